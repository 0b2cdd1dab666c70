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


def test_a_lease_larger_than_the_cluster_is_refused():
    with pytest.raises(ValueError, match="cluster has 2"):
        LeaseScheduler(2).submit(_be(0, 0, 3, 10))


def test_clip_time_is_the_submission_at_5_percent():
    leases = [_be(i, 10 * i, 1, 5) for i in range(100)]
    assert clip_time(leases) == 40  # position int(0.05 * 100) - 1 = 4


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.lists(st.tuples(st.integers(0, 500), st.integers(1, 6), st.integers(1, 300),
                                             st.floats(0.0, 1.0)), min_size=1, max_size=25))
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
