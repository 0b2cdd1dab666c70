"""Decisions M12, M13, BASE (docs/decisions/ilp.md): the k-model Watershed ILP with data location, and data
co-location."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.model.errors import UserError
from skylease.planning.provisioning import SCENARIO_A, SCENARIO_B, WatershedModel, solve_multimodel
from skylease.planning.provisioning.baselines import colocation
from skylease.planning.provisioning.catalog import CloudType, load_catalog, pick
from skylease.planning.provisioning.multimodel import (
    AZURE,
    LOCAL,
    default_init_penalty,
    run_tasks,
    transfer_price,
)
from skylease.planning.provisioning.watershed import WatershedJob, solve_watershed

HYBRID = load_catalog("hybrid")
MM_TYPES = pick(HYBRID, "local", "azure-medium")  # the paper's multi-model use case: local + Azure medium
BOTH = frozenset({LOCAL, AZURE})


def _elbow(models) -> tuple[int, object]:
    pts = [colocation(models, HYBRID, n) for n in range(1, 33)]
    i = min(range(32), key=lambda i: abs(pts[i].detail["local_min"] - pts[i].detail["azure_min"]))
    return i + 1, pts[i]


def _check_transfers(models, plan) -> None:
    """A transfer is listed (and charged) iff a model runs at a location that lacks its data."""
    by = {m.name: m for m in models}
    loc_of = {t.name: t.location for t in HYBRID}
    away = {(name, loc_of[t]) for name, per in plan.detail["assignment"].items() for t in per
            if loc_of[t] not in by[name].data_at}
    assert {(d["model"], d["to"]) for d in plan.detail["transfers"]} == away
    assert plan.detail["transfer_cost"] == pytest.approx(sum(transfer_price(by[n], loc) for n, loc in away))
    assert plan.cost == pytest.approx(plan.detail["transfer_cost"] + plan.detail["compute_cost"])


# --- scenarios and co-location ---------------------------------------------------------------------

def test_scenarios_match_the_spec():
    for sc in (SCENARIO_A, SCENARIO_B):
        assert [m.n_tasks for m in sc] == [200] * 5
        assert [m.task_minutes for m in sc] == [1.0, 2.625, 4.25, 5.875, 7.5]
    assert [sorted(m.data_at) for m in SCENARIO_A] == [[LOCAL], [AZURE], sorted(BOTH), [LOCAL], [AZURE]]
    assert [sorted(m.data_at) for m in SCENARIO_B] == [[LOCAL], [LOCAL], sorted(BOTH), [LOCAL], [AZURE]]
    assert colocation(SCENARIO_A, HYBRID, 4).detail["placement"] == {"local": ["m1", "m4"],
                                                                     "azure": ["m2", "m3", "m5"]}
    assert colocation(SCENARIO_B, HYBRID, 4).detail["placement"] == {"local": ["m1", "m2", "m4"],
                                                                     "azure": ["m3", "m5"]}


def test_colocation_one_model_matches_ws_simulate_times():
    from skylease.planning.provisioning.baselines import ws_simulate

    medium = pick(HYBRID, "azure-medium")[0]
    for n in (5, 12):
        job = WatershedJob(n_tasks=400, task_minutes=2.0)
        ref = ws_simulate(job, 0, extra={medium: n}, billing="minute")
        loc_only = colocation([WatershedModel("a", 400, 2.0, 1.0, frozenset({LOCAL}))], HYBRID, n)
        az_only = colocation([WatershedModel("a", 400, 2.0, 1.0, frozenset({AZURE}))], HYBRID, n)
        assert loc_only.makespan_min == pytest.approx(ws_simulate(job, 0, billing="minute").makespan_min)
        assert loc_only.cost == 0.0
        # Azure alone: 2n cores, start-up 30 min, then ceil(400/2n) rounds of 2 min
        assert az_only.makespan_min == pytest.approx(30 + math.ceil(400 / (2 * n)) * 2.0)
        assert az_only.cost == pytest.approx(n * math.ceil(az_only.makespan_min) * medium.minute_price)
        assert ref.makespan_min <= az_only.makespan_min


@pytest.mark.parametrize("models", [SCENARIO_A, SCENARIO_B], ids=["A", "B"])
def test_ilp_dominates_colocation(models):
    """The paper's claim, for the paper's (fluid) model. Whole-task plans lose it at scenario A's
    elbow (20-22 instances): co-location finishes at 104-105 min and is billed to that minute,
    while a whole plan must end on the 10-min grid (100 min): $8.63 against $8.40-8.62."""
    elbow_n, _ = _elbow(models)
    for n in sorted({elbow_n, 32}):
        p = colocation(models, HYBRID, n)
        q = solve_multimodel(models, MM_TYPES, p.makespan_min, tiebreak=False, capacity="fluid")
        assert q.ok, q.detail
        assert q.makespan_min <= p.makespan_min + 1e-9
        assert q.cost <= p.cost + 1e-9
        _check_transfers(models, q)


# --- equivalences and transfers ----------------------------------------------------------------------

@pytest.mark.parametrize("capacity", ["fluid", "whole"])
@pytest.mark.parametrize("deadline", [50, 60, 70, 90, 120])
def test_one_model_with_data_everywhere_equals_solve_watershed(deadline, capacity):
    types = pick(HYBRID, "local", "azure-small")
    job = WatershedJob(n_tasks=600, task_minutes=1.5, local_cores=16)
    ws = solve_watershed(job, types, deadline, billing="minute", capacity=capacity)
    mm = solve_multimodel([WatershedModel("w", 600, 1.5, 1.0, BOTH)], types, deadline, capacity=capacity)
    assert mm.status == ws.status
    if ws.ok:
        assert mm.cost == pytest.approx(ws.cost)
        assert mm.makespan_min == ws.makespan_min
        assert mm.detail["transfer_cost"] == 0.0


def test_transfer_cost_iff_running_away_from_data():
    small_in_azure = WatershedModel("a", 100, 1.0, 1.0, frozenset({AZURE}))
    p = solve_multimodel([small_in_azure], MM_TYPES, 300)
    # moving 1 GB out of Azure ($0.15) is cheaper than Azure compute: it runs on the free local cores
    assert set(p.detail["assignment"]["a"]) == {"local"}
    assert p.detail["transfer_cost"] == pytest.approx(0.15)
    assert p.detail["transfers"] == [{"model": "a", "to": LOCAL, "from": [AZURE], "cost": 0.15}]
    assert p.cost == pytest.approx(0.15)
    big_in_azure = WatershedModel("a", 100, 1.0, 100.0, frozenset({AZURE}))
    q = solve_multimodel([big_in_azure], MM_TYPES, 300)
    assert set(q.detail["assignment"]["a"]) == {"azure-medium"}
    assert q.detail["transfers"] == [] and q.detail["transfer_cost"] == 0.0
    assert q.cost == pytest.approx(q.detail["compute_cost"]) and q.cost > 0
    _check_transfers([big_in_azure], q)
    # a price per source location overrides the default
    r = solve_multimodel([small_in_azure], MM_TYPES, 300, transfer_out_per_gb={AZURE: 0.01})
    assert r.detail["transfer_cost"] == pytest.approx(0.01)
    # data in both places: no transfer binary, never a transfer cost
    s = solve_multimodel([WatershedModel("a", 400, 1.0, 50.0, BOTH)], MM_TYPES, 40)
    assert s.ok and s.detail["transfers"] == [] and s.cost == pytest.approx(s.detail["compute_cost"])


def test_init_penalty_default_and_override():
    local, medium = MM_TYPES
    m = WatershedModel("a", 10, 2.5, 0.0, BOTH)
    assert default_init_penalty(local, m) == pytest.approx(4.0)   # 10 min / 2.5 min
    assert default_init_penalty(medium, m) == pytest.approx(24.0)  # 30 min * 2 cores / 2.5 min
    # 16 local cores, 1 interval of 10 min: 64 tasks minus 16 machines * penalty
    for capacity in ("fluid", "whole"):  # whole: the penalty is a stage-in of penalty*task/core minutes
        assert solve_multimodel([WatershedModel("a", 64, 2.5, 0.0, BOTH)], [local], 10,
                                init_penalty_tasks=0, capacity=capacity).ok
        assert not solve_multimodel([WatershedModel("a", 64, 2.5, 0.0, BOTH)], [local], 10,
                                    capacity=capacity).ok
    # whole tasks: 1 task of stage-in leaves 3 of the 4 task slots of every core
    assert solve_multimodel([WatershedModel("a", 48, 2.5, 0.0, BOTH)], [local], 10, init_penalty_tasks=1).ok
    assert not solve_multimodel([WatershedModel("a", 49, 2.5, 0.0, BOTH)], [local], 10,
                                init_penalty_tasks=1).ok


def test_infeasible_and_errors():
    p = solve_multimodel(SCENARIO_A, MM_TYPES, 30)
    assert p.status == "infeasible" and math.isnan(p.cost)
    assert "\n" not in p.detail["message"] and "30 min" in p.detail["message"]
    assert solve_multimodel(SCENARIO_A, MM_TYPES, 5).status == "infeasible"
    with pytest.raises(UserError):
        solve_multimodel(SCENARIO_A, MM_TYPES, 0)
    with pytest.raises(UserError):
        solve_multimodel(SCENARIO_A, MM_TYPES, 100, billing="daily")
    with pytest.raises(UserError):
        solve_multimodel(SCENARIO_A, MM_TYPES, 100, capacity="half")
    with pytest.raises(UserError):
        WatershedModel("x", 1, 1.0, 1.0, frozenset())
    with pytest.raises(UserError):
        colocation(SCENARIO_A, pick(HYBRID, "local", "azure-small"), 3)
    assert colocation(SCENARIO_A, HYBRID, 0).status == "infeasible"


def test_hourly_billing_costs_whole_instance_hours():
    p = solve_multimodel(SCENARIO_B[:2], MM_TYPES, 60, billing="hourly")
    q = solve_multimodel(SCENARIO_B[:2], MM_TYPES, 60, billing="minute")
    assert p.ok and q.ok and p.cost >= q.cost - 1e-9
    assert p.cost == pytest.approx(sum(u * 0.24 for u in p.billed_units.values())
                                   + p.detail["transfer_cost"])


# --- exactness on tiny instances: brute force over every integer plan --------------------------------

def _brute(models, types, n_int, interval=10.0) -> float:
    """Minimum cost over all x[i][j][k] (per-type totals monotone, <= availability), with the same
    capacities, InitPenalty, transfer and minute-billing rules as the ILP; inf if none is feasible."""
    locs = sorted({t.location for t in types})
    per_type = []
    for t in types:
        a = t.max_count
        cells = [c for c in itertools.product(range(a + 1), repeat=len(models)) if sum(c) <= a]
        cfgs = [seq for seq in itertools.product(cells, repeat=n_int)
                if all(sum(seq[i]) >= sum(seq[i + 1]) for i in range(n_int - 1))]
        arr = np.array(cfgs, dtype=float)  # (C, n_int, K)
        cap = np.array([t.cores * t.capacity * interval / m.task_minutes for m in models])
        pen = np.array([default_init_penalty(t, m) for m in models])
        work = arr.sum(axis=1) * cap - arr.max(axis=1) * pen
        cost = arr.sum(axis=(1, 2)) * interval * t.minute_price
        per_type.append((work, cost, arr.sum(axis=1) > 0))
    (w0, c0, u0), (w1, c1, u1) = per_type
    work = w0[:, None, :] + w1[None, :, :]
    cost = c0[:, None] + c1[None, :]
    for k, m in enumerate(models):
        for loc in locs:
            if loc in m.data_at:
                continue
            used = np.zeros(cost.shape, dtype=bool)
            if types[0].location == loc:
                used |= u0[:, None, k]
            if types[1].location == loc:
                used |= u1[None, :, k]
            cost = cost + used * transfer_price(m, loc)
    ok = np.all(work >= np.array([m.n_tasks for m in models]) - 1e-6, axis=2)
    return float(cost[ok].min()) if ok.any() else math.inf


_type = st.builds(lambda i, loc, cores, price, init, avail: CloudType(f"t{i}", loc, 1.0, price, None, init,
                                                                      avail, cores),
                  st.just(0), st.sampled_from([LOCAL, AZURE]), st.integers(1, 2),
                  st.sampled_from([0.0, 0.06, 0.12, 0.24]), st.sampled_from([0.0, 5.0, 10.0, 20.0]),
                  st.integers(1, 2))
_model = st.builds(lambda n, tm, gb, at: WatershedModel("m", n, tm, gb, at), st.integers(1, 12),
                   st.sampled_from([1.0, 2.5, 5.0, 10.0]), st.sampled_from([0.0, 1.0, 2.0]),
                   st.sampled_from([frozenset({LOCAL}), frozenset({AZURE}), BOTH]))


@settings(max_examples=40, deadline=None)
@given(t0=_type, t1=_type, m0=_model, m1=_model, n_int=st.integers(2, 3))
def test_ilp_equals_brute_force_on_tiny_instances(t0, t1, m0, m1, n_int):
    types = [CloudType("a", t0.location, 1.0, t0.price_hour, None, t0.init_minutes, t0.max_count, t0.cores),
             CloudType("b", t1.location, 1.0, t1.price_hour, None, t1.init_minutes, t1.max_count, t1.cores)]
    models = [WatershedModel("p", m0.n_tasks, m0.task_minutes, m0.input_gb, m0.data_at),
              WatershedModel("q", m1.n_tasks, m1.task_minutes, m1.input_gb, m1.data_at)]
    best = _brute(models, types, n_int)
    plan = solve_multimodel(models, types, n_int * 10.0, capacity="fluid")
    if math.isinf(best):
        assert plan.status == "infeasible"
    else:
        assert plan.ok
        assert plan.cost == pytest.approx(best, abs=1e-7)
        assert plan.makespan_min <= n_int * 10.0


# --- whole tasks: explicit machines --------------------------------------------------------------

def _check_machines(models, types, plan):
    """The layout adds up: every model's tasks are on runs that can do them, the runs make the
    plan's per-type counts, and each run's tasks fit after its stage-in."""
    by_t = {t.name: t for t in types}
    by_m = {m.name: m for m in models}
    step = plan.detail["interval_min"]
    done = dict.fromkeys(by_m, 0)
    for tname, chains in plan.detail["machines"].items():
        t = by_t[tname]
        counts = [0] * len(plan.instances[tname])
        for chain in chains:
            assert len(chain) == 1 and chain[0]["start_min"] == 0  # one model per machine, from t=0
            run = chain[0]
            m = by_m[run["model"]]
            assert run["capacity"] == run_tasks(t, m, run["end_min"], run["stage_min"])
            assert 0 <= run["tasks"] <= run["capacity"]
            done[m.name] += run["tasks"]
            for i in range(round(run["end_min"] / step)):
                counts[i] += 1
        assert counts == plan.instances[tname]
    assert done == {m.name: m.n_tasks for m in models}


@pytest.mark.parametrize("billing", ["minute", "hourly"])
@pytest.mark.parametrize("models", [SCENARIO_A, SCENARIO_B], ids=["A", "B"])
def test_whole_plans_name_their_machines(models, billing):
    for deadline in (100, 170, 240):
        plan = solve_multimodel(models, MM_TYPES, deadline, billing=billing)
        fluid = solve_multimodel(models, MM_TYPES, deadline, billing=billing, capacity="fluid")
        assert plan.ok and plan.detail["capacity"] == "whole" and fluid.detail["capacity"] == "fluid"
        assert plan.cost >= fluid.cost - 1e-9  # fluid capacities are an upper bound on whole tasks
        assert plan.solve_ms < 5000
        _check_machines(models, MM_TYPES, plan)
        _check_transfers(models, plan)


def test_run_tasks_counts_whole_tasks_after_the_stage_in():
    local, medium = MM_TYPES
    m = WatershedModel("a", 10, 7.5, 0.0, BOTH)
    assert run_tasks(local, m, 40, 10) == 4  # 30 min / 7.5
    assert run_tasks(local, m, 39, 10) == 3
    assert run_tasks(medium, m, 40, 30) == 2  # 2 cores, one task each in 10 min
    assert run_tasks(medium, m, 20, 30) == 0


# --- the whole-task model's exact DP route against its ILP ------------------------------------------

def _same_optimum(dp, ilp, models) -> None:
    assert dp.detail["method"] == "dp" and ilp.detail.get("method") != "dp"
    assert dp.status == ilp.status
    if dp.ok:
        assert dp.cost == pytest.approx(ilp.cost, abs=1e-9)
        assert dp.makespan_s == ilp.makespan_s
        for m in models:  # every task is placed on a run that does it
            assert sum(a["tasks"] for a in dp.detail["assignment"][m.name].values()) == m.n_tasks


@pytest.mark.parametrize("billing", ["minute", "hourly"])
@pytest.mark.parametrize("models", [SCENARIO_A, SCENARIO_B], ids=["A", "B"])
def test_whole_dp_equals_the_ilp_on_the_scenarios(models, billing):
    for deadline in (40, 100, 150, 240):
        _same_optimum(solve_multimodel(models, MM_TYPES, deadline, billing=billing),
                      solve_multimodel(models, MM_TYPES, deadline, billing=billing, method="ilp"), models)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.sampled_from([1.0, 2.5, 4.25, 7.5]), st.integers(0, 2)),
                min_size=1, max_size=3),
       st.sampled_from([30, 50, 80, 120]), st.sampled_from(["minute", "hourly"]), st.booleans(),
       st.sampled_from([None, 2.0]))
def test_whole_dp_equals_the_ilp_on_random_models(spec, deadline, billing, tiebreak, penalty):
    where = [frozenset({LOCAL}), frozenset({AZURE}), BOTH]
    models = [WatershedModel(f"m{i}", n, tau, 1.0, where[w]) for i, (n, tau, w) in enumerate(spec)]
    kw = {"billing": billing, "tiebreak": tiebreak, "init_penalty_tasks": penalty}
    dp = solve_multimodel(models, MM_TYPES, deadline, **kw)
    ilp = solve_multimodel(models, MM_TYPES, deadline, method="ilp", **kw)
    assert dp.status == ilp.status
    if dp.ok:
        assert dp.cost == pytest.approx(ilp.cost, abs=1e-9)
        if tiebreak:
            assert dp.makespan_s == ilp.makespan_s


def test_method_argument():
    with pytest.raises(UserError):
        solve_multimodel(SCENARIO_A, MM_TYPES, 100, method="simplex")
    with pytest.raises(UserError):
        solve_multimodel(SCENARIO_A, HYBRID, 100, method="dp")  # more than two usable types
    with pytest.raises(UserError):
        solve_multimodel(SCENARIO_A, HYBRID, 100, method="dp", capacity="fluid")
    # fluid: "auto" is the DP with minute billing and two usable types, else the ILP
    assert solve_multimodel(SCENARIO_A, MM_TYPES, 100, capacity="fluid").detail["method"] == "dp"
    ilp = solve_multimodel(SCENARIO_A, MM_TYPES, 100, capacity="fluid", method="ilp")
    assert ilp.detail.get("method") != "dp"
    assert solve_multimodel(SCENARIO_A, HYBRID, 100, capacity="fluid").detail.get("method") != "dp"
    assert solve_multimodel(SCENARIO_A, HYBRID, 100).detail.get("method") != "dp"


# --- fluid capacity: the minute-billing DP against the ILP -----------------------------------------

def _check_fluid_counts(models, types, plan, deadline):
    """The DP's counts satisfy eqs. 29-33: per-type totals within availability and never rising,
    and every model's work (eq. 31 with machines = the most it runs at once) covers its tasks."""
    per_type = {t.name: counts for t, counts in zip(types, [None] * len(types), strict=True)}
    for t in types:
        per_type[t.name] = plan.instances.get(t.name, [])
        counts = per_type[t.name]
        assert all(c <= t.max_count for c in counts)
        assert all(a >= b for a, b in itertools.pairwise(counts))
    assert plan.makespan_min <= deadline + 1e-9
    for m in models:
        assert sum(a["tasks"] for a in plan.detail["assignment"][m.name].values()) >= m.n_tasks - 1e-7


