"""A host that leaves a local pool (a volatility trace's departure, a lost worker): its processes
are dead when `kill` returns, and the run's loop is not held while init reaps them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from skylease.model.instance import InstanceType
from skylease.runtime.execute import run_task
from skylease.runtime.pools import LocalPool, WorkerGone, kill_tree


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_for(path: Path, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.01)
    return path.read_text().strip()


def test_kill_tree_returns_once_the_tree_is_dead_not_once_init_reaped_it(tmp_path):
    """The shell's child outlives its killed parent as an orphan that init reaps when it likes (in
    rounds of about a second in a container): kill_tree does not wait for that."""
    pidfile = tmp_path / "pid"
    script = tmp_path / "child.py"
    script.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                      "time.sleep(60)\n")
    # "; true": the shell forks the child (rather than exec) and waits for it
    shell = subprocess.Popen(["bash", "-c", f"{sys.executable} {script}; true"], start_new_session=True)
    child = int(_wait_for(pidfile))
    t0 = time.monotonic()
    kill_tree(shell.pid)
    took = time.monotonic() - t0
    assert _dead(child) and _dead(shell.pid)
    assert shell.wait(timeout=1) == -9
    assert took < 0.5, took


def test_a_host_leaving_a_local_pool_is_dead_at_once_and_reaped(tmp_path):
    pool = LocalPool(InstanceType("local"))
    pool.start("w0")
    pidfile = tmp_path / "pid"
    task = {"id": 0, "kind": "shell",
            "command": f"{sys.executable} -c \"import os,time; "
                       f"open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)\""}
    try:
        deadline = time.monotonic() + 30
        while "w0" not in pool.workers():
            assert time.monotonic() < deadline, "the worker never came up"
            time.sleep(0.01)
        call = pool.submit("w0", run_task, task)
        task_pid = int(_wait_for(pidfile))
        worker = pool.procs["w0"].proc
        t0 = time.monotonic()
        pool.kill("w0")
        took = time.monotonic() - t0
        assert took < 0.5, took
        assert _dead(task_pid)
        assert worker.returncode is not None  # reaped by its parent, not left a zombie
        assert "w0" not in pool.workers()
        with pytest.raises(WorkerGone):  # its call fails: the driver requeues the task
            call.result(timeout=5)
    finally:
        pool.close()
