"""The lease scheduler on the simulator: the Haizea paper's baseline, exactly (spec 001 §11)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler, LeaseState
from skylease.sim.leases import be_leases, clip_time, simulate_leases
from skylease.traces.swf import best_effort_requests, read_swf


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


def test_novm_nosr_baseline_is_the_papers_exactly(blue):
    _, req = blue
    leases = be_leases(req)
    run = simulate_leases(leases)
    assert run.all_best_effort == 2_674_265
    assert run.clip_time == 161_761
    assert all(le.state is LeaseState.DONE and le.end is not None for le in leases)
    s = run.summary()
    assert s["best_effort_leases"] == 5108 and s["mean_wait_s"] > 0 and s["mean_bounded_slowdown"] >= 1


def _be(i: int, submit: int, nodes: int, dur: int, real: int | None = None) -> Lease:
    real = dur if real is None else real
    return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, real, real)


def test_aggressive_backfilling_gives_one_future_reservation():
    # 4 nodes. Lease 0 holds 3 nodes for 100 s; lease 1 (4 nodes) cannot start: it takes the one
    # future reservation at 100. Lease 2 (4 nodes) can neither start nor reserve: it waits.
    # Lease 3 (1 node, 50 s) backfills on the free node now, because it ends before 100.
    leases = [_be(0, 0, 3, 100), _be(1, 0, 4, 10), _be(2, 0, 4, 10), _be(3, 0, 1, 50)]
    run = simulate_leases(leases, 4)
    start = {le.id: le.first_start for le in leases}
    assert start == {0: 0, 1: 100, 2: 110, 3: 0}
    assert ("reserve", 100) in leases[1].history  # the one future reservation
    assert leases[2].history[0] == ("schedule", 110)  # it waited, then started when lease 1 ended
    assert run.all_best_effort == 120


def test_slideback_after_a_premature_end():
    # Lease 0 asks 100 s but ends at 40; lease 1, reserved at 100 on the same nodes, slides to 40.
    leases = [_be(0, 0, 2, 100, real=40), _be(1, 0, 2, 30)]
    simulate_leases(leases, 2)
    assert leases[1].first_start == 40 and ("slideback", 40) in leases[1].history
    assert leases[1].end == 70


def test_a_lease_larger_than_the_cluster_is_rejected_with_its_reason():
    sched = LeaseScheduler(2)
    sched.submit(_be(0, 0, 3, 10))
    ((lease, why),) = sched.rejected
    assert lease.state is LeaseState.REJECTED and "cluster has 2" in why and not sched.busy


def test_clip_time_is_the_submission_at_5_percent():
    leases = [_be(i, 10 * i, 1, 5) for i in range(100)]
    assert clip_time(leases) == 40  # position int(0.05 * 100) - 1 = 4


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


def test_an_ar_requeues_the_be_reservation_it_overlaps():
    # 2 nodes. BE 0 runs on both until 100; BE 1 reserves both at 100 for 50 s. AR 2 (submitted at
    # 10) wants both nodes on [120, 200): BE 1's reservation is dropped and it waits for the AR.
    leases = [_be(0, 0, 2, 100), _be(1, 0, 2, 50), _ar(2, 10, 120, 2, 80)]
    run = simulate_leases(leases, 2)
    assert leases[2].first_start == 120 and leases[2].end == 200
    assert ("preempt", 10) in leases[1].history and leases[1].first_start == 200
    assert run.all_best_effort == 250 and run.summary()["ar_accepted"] == 1


def test_be_leases_backfill_only_what_ends_before_an_ar():
    # AR on both nodes at [100, 200); BE 1 (60 s) fits before it, BE 2 (150 s) must wait until 200.
    leases = [_ar(0, 0, 100, 2, 100), _be(1, 0, 1, 60), _be(2, 0, 1, 150)]
    simulate_leases(leases, 2)
    assert leases[1].first_start == 0 and leases[2].first_start == 200


def test_impossible_ars_are_rejected_with_a_reason():
    sched = LeaseScheduler(2)
    sched.submit(_ar(0, 50, 10, 1, 5))  # start before submission
    sched.submit(_ar(1, 0, 10, 3, 5))  # more nodes than the cluster
    sched.submit(_ar(2, 0, 10, 2, 5))
    sched.submit(_ar(3, 0, 12, 1, 5))  # overlaps AR 2 on a full cluster: infeasible
    sched.step(0)
    why = {le.id: reason for le, reason in sched.rejected}
    assert set(why) == {0, 1, 3}
    assert "past" in why[0] and "cluster has 2" in why[1] and "nodes can be free" in why[3]


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
