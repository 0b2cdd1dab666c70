"""A disk-image VM lease on SSH hosts end to end (issue 38, items 1-2): a real ``skylease serve`` on a
test site of two real sshd hosts (one 256 MB node each) whose repository holds ``blank.raw`` (1 MiB
of zeros: the guest need not boot from it, its firmware waits and QEMU runs all the same); real QEMU
(TCG on hosts), a 64 MB guest.

Its guest runs on one host on an overlay made there (qcow2, backed by ``/images/blank.raw``); two
advance reservations of one node each (a short one on the free node, a long one on the VM lease's)
save it on its host and make it resume on the other one after the short AR: the state file and the
overlay both go there (the first host keeps neither), QEMU runs there and not on the first host,
and the image in each host's cache still has the repository's bytes. Every file is read on its host
over SSH."""

from __future__ import annotations

import hashlib

import pytest

from skylease.runtime.leases.ssh import SshConnection, SshTarget

from .test_serve_host_vms import qemu_pids, until, vm_dir
from .vm_site import VM_SCALE, HostVmServer, add_users, build_repository

pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration]

#: The test site's first address is 127.0.0.(BASE+1): apart from other test modules' sites.
BASE = 160
DISK = b"\0" * (1 << 20)


@pytest.fixture(scope="module")
def disk_server(tmp_path_factory, ssh_site, payload_sandbox):
    site = ssh_site(2, base=BASE)
    root = tmp_path_factory.mktemp("host-disks")
    build_repository(root / "repo")  # (skips without QEMU)
    (root / "repo" / "blank.raw").write_bytes(DISK)
    srv = HostVmServer(root / "serve", None, site=site)
    add_users(srv)
    srv.conns = [SshConnection(SshTarget(h.address, 22, "root", identity_file=site.key,
                                         known_hosts=site.known_hosts, connect_timeout=5.0),
                               root / "ssh").open() for h in site.hosts]
    srv.start()
    yield srv
    srv.stop()
    for conn in srv.conns:
        for pid in qemu_pids(conn):
            conn.run(["kill", "-9", str(pid)])
        conn.close()


def listing(conn: SshConnection, folder: str) -> set[str]:
    return set(conn.run(["sh", "-c", f"ls -A {folder} 2>/dev/null || true"])[1].decode().split())


def cached_digest(srv: HostVmServer, conn: SshConnection) -> str:
    """The SHA-256 of blank.raw in the node's cache on ``conn``'s host ('' if it is not there)."""
    path = f".skylease/{srv.serve_id()}/{conn.target.address}/nodes/*/cache/blank.raw"
    return conn.run(["sh", "-c", f"cat {path} | sha256sum"])[1].decode().split()[0] if conn.run(
        ["sh", "-c", f"test -f {path}"])[0] == 0 else ""


def test_a_disk_vm_lease_moves_to_the_other_host_with_its_overlay(disk_server):
    srv = disk_server
    r = srv.call("POST", "/leases", "alice", json={"duration": 600, "memory": 64, "vm": True,
                                                    "image": "blank.raw"})
    assert r.status_code == 201, r.text
    lid = r.json()["id"]
    on = until(srv, "QEMU on a host", lambda: [c for c in srv.conns if qemu_pids(c)], 60)
    assert len(on) == 1, on
    src = on[0]
    dst = next(c for c in srv.conns if c is not src)
    [qemu] = qemu_pids(src)
    folder, there = vm_dir(srv, src, lid), vm_dir(srv, dst, lid)
    head = src.run(["head", "-c", "4096", f"{folder}/overlay.qcow2"])[1]
    assert head[:4] == b"QFI\xfb" and b"/images/blank.raw" in head  # made on its host, on the image
    ar = {"type": "advance-reservation", "start_in": 4 * VM_SCALE, "nodes": 1, "memory": 256}
    short = srv.call("POST", "/leases", "alice", json={**ar, "duration": 5 * VM_SCALE})
    long = srv.call("POST", "/leases", "alice", json={**ar, "duration": 120 * VM_SCALE})
    assert short.status_code == 201 and long.status_code == 201, (short.text, long.text)
    # saved on its host: its state file beside its overlay, its QEMU gone
    until(srv, "the guest saved on its first host",
          lambda: qemu not in qemu_pids(src) and {"state.bin", "overlay.qcow2"} <= listing(src, folder),
          60, step=0.1)
    # after the short AR: resumed on the other host from both files carried there
    until(srv, "QEMU on the other host", lambda: qemu_pids(dst), 60)
    assert qemu_pids(src) == []
    assert not {"state.bin", "overlay.qcow2"} & listing(src, folder)  # (moved: the first host keeps neither)
    assert "overlay.qcow2" in listing(dst, there)
    view = srv.call("GET", f"/leases/{lid}").json()
    assert view["state"] == "active" and len(view["payloads"]) == 1, view
    digest = hashlib.sha256(DISK).hexdigest()
    assert [cached_digest(srv, c) for c in (src, dst)] == [digest, digest]  # (the image never written)
    srv.assert_quiet()
    for lease in (lid, long.json()["id"]):
        srv.call("DELETE", f"/leases/{lease}", "alice")
    until(srv, "QEMU gone after the cancel", lambda: qemu_pids(dst) == [], 30)
