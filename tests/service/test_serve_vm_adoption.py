"""VM leases through a real ``skylease serve`` (issue 38): four guests running when the server is
killed with ``kill -9`` are adopted by the restarted one through their QMP sockets, none booted
again; a server whose machine has no QEMU ends a VM lease with the reason and goes on; a VM asking
for more memory than a node has is refused with the reason."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from .payloads import payload_processes
from .vm_site import VmServer, add_users, build_repository

pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration]


def started(root: Path, env: dict[str, str] | None = None) -> VmServer:
    srv = VmServer(root / "serve", None, env=env)
    add_users(srv)
    srv.start()
    return srv


def stop(srv: VmServer) -> None:
    srv.stop()
    for pid, _ticks in payload_processes(srv.serve_id()):
        with contextlib.suppress(OSError):
            os.killpg(pid, 9)


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def test_four_running_guests_are_adopted_after_kill_9_and_none_is_booted_again(tmp_path):
    build_repository(tmp_path / "repo")
    srv = started(tmp_path)
    try:
        vm = {"duration": 6000, "memory": 96, "cpu": 0.5, "vm": True, "image": "guest"}
        ids = [srv.call("POST", "/leases", "alice", json=vm).json()["id"] for _ in range(4)]
        for lid in ids:
            srv.wait_ticks(lid, 2)
        views = srv.leases()
        assert sorted(len(views[i]["running_on"]) for i in ids) == [1, 1, 1, 1]
        assert len({views[i]["running_on"][0] for i in ids}) == 2  # two guests on each node
        pids = {lid: srv.payload_pid(lid) for lid in ids}
        guests = payload_processes(srv.serve_id())
        assert len(guests) == 4 and {pid for pid, _ in guests} == set(pids.values())
        srv.kill9()
        srv.start()
        assert {lid: srv.payload_pid(lid) for lid in ids} == pids  # adopted: the same QEMU processes
        for lid in ids:  # and driven: their counts go on (one count each since boot: not booted again)
            seen = len(srv.ticks(lid))
            ticks = srv.wait_ticks(lid, seen + 1, timeout=30)
            assert ticks == list(range(1, len(ticks) + 1)), (lid, ticks)
        assert payload_processes(srv.serve_id()) == guests  # no QEMU started, none ended
        for lid in ids:  # QMP reconnected: a cancel powers each guest off
            assert srv.call("DELETE", f"/leases/{lid}", "alice").status_code == 200
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in pids.values()):
            assert time.monotonic() < deadline, {lid: alive(pid) for lid, pid in pids.items()}
            time.sleep(0.1)
        for lid in ids:
            assert "powering off" in (srv.vm_dir(lid) / "serial.log").read_text(errors="replace")
        srv.assert_quiet()
    finally:
        stop(srv)


def test_no_qemu_ends_the_lease_with_the_reason_and_a_vm_beyond_a_node_is_refused(tmp_path):
    build_repository(tmp_path / "repo")
    bin_dir = tmp_path / "bin"  # this machine's programs, but QEMU's
    bin_dir.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        with contextlib.suppress(OSError):
            for name in os.listdir(d or "."):
                link = bin_dir / name
                if not name.startswith("qemu-system") and not link.exists():
                    link.symlink_to(Path(d, name))
    srv = started(tmp_path, env={**os.environ, "PATH": str(bin_dir)})
    try:
        r = srv.call("POST", "/leases", "alice", json={"duration": 600, "memory": 1024, "vm": True,
                                                       "image": "guest"})
        assert r.status_code == 409 and "memory" in r.json()["detail"], r.text
        lid = srv.call("POST", "/leases", "alice", json={"duration": 600, "memory": 96, "vm": True,
                                                         "image": "guest"}).json()["id"]
        deadline = time.monotonic() + 30
        while (view := srv.call("GET", f"/leases/{lid}").json())["state"] not in ("done", "cancelled"):
            assert time.monotonic() < deadline, view
            time.sleep(0.2)
        [failed] = view["ended_payloads"]
        assert failed["state"] == "failed" and "qemu-system-x86_64" in failed["reason"], failed
        assert "apt-get install qemu-system-x86" in failed["reason"], failed
        assert srv.call("GET", "/health").json()["ok"]
        assert "Traceback" not in srv.stderr()
    finally:
        stop(srv)
