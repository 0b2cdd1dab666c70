"""MapReduce and multi-model plans, replayed in the event simulator, against the issue's bar.

The bar: the replayed cost equals the plan's, and the completion time is within one interval (a
quarter hour for MapReduce, ``interval_min`` for the multi-model ILP). MapReduce plans meet it
(to floating-point rounding). Whole-task multi-model plans (the default) meet it: the replay ends
inside the plan's last interval and costs exactly ``multimodel.cost_if_stopped`` (the plan's cost
with hourly billing, at most the plan's with minute billing). Fluid multi-model plans (the paper's
eqs. 28-37) do not: they promise fractions of tasks, so their measured gaps are pinned below.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skylease.experiments.plan_replay import replay_mapreduce, replay_multimodel
from skylease.model.errors import UserError
from skylease.planning.provisioning import (
    SCENARIO_A,
    SCENARIO_B,
    MapReduceJob,
    load_catalog,
    pick,
    solve_mapreduce,
    solve_multimodel,
)
from skylease.planning.provisioning.multimodel import cost_if_stopped

EMR = load_catalog("emr")
JOB = MapReduceJob()
QUARTER_S = 900.0
HYBRID = pick(load_catalog("hybrid"), "local", "azure-medium")


def check_mapreduce(plan, job, types):
    r = replay_mapreduce(plan, job, types)
    assert r.unfinished == 0
    assert r.cost == pytest.approx(plan.cost, abs=1e-9)
    assert abs(r.makespan_s - plan.makespan_s) <= QUARTER_S + 1e-6
    return r


@pytest.mark.parametrize("billing", ["per_phase", "single_cluster"])
@pytest.mark.parametrize("deadline", [2.75, 3, 4, 6, 24])
def test_paper_mapreduce_plans_replay(deadline, billing):
    plan = solve_mapreduce(JOB, EMR, deadline, billing=billing)
    r = check_mapreduce(plan, JOB, EMR)
    # divisible work split by capacity: the replay is the fluid schedule, to rounding
    assert r.makespan_s == pytest.approx(plan.makespan_s, abs=1e-6)


def test_the_papers_630_in_3_hours_replays_exactly():
    """The plan that fills its 3 billed hours exactly ($6.30, 2 c1.medium + 17 c1.xlarge): any
    lateness would buy a fourth hour of 19 instances."""
    plan = solve_mapreduce(JOB, EMR, 3, billing="single_cluster")
    assert plan.instances == {"c1.medium": [2, 2], "c1.xlarge": [17, 17]}
    r = replay_mapreduce(plan, JOB, EMR)
    assert (r.cost, r.makespan_s) == (pytest.approx(6.30, abs=1e-9), pytest.approx(10800.0))
    assert r.map_s == pytest.approx(1000 / 350 * 3600)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(map_work=st.just(0.0) | st.floats(0.01, 400), reduce_work=st.just(0.0) | st.floats(0.01, 100),
       deadline=st.floats(0.5, 12),
       names=st.sets(st.sampled_from([t.name for t in EMR]), min_size=1),
       billing=st.sampled_from(["per_phase", "single_cluster"]),
       grain=st.sampled_from([1 / 60, 0.25, 1.0]))
def test_random_mapreduce_plans_replay(map_work, reduce_work, deadline, names, billing, grain):
    if map_work + reduce_work == 0:
        return
    job = MapReduceJob(map_work, reduce_work)
    types = pick(EMR, *sorted(names))
    plan = solve_mapreduce(job, types, deadline, billing=billing)
    if plan.ok:
        r = replay_mapreduce(plan, job, types, grain_hours=grain)
        assert r.unfinished == 0
        assert r.cost == pytest.approx(plan.cost, abs=1e-9)
        assert abs(r.makespan_s - plan.makespan_s) <= QUARTER_S + 1e-6


def test_replays_refuse_plans_that_are_not_ok():
    bad = solve_mapreduce(JOB, EMR, 1.0)
    assert not bad.ok
    with pytest.raises(UserError):
        replay_mapreduce(bad, JOB, EMR)
    bad_multi = solve_multimodel(SCENARIO_A, HYBRID, 60)
    assert not bad_multi.ok
    with pytest.raises(UserError):
        replay_multimodel(bad_multi, SCENARIO_A, HYBRID)
    with pytest.raises(UserError):
        replay_mapreduce(solve_mapreduce(JOB, EMR, 3), JOB, EMR, grain_hours=0)


# ---- multi-model -------------------------------------------------------------------------------

SCENARIOS = {"A": SCENARIO_A, "B": SCENARIO_B}


@pytest.mark.parametrize("scenario, deadline", [("A", 180), ("B", 180)])
def test_multimodel_plans_with_room_replay_within_one_interval(scenario, deadline):
    """Where the plan leaves its machines slack the replay meets the bar: same cost, same time
    within one interval (measured: +1.75 min for A, +0.62 min for B)."""
    models = SCENARIOS[scenario]
    plan = solve_multimodel(models, HYBRID, deadline, capacity="fluid", method="ilp")
    r = replay_multimodel(plan, models, HYBRID)
    assert r.unfinished == 0
    assert r.cost == pytest.approx(plan.cost, abs=1e-9)
    assert r.transfer_cost == pytest.approx(plan.detail["transfer_cost"], abs=1e-9)
    assert abs(r.makespan_s - plan.makespan_s) <= plan.detail["interval_min"] * 60 + 1e-6


# The ILP route (method="ilp"). Measured over scenarios A and B, deadlines 100-240 min in 10-min
# steps, minute billing, with highspy 1.15.1 (see test_multimodel_fluid_plans_known_gap): worst time
# gap and worst cost gaps.
# Fluid optima are tied, and which one the solver returns moves these figures (1.16.0 gave
# 66 min late at A 220, $0.40 over at B 140): they hold for the pinned solver only.
MULTI_WORST_LATE_MIN = 22.5  # scenario A at 200 min (2.25 intervals)
MULTI_WORST_EXTRA_COST = 0.36  # scenario B at 140 min
MULTI_WORST_SAVING = 0.028  # scenario A at 220 min


@pytest.mark.parametrize("scenario, deadline", [("A", 100), ("A", 200), ("A", 220), ("B", 140)])
def test_multimodel_fluid_plans_known_gap(scenario, deadline):
    """Known gap: the multi-model ILP (eqs. 28-37) counts fractions of tasks per interval and
    charges a model's stage-in per machine that ever runs it, with no machine identities. Whole
    tasks on real machines cannot do that work in those machine-intervals: a run of L minutes
    on one core does floor((L - init) / task) tasks, not (L - init) / task (m5's 7.5-min tasks
    lose up to 0.93 task per core-run), and laying the per-interval counts onto machines can
    need a staging more than the plan counts. The replay then runs late on the hosts of each
    model's last runs (extra cost), or, where the plan had slack, finishes a model early and
    stops its hosts (a smaller bill). Measured on the paper's scenarios A and B, deadlines
    100-240 min (step 10), minute billing, highspy 1.15.1: up to 22.5 min late (A at 200 min; 9
    of 30 plans are later than one 10-min interval), the cost up to $0.36 over the plan (B at
    140 min) and up to $0.028 under it (A at 220 min). Neither bar is met in general; the
    whole-task formulation (``capacity="whole"``, the default) closes it (tests below)."""
    models = SCENARIOS[scenario]
    plan = solve_multimodel(models, HYBRID, deadline, capacity="fluid", method="ilp")
    r = replay_multimodel(plan, models, HYBRID)
    assert r.unfinished == 0
    assert r.transfer_cost == pytest.approx(plan.detail["transfer_cost"], abs=1e-9)
    assert r.compute_cost == pytest.approx(sum(m.compute_cost for m in r.models))
    assert abs(r.makespan_s - plan.makespan_s) <= MULTI_WORST_LATE_MIN * 60 + 1e-6
    assert -MULTI_WORST_SAVING - 1e-9 <= r.cost - plan.cost <= MULTI_WORST_EXTRA_COST + 1e-9


def test_multimodel_hourly_billing_known_gap():
    """Known gap, hourly billing: besides the fluid loss above, a machine that changes model
    mid-hour becomes two hosts in the replay, each billed its own started hours. Measured on
    A and B, 100-240 min: up to 27.4 min late (A at 200) and up to $2.64 over (A and B at 120,
    pinned here: $9.51 replayed for a $6.87 plan)."""
    plan = solve_multimodel(SCENARIO_B, HYBRID, 120, billing="hourly", capacity="fluid", method="ilp")
    r = replay_multimodel(plan, SCENARIO_B, HYBRID)
    assert r.unfinished == 0
    assert r.cost - plan.cost == pytest.approx(2.64, abs=1e-9)
    assert abs(r.makespan_s - plan.makespan_s) <= 27.375 * 60 + 1e-6


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=st.sampled_from(["A", "B"]), deadline=st.integers(10, 24).map(lambda k: 10 * k))
def test_random_multimodel_plans_replay_within_the_measured_gap(scenario, deadline):
    """Random deadlines: every model finishes, within the measured gap of the plan."""
    models = SCENARIOS[scenario]
    plan = solve_multimodel(models, HYBRID, deadline, capacity="fluid", method="ilp")
    if plan.ok:
        r = replay_multimodel(plan, models, HYBRID)
        assert r.unfinished == 0
        assert abs(r.makespan_s - plan.makespan_s) <= MULTI_WORST_LATE_MIN * 60 + 1e-6
        assert -MULTI_WORST_SAVING - 1e-9 <= r.cost - plan.cost <= MULTI_WORST_EXTRA_COST + 1e-9


# The fluid model's default route with minute billing is the DP (``_fluid_dp``): the same optimal cost
# and makespan as the ILP, another of the tied optima. Measured on the same 30 plans: 9 later than
# one interval (as the ILP's), at worst 20.0 min late (A at 170), $0.40 over (B at 140) and $0.028
# under (A at 200). Not the bar either; the whole-task model below is.
DP_WORST_LATE_MIN = 20.0
DP_WORST_EXTRA_COST = 0.40
DP_WORST_SAVING = 0.028


@pytest.mark.parametrize("scenario, deadline", [("A", 170), ("A", 200), ("B", 140), ("B", 180)])
def test_multimodel_fluid_dp_plans_known_gap(scenario, deadline):
    """Known gap of the fluid model by its default (DP) route; as for the ILP's, a plan can need
    whole tasks beyond what the fractions promised. B at 180 min has room and meets the bar."""
    models = SCENARIOS[scenario]
    plan = solve_multimodel(models, HYBRID, deadline, capacity="fluid")
    assert plan.detail["method"] == "dp"
    r = replay_multimodel(plan, models, HYBRID)
    assert r.unfinished == 0
    assert r.transfer_cost == pytest.approx(plan.detail["transfer_cost"], abs=1e-9)
    late = r.makespan_s - plan.makespan_s
    assert abs(late) <= DP_WORST_LATE_MIN * 60 + 1e-6
    assert -DP_WORST_SAVING - 1e-9 <= r.cost - plan.cost <= DP_WORST_EXTRA_COST + 1e-9
    if (scenario, deadline) == ("A", 170):  # the witness: the gap is real, two intervals late
        assert late == pytest.approx(20.0 * 60)
    if (scenario, deadline) == ("B", 180):
        assert late <= plan.detail["interval_min"] * 60 + 1e-6
        assert r.cost == pytest.approx(plan.cost, abs=1e-9)


# ---- multi-model, whole tasks (the default): the bar is met --------------------------------------

def check_whole(plan, models, types=HYBRID):
    """Every task done inside the plan's last interval, at exactly ``cost_if_stopped``."""
    r = replay_multimodel(plan, models, types)
    step_s = plan.detail["interval_min"] * 60
    assert r.unfinished == 0
    assert plan.makespan_s - step_s - 1e-6 < r.makespan_s <= plan.makespan_s + 1e-6
    assert r.cost == pytest.approx(cost_if_stopped(plan, types, r.makespan_s / 60), abs=1e-9)
    assert r.cost <= plan.cost + 1e-9
    if plan.detail["billing"] == "hourly":
        assert r.cost == pytest.approx(plan.cost, abs=1e-9)
    assert r.transfer_cost == pytest.approx(plan.detail["transfer_cost"], abs=1e-9)
    assert r.compute_cost == pytest.approx(sum(m.compute_cost for m in r.models), abs=1e-9)
    return r


