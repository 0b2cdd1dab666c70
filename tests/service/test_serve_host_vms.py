"""VM leases on SSH hosts end to end (issue 38 on hosts): a real ``skylease serve`` on a test site of
two real sshd hosts (one node each, 256 MB) whose repository holds the test guest; real QEMU guests
(TCG on hosts), 128 MB.

Preemption: a best-effort VM lease's guest runs on its host (its QEMU process is in that host's PID
namespace, found by pgrep over the host's SSH connection, and not in the other's); an advance
reservation needing both nodes arrives: at the suspension the QEMU process is gone from the host and
the state file is there (read on the host); after the AR the guest resumes on that host and its first
tick after is its last before + 1. A kill -9 of the server while it runs again: the restarted one
adopts it (same QEMU process on the host) and powers it off over QMP, through the host's SSH
connection, when the lease is cancelled.

The test hosts share this machine's file system, but every file here is read on its host over SSH,
as on real machines (the lease folders lie in the SSH user's home there).
"""

from __future__ import annotations

import contextlib
import io
import time

import pytest

from skylease.cli import main
from skylease.runtime.leases.host_moves import StateCarry
from skylease.runtime.leases.ssh import SshConnection, SshTarget

from .vm_site import TICK_RE, VM_SCALE, HostVmServer, build_repository

pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration]

#: The test site's first address is 127.0.0.(BASE+1): apart from other test modules' sites.
BASE = 140


@pytest.fixture(scope="module")
def hosts_server(tmp_path_factory, ssh_site, payload_sandbox):
    site = ssh_site(2, base=BASE)
    root = tmp_path_factory.mktemp("host-vms")
    build_repository(root / "repo")
    srv = HostVmServer(root / "serve", None, site=site)
    for name, admin in (("alice", False), ("root", True)):
        out = io.StringIO()
        argv = ["serve", "user", "add", name, "--data-dir", str(srv.data), *(["--admin"] if admin else [])]
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
        srv.tokens[name] = out.getvalue().splitlines()[0].strip()
    conns = []
    for h in site.hosts:
        target = SshTarget(h.address, 22, "root", identity_file=site.key, known_hosts=site.known_hosts,
                           connect_timeout=5.0)
        conns.append(SshConnection(target, root / "ssh").open())
    srv.conns = conns
    srv.start()
    yield srv
    srv.stop()
    for conn in conns:
        for pid in qemu_pids(conn):
            conn.run(["kill", "-9", str(pid)])
        conn.close()


def qemu_pids(conn: SshConnection) -> list[int]:
    """The host's QEMU processes of guests (pids as the host sees them), by the process name QEMU
    gives itself (``-name ...,process=skylease-guest:vm-N``; the sandbox's command line, which names
    it too, is not matched)."""
    code, out, _ = conn.run(["pgrep", "^skylease-guest"])
    return [int(x) for x in out.split()] if code == 0 else []


def vm_dir(srv: HostVmServer, conn: SshConnection, lease: int) -> str:
    return f".skylease/{srv.serve_id()}/{conn.target.address}/leases/{lease}/vm-0"


def host_ticks(srv: HostVmServer, conn: SshConnection, lease: int) -> list[int]:
    text = conn.run(["cat", f"{vm_dir(srv, conn, lease)}/serial.log"])[1].decode(errors="replace")
    return [int(m.group(1)) for m in TICK_RE.finditer(text)]


def until(srv: HostVmServer, what: str, check, timeout: float, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s; the server said: " + "\n".join(
            srv.stderr().splitlines()[-8:])
        time.sleep(step)
    return got


