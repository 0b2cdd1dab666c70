"""The lease scheduler on the simulator: the Haizea paper's baseline, exactly (decision H20 in
docs/decisions/haizea.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.control.leases import (
    NAMED_CONFIGURATIONS,
    Lease,
    LeaseKind,
    LeaseScheduler,
    LeaseState,
    Reservation,
    ResourceTuple,
    SchedulerConfig,
)
from skylease.sim.leases import (
    LeaseRun,
    SimulatedEnactment,
    ar_leases,
    assign_images,
    be_leases,
    clip_time,
    simulate_leases,
    site_capacity,
    xml_leases,
)
from skylease.traces.lwf import read_plain_lwf, read_xml_lwf
from skylease.traces.swf import best_effort_requests, blue_horizon_filter, read_swf


@pytest.fixture(scope="module")
def blue(shared_data):
    df = read_swf(shared_data / "swf" / "blue_30days.swf")
    return df, best_effort_requests(df)


def test_trace_statistics_of_acceptance_test_a(blue):
    df, req = blue
    assert len(df) == 5545 and len(req) == 5108  # 437 jobs cancelled while queued are dropped
    assert (req["requested"] <= 3600).sum() == 3415  # 66.856 %
    assert (req["nodes"] <= 4).sum() == 3274  # 64.096 %
    assert req["run"].min() >= 1 and (req["run"] <= req["requested"]).all()


def test_blue_horizon_filter_keeps_queues_1_to_4_and_turns_processors_into_nodes(tmp_path):
    # job submit wait run alloc cpu mem req_procs req_time req_mem status user group exe queue part prec think
    rows = ["1 100 0 50 8 -1 -1 8 60 -1 1 1 1 1 1 1 -1 -1",
            "2 150 0 50 16 -1 -1 16 60 -1 1 1 1 1 5 1 -1 -1",  # queue 5: dropped
            "3 200 0 -1 64 -1 -1 68 600 -1 5 1 1 1 3 1 -1 -1",  # cancelled while queued
            f"4 {100 + 30 * 86400} 0 50 8 -1 -1 8 60 -1 1 1 1 1 2 1 -1 -1"]  # after 30 days: dropped
    p = tmp_path / "raw.swf"
    p.write_text("\n".join(rows) + "\n")
    cut = blue_horizon_filter(read_swf(p))
    assert cut["job_number"].tolist() == [1, 3] and cut["submit_time"].tolist() == [0, 100]
    assert cut["requested_processors"].tolist() == [1, 8]  # 68 // 8
    req = best_effort_requests(cut)
    assert req["job"].tolist() == [1] and req["run"].tolist() == [50]


def test_novm_nosr_baseline_is_the_papers_exactly(blue):
    _, req = blue
    leases = be_leases(req)
    run = simulate_leases(leases)
    assert run.all_best_effort == 2_674_265
    assert run.clip_time == 161_761
    assert all(le.state is LeaseState.DONE and le.end is not None for le in leases)
    s = run.summary()
    assert s["best_effort_leases"] == 5108 and s["mean_wait_s"] > 0 and s["mean_bounded_slowdown"] >= 1


def _config(name: str) -> SchedulerConfig:
    """A :class:`SchedulerConfig` preset (``novm_sr``) or a named configuration (``haizea-1.0``)."""
    if name.startswith("haizea"):
        return NAMED_CONFIGURATIONS[name.upper()][0]
    return getattr(SchedulerConfig, name)()


def _be(i: int, submit: int, nodes: int, dur: int, real: int | None = None) -> Lease:
    real = dur if real is None else real
    return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, real, real)


def test_clip_time_is_the_submission_at_5_percent():
    leases = [_be(i, 10 * i, 1, 5) for i in range(100)]
    assert clip_time(leases) == 40  # position int(0.05 * 100) - 1 = 4


def test_the_simulated_enactment_records_runs_and_refuses_to_overcommit():
    leases = [_be(0, 0, 2, 100, real=40), _be(1, 0, 2, 30)]
    run = simulate_leases(leases, 2)
    assert run.runs == [(0, "vm", 0, 40, (0, 1)), (1, "vm", 40, 70, (0, 1))]
    assert run.table()["start"].tolist() == [0, 40] and run.summary()["events"] == run.events
    enact = SimulatedEnactment([ResourceTuple(1.0, 1024, 0, 0.0)])
    rr = Reservation(leases[0], 0, 100, 100, (0,), usage=ResourceTuple(1.0, 1024, 0, 0.0))
    enact.start(rr, 0)
    with pytest.raises(RuntimeError, match="overcommitted"):
        enact.start(Reservation(leases[1], 0, 30, 30, (0,), usage=rr.usage), 0)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6),
    st.lists(
        st.tuples(st.integers(0, 500), st.integers(1, 6), st.integers(1, 300), st.floats(0.0, 1.0)),
        min_size=1,
        max_size=25,
    ),
)
def test_capacity_is_never_exceeded_and_every_lease_runs_once(n_nodes, specs):
    leases = [_be(i, s, min(k, n_nodes), d, max(1, int(d * f))) for i, (s, k, d, f) in enumerate(specs)]
    seen: list[tuple[int, int, int]] = []  # (start, end, nodes) of every run
    run = simulate_leases(leases, n_nodes)
    for le in leases:
        assert le.state is LeaseState.DONE and le.first_start is not None and le.end is not None
        assert le.first_start >= le.submit and le.end - le.first_start == le.real_duration
        assert sum(1 for what, _ in le.history if what == "start") == 1  # exactly once
        seen.append((le.first_start, le.end, le.nodes))
    # at every instant the running leases fit the cluster
    for t in sorted({s for s, _, _ in seen}):
        assert sum(k for s, e, k in seen if s <= t < e) <= n_nodes
    assert run.all_best_effort == max(e for _, e, _ in seen)


# -- advance reservations (NOVM-NOSR: preemption cancels and requeues) -------------------------------
def _ar(i: int, submit: int, start: int, nodes: int, dur: int) -> Lease:
    return Lease(
        i, LeaseKind.ADVANCE_RESERVATION, submit, nodes, dur, dur, dur, start=start, preemptible=False
    )


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5),
    st.lists(
        st.tuples(
            st.booleans(), st.integers(0, 400), st.integers(0, 300), st.integers(1, 5), st.integers(1, 200)
        ),
        min_size=1,
        max_size=20,
    ),
)
def test_ars_start_exactly_on_time_and_capacity_holds(n_nodes, specs):
    leases = []
    for i, (is_ar, submit, lead, k, d) in enumerate(specs):
        k = min(k, n_nodes)
        leases.append(_ar(i, submit, submit + lead, k, d) if is_ar else _be(i, submit, k, d))
    run = simulate_leases(leases, n_nodes)
    spans = []
    for le in leases:
        if le.kind is LeaseKind.ADVANCE_RESERVATION:
            if le.state is LeaseState.REJECTED:
                continue
            # the run stops when the best-effort work is done; an AR may not have started or ended
            assert le.first_start in (None, le.start) and le.end in (None, le.start + le.duration)
            spans.append((le.start, le.start + le.duration, le.nodes))
            continue
        else:
            assert le.state is LeaseState.DONE
            starts = [t for w, t in le.history if w == "start"]
            assert starts and starts[0] == le.first_start >= le.submit
            assert sum(1 for w, _ in le.history if w == "end") == 1  # completes exactly once
            le_start = starts[-1]  # the run that completed
            assert le.end - le_start == le.real_duration
            spans.append((le_start, le.end, le.nodes))
    for t in sorted({s for s, _, _ in spans}):
        assert sum(k for s, e, k in spans if s <= t < e) <= n_nodes
    assert run.summary()["ar_accepted"] + run.summary()["ar_rejected"] == sum(1 for s in specs if s[0])


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 5),
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 3000), st.integers(0, 2000), st.integers(1, 5),
                  st.integers(1, 2000), st.floats(0.0, 1.0)),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from(["novm_sr", "vm_predeploy", "vm_mult", "vm_reuse", "haizea-1.0", "haizea-1.0-transfers",
                     "haizea-1.0-transfers-reuse"]),
)
def test_with_suspension_capacity_holds_ars_are_on_time_and_be_work_is_done_once(n_nodes, specs, config):
    leases = []
    for i, (is_ar, submit, lead, k, d, f) in enumerate(specs):
        k = min(k, n_nodes)
        real = max(1, int(d * f))
        leases.append(_ar(i, submit, submit + lead, k, d) if is_ar else _be(i, submit, k, d, real))
    cfg = _config(config)
    assign_images(leases, "uniform", len(specs), n_images=2)
    run = simulate_leases(leases, n_nodes, config=cfg)  # the simulated enactment checks capacity
    held = [r for r in run.runs if r.kind != "migrate"]  # (a migration reserves no node)
    for t in sorted({r.start for r in held}):  # every run (VM, suspend, resume, shutdown) holds whole nodes
        assert sum(len(r.nodes) for r in held if r.start <= t < r.stop) <= n_nodes
    for le in leases:
        vm = [r for r in run.runs if r.lease == le.id and r.kind == "vm"]
        if le.kind is LeaseKind.ADVANCE_RESERVATION:
            if le.state is not LeaseState.REJECTED:
                assert le.first_start in (None, le.start)
                assert le.end in (None, le.start + cfg.planned(le.duration))
            continue
        shutdown = cfg.shutdown_time(le)  # (Haizea 1.0: after a normal end)
        assert le.state is LeaseState.DONE and sum(1 for w, _ in le.history if w == "end") == 1
        assert le.first_start is not None and le.first_start >= le.submit
        assert le.end in (vm[-1].stop, vm[-1].stop + shutdown)
        work = sum(r.stop - r.start for r in vm)
        if any(w == "preempt" for w, _ in le.history):  # a cancelled run loses its work
            assert work >= cfg.planned(le.real_duration) - shutdown
        else:  # suspended runs add up to the lease's actual run time (with VM overheads) exactly;
            # Haizea 1.0 ends a run early rather than suspend it when only its shutdown does not fit
            assert cfg.planned(le.real_duration) - shutdown <= work <= cfg.planned(le.real_duration)
        suspends = [r for r in run.runs if r.lease == le.id and r.kind == "suspend"]
        resumes = [r for r in run.runs if r.lease == le.id and r.kind == "resume"]
        # every suspension takes its time (21 s in the 2008 configurations) and is followed by a
        # whole resumption; an AR may cancel a resumption under way, or the run after it, and the
        # lease then resumes again
        assert all(r.stop - r.start == cfg.suspend_s(le, r.nodes) for r in suspends)
        whole = len([r for r in resumes if r.stop - r.start == cfg.resume_s(le, r.nodes)])
        preempts = sum(1 for w, _ in le.history if w == "preempt")
        assert len(suspends) <= whole <= len(suspends) + preempts
        assert len(resumes) <= len(suspends) + preempts


@pytest.mark.parametrize("skip", ["prune_dominated", "skip_stale"])
@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 6),
    st.lists(  # bursts of submissions, so that queues build up and many fits fail in one pass
        st.tuples(st.integers(0, 9).map(lambda x: x == 0), st.integers(0, 600), st.integers(0, 2000),
                  st.integers(1, 6), st.integers(1, 2000), st.floats(0.0, 1.0)),
        min_size=5,
        max_size=40,
    ),
    st.sampled_from(["novm_nosr", "novm_sr", "vm_predeploy", "vm_mult", "vm_reuse", "conservative", "fcfs",
                     "haizea-1.0", "haizea-1.0-transfers", "haizea-1.0-transfers-reuse"]),
)
def test_skipping_fits_that_must_fail_changes_no_decision(skip, n_nodes, specs, config):
    """A queue pass skips a lease that asks for at least the nodes and time of one that could not
    fit under the same start points (``prune_dominated``), and a lease whose last fit failed when
    nothing since can let it fit (``skip_stale``): every lease's history must be the same without
    the skip."""
    histories, made = [], []

    def scheduler(on: bool):  # (the seam: the scheduler made with the skip on or off)
        def make(*args, **kwargs) -> LeaseScheduler:
            made.append(LeaseScheduler(*args, **kwargs, **{skip: on}))
            return made[-1]
        return make

    for prune in (True, False):
        leases = []
        for i, (is_ar, submit, lead, k, d, f) in enumerate(specs):
            k = min(k, n_nodes)
            real = max(1, int(d * f))
            leases.append(_ar(i, submit, submit + lead, k, d) if is_ar else _be(i, submit, k, d, real))
        assign_images(leases, "uniform", len(specs), n_images=2)
        run = simulate_leases(leases, n_nodes, config=_config(config), scheduler=scheduler(prune))
        histories.append(([(le.id, le.state, le.history) for le in leases], run.runs))
    assert [getattr(s, skip) for s in made] == [True, False]
    assert histories[0] == histories[1]


# -- Table 1, NOVM-NOSR rows (decision H19 in docs/decisions/haizea.md, tolerances of H20) -------------------
# (rho, paper: all-BE %, wait ks, slowdown; ours, pinned: all-BE %, wait ks, slowdown). Ours equal the
# independent re-simulation of decision H20 to its printed precision.
TABLE1_NOVM_NOSR = [
    (10, (3.91, 16.91, 60.48), (3.91, 16.90, 60.33)),
    pytest.param(20, (8.66, 23.91, 71.80), (8.70, 24.04, 71.39), marks=pytest.mark.slow),
    pytest.param(30, (23.93, 68.95, 296.74), (22.88, 66.87, 333.96), marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("rho", "paper", "ours"), TABLE1_NOVM_NOSR)
def test_table1_novm_nosr_rows(blue, shared_data, rho, paper, ours):
    _, req = blue
    be = be_leases(req)
    ars = read_plain_lwf(shared_data / "lwf" / "injected" / "30days" / f"work_{rho}-dur_3h-size_2medium.lwf")
    leases = be + ar_leases(ars, len(be))
    run = simulate_leases(leases)
    s = run.summary()
    rel = (run.all_best_effort / 2_674_265 - 1) * 100
    wait, slow = s["mean_wait_s"] / 1000, s["mean_bounded_slowdown"]
    assert (round(rel, 2), round(wait, 2), round(slow, 2)) == ours
    tol = 0.15 if rho == 30 else 0.10
    assert abs(rel - paper[0]) <= 1.1
    assert abs(wait / paper[1] - 1) <= tol and abs(slow / paper[2] - 1) <= tol
    assert s["ar_rejected"] == 0 and s["ar_accepted"] == len(ars)
    for le in leases:  # every AR starts exactly at its requested time, or after the run stopped
        if le.kind is LeaseKind.ADVANCE_RESERVATION:
            assert le.first_start in (None, le.start)


# -- Table 1, NOVM-SR rows ---------------------------------------------------------------------------
# (rho, option preempt_future_resumptions, paper, ours pinned). The re-simulation of H20 gave
# -0.84 / 0.35 / 4.11 %, 5.99 / 8.26 / 13.60 ks, 32.36 / 50.86 / 128.72. A lease that must be
# suspended takes the nodes free longest (the 2008 findPhysNodesForVMs): before we did so, a 140-node
# suspended lease's planned resumption blocked two ARs of [30 %/3H/medium] and the wait was 17.20 ks
# (+15.9 %). No AR is rejected now, with or without the option (which then changes nothing).
TABLE1_NOVM_SR = [
    (10, False, (-0.76, 6.18, 31.05), (-0.76, 5.88, 29.57)),
    pytest.param(20, False, (0.10, 8.14, 49.56), (0.48, 7.84, 50.52), marks=pytest.mark.slow),
    pytest.param(30, False, (4.14, 14.84, 134.91), (3.86, 14.35, 131.51), marks=pytest.mark.slow),
    pytest.param(30, True, (4.14, 14.84, 134.91), (3.86, 14.35, 131.51), marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("rho", "unschedule_resumes", "paper", "ours"), TABLE1_NOVM_SR)
def test_table1_novm_sr_rows(blue, shared_data, rho, unschedule_resumes, paper, ours):
    _, req = blue
    be = be_leases(req)
    ars = read_plain_lwf(shared_data / "lwf" / "injected" / "30days" / f"work_{rho}-dur_3h-size_2medium.lwf")
    cfg = SchedulerConfig.novm_sr().with_(preempt_future_resumptions=unschedule_resumes)
    run = simulate_leases(be + ar_leases(ars, len(be)), config=cfg)
    s = run.summary()
    rel = (run.all_best_effort / 2_674_265 - 1) * 100
    wait, slow = s["mean_wait_s"] / 1000, s["mean_bounded_slowdown"]
    assert (round(rel, 2), round(wait, 2), round(slow, 2)) == ours
    tol = 0.15 if rho == 30 else 0.10
    assert abs(rel - paper[0]) <= 1.1 and abs(slow / paper[2] - 1) <= tol
    assert s["ar_rejected"] == 0 and abs(wait / paper[1] - 1) <= tol


# -- Table 1, VM-PREDEPLOY rows (VM overheads, mem+vm migration, no image transfers) -----------------
# The re-simulation of H20 gave -0.26 / 1.05 / 7.42 %, 7.81 / 11.80 / 21.04 ks, 39.52 / 60.20 / 124.06.
# Ours are within H20's tolerances (with the nodes free longest for a lease that must be suspended;
# before, the 10 % slowdown was 35.31, 10.8 % under the paper's).
TABLE1_VM_PREDEPLOY = [
    (10, (-0.27, 8.05, 39.60), (-0.51, 8.18, 40.61), 0),
    pytest.param(20, (1.58, 12.17, 62.45), (1.53, 11.81, 57.46), 1, marks=pytest.mark.slow),
    pytest.param(30, (7.19, 22.89, 133.59), (8.06, 25.17, 151.04), 6, marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("rho", "paper", "ours", "rejected"), TABLE1_VM_PREDEPLOY)
def test_table1_vm_predeploy_rows(blue, shared_data, rho, paper, ours, rejected):
    _, req = blue
    be = be_leases(req)
    ars = read_plain_lwf(shared_data / "lwf" / "injected" / "30days" / f"work_{rho}-dur_3h-size_2medium.lwf")
    run = simulate_leases(be + ar_leases(ars, len(be)), config=SchedulerConfig.vm_predeploy())
    s = run.summary()
    rel = (run.all_best_effort / 2_674_265 - 1) * 100
    wait, slow = s["mean_wait_s"] / 1000, s["mean_bounded_slowdown"]
    assert (round(rel, 2), round(wait, 2), round(slow, 2)) == ours
    # with +5 % and +20 s, a few ARs overlap and are rejected (decision H22 expects a few)
    assert s["ar_rejected"] == rejected
    tol = 0.15 if rho == 30 else 0.10
    assert abs(rel - paper[0]) <= 1.1 and abs(wait / paper[1] - 1) <= tol
    assert abs(slow / paper[2] - 1) <= tol


# -- the XML scenarios of Haizea 1.0 --------------------------------------------------------------------
def _scenario(shared_data, name: str, config: str,
              until: str = "best-effort") -> tuple[list[Lease], LeaseRun]:
    w = read_xml_lwf(shared_data / "lwf" / "scenarios" / f"{name}.lwf")
    leases = xml_leases(w.requests)
    run = simulate_leases(leases, w.n_nodes or 1, capacity=site_capacity(w.node_resources),
                          config=_config(config), until=until)
    return leases, run


# no transfer (no VM; VMs with the image predeployed), transfer, transfer + reuse
@pytest.mark.parametrize("config", ["novm_nosr", "novm_sr", "vm_predeploy", "vm_mult", "vm_reuse",
                                    "haizea-1.0", "haizea-1.0-transfers", "haizea-1.0-transfers-reuse"])
def test_every_xml_scenario_runs(shared_data, config):
    cfg = _config(config)
    for f in sorted((shared_data / "lwf" / "scenarios").glob("*.lwf")):
        leases, run = _scenario(shared_data, f.stem, config, until="all")
        assert run.summary()["ar_rejected"] == 0, f.name
        needs = {le.id: le for le in leases}
        for le in leases:
            assert le.state is LeaseState.DONE and le.first_start is not None, f.name
            if le.kind is LeaseKind.ADVANCE_RESERVATION:
                assert le.first_start == le.start, f.name
                assert le.end - le.start <= cfg.planned(le.duration), f.name
        # an image arrives before the VMs that need it start; none moves without transfers
        assert bool(run.transfers) == cfg.transfers, f.name
        for tr in run.transfers:
            for lid, _ in tr.users:
                assert tr.end <= needs[lid].first_start, f.name
                assert tr.image == needs[lid].image, f.name


def test_reuse_scenarios_skip_the_second_transfer(shared_data):
    # reuse1: an AR (00:15-00:30) and, at 00:45, a BE lease with the same 1 GB image (82 s at 12.5 MB/s)
    (_, be), run = _scenario(shared_data, "reuse1", "vm_mult")
    assert [(t.start, t.end, t.channel) for t in run.transfers] == [(818, 900, "ar"), (2700, 2782, "be")]
    assert be.first_start == 2782  # without reuse it waits for its own copy
    (_, be), run = _scenario(shared_data, "reuse1", "vm_reuse")
    assert [(t.start, t.end, t.channel) for t in run.transfers] == [(818, 900, "ar")]  # pushed late (EDF)
    assert be.first_start == be.submit == 2700  # the cached image is reused: no wait
    # reuse2: two ARs with different images; the BE lease reuses the second one's
    (_, _, be), run = _scenario(shared_data, "reuse2", "vm_reuse")
    assert len(run.transfers) == 2 and be.first_start == be.submit
    (_, _, be), run = _scenario(shared_data, "reuse2", "vm_mult")
    assert len(run.transfers) == 3 and be.first_start == be.submit + 82


def test_preemption_scenario_timelines(shared_data):
    # a 1-node BE lease runs from 00:00 for 1 h; at 00:15 an AR asks all 4 nodes for 00:30-01:00
    (be, ar), _ = _scenario(shared_data, "preemption", "novm_sr")
    # suspended before the AR starts (21 s to save 1 GB at 50 MB/s), resumed after it ends
    assert be.history == [("schedule", 0), ("start", 0), ("preempt", 900), ("suspend", 1779),
                          ("reserve", 3600), ("resume", 3600), ("start", 3621), ("end", 5442)]
    assert (ar.first_start, ar.end) == (1800, 3600)
    (be, ar), _ = _scenario(shared_data, "preemption", "novm_nosr")  # cancelled, restarted from scratch
    assert be.history == [("schedule", 0), ("start", 0), ("preempt", 900), ("reserve", 3600), ("start", 3600),
                          ("end", 7200)]
    # the AR really ends at 00:40 instead of 00:45: the suspended lease slides back to resume then
    (be, ar), _ = _scenario(shared_data, "preemption_prematureend2", "novm_sr")
    assert ar.end == 2400 and ("slideback", 2400) in be.history and ("resume", 2400) in be.history
    assert be.end == 2400 + 21 + (2700 - 1779)
    # with image transfers: the BE lease waits 82 s for its image, the AR's image arrives just in time
    (be, ar), run = _scenario(shared_data, "preemption", "vm_mult")
    assert [(t.start, t.end, t.channel) for t in run.transfers] == [(0, 82, "be"), (1718, 1800, "ar")]
    assert ("suspend", 1779) in be.history and be.first_start == 82
    assert (ar.first_start, ar.end) == (1800, 1800 + -(-1800 * 105 // 100) + 20)  # +5 %, +20 s
    assert ("resume", ar.end) in be.history


# -- Table 1, VM-MULT and VM-REUSE-* rows (image transfers; images drawn with seed 0) ---------------------
# Pinned at seed 0 (decision H17 in docs/decisions/haizea.md: the original image lists are lost; the spread
# over seeds is about ±0.5 pp run time, ±5 % wait, ±5 % slowdown). At this seed every cell is within H20's
# tolerances (VM-REUSE-* were not re-simulated (H20): reported, not required, but they hold).
TABLE1_IMAGES = [
    ("vm_mult", "uniform", 10, (0.60, 15.69, 91.94), (0.35, 15.59, 89.19), 1),
    pytest.param("vm_mult", "uniform", 20, (3.95, 34.56, 203.39), (3.22, 36.13, 208.75), 1,
                 marks=pytest.mark.slow),
    pytest.param("vm_mult", "uniform", 30, (12.21, 78.83, 441.10), (12.53, 73.02, 424.87), 7,
                 marks=pytest.mark.slow),
    pytest.param("vm_reuse", "uniform", 10, (0.03, 12.31, 62.24), (0.03, 12.15, 63.90), 1,
                 marks=pytest.mark.slow),
    pytest.param("vm_reuse", "uniform", 20, (3.15, 25.68, 140.42), (2.55, 25.11, 138.96), 1,
                 marks=pytest.mark.slow),
    pytest.param("vm_reuse", "uniform", 30, (10.74, 62.52, 338.60), (11.07, 59.98, 328.99), 7,
                 marks=pytest.mark.slow),
    pytest.param("vm_reuse", "skewed", 10, (-0.36, 10.69, 50.46), (-0.39, 10.95, 51.06), 1,
                 marks=pytest.mark.slow),
    pytest.param("vm_reuse", "skewed", 20, (2.48, 22.85, 115.99), (1.92, 22.92, 113.13), 1,
                 marks=pytest.mark.slow),
    pytest.param("vm_reuse", "skewed", 30, (10.43, 58.44, 309.67), (9.69, 58.89, 328.65), 6,
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("config", "images", "rho", "paper", "ours", "rejected"), TABLE1_IMAGES)
def test_table1_image_transfer_rows(blue, shared_data, config, images, rho, paper, ours, rejected):
    _, req = blue
    be = be_leases(req)
    ars = read_plain_lwf(shared_data / "lwf" / "injected" / "30days" / f"work_{rho}-dur_3h-size_2medium.lwf")
    leases = be + ar_leases(ars, len(be))
    assign_images(leases, images, seed=0)
    run = simulate_leases(leases, config=getattr(SchedulerConfig, config)())
    s = run.summary()
    rel = (run.all_best_effort / 2_674_265 - 1) * 100
    wait, slow = s["mean_wait_s"] / 1000, s["mean_bounded_slowdown"]
    assert (round(rel, 2), round(wait, 2), round(slow, 2)) == ours
    assert s["ar_rejected"] == rejected  # EDF: an AR whose image cannot arrive in time (decision H22)
    tol = 0.15 if rho == 30 else 0.10
    assert abs(rel - paper[0]) <= 1.1 and abs(wait / paper[1] - 1) <= tol
    assert abs(slow / paper[2] - 1) <= tol
