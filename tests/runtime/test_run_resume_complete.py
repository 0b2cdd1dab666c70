"""``skylease run --resume`` of a run with nothing left to run rents no worker, says so in one line
and leaves the run as it was (it used to rent the policy's workers again: ``workers rented`` 2 -> 4)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from skylease.cli import main

pytestmark = pytest.mark.timeout(120)


def _store(out: Path) -> tuple[int, int]:
    """(workers ever rented, segments) as the run's store holds them."""
    with sqlite3.connect(out / "results.sqlite") as db:
        return (db.execute("SELECT COUNT(*) FROM hosts").fetchone()[0],
                db.execute("SELECT COUNT(*) FROM segments").fetchone()[0])


def _run(tmp_path: Path, lines: str) -> tuple[list[str], Path]:
    (tmp_path / "jobs.txt").write_text(lines)
    out = tmp_path / "o"
    argv = ["run", str(tmp_path / "jobs.txt"), "--out", str(out), "--policy", "fixed:2", "--max-workers", "2"]
    return argv, out


def test_resuming_a_finished_run_rents_nothing_and_says_so_in_one_line(tmp_path, capsys):
    argv, out = _run(tmp_path, "true\n" * 3)
    assert main(argv) == 0
    before = _store(out)
    assert before[0] >= 1 and before[1] == 1
    summary, report = (out / "summary.json").read_bytes(), (out / "report.md").read_bytes()
    capsys.readouterr()

    assert main([*argv, "--resume"]) == 0
    said, err = capsys.readouterr()
    assert err == ""
    lines = said.strip().splitlines()
    assert len(lines) == 1, said
    assert "complete" in lines[0] and "3 of 3 tasks ok" in lines[0]
    assert str(out / "results.sqlite") in lines[0] and str(out / "report.md") in lines[0]
    assert _store(out) == before  # no worker rented, no segment opened
    assert (out / "summary.json").read_bytes() == summary and (out / "report.md").read_bytes() == report


def test_resuming_a_run_whose_only_unfinished_tasks_failed_rents_nothing_without_retry_failed(
        tmp_path, capsys):
    argv, out = _run(tmp_path, "true\nfalse\ntrue\n")
    assert main(argv) == 1
    before = _store(out)
    capsys.readouterr()

    assert main([*argv, "--resume"]) == 1  # the run still has a failed task, as its first run said
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 1 and "1 failed" in said[0] and "--retry-failed" in said[0], said
    assert _store(out) == before

    assert main([*argv, "--resume", "--retry-failed"]) == 1  # that one does run (and fails again)
    hosts, segments = _store(out)
    assert segments == before[1] + 1 and hosts > before[0]
    s = json.loads((out / "summary.json").read_text())
    assert s["segments"] == 2 and s["failed"] == 1 and s["retried"] == 1


def test_a_finished_run_killed_before_its_summary_gets_one_on_resume_without_renting(tmp_path, capsys):
    argv, out = _run(tmp_path, "true\n" * 3)
    assert main(argv) == 0
    first = json.loads((out / "summary.json").read_text())
    before = _store(out)
    (out / "summary.json").unlink()  # as if the driver died between the last result and the summary
    (out / "report.md").unlink()
    capsys.readouterr()

    assert main([*argv, "--resume"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1
    assert _store(out) == before
    s = json.loads((out / "summary.json").read_text())
    assert (s["tasks"], s["ok"], s["failed"], s["left"]) == (3, 3, 0, 0)
    assert s["outcome"] == "done" and s["segments"] == 1 and s["segment"] == 0
    assert s["hosts"] == first["hosts"] == before[0] and s["peak_hosts"] == first["peak_hosts"]
    assert s["wall_s"] == pytest.approx(first["wall_s"]) and s["cost"] == first["cost"]
    assert (out / "report.md").exists()