def start_vm(srv: HostVmServer) -> tuple[int, SshConnection, SshConnection, int]:
    """A best-effort VM lease whose guest ticks: (its id, its host's connection, the other host's,
    its QEMU's pid on its host). Its QEMU is on one host and not on the other."""
    vm = {"duration": 600, "memory": 128, "vm": True, "image": "guest"}
    r = srv.call("POST", "/leases", "alice", json=vm)
    assert r.status_code == 201, r.text
    lid = r.json()["id"]
    on = until(srv, "QEMU on a host", lambda: [c for c in srv.conns if qemu_pids(c)], 60)
    assert len(on) == 1, on
    other = next(c for c in srv.conns if c is not on[0])
    [qemu] = qemu_pids(on[0])
    assert qemu_pids(other) == []
    until(srv, "two ticks", lambda: len(host_ticks(srv, on[0], lid)) >= 2, 60)
    return lid, on[0], other, qemu


def test_a_preempted_vm_on_a_host_is_saved_there_and_resumed_where_it_stopped(hosts_server):
    srv = hosts_server
    lid, conn, other, qemu = start_vm(srv)  # (its guest runs on one host: its QEMU there, not on the other)
    said = [line for line in srv.stderr().splitlines() if "VM leases run their guests under" in line]
    assert len(said) == 1 and " TCG: " in said[0], said
    # the host's own KVM probe (run there over SSH: host_accel.py), its answer on the Hosts page's row
    assert f"a probe guest under KVM on {conn.target.label}" in said[0], said
    node = srv.call("GET", f"/leases/{lid}").json()["running_on"][0]
    [row] = [h for h in srv.call("GET", "/hosts").json() if h["name"] == node]
    assert row["vms"] == said[0].split("under ", 1)[1], (row, said)
    ar = srv.call("POST", "/leases", "alice", json={"type": "advance-reservation", "start_in": 4 * VM_SCALE,
                                                    "duration": 6 * VM_SCALE, "nodes": 2, "memory": 128})
    assert ar.status_code == 201, ar.text
    ar_id = ar.json()["id"]
    # the suspension: the guest saved to its state file on its host, its QEMU gone from there
    state = f"{vm_dir(srv, conn, lid)}/state.bin"

    def saved() -> bool:
        code, out, _ = conn.run(["head", "-c", "4", state])
        return code == 0 and out == b"QEVM" and qemu not in qemu_pids(conn)

    until(srv, "the guest saved on its host", saved, 60, step=0.1)
    before = host_ticks(srv, conn, lid)
    assert srv.leases()[ar_id]["state"] in ("scheduled", "active")
    view = srv.call("GET", f"/leases/{lid}").json()
    assert view["payloads"] == [], view
    # after the AR: resumed on the same host (its state file is there), counting on
    after = until(srv, "a tick after the resumption",
                  lambda: (t := host_ticks(srv, conn, lid))[len(before):] and t, 60)
    assert after[len(before)] == before[-1] + 1, (before[-3:], after[len(before) - 2:len(before) + 2])
    [resumed] = qemu_pids(conn)
    assert resumed != qemu and qemu_pids(other) == []
    assert conn.run(["test", "-e", state])[0] != 0  # (removed once the guest runs again)
    # kill -9 of the server: the restarted one adopts the guest on the host (the same QEMU process)
    pid = srv.payload_pid(lid)
    srv.kill9()
    srv.start()
    assert srv.payload_pid(lid) == pid and qemu_pids(conn) == [resumed]
    n = len(host_ticks(srv, conn, lid))
    until(srv, "a tick after the restart", lambda: len(host_ticks(srv, conn, lid)) > n, 30)
    # cancelled: powered off over QMP through the host's connection (ACPI: the guest says so)
    assert srv.call("DELETE", f"/leases/{lid}", "alice").status_code in (200, 202, 204)
    until(srv, "QEMU gone after the power-off", lambda: qemu_pids(conn) == [], 30)
    log = conn.run(["cat", f"{vm_dir(srv, conn, lid)}/serial.log"])[1].decode(errors="replace")
    assert "skylease-guest power button: powering off" in log, log[-500:]
    assert srv.call("GET", "/health").json()["ok"]


