"""QEMU guests on SSH hosts, driven over QMP through each host's SSH connection (ssh_bridge.py): on a
test site of two real sshd hosts (each in its own PID namespace), a guest booted on host1 is saved
to a state file there (its QEMU gone from host1), the file carried to host2 over the two SSH
connections, and the guest resumed on host2, where its QEMU runs and its tick counter goes on from
where it stopped. The test site's sshd forbids socket forwarding (as many sites do): QMP goes
through a bridge session, not ``ssh -L``.

The hosts share this machine's file system (only their namespaces are their own), so the guest's
folders are reachable by the same paths from everywhere; every file is still written and read on
its host through its SSH connection, as on real machines.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from skylease.runtime.leases.host_accel import HostAccel
from skylease.runtime.leases.host_qmp import HostMonitor
from skylease.runtime.leases.qemu_accel import choose_accel
from skylease.runtime.leases.qemu_spec import QEMU, GuestError, GuestFiles, GuestSpec, command_line, exec_uri
from skylease.runtime.leases.ssh import SshConnection, SshTarget

pytestmark = pytest.mark.integration

#: The test site's first address (127.0.0.(BASE+1)): apart from other test modules' sites.
BASE = 130
TICK = re.compile(r"tick=(\d+)")


@pytest.fixture(scope="module")
def site(ssh_site):
    return ssh_site(2, base=BASE)


def connect(site, k: int, tmp_path: Path) -> SshConnection:
    h = site.hosts[k]
    target = SshTarget(h.address, 22, "root", identity_file=site.key, known_hosts=site.known_hosts,
                       connect_timeout=5.0)
    return SshConnection(target, tmp_path / "ssh").open()


def on_host(conn: SshConnection, argv: list[str], stdin: bytes = b"", timeout: float = 30.0) -> bytes:
    code, out, err = conn.run(argv, stdin=stdin, timeout=timeout)
    assert code == 0, (argv, code, err.decode(errors="replace"))
    return out


def qemu_pids(conn: SshConnection, folder: Path) -> list[int]:
    """The host's QEMU processes of the guest in ``folder`` (pids as the host sees them)."""
    code, out, _ = conn.run(["pgrep", "-f", f"skylease-guest:{folder.name}"])
    return [int(x) for x in out.split()] if code == 0 else []


def ticks(conn: SshConnection, files: GuestFiles) -> list[int]:
    text = conn.run(["cat", str(files.serial)])[1].decode(errors="replace")
    return [int(m.group(1)) for m in TICK.finditer(text)]


