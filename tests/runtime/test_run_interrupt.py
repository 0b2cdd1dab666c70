"""Ctrl-C during `skylease run`: a partial summary naming the failed tasks, the exact command that
finishes the run, exit 130; summary.json and report.md say the same; the printed command resumes.

Deterministic under any load: the tasks after the first two wait for a gate file that the test
creates only once the interrupted run has exited, so the bag cannot finish before the SIGINT lands;
and the run is started with Python's Ctrl-C handler whatever SIGINT disposition pytest inherited
(see ``_WITH_CTRL_C``)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)


# A process started with SIGINT ignored passes that on across exec, and Python then installs no
# KeyboardInterrupt handler: the SIGINT is lost and the run goes on to "(done)", exit 1. A non-interactive
# shell ignores SIGINT in the commands it starts in the background (`pytest ... &` in a CI script), so
# the run under test sets Python's own handler first, as a run started from a terminal has it.
_WITH_CTRL_C = [sys.executable, "-c", "import runpy, signal; "
                "signal.signal(signal.SIGINT, signal.default_int_handler); "
                "runpy.run_module('skylease', run_name='__main__', alter_sys=True)"]


def _job(folder: Path, gate: Path) -> Path:
    """Two quick tasks (the second fails), then 30 that wait for ``gate`` (for at most 3 minutes, so a
    task left behind by a failed test ends on its own)."""
    job = folder / "jobs.txt"
    wait = f"i=0; until [ -e {shlex.quote(str(gate))} ] || [ $i -ge 3600 ]; do sleep 0.05; i=$((i+1)); done\n"
    job.write_text("true\nexit 9\n# a comment\n" + wait * 30)
    return job


def _interrupt_after(cmd: list[str], store: Path, results: int, env: dict, cwd: Path):
    """Start ``cmd``, send SIGINT once ``results`` results are recorded; (code, stdout, stderr)."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if store.exists():
            with sqlite3.connect(f"{store.as_uri()}?mode=ro", uri=True) as db:
                if db.execute("SELECT COUNT(*) FROM results").fetchone()[0] >= results:
                    break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def _check_interrupted(code: int, out: str, err: str, resume: str) -> None:
    assert code == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert "(interrupted)" in out and "succeeded" in out and "not run" in out and "cost" in out
    assert "Failed tasks (1):" in out and "line 2, exit code 9 (1 attempt(s)): exit 9" in out
    assert resume in out  # the exact command, on one line


def test_ctrl_c_prints_a_partial_summary_and_the_resume_command(tmp_path):
    gate = tmp_path / "gate"
    job = _job(tmp_path, gate)
    out = tmp_path / "o"
    env = dict(os.environ)
    args = ["run", str(job), "--out", str(out), "--policy", "fixed:1", "--price", "0.5"]
    try:  # SIGINT once the two quick tasks are recorded: the other 30 cannot end until the gate opens
        code, stdout, stderr = _interrupt_after([*_WITH_CTRL_C, *args], out / "results.sqlite", 2, env,
                                                tmp_path)
    finally:
        gate.touch()  # (after the run exited) the resume's tasks end at once
    resume = f"skylease run {job} --out {out} --policy fixed:1 --price 0.5 --resume"
    _check_interrupted(code, stdout, stderr, resume)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outcome"] == "interrupted" and summary["left"] > 0 and summary["cost"] > 0
    assert summary["failed_tasks"] == [{"line": 2, "command": "exit 9", "exit_code": 9, "attempts": 1,
                                        "stderr": ""}]
    assert summary["next"]["resume"] == resume
    report = (out / "report.md").read_text()
    assert resume in report and "| 2 | `exit 9` | 9 | 1 |" in report
    with sqlite3.connect(out / "results.sqlite") as db:  # the segment was closed, not left as a crash
        assert db.execute("SELECT outcome, ended_unix IS NOT NULL FROM segments").fetchall() == [
            ("interrupted", 1)]
        ok_before = {t for (t,) in db.execute("SELECT task FROM results")}
    # the printed command finishes the run: the recorded tasks (the failed one too) do not run again
    words = shlex.split(resume)
    res = subprocess.run([sys.executable, "-m", "skylease", *words[1:]], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stderr  # the failed task is still failed
    with sqlite3.connect(out / "results.sqlite") as db:
        rows = db.execute("SELECT task, segment FROM results ORDER BY task").fetchall()
    assert [t for t, _ in rows] == list(range(32))
    assert {t for t, seg in rows if seg == 0} == ok_before