def test_a_vm_lease_migrates_to_the_other_host_and_counts_on_there(hosts_server):
    """Two ARs of one node each from the same time: the short one takes the free node (no
    preemption), the long one the VM lease's (preempting it). After the short AR, the VM lease
    resumes on the node it left free, on the other host: its state file carried there, its counter
    going on, its QEMU running there and gone from its first host."""
    srv = hosts_server
    lid, src, dst, qemu = start_vm(srv)
    ar = {"type": "advance-reservation", "start_in": 4 * VM_SCALE, "nodes": 1, "memory": 256}
    short = srv.call("POST", "/leases", "alice", json={**ar, "duration": 5 * VM_SCALE})
    long = srv.call("POST", "/leases", "alice", json={**ar, "duration": 120 * VM_SCALE})
    assert short.status_code == 201 and long.status_code == 201, (short.text, long.text)
    state = f"{vm_dir(srv, src, lid)}/state.bin"
    until(srv, "the guest saved on its first host",
          lambda: qemu not in qemu_pids(src) and src.run(["test", "-s", state])[0] == 0, 60, step=0.1)
    before = host_ticks(srv, src, lid)
    # after the short AR: resumed on the other host, from the state file carried there
    after = until(srv, "a tick on the other host", lambda: host_ticks(srv, dst, lid), 60)
    assert after[0] == before[-1] + 1, (before[-3:], after[:3])
    assert qemu_pids(src) == [] and len(qemu_pids(dst)) == 1
    assert src.run(["test", "-e", state])[0] != 0  # (moved: the first host's file is gone)
    view = srv.call("GET", f"/leases/{lid}").json()
    assert view["state"] == "active" and len(view["payloads"]) == 1, view
    # the carry recorded beside its window: from its start to the resumption's (the time it was paced
    # to fill: this schedule has no migration reservations), before the resumption's own record
    kinds = [o["kind"] for o in view["overheads"]]
    assert kinds == ["suspend", "migrate", "resume"], view["overheads"]
    carried, resumed = view["overheads"][1], view["overheads"][2]
    assert carried["reserved_end"] == resumed["reserved_start"], view["overheads"]
    assert carried["measured_s"] > 0, view["overheads"]
    assert carried["reserved_start"] <= carried["started"] + 1 and carried["ended"] <= resumed["started"] + 1
    srv.assert_quiet()
    for lease in (lid, long.json()["id"]):
        srv.call("DELETE", f"/leases/{lease}", "alice")
    until(srv, "QEMU gone after the cancel", lambda: qemu_pids(dst) == [], 30)


def test_a_state_carry_fills_its_window_and_is_whole_or_absent(hosts_server, tmp_path):
    """StateCarry between the two hosts: 3 MB paced to 1.5 s takes that long (not less), arrives
    whole (same SHA-256 on the destination host) and leaves the source without it; a carry from a
    file that is not there fails with the reason and leaves nothing on the destination."""
    one, two = hosts_server.conns
    src, dst = f"carry-{tmp_path.name}/src.bin", f"carry-{tmp_path.name}/dst/state.bin"
    code, _, err = one.run(["sh", "-c", f"mkdir -p {src.rsplit('/', 1)[0]} && "
                            f"head -c 3145728 /dev/urandom > {src}"])
    assert code == 0, err
    digest = one.run(["sh", "-c", f"sha256sum < {src}"])[1]
    t0 = time.monotonic()
    carry = StateCarry(one, src, two, dst, 1.5)
    assert carry.wait(30) and carry.done, carry.error
    took = time.monotonic() - t0
    assert 1.5 <= took < 1.5 + 5, took
    assert two.run(["sh", "-c", f"sha256sum < {dst}"])[1] == digest and carry.size == 3145728
    assert one.run(["test", "-e", src])[0] != 0  # (moved)
    bad = StateCarry(one, src, two, dst + "2", 0.0)
    assert bad.wait(30) and not bad.done and src in (bad.error or ""), bad.error
    assert two.run(["sh", "-c", f"ls -A {dst.rsplit('/', 1)[0]}"])[1].split() == [b"state.bin"]
    for conn in (one, two):
        conn.run(["rm", "-rf", f"carry-{tmp_path.name}"])
