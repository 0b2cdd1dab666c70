"""run_task: shell commands and Python calls, their exit codes, output tails and timeouts."""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skylease.runtime import execute
from skylease.runtime.execute import TAIL_BYTES, run_task
from skylease.runtime.jobs import JobTask

KEYS = {"task", "attempt", "exit_code", "stdout_tail", "stderr_tail", "runtime_s", "host", "pid",
        "started_unix", "ended_unix", "result"}


def shell(command: str, **kw) -> dict:
    return run_task(JobTask(7, "shell", command=command).to_json(), **kw)


def call(target: str, *args, timeout_s: float | None = None, **kwargs) -> dict:
    return run_task(JobTask(3, "python", target=target, args=args, kwargs=kwargs).to_json(),
                    timeout_s=timeout_s)


def gone(pid: int) -> bool:
    """True when the process no longer runs (a zombie that nobody reaps counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return True


def test_shell_success_is_a_plain_dict() -> None:
    t0 = time.time()
    out = run_task(JobTask(7, "shell", command="echo hi; echo err >&2").to_json(), attempt=2)
    assert set(out) == KEYS
    assert (out["task"], out["attempt"], out["exit_code"]) == (7, 2, 0)
    assert (out["stdout_tail"], out["stderr_tail"], out["result"]) == ("hi\n", "err\n", None)
    assert (out["host"], out["pid"]) == (socket.gethostname(), os.getpid())
    assert t0 <= out["started_unix"] <= out["ended_unix"] <= time.time()
    assert 0 <= out["runtime_s"] < 5
    assert json.loads(json.dumps(out)) == out


def test_run_task_pickles_by_reference() -> None:
    assert pickle.loads(pickle.dumps(run_task)) is run_task
    assert len(pickle.dumps(run_task)) < 100


def test_shell_nonzero_exit_and_stdin_closed() -> None:
    assert shell("exit 3")["exit_code"] == 3
    assert shell("cat")["exit_code"] == 0  # reads /dev/null, not the worker's stdin


def test_shell_killed_by_a_signal() -> None:
    out = shell("kill -9 $$")
    assert out["exit_code"] == 128 + 9 and "SIGKILL" in out["stderr_tail"]


def test_output_tails_keep_the_last_bytes() -> None:
    out = shell("i=0; while [ $i -lt 400 ]; do echo line$i; echo err$i >&2; i=$((i+1)); done")
    assert len(out["stdout_tail"]) == TAIL_BYTES and out["stdout_tail"].endswith("line399\n")
    assert len(out["stderr_tail"]) == TAIL_BYTES and out["stderr_tail"].endswith("err399\n")
    assert "line0\n" not in out["stdout_tail"]


def test_tail_does_not_start_inside_a_character() -> None:
    out = shell("i=0; while [ $i -lt 1500 ]; do printf 'é'; i=$((i+1)); done")  # 3000 bytes
    assert out["stdout_tail"] == "é" * (TAIL_BYTES // 2)
    assert execute._tail(b"\xff" * 3) == "\ufffd" * 3  # not UTF-8: replaced, not raised


def test_big_output_is_not_kept_in_full() -> None:
    out = shell("head -c 3000000 /dev/zero | tr '\\0' a; echo END")
    assert out["exit_code"] == 0 and out["stdout_tail"].endswith("a" * 100 + "END\n")
    assert len(out["stdout_tail"]) == TAIL_BYTES


def test_timeout_kills_the_process_group() -> None:
    t0 = time.monotonic()
    out = shell("sleep 30 & echo $!; sleep 30", timeout_s=0.3)
    assert time.monotonic() - t0 < 3
    assert out["exit_code"] == 124 and "timed out" in out["stderr_tail"]
    child = int(out["stdout_tail"].split()[0])
    deadline = time.monotonic() + 2
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone(child)


def test_timeout_of_a_command_that_ignores_sigterm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(execute, "KILL_GRACE_S", 0.2)
    t0 = time.monotonic()
    out = shell("trap '' TERM; sleep 30", timeout_s=0.2)
    assert out["exit_code"] == 124 and time.monotonic() - t0 < 3


def test_timeout_of_a_command_that_closed_its_output() -> None:
    t0 = time.monotonic()
    out = shell("exec >&- 2>&-; sleep 30", timeout_s=0.3)
    assert out["exit_code"] == 124 and time.monotonic() - t0 < 3


def test_fast_command_is_not_timed_out() -> None:
    assert shell("true", timeout_s=5)["exit_code"] == 0


# Counted in a fresh interpreter: in the test process, what earlier tests left behind (a results
# store held by a reference cycle keeps its three SQLite files open) may be garbage-collected during
# the loop, and Dask threads of earlier tests may open or close sockets, so the count there depends
# on what ran before (it once read 27 after, 33 before).
_FD_PROBE = """
import json
import os
from skylease.runtime.execute import run_task
from skylease.runtime.jobs import JobTask

