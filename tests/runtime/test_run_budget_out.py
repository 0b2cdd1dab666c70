"""A run whose budget runs out says so (how much was spent of what was allowed), and the command it
gives to finish the run has a larger budget, which does finish it (issue 36, item 7)."""

from __future__ import annotations

import json
import shlex

import pytest

from skylease.cli import main

pytestmark = pytest.mark.timeout(120)


def test_a_spent_budget_is_said_and_its_finish_command_finishes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.txt").write_text("sleep 0.3\n" * 12)
    # one worker of 3 s at $1 fits a $1 budget; it runs about 9 of the 12 tasks, then none can rent
    argv = ["run", "jobs.txt", "--out", "o", "--policy", "a2ha:aggressive", "--price", "1",
            "--billing-unit", "3", "--budget", "1"]
    assert main(argv) == 1
    text = capsys.readouterr().out
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["left"] > 0 and s["outcome"] == "budget spent"
    assert s["budget_ran_out"] == {"spent": 1.0, "budget": 1.0, "least_charge": 1.0}
    assert "The budget ran out: $1.00 spent of the $1.00 allowed" in text  # money as docs/cli.md prints it
    assert "The budget ran out" in (tmp_path / "o" / "report.md").read_text()
    finish = shlex.split(s["next"]["resume"])
    budget = float(finish[finish.index("--budget") + 1])
    assert budget >= 2.0  # room for one more worker, at least
    assert s["next"]["resume"] in text
    assert main(["status", "o", "--json"]) == 0  # status gives the same command
    assert json.loads(capsys.readouterr().out)["next"]["resume"] == s["next"]["resume"]
    # the command given finishes the run
    assert main(finish[1:]) == 0, capsys.readouterr().err
    s2 = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s2["left"] == 0 and s2["outcome"] == "done" and s2["cost"] <= budget
