"""After a run: `--resume --retry-failed` reruns exactly the failed tasks, and `skylease export`
writes one row per task (CSV, JSON; Parquet only with pyarrow)."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import sqlite3

import pytest

from skylease.cli import main

pytestmark = pytest.mark.timeout(240)


def _job(tmp_path):
    """Tasks 1 and 3 fail while the marker exists; every task notes each time it runs."""
    runs, marker = tmp_path / "runs", tmp_path / "marker"
    runs.mkdir()
    marker.write_text("")
    lines = ["# tasks fail while the marker exists"]
    for i in range(5):
        fail = f" && test ! -e {marker}" if i in (1, 3) else ""
        lines.append(f"echo x >> {runs}/{i}{fail}")
    job = tmp_path / "jobs.txt"
    job.write_text("\n".join(lines) + "\n")
    return job, runs, marker


def _runs(runs) -> dict[int, int]:
    return {int(p.name): len(p.read_text().splitlines()) for p in runs.iterdir()}


def test_retry_failed_reruns_exactly_the_failed_tasks(tmp_path, capsys):
    job, runs, marker = _job(tmp_path)
    out = tmp_path / "o"
    argv = ["run", str(job), "--out", str(out), "--policy", "fixed:1"]
    assert main(argv) == 1
    printed = capsys.readouterr().out
    assert "Failed tasks (2):" in printed
    assert "line 3, exit code 1" in printed and "line 5, exit code 1" in printed
    retry = f"skylease run {job} --out {out} --policy fixed:1 --resume --retry-failed"
    assert retry in printed
    assert _runs(runs) == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1}
    assert main([*argv, "--resume"]) == 1  # without --retry-failed: nothing runs again
    capsys.readouterr()
    assert _runs(runs) == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1}
    marker.unlink()  # the cause is fixed
    assert main([*argv, "--resume", "--retry-failed"]) == 0
    capsys.readouterr()
    assert _runs(runs) == {0: 1, 1: 2, 2: 1, 3: 2, 4: 1}  # the failed ones again, the ok ones not
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("SELECT task, status, segment FROM results ORDER BY task").fetchall() == [
            (0, "ok", 0), (1, "ok", 1), (2, "ok", 0), (3, "ok", 1), (4, "ok", 0)]  # (no segment for nothing)
        # the failed results are kept as failed attempts
        assert db.execute("SELECT task, outcome, exit_code FROM attempts ORDER BY task").fetchall() == [
            (1, "failed", 1), (3, "failed", 1)]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed"] == 0 and summary["failed_tasks"] == []
    # export counts both tries of a retried task
    assert main(["export", str(out), "--format", "json", "--output", "-"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["attempts"] for r in rows] == [1, 2, 1, 2, 1]


def test_export_writes_one_row_per_task(tmp_path, capsys):
    job, _, _ = _job(tmp_path)
    out = tmp_path / "o"
    assert main(["run", str(job), "--out", str(out), "--policy", "fixed:1", "--price", "1",
                 "--billing-unit", "3600"]) == 1
    capsys.readouterr()
    assert main(["export", str(out)]) == 0
    assert f"5 task(s) written to {out / 'tasks.csv'}" in capsys.readouterr().out
    rows = list(csv.DictReader(io.StringIO((out / "tasks.csv").read_text())))
    assert [r["id"] for r in rows] == ["0", "1", "2", "3", "4"]
    assert [r["line"] for r in rows] == ["2", "3", "4", "5", "6"]  # job-file lines, comment skipped
    assert [r["state"] for r in rows] == ["ok", "failed", "ok", "failed", "ok"]
    assert [r["exit_code"] for r in rows] == ["0", "1", "0", "1", "0"]
    assert rows[1]["command"] == job.read_text().splitlines()[2]
    assert all(r["worker"] == "local-0" and r["pool"] == "local" and r["started_at"].endswith("Z")
               and r["started_at"] <= r["ended_at"] and float(r["runtime_s"]) >= 0 for r in rows)
    # one worker, one hour charged: the shares add up to its charge
    assert sum(float(r["cost_share"]) for r in rows) == pytest.approx(1.0)
    target = tmp_path / "t.json"
    assert main(["export", str(out), "--output", str(target)]) == 0  # the format from the suffix
    capsys.readouterr()
    data = json.loads(target.read_text())
    assert [r["state"] for r in data] == [r["state"] for r in rows] and data[1]["line"] == 3
    assert not [p for p in tmp_path.rglob("*.tmp*")]  # written through a temporary file, renamed


def test_parquet_needs_pyarrow(tmp_path, capsys):
    (tmp_path / "j.txt").write_text("true\n")
    out = tmp_path / "o"
    assert main(["run", str(tmp_path / "j.txt"), "--out", str(out), "--policy", "fixed:1"]) == 0
    capsys.readouterr()
    code = main(["export", str(out), "--format", "parquet"])
    if importlib.util.find_spec("pyarrow") is None:
        assert code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pip install pyarrow" in err and "--format" in err
        assert not (out / "tasks.parquet").exists()
    else:
        import pandas as pd

        assert code == 0
        assert list(pd.read_parquet(out / "tasks.parquet")["state"]) == ["ok"]


@pytest.mark.parametrize(("argv", "field"), [(["--format", "xml"], "--format"),
                                             (["--output", "missing/dir/t.csv"], "--output"),
                                             # issue 36: x.xlsx got CSV; a name must not lie
                                             (["--output", "t.xlsx"], "--output"),
                                             (["--format", "csv", "--output", "t.json"], "--output"),
                                             (["--format", "json", "--output", "t.csv"], "--output")])
def test_export_mistakes_are_one_line(tmp_path, capsys, argv, field):
    (tmp_path / "j.txt").write_text("true\n")
    out = tmp_path / "o"
    assert main(["run", str(tmp_path / "j.txt"), "--out", str(out), "--policy", "fixed:1"]) == 0
    capsys.readouterr()
    argv = [str(tmp_path / a) if a.startswith(("missing/", "t.")) else a for a in argv]
    assert main(["export", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err
    assert not list(tmp_path.glob("t.*")), "nothing written"


def test_export_format_from_a_plain_name_or_an_explicit_format(tmp_path, capsys):
    """No suffix: CSV; --format with a suffix that names no format: the user's choice."""
    (tmp_path / "j.txt").write_text("true\n")
    out = tmp_path / "o"
    assert main(["run", str(tmp_path / "j.txt"), "--out", str(out), "--policy", "fixed:1"]) == 0
    assert main(["export", str(out), "--output", str(tmp_path / "tasks")]) == 0
    assert (tmp_path / "tasks").read_text().startswith("id,line,command,")
    assert main(["export", str(out), "--format", "json", "--output", str(tmp_path / "t.txt")]) == 0
    assert json.loads((tmp_path / "t.txt").read_text())[0]["state"] == "ok"


def test_many_failed_tasks_are_listed_first_and_counted(tmp_path, capsys):
    job = tmp_path / "jobs.txt"
    job.write_text("true\n" + "".join(f"exit {i % 5 + 1}\n" for i in range(60)))
    out = tmp_path / "o"
    assert main(["run", str(job), "--out", str(out), "--policy", "fixed:2"]) == 1
    printed = capsys.readouterr().out
    assert "Failed tasks (60):" in printed and "line 2, exit code 1 (1 attempt(s)): exit 1" in printed
    assert "line 11, " in printed and "line 12, " not in printed and "and 50 more" in printed
    report = (out / "report.md").read_text()
    assert "| 51 | `exit 5` | 5 | 1 |" in report and "| 52 |" not in report
    assert f"and 10 more: `skylease export {out}` lists every task" in report
    assert len(json.loads((out / "summary.json").read_text())["failed_tasks"]) == 60
