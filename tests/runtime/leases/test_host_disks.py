"""Disk images (``.raw``, ``.qcow2``) for VM leases on SSH hosts, and their migration (issue 38, items
1-2): a site of two real sshd hosts (one node each) enacted by SiteNodes, as the server does; real
QEMU (TCG), 64 MB guests. The disk is a blank raw file: the guest need not boot from it (its firmware
waits, QEMU runs all the same), which is all a save, a carry and a resumption need.

* a disk VM started on host1: its image is carried to the node's cache there (none of the site's
  image transfers ran), its overlay made on host1 in the VM's folder, a qcow2 backed by
  ``/images/<image>`` (the image as QEMU sees it in its sandbox), the payload user's; the image's
  bytes in the cache never change;
* saved there and carried to host2: the state file and the overlay go together, paced to the
  window over both files' bytes; a cancelled carry leaves host2 neither (and host1 both); a carry
  that completes leaves host2 both and host1 neither, and QEMU resumes there;
* a corrupt qcow2 image: one line naming the host, the image and what qemu-img said; nothing runs;
  so too a host without qemu-img (the enactment's ``qemu_img`` set to a program no host has).

What the test reads on a host it reads over its own SSH connection to it (the hosts share this
machine's files, but every path here is one on the host, relative to root's home there)."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import time

import pytest
from tests import hostnodes as hosts

from skylease.runtime.leases.host_vms import HostVms
from skylease.runtime.leases.local_vms import VmFailed
from skylease.runtime.leases.qemu_spec import GuestFiles
from skylease.runtime.leases.site import load_site
from skylease.runtime.leases.site_nodes import SiteNodes

pytestmark = [pytest.mark.timeout(120), pytest.mark.integration]

#: The test site's first address is 127.0.0.(BASE+1): apart from other test modules' sites.
BASE = 160
DISK = b"\0" * (1 << 20)
LEASE = 7


@pytest.fixture(scope="module")
def site(ssh_site):
    for tool in ("qemu-system-x86_64", "qemu-img"):
        if shutil.which(tool) is None:
            why = f"{tool} is missing (apt-get install qemu-system-x86 qemu-utils)"
            pytest.fail(why) if os.environ.get("SKYLEASE_REQUIRE_QEMU") == "1" else pytest.skip(why)
    return ssh_site(2, base=BASE)


@pytest.fixture(scope="module")
def nodes(site, tmp_path_factory):
    """SiteNodes of a site of the two hosts (one 256 MB node each), its repository holding
    ``blank.raw`` (1 MiB of zeros) and ``bad.qcow2`` (a qcow2 magic, then nonsense); the
    connections of the test to each host as ``nodes.conns``."""
    root = tmp_path_factory.mktemp("host-disks")
    (root / "repo").mkdir()
    (root / "repo" / "blank.raw").write_bytes(DISK)
    (root / "repo" / "bad.qcow2").write_bytes(b"QFI\xfb" + b"nonsense" * 64)
    text = (f'repository = "repo"\n[ssh]\nuser = "root"\nidentity_file = "{site.key}"\n'
            f'known_hosts = "{site.known_hosts}"\n')
    for h in site.hosts:
        text += f'[[hosts]]\naddress = "{h.address}"\nname = "{h.name}"\nnodes = 1\ncpu = 1\nmemory = 256\n'
    (root / "site.toml").write_text(text)
    serve_id = f"disks-{secrets.token_hex(4)}"
    made = SiteNodes(load_site(root / "site.toml"), root / "data", serve_id, sandbox=None)
    made.conns = [hosts.connection(site, k, root / f"ssh{k}").open() for k in range(2)]
    try:
        yield made
    finally:
        made.close(kill=True, grace_s=0.2)
        for conn in made.conns:
            conn.run(["rm", "-rf", f".skylease/{serve_id}"])
            conn.close()


def on_host(conn, script: str) -> bytes:
    code, out, err = conn.run(["sh", "-c", script], timeout=30)
    assert code == 0, (script, err.decode(errors="replace"))
    return out


def listing(conn, folder) -> list[str]:
    return sorted(on_host(conn, f"ls -A {folder} 2>/dev/null || true").decode().split())


def qemu_pids(conn) -> list[int]:
    code, out, _ = conn.run(["pgrep", "^skylease-guest"])
    return [int(x) for x in out.split()] if code == 0 else []


def test_a_disk_vm_runs_on_an_overlay_made_on_its_host_and_moves_with_it(nodes):
    one, two = nodes.conns
    host1, host2 = nodes.part(0), nodes.part(1)
    cached = f"{host1.cache_dir(0)}/blank.raw"
    assert one.run(["test", "-e", cached])[0] != 0  # (no image transfer ran: carried at the start)
    p = nodes.spawn_vm(LEASE, 0, 0, image="blank.raw", memory_mb=64, cpus=1)
    files = GuestFiles(host1.vms.folder(LEASE, 0))
    there = GuestFiles(host2.vms.folder(LEASE, 0))
    assert p.node == 0 and len(qemu_pids(one)) == 1 and qemu_pids(two) == []
    head = on_host(one, f"head -c 4096 {files.overlay}")
    assert head[:4] == b"QFI\xfb" and b"/images/blank.raw" in head  # backed by the image as QEMU sees it
    owner = host1.confinement.owner()
    assert owner is not None  # (the hosts' SSH user is root: QEMU runs as the payload user)
    assert on_host(one, f"stat -c %u:%g {files.overlay}").decode().strip() == f"{owner[0]}:{owner[1]}"
    assert listing(one, files.folder).count("overlay.qcow2.part") == 0
    digest = hashlib.sha256(DISK).hexdigest().encode()
    assert on_host(one, f"sha256sum < {cached}").split()[0] == digest

    # saved on host1: its state file beside its overlay, its QEMU gone
    assert nodes.suspend_vm(p) > 0
    assert {"state.bin", "overlay.qcow2"} <= set(listing(one, files.folder)) and qemu_pids(one) == []
    sizes = [int(x) for x in on_host(one, f"stat -c %s {files.state} {files.overlay}").split()]

    # a carry cancelled half-way: host2 has neither file (nor a part of one), host1 keeps both
    carry = nodes.carry_state(LEASE, 0, 0, 1, 30.0)
    time.sleep(1.0)
    carry.cancel()
    assert not carry.done and carry.error == "cancelled"
    assert not {"state.bin", "overlay.qcow2"} & set(listing(two, there.folder)), listing(two, there.folder)
    assert not [f for f in listing(two, there.folder) if f.endswith(".part")]
    assert {"state.bin", "overlay.qcow2"} <= set(listing(one, files.folder))

    # carried to host2: both files, in a window paced over both files' bytes; host1 keeps neither
    window = 1.5
    t0 = time.monotonic()
    carry = nodes.carry_state(LEASE, 0, 0, 1, window)
    assert carry.wait(60) and carry.done, carry.error
    assert window <= time.monotonic() - t0 < window + 10
    assert carry.size == sum(sizes) and carry.carried == [str(files.overlay), str(files.state)]
    assert {"state.bin", "overlay.qcow2"} <= set(listing(two, there.folder))
    assert not {"state.bin", "overlay.qcow2"} & set(listing(one, files.folder))
    assert on_host(two, f"stat -c %u:%g {there.state} {there.overlay}").decode().split() == [
        f"{owner[0]}:{owner[1]}"] * 2

    # resumed on host2 from both (the image carried to its node's cache there too)
    p2 = nodes.spawn_vm(LEASE, 0, 1, image="blank.raw", memory_mb=64, cpus=1)
    assert p2.node == 1 and len(qemu_pids(two)) == 1 and qemu_pids(one) == []
    assert "state.bin" not in listing(two, there.folder)  # (loaded, then removed: it runs again)
    assert on_host(two, f"head -c 4 {there.overlay}") == b"QFI\xfb"
    nodes.shutdown_vm(p2, 0.2)
    deadline = time.monotonic() + 20
    while qemu_pids(two):
        assert time.monotonic() < deadline, "QEMU still runs on host2"
        time.sleep(0.2)
    for conn, node in ((one, 0), (two, 1)):  # the image itself was never written
        assert on_host(conn, f"sha256sum < {nodes.part(node).cache_dir(node)}/blank.raw").split()[0] == digest


def test_a_corrupt_disk_image_fails_its_vm_in_one_line_naming_host_and_image(nodes):
    one = nodes.conns[0]
    before = qemu_pids(one)
    with pytest.raises(VmFailed) as err:
        nodes.spawn_vm(LEASE + 1, 0, 0, image="bad.qcow2", memory_mb=64, cpus=1)
    said = str(err.value)
    label = nodes.part(0).conn.target.label
    assert said.startswith(f"{label}: ") and "bad.qcow2: qemu-img cannot read it as a qcow2 image: " in said
    assert "\n" not in said and err.value.payload is None
    assert qemu_pids(one) == before
    folder = nodes.part(0).vms.folder(LEASE + 1, 0)
    assert not [f for f in listing(one, folder) if f.startswith("overlay")]


def test_a_host_without_qemu_img_fails_a_disk_vm_naming_the_host_and_the_package(nodes):
    """A HostVms whose qemu-img is a program the host does not have (its ``qemu_img`` seam, as on a
    host without qemu-utils): the VM fails in one line, nothing runs, no overlay is left."""
    one, part = nodes.conns[0], nodes.part(0)
    vms = HostVms(part, qemu_img="qemu-img-not-installed")
    before = qemu_pids(one)
    with pytest.raises(VmFailed) as err:
        vms.spawn(LEASE + 2, 0, 0, image="blank.raw", memory_mb=64, cpus=1)
    said = str(err.value)
    assert said == (f"qemu-img-not-installed not found on {part.conn.target.label}: apt-get install "
                    "qemu-utils (a disk image's guest runs on an overlay qemu-img makes)"), said
    assert qemu_pids(one) == before
    assert not [f for f in listing(one, vms.folder(LEASE + 2, 0)) if f.startswith("overlay")]
