"""The test vectors of decision CHECKS (docs/decisions/ilp.md) and properties of
skylease.planning.provisioning."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from skylease.model.errors import UserError
from skylease.planning.provisioning._milp import Milp
from skylease.planning.provisioning.baselines import mr_naive, ws_incremental, ws_naive, ws_simulate
from skylease.planning.provisioning.catalog import CloudType, load_catalog, parse_catalog, pick
from skylease.planning.provisioning.mapreduce import MapReduceJob, solve_mapreduce
from skylease.planning.provisioning.modes import cheapest_meeting_deadline, min_cost, min_time, weighted
from skylease.planning.provisioning.pareto import nondominated, sweep
from skylease.planning.provisioning.watershed import WatershedJob, solve_watershed

EMR = load_catalog("emr")
HYBRID = load_catalog("hybrid")
WS_TYPES = pick(HYBRID, "local", "azure-small")
MR = MapReduceJob()
WS = WatershedJob()


# --- 1-3: MapReduce -------------------------------------------------------------------------------

def test_1_mr_naive_10_c1_xlarge():
    p = mr_naive(MR, pick(EMR, "c1.xlarge")[0], 10)
    assert p.makespan_h == pytest.approx(5.25)
    assert p.cost == pytest.approx(7.20)


def test_2_mr_single_cluster_3h_is_the_papers_example():
    p = solve_mapreduce(MR, EMR, 3.0, billing="single_cluster")
    assert p.status == "optimal"
    assert p.cost == pytest.approx(6.30)
    assert {k: v[0] for k, v in p.instances.items()} == {"c1.medium": 2, "c1.xlarge": 17}
    assert p.makespan_h == pytest.approx(3.0)
    assert "2 c1.medium and 17 c1.xlarge" in p.detail["summary"]


@pytest.mark.parametrize(("d", "cost"), [(5.0, 6.30), (6.0, 6.30), (3.0, 7.77), (2.75, 8.40)])
def test_3_mr_literal_ilp(d, cost):
    p = solve_mapreduce(MR, EMR, d)
    assert p.status == "optimal"
    assert p.cost == pytest.approx(cost)
    assert p.makespan_h <= d + 1e-9
    assert all(sum(v[k] for v in p.instances.values()) <= 20 for k in (0, 1))


def test_3_mr_literal_ilp_infeasible_at_2_5h():
    p = solve_mapreduce(MR, EMR, 2.5)
    assert p.status == "infeasible"
    assert p.detail["message"] == "no plan finishes by 2.5 h"
    assert math.isnan(p.cost)


def test_mr_per_type_limit_frontier_and_paper_ratios():
    deadlines = (1.75, 2.0, 2.25, 2.5, 2.75, 3.0)
    got = [solve_mapreduce(MR, EMR, d, limit_scope="per_type").cost for d in deadlines]
    assert got == pytest.approx([12.21, 9.36, 7.20, 6.60, 6.42, 6.30])
    naive = [mr_naive(MR, t, n) for t in EMR for n in (10, 20)]
    cheapest = min_cost(lambda d: solve_mapreduce(MR, EMR, d), 6.0, lo=0.25, step=0.25, unit="h")
    assert (cheapest.cost, cheapest.makespan_h) == (pytest.approx(6.30), pytest.approx(5.0))
    assert max(p.cost for p in naive) / cheapest.cost == pytest.approx(16.80 / 6.30)  # "2.6x"
    assert mr_naive(MR, EMR[0], 10).makespan_h / cheapest.makespan_h == pytest.approx(21.0)  # "21x"


# --- 4-7: Watershed -------------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "minutes", "cost"), [(20, 63.0, 4.80), (22, 61.5, 5.28), (24, 60.0, 2.88),
                                                    (9, 78.0, 2.16), (0, 104.5, 0.0)])
def test_4_ws_naive(n, minutes, cost):
    p = ws_naive(WS, n)
    assert p.makespan_min == pytest.approx(minutes)
    assert p.cost == pytest.approx(cost)


def test_4_ws_incremental_78_min():
    p = ws_incremental(WS, 78, 44)
    assert (p.makespan_min, p.cost) == (pytest.approx(78.0), pytest.approx(2.16))
    assert p.instances["azure-small"] == [9]


def test_5_ws_ilp_10_min_intervals():
    p = solve_watershed(WS, WS_TYPES, 70)
    assert p.cost == pytest.approx(2.16)
    assert p.makespan_min == pytest.approx(70.0)
    small = p.instances["azure-small"]
    assert small[:6] == [18] * 6 and not any(small[6:])  # 18 in hour 1, none in hour 2
    assert p.billed_units == {"azure-small": 18}
    assert solve_watershed(WS, WS_TYPES, 60).cost == pytest.approx(2.88)
    assert solve_watershed(WS, WS_TYPES, 73).cost == pytest.approx(2.16)  # 73 min is processed as 70
    assert solve_watershed(WS, HYBRID, 70).cost == pytest.approx(2.16)  # the full catalog agrees


def test_6_ws_ilp_1_min_intervals_61():
    p = solve_watershed(WS, WS_TYPES, 61, interval_min=1)
    assert p.cost == pytest.approx(2.76)
    assert p.makespan_min == pytest.approx(61.0)
    assert p.billed_units == {"azure-small": 23}
    assert solve_watershed(WS, WS_TYPES, 61).cost == pytest.approx(2.88)  # 10-min grid: 61 -> 60


def test_7_headline_ratios():
    naive = ws_naive(WS, 22)
    ilp61 = solve_watershed(WS, WS_TYPES, 61, interval_min=1)
    assert round((naive.cost / ilp61.cost - 1) * 100) == 91
    inc = ws_incremental(WS, 78)
    ilp70 = solve_watershed(WS, WS_TYPES, 70)
    assert inc.cost == pytest.approx(ilp70.cost)
    assert round((inc.makespan_min / ilp70.makespan_min - 1) * 100, 1) == 11.4


# --- 8: NP-hardness reduction (bounded knapsack -> minute-billing model, eqs. 19, 21, 25-27) --------

def _knapsack_via_reduction(w, v, c, cap):
    m = Milp()
    cost = m.var(lb=-math.inf, cost=1.0)
    x = [m.var(0, cj, integer=True) for cj in c]  # AVAILABILITY_j = c_j, one interval of length 1
    work = [m.var(lb=-math.inf) for _ in c]
    for xj, wk, wj in zip(x, work, w, strict=True):
        m.row({wk: 1, xj: wj}, 0, 0)  # (19) with capacity_j = -w_j
    m.row(dict.fromkeys(work, 1.0), lo=-cap)  # (21) with NUMBER_OF_TASKS = -W  <=> Σ w x <= W (26)
    m.row({cost: 1, **{xj: vj for xj, vj in zip(x, v, strict=True)}}, 0, 0)  # (25) minuteCost = -v (27)
    r = m.solve()
    assert r.status == "optimal"
    return -r.objective


def _knapsack_dp(w, v, c, cap):
    best = [0] * (cap + 1)
    for wj, vj, cj in zip(w, v, c, strict=True):
        for _ in range(cj):
            for b in range(cap, wj - 1, -1):
                best[b] = max(best[b], best[b - wj] + vj)
    return best[cap]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(0, 20), st.integers(0, 3)), min_size=1, max_size=5),
       st.integers(0, 30))
def test_8_knapsack_reduction_matches_dp(items, cap):
    w, v, c = (list(t) for t in zip(*items, strict=True))
    assert _knapsack_via_reduction(w, v, c, cap) == pytest.approx(_knapsack_dp(w, v, c, cap))


# --- brute force on tiny Watershed instances ------------------------------------------------------

def _monotone_seqs(avail, m):
    return [s for s in itertools.product(range(avail + 1), repeat=m) if all(a >= b for a, b in
                                                                           itertools.pairwise(s))]


@settings(max_examples=30, deadline=None)
@given(n_tasks=st.integers(1, 60), local=st.integers(0, 2), init_l=st.sampled_from([0.0, 10.0, 20.0]),
       init_c=st.sampled_from([0.0, 15.0, 30.0]), price=st.sampled_from([0.06, 0.12, 0.5]),
       cores=st.integers(1, 2), billing=st.sampled_from(["hourly", "minute"]),
       capacity=st.sampled_from(["whole", "fluid"]))
def test_tiny_watershed_matches_brute_force(n_tasks, local, init_l, init_c, price, cores, billing, capacity):
    job = WatershedJob(n_tasks=n_tasks, task_minutes=3.0, local_cores=local)
    types = (CloudType("local", "local", 1.0, 0.0, init_minutes=init_l, max_count=local),
             CloudType("cloud", "cloud", 1.0, price, init_minutes=init_c, max_count=2, cores=cores))
    length, m = 30.0, 3
    best = math.inf
    for sl in _monotone_seqs(local, m):
        for sc in _monotone_seqs(2, m):
            work = 0.0
            for i in range(m):
                s = i * length
                for t, cnt in zip(types, (sl[i], sc[i]), strict=True):
                    if capacity == "fluid":
                        work += cnt * t.cores * max(0.0, min(length, s + length - t.init_minutes)) / 3.0
                    else:  # whole 3-min tasks finished since the instance booted
                        done = [math.floor(max(0.0, x - t.init_minutes) / 3.0) for x in (s, s + length)]
                        work += cnt * t.cores * (done[1] - done[0])
            if work < n_tasks - 1e-9:
                continue
            if billing == "hourly":
                cost = price * (max(sc[0], sc[1]) + sc[2])  # hour 0 = intervals 0, 1; hour 1 = interval 2
            else:
                cost = price / 60 * length * sum(sc)
            best = min(best, cost)
    p = solve_watershed(job, types, length * m, interval_min=length, billing=billing, capacity=capacity)
    if math.isinf(best):
        assert p.status == "infeasible"
    else:
        assert p.status == "optimal"
        assert p.cost == pytest.approx(best, abs=1e-9)


def test_ws_tiebreak_returns_fastest_of_the_cheapest():
    # Local-only is free; with the tie-break the plan stops at the first interval that suffices.
    p = solve_watershed(WS, WS_TYPES, 200)
    assert p.cost == 0.0
    assert p.makespan_min == pytest.approx(110.0)


def test_ws_simulate_matches_naive_and_minute_billing():
    assert ws_simulate(WS, 20).cost == ws_naive(WS, 20).cost
    assert ws_simulate(WS, 20, billing="minute").cost == pytest.approx(20 * 63 * 0.002)


# --- modes, Pareto, infeasible messages -----------------------------------------------------------

def _ws1(d):
    return solve_watershed(WS, WS_TYPES, d, interval_min=1, capacity="fluid")


def _ws1_whole(d):
    return solve_watershed(WS, WS_TYPES, d, interval_min=1)


def test_infeasible_message_names_the_fastest_plan():
    p = cheapest_meeting_deadline(_ws1, 45, step=1, upper=120)
    assert p.status == "infeasible"
    assert p.detail["message"] == "no plan finishes by 45 min; the fastest possible is 50 min at $5.16"
    # Whole tasks (the default): 50 min is only reachable with fractions of 90 s tasks.
    w = cheapest_meeting_deadline(_ws1_whole, 45, step=1, upper=120)
    assert w.detail["message"] == "no plan finishes by 45 min; the fastest possible is 51 min at $4.92"
    q = cheapest_meeting_deadline(lambda d: solve_mapreduce(MR, EMR, d), 2.0, step=0.25, upper=6, unit="h")
    assert q.detail["message"] == "no plan finishes by 2 h; the fastest possible is 2.75 h at $8.40"
    assert "\n" not in p.detail["message"]


def test_incremental_infeasible_message():
    p = ws_incremental(WS, 45)
    assert p.status == "infeasible"
    assert p.detail["message"] == ("no configuration finishes by 45 min; "
                                   "the fastest possible is 50.5 min at $5.28")


def test_min_time_min_cost_and_weighted():
    fast = min_time(_ws1, 1, 120, 1)
    assert (fast.makespan_min, fast.cost) == (pytest.approx(50.0), pytest.approx(5.16))
    cheap = min_cost(_ws1, 120, lo=1, step=1)
    assert cheap.cost == 0.0 and cheap.makespan_min == pytest.approx(104.0)
    mr_fast = min_time(lambda d: solve_mapreduce(MR, EMR, d), 0.25, 6, 0.25, unit="h")
    assert mr_fast.cost == pytest.approx(8.40)
    front = nondominated(sweep(lambda d: solve_watershed(WS, WS_TYPES, d, capacity="fluid"),
                               range(40, 121, 10)))
    assert [(p.makespan_min, p.cost) for p in front] == [
        (50, 5.16), (60, 2.88), (70, 2.16), (80, 1.56), (90, 0.96), (100, 0.24), (110, 0.0)]
    whole = nondominated(sweep(lambda d: solve_watershed(WS, WS_TYPES, d), range(40, 121, 10)))
    assert [(p.makespan_min, p.cost) for p in whole] == [
        (60, 2.88), (70, 2.16), (80, 1.68), (90, 0.96), (100, 0.24), (110, 0.0)]
    assert weighted(front, 1.0).cost == 0.0
    assert weighted(front, 0.0).makespan_min == 50


def test_plan_to_json_keys():
    j = solve_watershed(WS, WS_TYPES, 70).to_json()
    assert {"status", "cost", "makespan_s", "instances", "solve_ms"} <= set(j)
    assert solve_mapreduce(MR, EMR, 2.5).to_json()["cost"] is None


# --- catalogs -------------------------------------------------------------------------------------

def test_builtin_catalogs():
    assert [t.name for t in EMR] == ["m1.small", "m1.large", "m1.xlarge", "c1.medium", "c1.xlarge"]
    small = pick(HYBRID, "azure-small")[0]
    assert (small.price_hour, small.init_minutes, small.max_count) == (0.12, 30.0, 44)
    assert small.minute_price == pytest.approx(0.002)


@pytest.mark.parametrize(("text", "field"), [
    ('[[types]]\nname="a"\nlocation="x"\ncapacity=0\nprice_hour=1', "types[0].capacity"),
    ('[[types]]\nname="a"\nlocation="x"\ncapacity=1', "types[0].price_hour"),
    ('[[types]]\nname="a"\nlocation="x"\ncapacity=1\nprice_hour=1\nmax_count=1.5', "types[0].max_count"),
    ('[[types]]\nname="a"\nlocation="x"\ncapacity=1\nprice_hour=1\ncolour="red"', "types[0].colour"),
    ('types=[]', "types"),
])
def test_bad_catalog_names_file_and_field(text, field):
    with pytest.raises(UserError) as e:
        parse_catalog(text, "my.toml")
    assert e.value.file == "my.toml" and e.value.field == field


def test_catalog_mistakes_name_the_line(tmp_path):
    text = '[[types]]\nname="a"\nlocation="x"\ncapacity=1\nprice_hour=1\n\n[[types]]\nname="a"\n' \
           'location="x"\ncapacity="big"\nprice_hour=1\n'
    with pytest.raises(UserError) as e:
        parse_catalog(text, "my.toml")
    assert str(e.value) == "my.toml:10: types[1].capacity: must be a finite number > 0, got 'big'"
    with pytest.raises(UserError) as e:
        parse_catalog(text.replace('"big"', "2"), "my.toml")
    assert str(e.value) == "my.toml:8: types[1].name: duplicate type name 'a'"
    p = tmp_path / "c.toml"
    p.write_bytes(b"[[types]]\n\xff\n")
    with pytest.raises(UserError) as e:
        load_catalog(p)
    assert str(e.value) == f"{p}:2: not a text file (invalid UTF-8)"


def test_missing_catalog_file(tmp_path):
    with pytest.raises(UserError, match="no such catalog"):
        load_catalog(tmp_path / "nope.toml")


@settings(max_examples=40, deadline=None)
@example(deadline=4.25, map_work=50.0, reduce_work=0.0, limit=3)  # highspy 1.16.0 said $0.36, not $0.30
@given(deadline=st.sampled_from([x / 4 for x in range(6, 41)]),
       map_work=st.sampled_from([50.0, 200.0, 1000.0]), reduce_work=st.sampled_from([0.0, 10.0, 50.0]),
       limit=st.integers(3, 20))
def test_enumeration_equals_the_ilp(deadline, map_work, reduce_work, limit):
    """The decomposed enumeration solves eqs. 1-17 exactly: same status and cost as HiGHS."""
    job = MapReduceJob(map_work, reduce_work)
    a = solve_mapreduce(job, EMR, deadline, limit=limit, method="ilp")
    b = solve_mapreduce(job, EMR, deadline, limit=limit, method="enumerate")
    assert a.status == b.status
    if a.ok:
        assert b.cost == pytest.approx(a.cost, abs=1e-9)
        assert b.makespan_s <= deadline * 3600 + 1e-6


@settings(max_examples=30, deadline=None)
@given(deadline=st.integers(45, 130), interval=st.sampled_from([1, 5, 10, 15]),
       billing=st.sampled_from(["hourly", "minute"]))
def test_one_solve_tiebreak_equals_two_stage(deadline, interval, billing):
    """cost + weight * active intervals in one solve gives the same plan cost and length as the
    lexicographic two-solve tie-break."""
    import skylease.planning.provisioning.watershed as wsmod

    one = solve_watershed(WS, WS_TYPES, deadline, interval_min=interval, billing=billing, method="ilp")
    saved = wsmod._tiebreak_weight
    wsmod._tiebreak_weight = lambda *a: None
    try:
        two = solve_watershed(WS, WS_TYPES, deadline, interval_min=interval, billing=billing, method="ilp")
    finally:
        wsmod._tiebreak_weight = saved
    assert one.status == two.status
    if one.ok:
        assert one.cost == pytest.approx(two.cost, abs=1e-9)
        assert one.makespan_s == two.makespan_s
        assert (one.detail["stages"], two.detail["stages"]) == (1, 2)
