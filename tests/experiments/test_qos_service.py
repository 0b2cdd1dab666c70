"""Simulated BoTs served by the SpeQuloS service logic in process (issue 20, item 6), and the
issue's Done-when on predictions: after 10 finished BoTs of one infrastructure, α is learned from
them and the success rate is reported; other infrastructures do not change it."""

from __future__ import annotations

import itertools

import pytest

from skylease.control.qos.prediction import fit_alpha, success_rate
from skylease.experiments.qos_service import simulate_served
from skylease.experiments.spequlos import run_once
from skylease.model.errors import UserError
from skylease.runtime.qos.bots import BotRegistry
from skylease.service.db import engine_for


@pytest.fixture
def registry(tmp_path):
    engine = engine_for(None, tmp_path)
    yield BotRegistry(engine)
    engine.dispose()


def test_a_simulated_bot_is_registered_reported_every_tick_and_finished(registry):
    run = simulate_served(registry, "alice", "xwhep", "nd", "small", "9C-C-R", seed=3)
    alone = run_once("xwhep", "nd", "small", "9C-C-R", 3)  # the service only watches: same run
    assert run.row["completion_s"] == alone["completion_s"] and run.row["cws"] == alone["cws"]
    bot = run.bot
    assert (bot.owner, bot.infrastructure, bot.n_tasks, bot.strategy, bot.state) == (
        "alice", "xwhep/nd", 1000, "9C-C-R", "done")
    assert bot.completion_time == run.row["completion_s"]
    # p_half is the exact half-way time, as the policy's own naive prediction
    assert bot.p_half == run.row["predict_p"]
    series = registry.series(bot.id)
    off_tick = [p for p in series if p.t % 240.0]
    assert len(off_tick) == 1 and off_tick[0].completed == 500  # the report at half completion
    assert series[0].t == 0.0 and series[-1].t <= bot.completion_time
    assert len(series) <= bot.completion_time // 240 + 2 and len(series) > 0.9 * bot.completion_time // 240
    assert all(x.completed <= y.completed for x, y in itertools.pairwise(series))
    pred = run.prediction
    assert pred is not None and (pred.r, pred.completed, pred.state) == (0.5, 500, "running")
    assert pred.t_p == run.row["predicted_s"] and pred.runs == 0 and pred.alpha == 1.0


def test_alpha_is_learned_from_ten_finished_simulated_bots_of_one_infrastructure(registry):
    p, total = [], []
    for seed in range(1, 11):
        run = simulate_served(registry, "alice" if seed % 2 else "bob", "xwhep", "nd", "small", seed=seed)
        p.append(run.row["predict_p"])
        total.append(run.row["completion_s"])
    alpha = fit_alpha(p, total)
    hist = registry.history("xwhep/nd")
    assert hist.runs == 10 and len(hist.bots) == 10
    assert hist.alpha == alpha and alpha != 1.0
    assert hist.success_rate is not None and hist.success_rate == success_rate(p, total, alpha)
    # the next BoT is predicted with it, by the Oracle and by its own policy alike
    nxt = simulate_served(registry, "carol", "xwhep", "nd", "small", seed=11)
    assert nxt.prediction is not None
    assert (nxt.prediction.alpha, nxt.prediction.runs, nxt.prediction.success_rate) == (
        alpha, 10, hist.success_rate)
    assert nxt.prediction.t_p == pytest.approx(alpha * nxt.row["predict_p"])
    assert nxt.prediction.t_p == pytest.approx(nxt.row["predicted_s"])
    assert registry.predict(nxt.bot.id).alpha == alpha  # a finished BoT is predicted without itself
    before = registry.history("xwhep/nd")
    assert before.runs == 11
    assert before.alpha == fit_alpha([*p, nxt.row["predict_p"]], [*total, nxt.row["completion_s"]])
    # BoTs of another infrastructure have their own history and leave this one alone
    for seed in range(1, 4):
        simulate_served(registry, "alice", "boinc", "nd", "small", seed=seed)
    assert registry.history("boinc/nd").runs == 3
    after = registry.history("xwhep/nd")
    assert (after.runs, after.alpha, after.success_rate) == (before.runs, before.alpha, before.success_rate)


def test_bad_names_and_periods_are_one_line(registry):
    with pytest.raises(UserError, match="letters, digits") as exc:
        simulate_served(registry, "alice", "xwhep", "nd", "small", infrastructure="two words")
    assert exc.value.field == "infrastructure"
    with pytest.raises(UserError) as exc:
        simulate_served(registry, "alice", "xwhep", "nd", "small", period=0)
    assert exc.value.field == "period"
    assert registry.bots() == []


def test_the_demos_two_users_are_served_billed_and_faster_than_without_qos(tmp_path):
    """Part 10 of the demo: the service's Scheduler (not a policy in the simulation) serves each
    user's bag; each finishes sooner than without QoS, spends at most its order, and its
    account is what was deposited less what it spent (the refund came back)."""
    from skylease.experiments.demo import qos_service_demo

    rows = qos_service_demo(tmp_path)
    assert [r["owner"] for r in rows] == ["alice", "bob"]
    for r in rows:
        bag = r["bag"]
        assert bag["owner"] == r["owner"] and bag["state"] == "done" and not bag["served"]
        assert r["completion_s"] < r["without_s"]
        assert 0 < bag["credits_spent"] <= bag["credits_ordered"]
        assert r["balance"] == pytest.approx(5000 - bag["credits_spent"])
        assert bag["completion_time"] == pytest.approx(r["completion_s"])
