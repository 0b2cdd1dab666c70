"""Bags and grids of any size for `simulate spequlos` (issue 41, item 1): a bag of one's own
``N:SECONDS``, a generated grid of ``--nodes`` over ``--days``, the progress of a long run, and the
limits checked before any work."""

from __future__ import annotations

import json

import pytest

from skylease.cli import main
from skylease.experiments.spequlos import run_once, simulate
from skylease.sim.dg.workload import DGBot, custom_bot, make_bot


def test_a_bag_of_ones_own_is_n_tasks_of_seconds_on_the_reference_node():
    b = make_bot("1,000:600")
    assert (len(b), b.category, float(b.nops[0])) == (1000, "1000:600", 600_000.0)
    assert float(b.arrival.max()) == 0.0
    assert b.wall_clock_bound == 1800.0  # three times its tasks' seconds, as SMALL's and BIG's bounds
    assert b.credits == pytest.approx(0.1 * 1000 * 1800 / 3600 * 15)
    assert make_bot("small").credits == pytest.approx(DGBot.homogeneous(1000, 3.6e6, "SMALL").credits)
    assert custom_bot("small") is None and custom_bot(" 5 : .5 ") == (5, 0.5)
    with pytest.raises(ValueError):
        custom_bot("0:60")


def test_a_bag_drawn_from_a_distribution_is_seeded_and_in_seconds_on_the_reference_node():
    a, b = make_bot("gamma:20000:600:300", seed=5), make_bot("gamma:20000:600:300", seed=5)
    assert (len(a), a.category) == (20000, "gamma:20000:600:300") and (a.nops == b.nops).all()
    assert abs(a.nops.mean() / 1000 - 600) < 15 and abs(a.nops.std() / 1000 - 300) < 15
    assert a.wall_clock_bound == pytest.approx(3 * a.nops.mean() / 1000)
    assert not (make_bot("gamma:20000:600:300", seed=6).nops == a.nops).all()


def test_a_sized_grid_runs_the_whole_bag_and_says_its_size():
    res = simulate("xwhep", "nd", "500:600", "9C-C-R", seed=3, nodes=40, days=5)
    assert (res["nodes"], res["n_tasks"], res["completed"], res["bot"]) == (40, 500, 500, "500:600")
    assert res["baseline"]["completed"] == 500
    # 500 tasks of 10 minutes on 40 nodes of about 1,000 nops/s: at least 500 / 40 rounds of 10 minutes
    assert res["baseline"]["completion_s"] >= 500 / 40 * 600 * 0.5


def test_progress_is_told_and_changes_nothing():
    kw = dict(nodes=40, days=5)
    plain = run_once("boinc", "seti", "300:300", "9A-G-D", 1, **kw)
    told: list[tuple[int, int]] = []
    watched = run_once("boinc", "seti", "300:300", "9A-G-D", 1, progress=lambda d, n: told.append((d, n)),
                       **kw)
    for key in ("completion_s", "completed", "credits_used", "cws", "tail_slowdown", "events"):
        assert watched[key] == plain[key], key
    done = [d for d, _ in told]
    assert done == sorted(done) and done[0] == 0 and done[-1] == 300 and {n for _, n in told} == {300}
    runs: list[str] = []
    simulate("xwhep", "nd", "200:300", "9C-C-R", 0, nodes=30, days=3, progress=lambda r, d, n: runs.append(r))
    assert runs[0] == "baseline" and runs[-1] == "9C-C-R" and set(runs) == {"baseline", "9C-C-R"}


@pytest.mark.parametrize(("argv", "says"), [
    (["--bot", "0:600"], "--bot: N:SECONDS needs N >= 1 and SECONDS > 0"),
    (["--bot", "100000000000:60"], "--bot: too many tasks: 100,000,000,000; at most "),
    (["--bot", "tiny"], "unknown BoT category 'tiny': use one of small; big; random; N:SECONDS"),
    (["--bot", "gamma:10:60"], "--bot: expected gamma:N:MEAN:SD (got 'gamma:10:60'); valid forms: small; "),
    (["--bot", "normal:100000000000:60:1"], "--bot: too many tasks: normal:100000000000:60:1 asks for "),
    (["--bot", "small", "--trace", "g5klyo", "--nodes", "10"], "--nodes: sizes a generated trace (seti, nd)"),
    (["--bot", "small", "--nodes", "100000000"], "--nodes: too many nodes"),
    (["--bot", "small", "--nodes", "1000000", "--days", "3000"], "--nodes x --days: too many availability"),
    (["--bot", "small", "--days", "0"], "--days: must be a finite number > 0"),
])
def test_sizes_beyond_the_limits_are_one_line_before_any_work(capsys, argv, says):
    base = ["simulate", "spequlos", "--middleware", "xwhep", "--trace", "seti"]
    code = main([*base, *argv] if "--trace" not in argv else [*base[:4], *argv])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err, err


def test_the_json_says_the_grids_size(capsys):
    code = main(["simulate", "spequlos", "--middleware", "boinc", "--trace", "nd", "--bot", "100:60",
                 "--nodes", "20", "--days", "2", "--json"])
    res = json.loads(capsys.readouterr().out)
    assert code == 0 and (res["nodes"], res["n_tasks"], res["bot"]) == (20, 100, "100:60")
