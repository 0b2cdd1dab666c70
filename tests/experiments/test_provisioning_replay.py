"""Every provisioning plan, replayed in the event simulator, costs what it says and finishes on time.

The planner counts whole tasks per interval (capacity="whole", the default); the simulator runs
whole 90 s tasks on hosts that boot, are billed per started unit and are stopped when the plan
says. The issue's bar: the same cost exactly, and a completion time within one interval. The
paper's literal fluid model (capacity="fluid") is kept for its test vectors and has one known gap.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.experiments.provisioning import replay_watershed
from skylease.planning.provisioning import WatershedJob, load_catalog, pick, solve_watershed
from skylease.planning.provisioning.baselines import ws_incremental, ws_naive
from skylease.planning.provisioning.watershed import cost_if_stopped

JOB = WatershedJob()
TYPES = pick(load_catalog("hybrid"), "local", "azure-small")


def check(plan, interval_min):
    r = replay_watershed(plan, JOB, TYPES)
    assert r.done == JOB.n_tasks and r.unfinished == ()
    # The replay releases every instance when the last task ends; with minute billing a job that
    # ends inside its last interval pays exactly the plan's counts up to that minute.
    assert r.cost == pytest.approx(cost_if_stopped(plan, TYPES, r.makespan / 60), abs=1e-9)
    assert r.cost <= plan.cost + 1e-9
    if plan.detail["billing"] == "hourly" or r.makespan >= plan.makespan_s - 1e-6:
        assert r.cost == pytest.approx(plan.cost, abs=1e-9)
    assert abs(r.makespan - plan.makespan_s) <= interval_min * 60 + 1e-6
    return r


@pytest.mark.parametrize("deadline, interval", [(70, 10), (60, 10), (61, 1)])
def test_paper_ilp_plans_replay(deadline, interval):
    plan = solve_watershed(JOB, TYPES, deadline, interval_min=interval)
    check(plan, interval)


@pytest.mark.parametrize("n, minutes, cost", [(0, 104.5, 0.0), (9, 78, 2.16), (20, 63, 4.80),
                                              (22, 61.5, 5.28), (24, 60, 2.88)])
def test_naive_baselines_replay_exactly(n, minutes, cost):
    """The event simulator reproduces the discrete-task baseline times (decision BASE) to the second."""
    plan = ws_naive(JOB, n)
    r = replay_watershed(plan, JOB, TYPES)
    assert (r.makespan / 60, r.cost) == (pytest.approx(minutes), pytest.approx(cost))
    assert (plan.makespan_s / 60, plan.cost) == (pytest.approx(minutes), pytest.approx(cost))


def test_incremental_baseline_replays():
    plan = ws_incremental(JOB, 78)
    r = replay_watershed(plan, JOB, TYPES)
    assert (r.makespan, r.cost) == (pytest.approx(plan.makespan_s), pytest.approx(plan.cost))


@settings(max_examples=25, deadline=None)
@given(deadline=st.integers(45, 130), interval=st.sampled_from([1, 2, 5, 10, 15, 30]))
def test_random_hourly_plans_replay_within_one_interval(deadline, interval):
    plan = solve_watershed(JOB, TYPES, deadline, interval_min=interval, billing="hourly")
    if plan.ok:
        check(plan, interval)


@settings(max_examples=25, deadline=None)
@given(deadline=st.integers(45, 130), interval=st.sampled_from([5, 10, 15, 30]))
def test_random_minute_billed_plans_replay_within_one_interval(deadline, interval):
    plan = solve_watershed(JOB, TYPES, deadline, interval_min=interval, billing="minute")
    if plan.ok:
        check(plan, interval)


@pytest.mark.parametrize("deadline", [70, 75, 90])
@pytest.mark.parametrize("interval", [1, 2])
def test_minute_billing_short_intervals_known_gap(deadline, interval):
    """Known gap of the paper's fluid model (not the default): with per-minute billing and intervals
    shorter than two tasks, the fluid plan stops instances mid-task on minute boundaries. Whole
    90 s tasks cannot follow it at the same cost (a host kept to finish its task would pay
    another minute), so the replay, which keeps the cost exact, can finish up to two tasks
    (3 min) late. Measured worst case over deadlines 45-130: 3.0 min."""
    plan = solve_watershed(JOB, TYPES, deadline, interval_min=interval, billing="minute", capacity="fluid")
    r = replay_watershed(plan, JOB, TYPES)
    assert r.cost == pytest.approx(plan.cost, abs=1e-9)
    if (deadline, interval) == (70, 1):  # a witness that the gap is real: later than one interval
        assert r.makespan > plan.makespan_s + interval * 60
    assert abs(r.makespan - plan.makespan_s) <= 2 * JOB.task_minutes * 60 + 1e-6


@settings(max_examples=40, deadline=None)
@given(deadline=st.integers(45, 130), interval=st.sampled_from([1, 2, 5, 10, 15, 30]),
       billing=st.sampled_from(["hourly", "minute"]))
def test_whole_task_plans_replay_by_their_end_at_their_cost(deadline, interval, billing):
    """With capacity="whole" the plan counts only tasks that really finish, so the replay never
    runs late, whatever the interval and billing (this closes the gap of the fluid model)."""
    plan = solve_watershed(JOB, TYPES, deadline, interval_min=interval, billing=billing, capacity="whole")
    if plan.ok:
        r = check(plan, interval)
        assert r.makespan <= plan.makespan_s + 1e-6


@pytest.mark.parametrize("capacity", ["whole", "fluid"])
@pytest.mark.parametrize("deadline, interval, cost", [(70, 10, 2.16), (60, 10, 2.88), (61, 1, 2.76)])
def test_whole_task_capacity_keeps_the_papers_ilp_points(deadline, interval, cost, capacity):
    """R12-R14's ILP points are the same with whole tasks (the default, by the DP) and fluid ones."""
    plan = solve_watershed(JOB, TYPES, deadline, interval_min=interval, capacity=capacity)
    assert plan.cost == pytest.approx(cost) and plan.makespan_s == deadline * 60
    assert plan.detail.get("method") == ("dp" if capacity == "whole" else None)
