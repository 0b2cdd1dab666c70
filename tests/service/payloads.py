"""The lease payload processes of a real server (tests/service/conftest.py's ServeProcess), seen in
/proc: a payload's process group leader carries ``SKYLEASE_SERVE_ID``, ``SKYLEASE_LEASE`` and
``SKYLEASE_VNODE`` in its environment."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import ServeProcess

#: The states of a lease that is over.
TERMINAL = ("done", "rejected", "cancelled")


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start ticks) of a process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2:].split()
    return rest[0].decode(), int(rest[2]), int(rest[19])


def payload_processes(serve_id: str) -> dict[tuple[int, int], tuple[int, int, str]]:
    """The live process group leaders whose environment holds ``SKYLEASE_SERVE_ID=serve_id``:
    (pid, start ticks) -> (lease, vnode, state)."""
    out = {}
    mark = f"SKYLEASE_SERVE_ID={serve_id}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                items = fh.read().split(b"\0")
        except OSError:
            continue
        if mark not in items:
            continue
        st = proc_stat(pid)
        if st is None or st[0] == "Z" or st[1] != pid:
            continue
        env = dict(item.decode().partition("=")[::2] for item in items if item)
        out[(pid, st[2])] = (int(env["SKYLEASE_LEASE"]), int(env["SKYLEASE_VNODE"]), st[0])
    return out


class ProcWatcher:
    """Every payload process that ever shows up in /proc (sampled every 50 ms in a thread)."""

    def __init__(self, serve_id: str) -> None:
        self.serve_id = serve_id
        self.seen: dict[tuple[int, int], tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            for key, (lease, vnode, _) in payload_processes(self.serve_id).items():
                self.seen[key] = (lease, vnode)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def state_in_proc(pid: int) -> str | None:
    st = proc_stat(pid)
    return None if st is None else st[0]


def payloads_of(srv: ServeProcess, lease: int) -> dict[int, int]:
    """vnode -> pid of the lease's live payload processes, from /proc."""
    procs = payload_processes(srv.serve_id())
    return {vnode: pid for (pid, _), (lid, vnode, _) in procs.items() if lid == lease}


def wait_for_payloads(srv: ServeProcess, lease: int, n: int, timeout: float = 60) -> dict[int, int]:
    """The lease's ``n`` payloads, once the manager thread has started them (a request is answered
    once journaled; its payloads are spawned right after)."""
    deadline = time.monotonic() + timeout
    while len(got := payloads_of(srv, lease)) < n:
        assert time.monotonic() < deadline, (lease, got)
        time.sleep(0.02)
    return got


def assert_no_payload_left(srv: ServeProcess, timeout: float = 60) -> None:
    """No payload process of the server is alive (each has 1 s of grace after SIGTERM)."""
    deadline = time.monotonic() + timeout
    while (left := payload_processes(srv.serve_id())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, left


def assert_processes_match_states(srv: ServeProcess, tries: int = 5) -> None:
    """Each lease's processes are what its state says: one running process per VM while its VM
    reservation is active, only stopped ones otherwise (suspended, or being suspended or resumed),
    none once it is over; and the server shows the same pids. (Compared again if a step came
    between the two looks.)"""
    for attempt in range(tries):
        views = srv.leases()
        procs = payload_processes(srv.serve_id())
        if views == srv.leases():
            break
        assert attempt < tries - 1, "the leases kept changing"
    by_lease: dict[int, dict[int, tuple[int, str]]] = {}
    for (pid, _), (lid, vnode, state) in procs.items():
        assert vnode not in by_lease.setdefault(lid, {}), f"lease {lid} VM {vnode} has two processes"
        by_lease[lid][vnode] = (pid, state)
    for lid, v in views.items():
        mine = by_lease.get(lid, {})
        shown = sorted((p["vnode"], p["pid"]) for p in v["payloads"])
        assert shown == sorted((k, pid) for k, (pid, _) in mine.items()), (lid, shown, mine)
        stopped = [st == "T" for _, st in mine.values()]
        if v["state"] in TERMINAL:
            assert not mine, (lid, v["state"], mine)
        elif v["running_on"]:
            assert sorted(mine) == list(range(v["nodes"])) and not any(stopped), (lid, mine)
        else:
            assert all(stopped), (lid, v["state"], mine)


def kill_payloads_of(srv: ServeProcess) -> None:
    """Whatever a failed test left running (by the pids found in /proc)."""
    try:
        serve_id = srv.serve_id()
    except Exception:  # no database yet, no payloads
        return
    for pid, _ticks in payload_processes(serve_id):
        with contextlib.suppress(OSError):
            os.killpg(pid, 9)




def cancel_unfinished(srv: ServeProcess) -> None:
    """Cancel every lease of ``srv`` not over (a stopped server leaves its payloads running)."""
    for v in srv.leases().values():
        if v["state"] not in TERMINAL:
            srv.call("DELETE", f"/leases/{v['id']}")