def wait_ticks(conn: SshConnection, files: GuestFiles, more_than: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while len(seen := ticks(conn, files)) <= more_than:
        assert time.monotonic() < deadline, f"no tick beyond {more_than} in {timeout} s: {seen}"
        time.sleep(0.2)
    return seen


def wait_migration(mon: HostMonitor, timeout: float, *, incoming: bool) -> None:
    deadline = time.monotonic() + timeout
    while True:
        info = mon.cmd("query-migrate")
        assert info.get("status") != "failed", info
        if incoming and mon.cmd("query-status")["status"] != "inmigrate":
            return
        if not incoming and info.get("status") == "completed":
            return
        assert time.monotonic() < deadline, info
        time.sleep(0.05)


def boot(conn: SshConnection, spec: GuestSpec, files: GuestFiles, *, incoming: bool) -> None:
    on_host(conn, ["mkdir", "-p", str(files.folder)])
    argv = command_line(QEMU, spec, files, "tcg", disk_format=None, incoming=incoming)
    on_host(conn, [*argv, "-daemonize", "-D", str(files.log)])


def test_a_guest_saved_on_one_host_resumes_on_another_and_counts_on(site, test_guest, tmp_path):
    one, two = connect(site, 0, tmp_path), connect(site, 1, tmp_path)
    spec = GuestSpec(kernel=test_guest.kernel, initrd=test_guest.initrd, memory_mb=96)
    src, dst = GuestFiles(tmp_path / "on-host1"), GuestFiles(tmp_path / "on-host2")
    monitors: list[HostMonitor] = []

    def monitor(conn: SshConnection, files: GuestFiles) -> HostMonitor:
        monitors.append(HostMonitor(conn, str(files.qmp)))
        return monitors[-1]

    try:
        boot(one, spec, src, incoming=False)
        [pid1] = qemu_pids(one, src.folder)
        assert qemu_pids(two, src.folder) == []  # (host2 does not see host1's processes)
        mon = monitor(one, src)
        assert mon.cmd("query-status")["status"] == "running"
        before = wait_ticks(one, src, 2, timeout=60)

        # suspend on host1: the state to a file there, QEMU gone
        mon.cmd("stop")
        last = ticks(one, src)[-1]
        mon.cmd("migrate-set-parameters", {"max-bandwidth": 1 << 40})
        mon.cmd("migrate", {"uri": exec_uri("cat >", src.state)})
        wait_migration(mon, 60, incoming=False)
        mon.cmd("quit")
        deadline = time.monotonic() + 10
        while qemu_pids(one, src.folder):
            assert time.monotonic() < deadline, "QEMU still runs on host1 after quit"
            time.sleep(0.1)
        size = int(on_host(one, ["stat", "-c", "%s", str(src.state)]))
        assert size > 1_000_000 and on_host(one, ["head", "-c", "4", str(src.state)]) == b"QEVM"

        # migration: the state file carried from host1 to host2 over their connections
        data = on_host(one, ["cat", str(src.state)], timeout=60)
        on_host(two, ["mkdir", "-p", str(dst.folder)])
        on_host(two, ["sh", "-c", f"cat > {dst.state}"], stdin=data, timeout=60)
        assert len(data) == size

        # resume on host2
        boot(two, spec, dst, incoming=True)
        [pid2] = qemu_pids(two, dst.folder)
        assert qemu_pids(one, dst.folder) == []
        mon2 = monitor(two, dst)
        mon2.cmd("migrate-incoming", {"uri": exec_uri("cat", dst.state)})
        wait_migration(mon2, 60, incoming=True)
        mon2.cmd("cont")
        after = wait_ticks(two, dst, 1, timeout=30)
        assert after[0] == last + 1, (before, last, after)  # the counter went on where it stopped
        assert after == list(range(last + 1, last + 1 + len(after))), after
        assert mon2.cmd("query-status")["status"] == "running"
        assert qemu_pids(two, dst.folder) == [pid2] and qemu_pids(one, src.folder) == [], pid1
        mon2.cmd("quit")
    finally:
        for mon in monitors:
            mon.close()
        for conn, files in ((one, src), (two, dst)):
            for pid in qemu_pids(conn, files.folder):
                conn.run(["kill", "-9", str(pid)])
            conn.close()


def test_a_socket_that_is_not_there_is_one_line_naming_host_and_socket(site, tmp_path):
    conn = connect(site, 0, tmp_path)
    try:
        missing = str(tmp_path / "nothing.sock")
        t0 = time.monotonic()
        with pytest.raises(GuestError) as err:
            HostMonitor(conn, missing)
        assert time.monotonic() - t0 < 10
        said = str(err.value)
        assert said.startswith(f"{conn.target.label}: QMP at {missing}: cannot connect to {missing}: "), said
        assert "No such file" in str(err.value) and "\n" not in str(err.value)
    finally:
        conn.close()


def test_the_kvm_probe_runs_on_the_host_and_its_answer_is_kept(site, test_guest, tmp_path):
    """host_accel.py: the KVM probe booted on the host (over its SSH connection) answers as this
    machine's own probe does (the test hosts share its kernel and /dev/kvm), names the host, leaves
    nothing running or written there, and is kept: a second server does not probe again."""
    one = connect(site, 0, tmp_path)
    scripts: list[str] = []

    def run(script: str, timeout: float) -> tuple[int, str]:
        scripts.append(script)
        code, out, err = one.run(["sh", "-c", script], timeout=timeout)
        return code, (out if code == 0 else err).decode(errors="replace")

    spec = GuestSpec(kernel=test_guest.kernel, initrd=test_guest.initrd, memory_mb=96)
    folder, store = tmp_path / "kvm-probe", tmp_path / "accel-hosts.json"
    choice = HostAccel(store).choose(one.target.label, QEMU, spec, str(folder), run, None)
    here = choose_accel(spec)
    assert choice.accel == here.accel and one.target.label in choice.reason, (choice, here)
    assert qemu_pids(one, folder) == [] and one.run(["test", "-e", str(folder)])[0] != 0
    again = HostAccel(store).choose(one.target.label, QEMU, spec, str(folder), run, None)
    assert (again.accel, again.reason) == (choice.accel, choice.reason) and len(scripts) == 1
    print(f"\n[kvm probe] {one.target.label}: {choice.accel} ({choice.reason}); here: {here.reason}")
