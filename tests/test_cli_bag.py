"""`skylease simulate bag`: any bag policy on the simulated cloud of `simulate a2ha`, loaded by
`skylease run`'s loader; `bag_cell` in a campaign against A2HA with describe() in its rows; and the
tutorial's policy file (docs/howto/your-policy.md), unchanged, in simulate bag, in a campaign and
in `skylease run` (whose replay builds the same class)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from tests.cli_helpers import one_line, run

from skylease.control.fixed import FixedPool
from skylease.experiments.a2ha import cloud_pool
from skylease.experiments.bag import bag_cell, workload_bag
from skylease.experiments.sweep import run_campaign
from skylease.sim.env import simulate
from skylease.traces.bot import a2ha_workload

pytestmark = pytest.mark.timeout(240)

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "howto" / "your-policy.md"


def tutorial_policy() -> str:
    """The tutorial's `<!-- file: greedy.py -->` block, as the page shows it."""
    text = TUTORIAL.read_text(encoding="utf-8")
    m = re.search(r"<!-- file: greedy\.py -->\n```python\n(.*?)^```", text, re.S | re.M)
    assert m is not None, "docs/howto/your-policy.md lost its greedy.py block"
    return m.group(1)


@pytest.fixture
def lab(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "greedy.py").write_text(tutorial_policy())
    (tmp_path / "jobs.txt").write_text("sleep 0.2\n" * 6)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_builtin_is_the_simulator_run_of_the_same_policy(capsys):
    code, out, _ = run(capsys, "simulate", "bag", "--workload", "image", "--policy", "fixed:5", "--json")
    assert code == 0
    res = json.loads(out)
    direct = simulate(FixedPool(5, pool="cloud"), a2ha_workload("image"), [cloud_pool()])
    assert res["wall_s"]["mean"] == direct.makespan and res["cost"]["mean"] == direct.cost
    assert res["hosts"]["mean"] == 5 and res["order"] == "fifo"
    assert res["policy_class"] == "skylease.control.fixed:FixedPool(n=5, pool='cloud')"


def test_a2ha_by_name_is_simulate_a2ha_run_for_run(capsys):
    """The loader's A2HA (the one `skylease run` builds) on the same seeds: every metric equal."""
    answers = []
    for argv in (["a2ha"], ["bag", "--policy", "a2ha"]):
        code, out, _ = run(capsys, "simulate", *argv, "--workload", "synthetic", "--orderings", "5", "--json")
        assert code == 0
        answers.append(json.loads(out))
    a2ha, bag = answers
    assert bag["order"] == "random"
    for k in ("hosts", "wall_s", "speedup", "charged_hours", "cost", "interrupted_tasks", "wasted_s",
              "continued_hosts", "unfinished"):
        assert bag[k] == a2ha[k], k


