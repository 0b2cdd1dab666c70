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
  ignored by the driver) and ``{"op": "kill"}`` (the processes of the running task are killed: a
  losing copy). End of input (the driver released the host, or died) ends the worker and the
  processes of its running task.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections import deque
from typing import Any, BinaryIO, NamedTuple

from skylease.runtime.batch import run_batch
from skylease.runtime.execute import run_task


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

    A shell started after the first round in a session none of them was in is a new task's (one
    that began as the old one ended): it is spared. The orphans given to us are reaped here; the
    processes our own code started are left to it to reap.
    """
    me = os.getpid()
    first = _descendants(me)
    ours = {p for p, proc in first.items() if proc.parent == me}
    sessions = {proc.session for proc in first.values()}
    own_group = os.getpgid(0)
    reaper = _subreaper(True)
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        procs = first
        while True:
            live = []
            for p, proc in procs.items():
                if proc.ended:
                    if proc.parent == me and p not in ours:  # an orphan given to us
                        with contextlib.suppress(ChildProcessError):
                            os.waitpid(p, os.WNOHANG)
                elif p in killed or proc.session in sessions or proc.parent != me:
                    live.append(p)
            if not live or time.monotonic() > deadline:
                break
            for p in live:
                group = procs[p].group
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if group != own_group and group in procs:  # a group one of them leads
                        os.killpg(group, signal.SIGKILL)
                    else:
                        os.kill(p, signal.SIGKILL)
            killed.update(live)
            time.sleep(0.001)  # (a SIGKILL takes effect when its process is next scheduled)
            procs = _descendants(me)
    finally:
        if reaper:
            _subreaper(False)
    return len(killed)


class _Inbox:
    """Calls waiting to run, fed by the reader thread; cancelled ones are skipped."""

    def __init__(self) -> None:
        self.calls: deque[dict[str, Any]] = deque()
        self.cancelled: set[int] = set()
        self.cond = threading.Condition()
        self.busy = False  # a call runs: at the end of input its processes are killed

    def read(self, src: BinaryIO) -> None:
        for line in src:
            msg = json.loads(line)
            op = msg.get("op")
            if op == "kill":
                kill_children()
                continue
            with self.cond:
                if op == "cancel":
                    self.cancelled.add(int(msg["id"]))
                else:
                    self.calls.append(msg)
                    self.cond.notify()
        # the driver closed our input (released us) or died: our task's processes go with us (an
        # idle worker has none, and skips psutil's import: a run's end waits for its workers)
        with self.cond:
            busy = self.busy
        if busy:
            kill_children()
        os._exit(0)

    def next(self) -> dict[str, Any]:
        with self.cond:
            while True:
                while not self.calls:
                    self.cond.wait()
                msg = self.calls.popleft()
                if int(msg["id"]) in self.cancelled:
                    self.cancelled.discard(int(msg["id"]))
                    continue
                self.busy = True
                return msg


def _call(msg: dict[str, Any]) -> dict[str, Any]:
    op, args = msg.get("op"), msg.get("args") or []
    try:
        if op == "task":
            return {"id": msg["id"], "result": run_task(*args)}
        if op == "batch":
            return {"id": msg["id"], "result": run_batch(*args)}
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
        answer = _call(inbox.next())
        with inbox.cond:
            inbox.busy = False
        try:
            dst.write(json.dumps(answer, default=_default).encode() + b"\n")
            dst.flush()
        except OSError:  # the driver is gone
            kill_children()
            os._exit(0)


if __name__ == "__main__":
    main()
