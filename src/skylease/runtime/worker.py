"""A local worker: one process, one task slot, fed over a pipe by the driver that started it.

A host of a local pool is one of these (``python -m skylease.runtime.worker``). It imports only
what running a task needs (:mod:`skylease.runtime.execute`), so it is up some 30 ms after it is
started, where a Dask worker spent 0.7 s of CPU importing Dask (which is why there was a fork server
and a warm service). Nothing of Dask is on the path of a local run.

The wire (one JSON object per line; the worker's own standard streams are ``/dev/null``, so a
task's prints cannot corrupt it):

* worker -> driver: ``{"ready": PID}`` once, then ``{"id": N, "result": ...}`` or
  ``{"id": N, "error": TEXT}`` per call, in the order the calls ran;
* driver -> worker: ``{"id": N, "op": "task"|"batch"|"call", "args": [...]}`` (``call``: a
  callable shipped as base64 cloudpickle, then its JSON arguments; queued: one runs at a
  time, so a batch sent while another runs waits behind it, with no round trip between them),
  ``{"op": "cancel", "id": N}`` (a queued call is dropped; a running one goes on and its answer is
  ignored by the driver) and ``{"op": "kill", "id": N}`` (call N's processes are killed and it
  starts no more; a queued one starts nothing when its turn comes: a losing copy; without an id,
  the running call). End of input (the driver released the host, or died) ends the worker and the
  processes of its running task.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any, BinaryIO, NamedTuple

from skylease.runtime.batch import run_batch
from skylease.runtime.execute import Refused, Starter, run_task


def kill_children() -> int:
    """Kill the processes this process started (a task's shell and what it started)."""
    if os.path.isdir("/proc"):  # (Linux: round after round, below; also where psutil is absent,
        # a worker on an SSH host, which runs with the standard library only: ssh_pool.py)
        return _kill_descendants()
    import psutil

    n = 0
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
            n += 1
    return n


class _Proc(NamedTuple):
    parent: int
    group: int
    session: int
    ended: bool  # a zombie: it runs nothing any more, its parent has not reaped it yet


def _descendants(pid: int) -> dict[int, _Proc]:
    """Every descendant of ``pid`` now, found by their parents in /proc (Linux)."""
    children: dict[int, list[int]] = {}
    procs: dict[int, _Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:  # ended meanwhile
            continue
        state, ppid, group, session = data[data.rindex(b")") + 2:].split()[:4]  # the name may hold ')'
        procs[int(entry)] = _Proc(int(ppid), int(group), int(session), state in (b"Z", b"X"))
        children.setdefault(int(ppid), []).append(int(entry))
    out: dict[int, _Proc] = {}
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        out[child] = procs[child]
        todo += children.get(child, ())
    return out


_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def _subreaper(on: bool) -> bool:
    """Make this process the one its descendants' orphans are given to, rather than init."""
    import ctypes  # (here: a run that kills nothing does not pay for it)

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux, or no prctl
        return False


def _kill_descendants(timeout: float = 5.0) -> int:
    """SIGKILL to every descendant of this process, round after round until none of them runs.

    This process is their subreaper meanwhile (Linux >= 3.4): a shell killed while it forks leaves
    its new child to us rather than to init, and the next round finds it (CI once saw a task's
    ``sleep`` outlive its worker that way). A group one of them leads (a task's shell leads its own)
    is killed as one: the kernel lets no fork inside a group escape a signal sent to it. Nothing is
    stopped on the way: the tree was once frozen (SIGSTOP) and then killed, and a worker itself
    killed in between left it stopped for good (CI's chaos test did).

    Every descendant is the killed call's: the worker starts no command while it kills
    (:class:`_Inbox`). The orphans given to us are reaped here; the processes our own code started
    are left to it to reap (their exit codes are its answer). The rounds slow down (1 ms doubling to
    50 ms), and a process we may not signal is left: one that will not die costs a few dozen scans
    of /proc until ``timeout``, not a busy core.
    """
    me = os.getpid()
    procs = _descendants(me)
    ours = {p for p, proc in procs.items() if proc.parent == me}
    own_group = os.getpgid(0)
    reaper = _subreaper(True)
    killed: set[int] = set()
    denied: set[int] = set()
    pause, deadline = 0.001, time.monotonic() + timeout
    try:
        while True:
            live = []
            for p, proc in procs.items():
                if not proc.ended:
                    if p not in denied:
                        live.append(p)
                elif proc.parent == me and p not in ours:  # an orphan given to us
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(p, os.WNOHANG)
            if not live or time.monotonic() > deadline:
                break
            for p in live:
                group = procs[p].group
                try:
                    if group != own_group and group in procs:  # a group one of them leads
                        os.killpg(group, signal.SIGKILL)
                    else:
                        os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                except PermissionError:
                    denied.add(p)
            killed.update(live)
            time.sleep(pause)  # (a SIGKILL takes effect when its process is next scheduled)
            pause = min(0.05, 2 * pause)
            procs = _descendants(me)
    finally:
        if reaper:
            _subreaper(False)
    return len(killed)


class _Inbox:
    """Calls waiting to run, fed by the reader thread; cancelled ones are skipped. It also starts
    the running call's commands (:meth:`start`), so that a kill and a start exclude each other: a
    kill that comes before its task's command began would otherwise find nothing to kill and let
    the command run on (CI saw a task's ``sleep`` outlive its worker so)."""

    def __init__(self) -> None:
        self.calls: deque[dict[str, Any]] = deque()
        self.cancelled: set[int] = set()
        self.cond = threading.Condition()
        self.running: int | None = None  # the call that runs: at the end of input its processes die
        self.doomed = False  # the running call was killed: it starts no other process
        self.killed: set[int] = set()  # queued calls killed before they ran: they start nothing

    def read(self, src: BinaryIO) -> None:
        for line in src:
            msg = json.loads(line)
            op = msg.get("op")
            if op == "kill":
                self.kill(msg.get("id"))
                continue
            with self.cond:
                if op == "cancel":
                    self.cancelled.add(int(msg["id"]))
                else:
                    self.calls.append(msg)
                    self.cond.notify()
        # the driver closed our input (released us) or died: our task's processes go with us (an
        # idle worker has none)
        self.end()

    def kill(self, cid: int | None) -> None:
        """Kill call ``cid`` (None: the one that runs): its processes if it runs, and it starts no
        more (a batch's next tasks, or the command it was about to start); if it is queued, it
        starts nothing when its turn comes (its answer says so)."""
        with self.cond:  # (held throughout: no command of the call starts meanwhile)
            if cid is not None and cid != self.running:
                if any(int(m["id"]) == cid for m in self.calls):
                    self.killed.add(cid)
                return
            if self.running is not None:
                self.doomed = True
                kill_children()

    def end(self) -> None:
        """This worker ends, and the processes of its running call with it."""
        with self.cond:  # (never released: nothing starts after the kill)
            if self.running is not None:
                self.doomed = True
                kill_children()
            os._exit(0)

    def start(self, *args: Any, **kwargs: Any) -> subprocess.Popen:
        """Start a command of the running call (:func:`run_task`'s ``start``), unless it was killed."""
        with self.cond:
            if self.doomed:
                raise Refused
            return subprocess.Popen(*args, **kwargs)

    def next(self) -> dict[str, Any]:
        with self.cond:
            self.running = None
            while True:
                while not self.calls:
                    self.cond.wait()
                msg = self.calls.popleft()
                if int(msg["id"]) in self.cancelled:
                    self.cancelled.discard(int(msg["id"]))
                    self.killed.discard(int(msg["id"]))  # (the driver kills a copy, then cancels it)
                    continue
                self.running = int(msg["id"])
                self.doomed = self.running in self.killed
                self.killed.discard(self.running)
                return msg


def _call(msg: dict[str, Any], start: Starter) -> dict[str, Any]:
    op, args = msg.get("op"), msg.get("args") or []
    try:
        if op == "task":
            return {"id": msg["id"], "result": run_task(*args, start=start)}
        if op == "batch":
            return {"id": msg["id"], "result": run_batch(*args, start=start)}
        if op == "call":  # (base64 cloudpickle of a callable, its JSON arguments): a campaign's cells
            return {"id": msg["id"], "result": _unpickled(args[0])(*args[1:])}
        return {"id": msg["id"], "error": f"unknown call {op!r}"}
    except Exception as e:  # a task's own errors come back as results: this is the worker's
        return {"id": msg["id"], "error": f"{type(e).__name__}: {e}"}


def _unpickled(payload: str) -> Any:
    """The callable shipped as ``payload``, unpickled once per worker."""
    fn = _FUNCTIONS.get(payload)
    if fn is None:
        import base64

        import cloudpickle

        fn = _FUNCTIONS[payload] = cloudpickle.loads(base64.b64decode(payload))
    return fn


_FUNCTIONS: dict[str, Any] = {}


def _default(x: Any) -> Any:
    """numpy scalars and arrays in a cell's rows become plain JSON values."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"cannot send a {type(x).__name__} back to the driver")


def main() -> None:
    src = os.fdopen(os.dup(0), "rb")
    dst = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.path.insert(0, os.getcwd())  # python callables are found as the driver finds them
    with contextlib.suppress(ImportError):  # `ps` tells a worker from the driver
        from setproctitle import setproctitle

        setproctitle(f"skylease worker {os.environ.get('SKYLEASE_POOL', '?')}/"
                     f"{os.environ.get('SKYLEASE_WORKER', '?')}")
    inbox = _Inbox()
    threading.Thread(target=inbox.read, args=(src,), daemon=True).start()
    dst.write(json.dumps({"ready": os.getpid()}).encode() + b"\n")
    dst.flush()
    while True:
        answer = _call(inbox.next(), inbox.start)
        try:
            dst.write(json.dumps(answer, default=_default).encode() + b"\n")
            dst.flush()
        except OSError:  # the driver is gone
            inbox.end()


if __name__ == "__main__":
    main()