def test_runs_left_unfinished_are_said(tmp_path, monkeypatch, capsys):
    (tmp_path / "idle.py").write_text("from skylease.control.env import Policy\n\n\nclass Idle(Policy):\n"
                                      "    pass\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "simulate", "bag", "--workload", "constant:4:100", "--policy", "idle.py:Idle")
    assert code == 0
    assert "1 of 1 run(s) ended with tasks unfinished (on average 4.0)" in out


def test_the_table_shows_makespan_cost_hosts_and_describe(capsys):
    code, out, _ = run(capsys, "simulate", "bag", "--workload", "constant:12:1800", "--policy", "fixed:3",
                       "--price", "0.5", "--boot-time", "0")
    assert code == 0
    assert "policy: skylease.control.fixed:FixedPool(n=3, pool='cloud')" in out
    # 12 tasks of 30 min on 3 hosts: 4 tasks each, 2 h of work, 2 units of $0.50 per host
    assert re.search(r"makespan\s*│ 2h 00m ± 0 s", out), out
    assert re.search(r"cost\s*│ \$3\.00 ± \$0\.00", out) and re.search(r"hosts\s*│ 3\.0 ± 0\.0", out), out


def test_the_same_seed_gives_every_policy_the_same_bag(capsys):
    def serial(policy: str, seed: int) -> float:  # the bag's total work: speedup x makespan
        code, out, _ = run(capsys, "simulate", "bag", "--workload", "normal:30:600:100", "--policy", policy,
                           "--seed", str(seed), "--json")
        assert code == 0
        res = json.loads(out)
        assert res["tasks"] == 30 and res["order"] == ("random" if policy == "a2ha" else "fifo")
        return res["speedup"]["mean"] * res["wall_s"]["mean"]

    assert serial("fixed:4", 7) == pytest.approx(serial("a2ha", 7), rel=1e-12)
    assert serial("fixed:4", 7) != pytest.approx(serial("fixed:4", 8), rel=1e-6)


@pytest.mark.parametrize(("argv", "needles"), [
    (["--policy", "gone.py:Mine"], ["gone.py", "--policy"]),
    (["--policy", "fixed:2", "--policy-arg", "n=2"], ["--policy-arg"]),
    (["--policy", "fixed:2", "--budget", "10"], ["--budget"]),
    (["--policy", "a2ha", "--budget", "0.5"], ["--budget"]),
    (["--policy", "a2ha", "--boot-time", "3600"], ["--boot-time"]),
    (["--policy", "a2ha", "--orderings", "0"], ["--orderings"]),
])
def test_bad_input_is_one_line(capsys, argv, needles):
    one_line(capsys, ["simulate", "bag", "--workload", "constant:4:100", *argv], *needles)


def test_a_policy_that_raises_in_a_callback_is_one_line_with_its_file_and_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "broken.py").write_text("from skylease.control.env import Policy\n\n\nclass Broken(Policy):\n"
                                        "    def on_start(self, env):\n        raise RuntimeError('oops')\n")
    monkeypatch.chdir(tmp_path)
    one_line(capsys, ["simulate", "bag", "--workload", "constant:4:100", "--policy", "broken.py:Broken"],
             "broken.py:6", "RuntimeError: oops", "--policy")


def test_the_tutorial_policy_runs_unchanged_in_simulate_bag(lab, capsys):
    code, out, _ = run(capsys, "simulate", "bag", "--workload", "image", "--policy", "greedy.py:Greedy",
                       "--policy-arg", "per_host=8", "--policy-arg", "maximum=16", "--json")
    assert code == 0
    res = json.loads(out)
    assert res["policy_class"] == f"{lab / 'greedy.py'}:Greedy(per_host=8, maximum=16, pool='cloud')"
    assert res["hosts"]["mean"] == 16 and res["unfinished"]["mean"] == 0


def test_the_tutorial_policy_runs_unchanged_in_a_campaign_against_a2ha(lab):
    grid = {"workload": ["synthetic"], "policy": ["a2ha", ["greedy.py:Greedy", "per_host=8"]]}
    res = run_campaign(bag_cell, grid, seeds=2, out=lab / "runs", workers=1, progress=False)
    assert not res.failed and len(res.table) == 4
    classes = sorted(set(res.table["policy_class"]))
    assert classes[0] == f"{lab / 'greedy.py'}:Greedy(per_host=8, maximum=8, pool='cloud')"
    assert classes[1].startswith("skylease.control.a2ha:A2HA(creation_ratio=0.5, ")
    # paired: both policies of a repetition ran on the same bag (its serial time), another per rep
    by_rep = res.table.groupby("rep")["serial_s"]
    assert (by_rep.nunique() == 1).all() and res.table["serial_s"].nunique() == 2
    assert sorted(res.table["serial_s"].unique()) == sorted(
        math.fsum(t.work for t in workload_bag("synthetic", r).tasks) for r in (0, 1))
    assert "policy_class" in (lab / "runs" / "results.csv").read_text().splitlines()[0]


def test_the_tutorial_policy_runs_unchanged_for_real_and_replay_builds_it(lab, capsys):
    code, _, err = run(capsys, "run", "jobs.txt", "--out", "out", "--policy", "greedy.py:Greedy",
                       "--policy-arg", "maximum=2")
    assert code == 0, err
    summary = json.loads((lab / "out" / "summary.json").read_text())
    want = f"{lab / 'greedy.py'}:Greedy(per_host=4, maximum=2, pool='local')"
    assert summary["policy_class"] == want and summary["hosts"] == 2
    code, out, err = run(capsys, "simulate", "replay", "out", "--seeds", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["policy_class"] == want
