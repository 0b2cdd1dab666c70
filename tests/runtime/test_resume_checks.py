"""A resume is checked before anything starts: the same job, money left under the budget."""

from __future__ import annotations

import sqlite3

from skylease.cli import main
from skylease.runtime.jobs import load_job
from skylease.runtime.store import ResultStore


def _stopped_run(folder, job, spent: float) -> None:
    store = ResultStore(folder / "results.sqlite")
    j = load_job(str(job))
    store.set_meta({"job": j.source, "fingerprint": j.fingerprint(), "tasks": len(j.tasks)})
    store.add_tasks((t.id, t.to_json(), t.label) for t in j.tasks)
    store.start_segment(12345)
    store.end_segment(spent, "interrupted")
    store.close()


def _segments(folder) -> int:
    with sqlite3.connect(folder / "results.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM segments").fetchone()[0]


def test_resuming_another_job_is_one_line_and_starts_nothing(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("true\ntrue\n")
    (tmp_path / "b.txt").write_text("false\n")
    out = tmp_path / "o"
    out.mkdir()
    _stopped_run(out, tmp_path / "a.txt", 0.0)
    assert main(["run", str(tmp_path / "b.txt"), "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the job differs" in err
    assert _segments(out) == 1


def test_resuming_with_the_budget_spent_is_one_line_and_starts_nothing(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("true\ntrue\n")
    out = tmp_path / "o"
    out.mkdir()
    _stopped_run(out, tmp_path / "a.txt", 1.0)
    argv = ["run", str(tmp_path / "a.txt"), "--out", str(out), "--resume", "--policy", "a2ha",
            "--price", "1", "--billing-unit", "10"]
    assert main([*argv, "--budget", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--budget" in err and "spent (1 of 0.5)" in err
    assert _segments(out) == 1
    # with money left, the same resume runs and finishes the two tasks
    assert main([*argv, "--budget", "5"]) == 0
    capsys.readouterr()
    assert _segments(out) == 2