def _same_fluid(dp, ilp, tiebreak):
    assert dp.status == ilp.status
    if dp.ok:
        assert dp.detail["method"] == "dp"
        assert dp.cost == pytest.approx(ilp.cost, abs=1e-9)
        if tiebreak:
            assert dp.makespan_s == ilp.makespan_s


@pytest.mark.parametrize("tiebreak", [True, False])
@pytest.mark.parametrize("models", [SCENARIO_A, SCENARIO_B], ids=["A", "B"])
def test_fluid_dp_equals_the_ilp_on_the_scenarios(models, tiebreak):
    for deadline in (30, 60, 100, 170):
        dp = solve_multimodel(models, MM_TYPES, deadline, capacity="fluid", tiebreak=tiebreak, method="dp")
        ilp = solve_multimodel(models, MM_TYPES, deadline, capacity="fluid", tiebreak=tiebreak, method="ilp")
        _same_fluid(dp, ilp, tiebreak)
        if dp.ok:
            _check_fluid_counts(models, MM_TYPES, dp, deadline)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.sampled_from([1.0, 2.5, 4.25, 7.5]), st.integers(0, 2)),
                min_size=1, max_size=3),
       st.sampled_from([20, 40, 70]), st.booleans(), st.sampled_from([None, 2.0]))
