"""The hybrid (Watershed) model solved by dynamic programming over lanes equals its ILP.

``solve_watershed(method="dp")`` (the default route for whole-task capacities) must give the same
status, cost and, with the tie-break, the same makespan as HiGHS on eqs. 18-25, and a plan that
satisfies eqs. 20-25 by itself.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from skylease.model.errors import UserError
from skylease.planning.provisioning.catalog import CloudType, load_catalog, pick
from skylease.planning.provisioning.watershed import (
    WatershedJob,
    availability,
    interval_capacity,
    solve_watershed,
)

HYBRID = load_catalog("hybrid")
WS_TYPES = pick(HYBRID, "local", "azure-small")
WS = WatershedJob()


def check_plan(plan, job, types, interval, billing):
    """The plan's counts satisfy eqs. 20-22 and cost what it says (eqs. 23-25)."""
    n = round(plan.makespan_min / interval)
    counts = {t.name: plan.instances.get(t.name, [0] * n) for t in types}
    work = 0.0
    cost = 0.0
    for t in types:
        c = counts[t.name]
        assert len(c) == n and all(a >= b for a, b in itertools.pairwise(c))  # (22)
        assert max(c, default=0) <= availability(job, t)  # (20)
        work += sum(x * interval_capacity(job, t, i * interval, interval, "whole") for i, x in enumerate(c))
        if billing == "minute":
            cost += sum(c) * interval * t.minute_price
        else:
            per_hour = round(60 / interval)
            cost += sum(max(c[h:h + per_hour]) for h in range(0, n, per_hour)) * t.price_hour
    assert work >= job.n_tasks  # (21)
    assert plan.cost == pytest.approx(cost, abs=1e-9)


@pytest.mark.parametrize("deadline, interval, cost", [(70, 10, 2.16), (60, 10, 2.88), (61, 1, 2.76),
                                                      (51, 1, 4.92), (80, 10, 1.68), (200, 10, 0.0)])
def test_dp_is_the_default_and_gives_the_papers_points(deadline, interval, cost):
    plan = solve_watershed(WS, WS_TYPES, deadline, interval_min=interval)
    assert plan.detail["method"] == "dp"
    assert plan.cost == pytest.approx(cost, abs=1e-9)
    check_plan(plan, WS, WS_TYPES, interval, "hourly")


@settings(max_examples=60, deadline=None)
@example(n_tasks=1000, task=1.5, local=16, init_l=10.0, init_c=30.0, price=0.12, cores=1, avail=44,
         second=False, deadline=61, interval=1, billing="hourly", tiebreak=True)
@example(n_tasks=1000, task=1.5, local=16, init_l=10.0, init_c=30.0, price=0.12, cores=1, avail=44,
         second=True, deadline=45, interval=5, billing="minute", tiebreak=True)
@given(n_tasks=st.integers(1, 400), task=st.sampled_from([1.0, 1.5, 2.5, 7.5]), local=st.integers(0, 16),
       init_l=st.sampled_from([0.0, 10.0]), init_c=st.sampled_from([0.0, 15.0, 30.0]),
       price=st.sampled_from([0.06, 0.12, 0.24]), cores=st.integers(1, 4), avail=st.integers(0, 30),
       second=st.booleans(), deadline=st.integers(20, 180), interval=st.sampled_from([1, 2, 5, 10, 15, 30]),
       billing=st.sampled_from(["hourly", "minute"]), tiebreak=st.booleans())
def test_dp_equals_the_ilp(n_tasks, task, local, init_l, init_c, price, cores, avail, second, deadline,
                           interval, billing, tiebreak):
    job = WatershedJob(n_tasks=n_tasks, task_minutes=task, local_cores=local)
    types = [CloudType("local", "local", 1.0, 0.0, init_minutes=init_l, max_count=local),
             CloudType("cloud", "cloud", 1.0, price, init_minutes=init_c, max_count=avail, cores=cores)]
    if second:  # a second priced type: faster per core, dearer, another start-up
        types.append(CloudType("big", "cloud", 2.0, price * 3, init_minutes=init_c / 2, max_count=5, cores=2))
    ilp = solve_watershed(job, types, deadline, interval_min=interval, billing=billing, tiebreak=tiebreak,
                          method="ilp")
    dp = solve_watershed(job, types, deadline, interval_min=interval, billing=billing, tiebreak=tiebreak,
                         method="dp")
    assert dp.status == ilp.status
    if not ilp.ok:
        return
    assert dp.cost == pytest.approx(ilp.cost, abs=1e-9)
    if tiebreak:
        assert dp.makespan_s == ilp.makespan_s
    check_plan(dp, job, types, interval, billing)


def test_dp_refuses_what_it_cannot_solve():
    with pytest.raises(UserError, match="method 'dp'"):
        solve_watershed(WS, WS_TYPES, 70, capacity="fluid", method="dp")
    with pytest.raises(UserError, match="method 'dp'"):  # five priced Azure sizes
        solve_watershed(WS, HYBRID, 70, method="dp")
    with pytest.raises(UserError, match="method must be"):
        solve_watershed(WS, WS_TYPES, 70, method="cbc")
    # "auto" falls back to the ILP where the DP does not apply
    assert solve_watershed(WS, HYBRID, 70).detail.get("method") is None
    assert solve_watershed(WS, WS_TYPES, 70, capacity="fluid").detail.get("method") is None


def test_infeasible_by_dp_says_so():
    plan = solve_watershed(WS, WS_TYPES, 40)
    assert plan.status == "infeasible" and "no plan finishes by 40 min" in plan.detail["message"]
    assert math.isnan(plan.cost)
