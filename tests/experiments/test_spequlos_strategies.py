"""SpeQuloS strategies as plug-ins: the paper's 18 are instances of the built-in
:class:`~skylease.control.qos.strategy.Strategy` and give exactly the results they gave before it
existed (fingerprints recorded on the code before the change); a strategy of one's own loads from a
file with parameters and does what it says, in ``run_once`` and in ``skylease simulate spequlos``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from skylease.control.plugins import parse_args
from skylease.control.qos import CloudStrategy, SpeQuloS, load_strategy, parse_plan
from skylease.control.qos.strategy import STRATEGIES, Strategy
from skylease.experiments.spequlos import run_once, stop_idle_cw
from skylease.model.errors import UserError

HERE = Path(__file__).resolve().parent
FILE = HERE / "data" / "strategies.py"

#: Runs of the built-ins as `skylease simulate spequlos --json` printed them on main before the
#: strategies became classes (5465bb6): (middleware, trace, bot, strategy, seed) -> values. The
#: generated traces (nd, seti) need no data set.
FINGERPRINTS = {
    ("boinc", "nd", "small", "9C-C-R", 0): {
        "completion_s": 59892.29182945937, "credits_used": 1191.0, "cws": 176, "cw_started_s": 56160.0,
        "cloud_work_share": 0.064, "events": 3403, "predicted_s": 63522.32414099574},
    ("xwhep", "nd", "small", "9A-G-D", 1): {
        "completion_s": 17686.150097317528, "credits_used": 1630.0, "cws": 305, "cw_started_s": 16320.0,
        "cloud_work_share": 0.21, "events": 1604, "predicted_s": 23452.698566520587},
    ("boinc", "nd", "random", "V-G-D", 4): {
        "completion_s": 3322.664203066379, "credits_used": 0.0, "cws": 0, "cw_started_s": None,
        "cloud_work_share": 0.0, "events": 4314, "predicted_s": 1296.08501252532},
    ("boinc", "nd", "small", "batch-accel+9A-G-R", 7): {
        "completion_s": 52235.0140876841, "credits_used": 3540.0, "cws": 305, "cw_started_s": 48480.0,
        "cloud_work_share": 0.171, "events": 3863, "predicted_s": 62903.241591302445, "extra_results": 31},
}


@pytest.mark.parametrize("key", list(FINGERPRINTS), ids=lambda k: "-".join(map(str, k)))
def test_the_built_ins_give_what_they_gave_before(key):
    row = run_once(*key)
    assert {k: row[k] for k in FINGERPRINTS[key]} == FINGERPRINTS[key]
    assert row["strategy"] == key[3]


def test_the_paper_strategies_are_cloud_strategies():
    for name in STRATEGIES:
        s = load_strategy(name)
        assert isinstance(s, CloudStrategy) and isinstance(s, Strategy) and s.name == name
        assert s.usage == {"F": "flat", "R": "reschedule", "D": "duplicate"}[name[-1]]
        assert s.greedy == (name.split("-")[1] == "G") == stop_idle_cw("greedy", s)
    assert load_strategy("none") is None
    # the scheduler's thresholds are the built-in's (as they were the Oracle's)
    p = SpeQuloS("9C-C-R", 10.0, threshold=0.8, variance_factor=3.0)
    assert p.strategy.oracle.threshold == 0.8 and p.strategy.oracle.variance_factor == 3.0


def test_a_strategy_written_as_the_paper_s_gives_its_results():
    """NinetyGreedy (a file, the user's way) and the built-in 9C-G-R make the same run, to the bit."""
    for key in (("xwhep", "nd", "small", 1), ("boinc", "nd", "small", 2)):
        mine = run_once(*key[:3], f"{FILE}:NinetyGreedy", key[3])
        paper = run_once(*key[:3], "9C-G-R", key[3])
        assert mine["cws"] > 0
        assert mine["strategy"] == "NinetyGreedy()"
        drop = ("strategy", "wall_s")
        assert {k: v for k, v in mine.items() if k not in drop} == \
            {k: v for k, v in paper.items() if k not in drop}


def test_a_strategy_of_one_s_own_starts_when_and_as_many_as_it_says():
    seen: list[SpeQuloS] = []

    def watch(policy: SpeQuloS) -> SpeQuloS:
        seen.append(policy)
        return policy

    row = run_once("xwhep", "nd", "small", f"{FILE}:AtShare", 1, wrap=watch,
                   strategy_args=parse_args(["at=0.8", "workers=3"]))
    strategy = seen[0].strategy
    assert type(strategy).__name__ == "AtShare" and (strategy.at, strategy.workers) == (0.8, 3)
    assert row["strategy"] == "AtShare(at=0.8, workers=3)"
    asked = strategy.asked
    yes = [a for a in asked if a[3]]
    assert len(yes) == 1 and asked[-1] is yes[0]  # asked every tick until it said yes, then never
    at, completed, submitted, _ = yes[0]
    assert completed >= 0.8 * submitted and all(c < 0.8 * n for _, c, n, _ in asked[:-1])
    assert row["cw_started_s"] == at and row["cws"] == 3  # then and as many, not a tick later
    baseline = run_once("xwhep", "nd", "small", "none", 1)
    assert row["completion_s"] != baseline["completion_s"]  # its workers did something
    # earlier than the paper's 9C-C-R, which waits for 90 %
    assert row["cw_started_s"] < run_once("xwhep", "nd", "small", "9C-C-R", 1)["cw_started_s"]


def test_a_strategy_reading_the_completion_times_gets_them():
    seen: list[SpeQuloS] = []
    row = run_once("xwhep", "nd", "small", f"{FILE}:Times", 1, wrap=lambda p: seen.append(p) or p,
                   strategy_args={"gap": 900.0, "workers": 2})
    assert seen[0].strategy.seen > 0 and row["cws"] == 2


def test_a_strategy_that_fails_during_the_run_is_one_line():
    with pytest.raises(UserError) as e:
        run_once("xwhep", "nd", "small", f"{FILE}:Broken", 1)
    text = str(e.value)
    assert "\n" not in text and "Broken failed: KeyError" in text and f"{FILE}:" in text


@pytest.mark.parametrize(("spec", "args", "field", "says"), [
    ("gone.py:Mine", [], "strategy", "no such file"),
    (f"{FILE}:Nope", [], "strategy", "has no class 'Nope'"),
    ("json:JSONDecoder", [], "strategy", "must derive from skylease.control.qos.strategy:CloudStrategy"),
    (f"{FILE}:AtShare", ["at=1.5"], "--strategy-arg", "at must be in (0, 1], got 1.5"),
    (f"{FILE}:AtShare", ["n=1"], "--strategy-arg", "unknown parameter 'n' of AtShare; it takes at, workers"),
    (f"{FILE}:AtShare", ["workers=many"], "--strategy-arg", "parameter 'workers' of AtShare takes int"),
    ("9C-C-R", ["at=1"], "--strategy-arg", "9C-C-R takes no parameters"),
    ("9Z-C-R", [], "strategy", "unknown QoS strategy '9Z-C-R'"),
])
def test_a_bad_strategy_is_one_line(spec, args, field, says):
    with pytest.raises(UserError) as e:
        parse_plan(spec, parse_args(args))
    assert e.value.field == field and says in e.value.message and "\n" not in str(e.value)


def test_simulate_spequlos_runs_a_strategy_from_a_file(tmp_path):
    """The CLI: --strategy FILE.py:CLASS with --strategy-arg, then a mistake in it (one line, exit 2)."""
    (tmp_path / "at_share.py").write_text(FILE.read_text())
    cmd = [sys.executable, "-m", "skylease", "simulate", "spequlos", "--middleware", "xwhep", "--trace", "nd",
           "--bot", "small", "--seed", "1", "--strategy", "at_share.py:AtShare"]
    done = subprocess.run([*cmd, "--strategy-arg", "workers=4", "--strategy-arg", "at=0.5", "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    res = json.loads(done.stdout)
    assert res["strategy"] == "AtShare(at=0.5, workers=4)" and res["cws"] == 4
    assert 0 < res["cw_started_s"] < res["baseline"]["completion_s"]
    bad = subprocess.run([*cmd, "--strategy-arg", "at=2"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip() == \
        "skylease simulate spequlos: error: --strategy-arg: at_share.py:AtShare: at must be in (0, 1], " \
        "got 2.0"