def test_fluid_dp_equals_the_ilp_on_random_models(spec, deadline, tiebreak, penalty):
    where = [frozenset({LOCAL}), frozenset({AZURE}), BOTH]
    models = [WatershedModel(f"m{i}", n, tau, 1.0, where[w]) for i, (n, tau, w) in enumerate(spec)]
    kw = {"capacity": "fluid", "tiebreak": tiebreak, "init_penalty_tasks": penalty}
    dp = solve_multimodel(models, MM_TYPES, deadline, method="dp", **kw)
    ilp = solve_multimodel(models, MM_TYPES, deadline, method="ilp", **kw)
    _same_fluid(dp, ilp, tiebreak)
    if dp.ok:
        _check_fluid_counts(models, MM_TYPES, dp, deadline)


def test_fluid_hourly_and_capture_stay_on_the_ilp():
    plan = solve_multimodel(SCENARIO_A, MM_TYPES, 100, capacity="fluid", billing="hourly")
    assert plan.ok and plan.detail.get("method") != "dp" and plan.detail["variables"] > 0


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.sampled_from([1.0, 2.5, 4.25, 7.5]), st.integers(0, 2)),
                min_size=1, max_size=3),
       st.sampled_from([20, 50, 70, 130]), st.booleans())
def test_fluid_hourly_start_and_bound_keep_the_optimum(spec, deadline, tiebreak):
    """Hourly billing stays the ILP, with the minute-rate DP as first incumbent and lower bound."""
    where = [frozenset({LOCAL}), frozenset({AZURE}), BOTH]
    models = [WatershedModel(f"m{i}", n, tau, 1.0, where[w]) for i, (n, tau, w) in enumerate(spec)]
    kw = {"capacity": "fluid", "tiebreak": tiebreak, "billing": "hourly"}
    fast = solve_multimodel(models, MM_TYPES, deadline, method="dp", **kw)
    ilp = solve_multimodel(models, MM_TYPES, deadline, method="ilp", **kw)
    assert fast.status == ilp.status
    if fast.ok:
        assert fast.cost == pytest.approx(ilp.cost, abs=1e-9)
        if tiebreak:
            assert fast.makespan_s == ilp.makespan_s
