"""After ``--resume``, summary.json and report.md describe the whole run (wall time, workers, peak,
lost tasks) beside its whole cost and tasks, and list its segments (issue 36, item 1)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from skylease.cli import main

pytestmark = pytest.mark.timeout(120)


def test_a_resumed_runs_summary_and_report_add_up_its_segments(tmp_path, capsys):
    (tmp_path / "jobs.txt").write_text("sleep 0.3\n" * 12)
    argv = ["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "o"), "--policy", "a2ha:aggressive",
            "--price", "1", "--billing-unit", "3"]
    assert main([*argv, "--budget", "1"]) == 1  # the budget buys one worker: tasks are left
    first = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert first["left"] > 0 and first["hosts"] == 1
    assert main([*argv, "--budget", "3", "--resume"]) == 0, capsys.readouterr().err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    with sqlite3.connect(tmp_path / "o" / "results.sqlite") as db:
        hosts = db.execute("SELECT COUNT(*) FROM hosts").fetchone()[0]
        # (a try that stopped with its worker is recorded with why: lost, released, interrupted...)
        lost = db.execute("SELECT COUNT(*) FROM attempts WHERE outcome NOT IN ('failed', 'cancelled')"
                          ).fetchone()[0]
    assert s["tasks"] == 12 and s["left"] == 0 and s["segments"] == 2
    assert s["hosts"] == hosts == first["hosts"] + s["this_segment"]["hosts"]
    assert s["hosts_per_pool"] == {"local": hosts}
    assert s["lost"] == lost == first["lost"] + s["this_segment"]["lost"]
    assert s["peak_hosts"] == max(first["peak_hosts"], s["this_segment"]["peak_hosts"])
    assert s["wall_s"] >= first["wall_s"] + s["this_segment"]["wall_s"]
    assert s["cost"] == pytest.approx(first["cost"] + s["this_segment"]["cost_this_segment"])
    assert [r["segment"] for r in s["per_segment"]] == [0, 1]
    assert sum(r["hosts"] for r in s["per_segment"]) == hosts
    report = (tmp_path / "o" / "report.md").read_text()
    assert f"| hosts | {hosts} |" in report and f"| lost | {lost} |" in report
    assert "resumed 1 time(s); the figures above are the whole run's" in report