def shell(command, **kw):
    return run_task(JobTask(7, "shell", command=command).to_json(), **kw)

shell("true")
before = sorted(os.listdir("/proc/self/fd"))
for i in range(30):
    shell("echo x", timeout_s=5 if i % 2 else None)
    shell("sleep 5", timeout_s=0.01)
print(json.dumps([before, sorted(os.listdir("/proc/self/fd"))]))
"""


def test_no_file_descriptor_leaks() -> None:
    proc = subprocess.run([sys.executable, "-c", _FD_PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    before, after = json.loads(proc.stdout)
    assert after == before


def test_python_success() -> None:
    out = call("math:factorial", 5)
    assert set(out) == KEYS
    assert (out["task"], out["exit_code"], out["result"], out["stderr_tail"]) == (3, 0, "120", "")
    assert call("builtins:int", "ff", base=16)["result"] == "255"


def test_python_result_repr_is_truncated() -> None:
    out = call("operator:mul", "x", 5000)
    assert out["exit_code"] == 0 and out["result"] == repr("x" * 5000)[:TAIL_BYTES]


def test_python_exception_gives_exit_1_and_the_traceback_tail() -> None:
    out = call("operator:truediv", 1, 0)
    assert out["exit_code"] == 1 and out["result"] is None
    assert out["stderr_tail"].startswith("Traceback") and "ZeroDivisionError" in out["stderr_tail"]
    py = call("json:loads", "{")
    assert py["exit_code"] == 1 and "JSONDecodeError" in py["stderr_tail"]
    assert "json/decoder.py" in py["stderr_tail"] and "_run_python" not in py["stderr_tail"]
    long = call("operator:getitem", {}, "y" * 5000)
    assert long["exit_code"] == 1 and len(long["stderr_tail"].encode()) == TAIL_BYTES
    assert long["stderr_tail"].endswith("y" * 50 + "'\n")


def test_python_import_error_and_sys_exit() -> None:
    out = call("no_such_module_xyz:f")
    assert out["exit_code"] == 1 and "ModuleNotFoundError" in out["stderr_tail"]
    assert call("sys:exit", 3)["exit_code"] == 3
    assert call("sys:exit")["exit_code"] == 0
    exited = call("sys:exit", "bye")
    assert exited["exit_code"] == 1 and exited["stderr_tail"] == "bye\n"


def test_python_over_the_timeout_counts_as_timed_out() -> None:
    out = call("time:sleep", 0.1, timeout_s=0.02)
    assert out["exit_code"] == 124 and out["result"] == "None" and "timeout" in out["stderr_tail"]
    assert call("time:sleep", 0.0, timeout_s=5)["exit_code"] == 0


def test_unknown_kind_is_reported_not_raised() -> None:
    out = run_task({"id": 1, "kind": "perl"})
    assert out["exit_code"] == 2 and "perl" in out["stderr_tail"]