# Measured over A and B, deadlines 100-240 min (step 10), both billings (60 plans): never late,
# at most 4.4 min early (A at 220 min, hourly); minute billing saves at most $0.012 by releasing
# the machines as the job ends inside its last interval (A and B at 170 min).
WHOLE_WORST_EARLY_MIN = 4.375
WHOLE_WORST_SAVING = 0.012


@pytest.mark.parametrize("billing", ["minute", "hourly"])
@pytest.mark.parametrize("scenario", ["A", "B"])
def test_whole_multimodel_plans_replay_on_time_at_their_cost(scenario, billing):
    models = SCENARIOS[scenario]
    for deadline in range(100, 250, 10):
        plan = solve_multimodel(models, HYBRID, deadline, billing=billing)
        assert plan.ok
        r = check_whole(plan, models)
        assert plan.makespan_s - r.makespan_s <= WHOLE_WORST_EARLY_MIN * 60 + 1e-6
        assert plan.cost - r.cost <= WHOLE_WORST_SAVING + 1e-9


def test_whole_plan_that_ends_inside_its_last_interval_pays_to_the_minute():
    plan = solve_multimodel(SCENARIO_A, HYBRID, 170)
    r = check_whole(plan, SCENARIO_A)
    assert (plan.cost, r.makespan_s / 60) == (pytest.approx(4.55), pytest.approx(168.625))
    assert r.cost == pytest.approx(4.538, abs=1e-9)  # the Azure machines released at minute 169


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=st.sampled_from(["A", "B"]), deadline=st.floats(95, 245),
       billing=st.sampled_from(["minute", "hourly"]), interval=st.sampled_from([10, 15, 20, 30]))
def test_random_whole_multimodel_plans_replay_on_time_at_their_cost(scenario, deadline, billing, interval):
    models = SCENARIOS[scenario]
    plan = solve_multimodel(models, HYBRID, deadline, billing=billing, interval_min=interval)
    if plan.ok:
        check_whole(plan, models)
