"""A worker kills its task's processes (a losing copy, or its driver gone): every one of them, even
one that leaves the task's group or is orphaned while its shell forks, and a worker itself killed
in the middle of that leaves nothing stopped behind (the processes were once frozen first, and CI's
chaos test left task shells stopped for good by killing their worker mid-freeze)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skylease.runtime.leases.procfs import proc_stat

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the worker's kill walks /proc (Linux)")


def _state(pid: int) -> str | None:
    """The process's state letter in /proc (None: gone)."""
    stat = proc_stat(pid)
    return None if stat is None else stat.state


def _running(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")


def _pids(path: Path, n: int, timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text().split() if path.exists() else []
        if len(lines) >= n:
            return [int(x) for x in lines]
        assert time.monotonic() < deadline, f"{path}: {len(lines)} of {n} processes started"
        time.sleep(0.01)


class _Worker:
    """A worker as a pool starts it, spoken to over its pipes."""

    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "skylease.runtime.worker"], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        assert "ready" in json.loads(self.proc.stdout.readline())

    def send(self, msg: dict) -> None:
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(timeout=10)


def _end(pids: list[int]) -> None:
    """End what a test started and a killed worker left running (by PID)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)


def test_a_losing_copy_is_killed_with_what_left_its_group_and_what_was_orphaned(tmp_path):
    """The task starts a process in a session of its own (out of the task's group), and a subshell
    that starts a shell and exits at once (that shell is init's before the kill, out of the tree,
    but still in the task's group). All die at once (the task's answer does not wait for an orphan
    holding its output open); the worker lives on and runs the next task."""
    pids = tmp_path / "pids"
    command = (f"setsid sleep 60 & echo $! >> {pids}; "
               f"(sh -c 'sleep 60 & echo $! >> {pids}; sleep 60' &); "
               f"sleep 60 & echo $! >> {pids}; wait")
    w = _Worker(tmp_path)
    try:
        w.send({"id": 1, "op": "task", "args": [{"id": 0, "kind": "shell", "command": command}]})
        started = _pids(pids, 3)
        t0 = time.monotonic()
        w.send({"op": "kill"})
        assert w.answer()["result"]["exit_code"] == 128 + 9
        assert time.monotonic() - t0 < 5
        deadline = time.monotonic() + 2
        while (left := [p for p in started if _running(p)]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not left, {p: _state(p) for p in left}
        w.send({"id": 2, "op": "task", "args": [{"id": 1, "kind": "shell", "command": "echo next"}]})
        assert w.answer()["result"]["exit_code"] == 0
    finally:
        w.close()
        _end(_pids(pids, 0))


def test_a_worker_killed_while_it_kills_its_task_leaves_nothing_stopped(tmp_path):
    """A task of 60 sleepers; the worker is told to kill it and is itself killed (kill -9) a moment
    later, at delays from 0 to 8 ms (where the kill is under way). Whatever it had not killed yet
    goes on running: no process is left stopped."""
    stopped: dict[float, list[int]] = {}
    for i, delay in enumerate((0.0, 0.0005, 0.001, 0.002, 0.004, 0.008)):
        pids = tmp_path / f"pids{i}"
        command = f"echo $$ >> {pids}; for i in $(seq 60); do sleep 60 & echo $! >> {pids}; done; wait"
        w = _Worker(tmp_path)
        try:
            w.send({"id": 1, "op": "task", "args": [{"id": 0, "kind": "shell", "command": command}]})
            started = _pids(pids, 61)  # the shell and its sleepers
            w.send({"op": "kill"})
            time.sleep(delay)
            w.proc.kill()
            w.proc.wait(timeout=10)
            time.sleep(0.05)  # (a signal sent just before the worker died lands)
            stopped[delay] = [p for p in started if _state(p) == "T"]
        finally:
            w.close()
            _end(_pids(pids, 0))
    assert not any(stopped.values()), {d: len(s) for d, s in stopped.items()}


def test_a_kill_names_its_call_a_queued_one_starts_nothing_and_the_running_one_is_spared(tmp_path):
    """Call 2 waits behind call 1 when the driver kills it (its copy lost before it began): call 1
    runs to its end untouched, and call 2 answers at once that its command never started."""
    w = _Worker(tmp_path)
    try:
        first = {"id": 0, "kind": "shell", "command": "sleep 0.5; echo one"}
        w.send({"id": 1, "op": "task", "args": [first]})
        w.send({"id": 2, "op": "task", "args": [{"id": 1, "kind": "shell", "command": "sleep 60"}]})
        w.send({"op": "kill", "id": 2})
        first = w.answer()
        assert first["id"] == 1 and first["result"]["exit_code"] == 0, first
        assert first["result"]["stdout_tail"].strip() == "one"
        t0 = time.monotonic()
        second = w.answer()
        assert second["id"] == 2 and second["result"]["exit_code"] == 128 + 9, second
        assert "killed before its command started" in second["result"]["stderr_tail"], second
        assert time.monotonic() - t0 < 5
    finally:
        w.close()


def test_a_killed_batch_starts_none_of_its_next_tasks(tmp_path):
    """A batch of three sleepers killed while its first runs: the first dies, the other two never
    start (all three answer at once), and the worker runs the next call."""
    from skylease.runtime.batch import batch_payload

    pids = tmp_path / "pids"
    tasks = [{"id": i, "kind": "shell", "command": f"echo $$ >> {pids}; exec sleep 60"} for i in range(3)]
    w = _Worker(tmp_path)
    try:
        w.send({"id": 1, "op": "batch", "args": [batch_payload(tasks, [1, 1, 1])]})
        _pids(pids, 1)
        t0 = time.monotonic()
        w.send({"op": "kill", "id": 1})
        answer = w.answer()
        assert time.monotonic() - t0 < 5
        assert [o["exit_code"] for o in answer["result"]] == [128 + 9] * 3, answer
        assert len(_pids(pids, 0)) == 1  # the other two never started
        w.send({"id": 2, "op": "task", "args": [{"id": 3, "kind": "shell", "command": "echo next"}]})
        assert w.answer()["result"]["exit_code"] == 0
    finally:
        w.close()
        _end(_pids(pids, 0))
