"""The lease scheduler alone (no simulator): backfilling, slideback, AR admission and preemption,
immediate leases, rejections (decisions H6-H12 in docs/decisions/haizea.md)."""

from __future__ import annotations

import math

import pytest

from skylease.control.leases import (
    Lease,
    LeaseKind,
    LeaseScheduler,
    LeaseState,
    Reservation,
    ResourceTuple,
    SchedulerConfig,
)


def _be(i: int, submit: int, nodes: int, dur: int, real: int | None = None) -> Lease:
    real = dur if real is None else real
    return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, real, real)


def _ar(i: int, submit: int, start: int, nodes: int, dur: int) -> Lease:
    return Lease(i, LeaseKind.ADVANCE_RESERVATION, submit, nodes, dur, dur, dur, start=start,
                 preemptible=False)


def _im(i: int, submit: int, nodes: int, dur: int) -> Lease:
    return Lease(i, LeaseKind.IMMEDIATE, submit, nodes, dur, dur, dur, preemptible=False)


class _Log:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def start(self, rr: Reservation, now: int) -> None:
        self.calls.append(("start", rr.lease.id, now))

    def stop(self, rr: Reservation, now: int) -> None:
        self.calls.append(("stop", rr.lease.id, now))


def test_aggressive_backfilling_gives_one_future_reservation(run_leases):
    # 4 nodes. Lease 0 holds 3 nodes for 100 s; lease 1 (4 nodes) cannot start: it takes the one
    # future reservation at 100. Lease 2 (4 nodes) can neither start nor reserve: it waits.
    # Lease 3 (1 node, 50 s) backfills on the free node now, because it ends before 100.
    leases = [_be(0, 0, 3, 100), _be(1, 0, 4, 10), _be(2, 0, 4, 10), _be(3, 0, 1, 50)]
    run_leases(leases, 4)
    assert {le.id: le.first_start for le in leases} == {0: 0, 1: 100, 2: 110, 3: 0}
    assert ("reserve", 100) in leases[1].history  # the one future reservation
    assert leases[2].history[0] == ("schedule", 110)  # it waited, then started when lease 1 ended


def test_the_reservation_counter_is_released_at_the_end_not_the_start(run_leases):
    # Lease 1 reserves [100, 110). While it runs, lease 2 (4 nodes) still cannot reserve; it is
    # scheduled only when lease 1's reservation ends (decision H9 in docs/decisions/haizea.md; [C][V]).
    leases = [_be(0, 0, 3, 100), _be(1, 0, 4, 10), _be(2, 0, 4, 10)]
    sched = run_leases(leases, 4)
    assert sched.reserved == 0 and leases[2].history[0] == ("schedule", 110)


def test_conservative_backfilling_reserves_for_every_waiting_lease(run_leases):
    leases = [_be(0, 0, 3, 100), _be(1, 0, 4, 10), _be(2, 0, 4, 10), _be(3, 0, 1, 50)]
    run_leases(leases, 4, SchedulerConfig.conservative())
    assert ("reserve", 110) in leases[2].history and leases[2].first_start == 110


def test_fcfs_stops_the_queue_at_the_first_lease_that_cannot_start(run_leases):
    leases = [_be(0, 0, 3, 100), _be(1, 0, 4, 10), _be(2, 0, 1, 50)]
    run_leases(leases, 4, SchedulerConfig.fcfs())
    assert leases[2].first_start == 110  # no backfilling: it waits behind lease 1


def test_slideback_after_a_premature_end(run_leases):
    # Lease 0 asks 100 s but ends at 40; lease 1, reserved at 100 on the same nodes, slides to 40.
    leases = [_be(0, 0, 2, 100, real=40), _be(1, 0, 2, 30)]
    run_leases(leases, 2)
    assert leases[1].first_start == 40 and ("slideback", 40) in leases[1].history
    assert leases[1].end == 70


def test_slideback_never_moves_an_advance_reservation(run_leases):
    # BE 0 ends at 40 instead of 100; the AR on the same node at 100 keeps its start.
    leases = [_be(0, 0, 1, 100, real=40), _ar(1, 0, 100, 1, 50), _be(2, 0, 1, 30)]
    run_leases(leases, 1)
    assert leases[1].first_start == 100 and not any(w == "slideback" for w, _ in leases[1].history)
    # BE 2 holds the future reservation after the AR; the AR is the next lease on the node, so
    # nothing slides (decision H12 in docs/decisions/haizea.md takes only the next lease per node) and BE 2
    # keeps its slot
    assert leases[2].first_start == 150


def test_an_ar_requeues_the_be_reservation_it_overlaps(run_leases):
    # 2 nodes. BE 0 runs on both until 100; BE 1 reserves both at 100 for 50 s. AR 2 (submitted at
    # 10) wants both nodes on [120, 200): BE 1's reservation is dropped and it waits for the AR.
    log = _Log()
    leases = [_be(0, 0, 2, 100), _be(1, 0, 2, 50), _ar(2, 10, 120, 2, 80)]
    sched = run_leases(leases, 2, enactment=log)
    assert leases[2].first_start == 120 and leases[2].end == 200
    assert ("preempt", 10) in leases[1].history and leases[1].first_start == 200
    assert sched.reserved == 0 and not sched.rejected
    assert log.calls == [("start", 0, 0), ("stop", 0, 100), ("start", 2, 120), ("stop", 2, 200),
                         ("start", 1, 200), ("stop", 1, 250)]


def test_a_running_be_lease_is_cancelled_and_requeued_without_suspension(run_leases):
    # BE 0 runs [0, 100); an AR submitted at 10 needs the only node at 50: BE 0 loses its run.
    log = _Log()
    leases = [_be(0, 0, 1, 100), _ar(1, 10, 50, 1, 20)]
    run_leases(leases, 1, enactment=log)
    assert leases[0].first_start == 0 and leases[0].end == 170
    assert [w for w, _ in leases[0].history] == ["schedule", "start", "preempt", "reserve", "start", "end"]
    assert log.calls[:2] == [("start", 0, 0), ("stop", 0, 10)]


def test_be_leases_backfill_only_what_ends_before_an_ar(run_leases):
    # AR on both nodes at [100, 200); BE 1 (60 s) fits before it, BE 2 (150 s) must wait until 200.
    leases = [_ar(0, 0, 100, 2, 100), _be(1, 0, 1, 60), _be(2, 0, 1, 150)]
    run_leases(leases, 2)
    assert leases[1].first_start == 0 and leases[2].first_start == 200


def test_an_ar_prefers_free_nodes_then_fewest_preemptions():
    # 3 nodes: node 0 free, nodes 1 and 2 hold BE leases; the AR needs 2 nodes: node 0 and one victim.
    leases = [_be(0, 0, 1, 1000), _be(1, 0, 1, 1000), _be(2, 0, 1, 10), _ar(3, 5, 500, 2, 100)]
    sched = LeaseScheduler(3)
    for le in leases[:3]:
        sched.submit(le)
    sched.step(0)
    assert sched.rr[0].nodes == (0,) and sched.rr[1].nodes == (1,) and sched.rr[2].nodes == (2,)
    sched.step(10)  # lease 2 ends: node 2 is free
    sched.submit(leases[3])
    sched.step(10)
    assert sched.rr[3].nodes == (0, 2) or sched.rr[3].nodes == (1, 2)
    preempted = [le.id for le in leases[:2] if ("preempt", 10) in le.history]
    assert len(preempted) == 1 and sched.rr[3].nodes == tuple(sorted({2, preempted[0]}))


def test_immediate_leases_start_now_or_are_rejected(run_leases):
    leases = [_be(0, 0, 1, 100), _im(1, 10, 1, 50), _im(2, 20, 1, 50)]
    sched = run_leases(leases, 2)
    assert leases[1].first_start == 10 and leases[1].end == 60
    assert leases[2].state is LeaseState.REJECTED and "free" in (leases[2].reason or "")
    assert [le.id for le, _ in sched.rejected] == [2]


def test_impossible_requests_are_rejected_with_a_reason():
    sched = LeaseScheduler(2)
    sched.submit(_ar(0, 50, 10, 1, 5))  # start before submission
    sched.submit(_ar(1, 0, 10, 3, 5))  # more nodes than the cluster
    sched.submit(_ar(2, 0, 10, 2, 5))
    sched.submit(_ar(3, 0, 12, 1, 5))  # overlaps AR 2 on a full cluster: infeasible
    sched.submit(_be(2, 0, 1, 5))  # id already used
    big = Lease(5, LeaseKind.BEST_EFFORT, 0, 1, 5, 5, 5, memory=4096)  # more memory than a node
    sched.submit(big)
    sched.step(0)
    why = {le.id: reason for le, reason in sched.rejected}
    assert set(why) == {0, 1, 2, 3, 5}
    assert "past" in why[0] and "cluster has 2" in why[1] and "nodes can be free" in why[3]
    assert "already in use" in why[2] and "largest node" in why[5]
    assert big.state is LeaseState.REJECTED and not sched.busy


def test_a_bad_lease_is_refused_at_construction():
    with pytest.raises(ValueError, match="real_duration"):
        _be(0, 0, 1, 10, real=20)
    with pytest.raises(ValueError):
        Lease(0, LeaseKind.BEST_EFFORT, 0, 0, 10, 10, 10)


def test_two_small_vms_share_a_node():
    # nodes of 2 CPUs: two 1-CPU single-node leases run side by side on node 0
    sched = LeaseScheduler(1, capacity=ResourceTuple(2.0, 2048, 0, 0.0))
    a, b = _be(0, 0, 1, 10), _be(1, 0, 1, 10)
    sched.submit(a)
    sched.submit(b)
    sched.step(0)
    assert a.first_start == b.first_start == 0


# -- suspension and resumption (NOVM-SR: 21 s suspend/resume, 82 s migration, thresholds 42/248 s) --
SR = SchedulerConfig.novm_sr()


def test_novm_sr_overheads_and_thresholds_are_the_specs():
    le = _be(0, 0, 1, 10)
    assert (SR.suspend_s(le), SR.resume_s(le), SR.migrate_s(le)) == (21, 21, 82)
    assert (SR.initial_threshold(le), SR.resume_threshold(le)) == (42, 248)
    vm = SR.with_(migrate="mem+vm", boot_s=20)
    img = Lease(1, LeaseKind.BEST_EFFORT, 0, 1, 10, 10, 10, image="a", image_size=4096)
    assert vm.migrate_s(img) == 410 and vm.resume_threshold(img) == 904 and vm.initial_threshold(img) == 82


def test_a_lease_split_by_an_ar_is_suspended_requeued_and_resumed(run_leases):
    # 1 node; AR on [1000, 1100). The BE lease (2000 s) starts now and must suspend before the AR:
    # VM [0, 979), SUSPEND [979, 1000); it resumes after the AR and migration: RESUME [1100, 1121),
    # VM [1121, 2142) for the 1021 s left.
    log = _Log()
    be, ar = _be(0, 0, 1, 2000), _ar(1, 0, 1000, 1, 100)
    sched = run_leases([be, ar], 1, SR, log)
    assert be.history == [("schedule", 0), ("start", 0), ("suspend", 979), ("reserve", 1100),
                          ("resume", 1100), ("start", 1121), ("end", 2142)]
    assert be.first_start == 0 and be.end == 2142 and be.state is LeaseState.DONE
    assert ar.first_start == 1000 and ar.end == 1100
    assert sched.reserved == 0 and not sched.busy
    assert ("start", 0, 0) in log.calls and ("stop", 0, 979) in log.calls


def test_a_suspend_threshold_not_met_rejects_that_change_point(run_leases):
    # AR on [30, 100): starting now would run only 30 s <= 42 s before suspending: the lease
    # instead reserves the first point where it runs whole, after the AR.
    be, ar = _be(0, 0, 1, 200), _ar(1, 0, 30, 1, 70)
    run_leases([be, ar], 1, SR)
    assert be.history == [("reserve", 100), ("start", 100), ("end", 300)]


def test_an_ar_suspends_a_running_lease_at_its_start(run_leases):
    # BE (1000 s) runs from 0; an AR submitted at 10 needs the node on [500, 600). The lease has run
    # 500 s >= 248 s by then: it is suspended at 500 (VM until 479, SUSPEND [479, 500)), and resumes
    # after the AR with its 521 s left.
    be, ar = _be(0, 0, 1, 1000), _ar(1, 10, 500, 1, 100)
    run_leases([be, ar], 1, SR)
    assert ("preempt", 10) in be.history and ("suspend", 479) in be.history
    assert ("resume", 600) in be.history and ("start", 621) in be.history and be.end == 1142
    assert ar.first_start == 500


def test_a_lease_that_ends_before_its_planned_suspension_completes(run_leases):
    # requested 2000 s but really 500 s: it ends at 500, before the planned suspension at 979
    be, ar = _be(0, 0, 1, 2000, real=500), _ar(1, 0, 1000, 1, 100)
    sched = run_leases([be, ar], 1, SR)
    assert be.end == 500 and not any(w == "suspend" for w, _ in be.history) and not sched.busy


def test_an_ar_too_close_to_suspend_for_cancels_the_running_lease(run_leases):
    # the AR (submitted 667) starts at 686: a suspension (21 s) would have to begin at 665, in the
    # past, so the running lease is cancelled and requeued instead (found by a random search)
    be, ar = _be(14, 368, 1, 1895, real=726), _ar(11, 667, 686, 1, 1583)
    run_leases([be, ar], 1, SR)
    assert ("preempt", 667) in be.history and not any(w == "suspend" for w, _ in be.history)
    assert ar.first_start == 686 and be.end == 686 + 1583 + 726


# -- the lease service's inputs: cancel and premature end --------------------------------------------
def _drive(sched: LeaseScheduler, until: int, t: int = 0) -> None:
    """Step at every event time from ``t`` to ``until``, as the simulator and the service do."""
    sched.step(t)
    while (nxt := sched.next_event(t)) <= until:
        t = int(nxt)
        sched.step(t)


def test_cancelling_a_running_lease_frees_its_node_and_the_queue_moves_up():
    log = _Log()
    sched = LeaseScheduler(1, enactment=log)
    a, b = _be(0, 0, 1, 100), _be(1, 0, 1, 100)
    sched.submit(a)
    sched.submit(b)
    _drive(sched, 10)
    assert a.state is LeaseState.ACTIVE and b.first_start is None
    sched.cancel(0, 10)
    sched.step(10)
    assert a.state is LeaseState.CANCELLED and a.end == 10 and ("cancel", 10) in a.history
    assert ("stop", 0, 10) in log.calls  # what ran of it is stopped
    assert b.first_start == 10  # the queue moves up at once
    with pytest.raises(ValueError, match="already cancelled"):
        sched.cancel(0, 11)


def test_cancelling_a_queued_or_reserved_lease_takes_it_out_without_running_it():
    sched = LeaseScheduler(1)
    a, b, c = _be(0, 0, 1, 100), _be(1, 0, 1, 50), _ar(2, 0, 500, 1, 10)
    for le in (a, b, c):
        sched.submit(le)
    _drive(sched, 5)
    assert b.state is LeaseState.SCHEDULED  # the future reservation behind a
    sched.cancel(1, 5)
    sched.cancel(2, 5)
    _drive(sched, 1000, 5)
    assert b.first_start is None and c.first_start is None
    assert b.state is c.state is LeaseState.CANCELLED
    assert not sched.rr and not sched.busy and a.end == 100


def test_a_premature_end_is_the_simulator_s_shorter_real_duration():
    # the same lease, once with a real duration of 30 s known in advance (the simulator), once told at
    # 30 s that its work ended (the service): the same events at the same times, slideback included
    def run(premature: bool) -> list[list[tuple[str, int]]]:
        sched = LeaseScheduler(2)
        first = _be(0, 0, 2, 100) if premature else _be(0, 0, 2, 100, real=30)
        leases = [first, _be(1, 0, 2, 100), _be(2, 5, 1, 20)]
        for le in leases[:2]:
            sched.submit(le)
        _drive(sched, 4)
        sched.submit(leases[2])
        sched.step(5)
        t = 5
        while (nxt := sched.next_event(t)) <= 400:
            if premature and t < 30 <= nxt:
                assert sched.premature_end(0, 30)
                nxt = 30
            t = int(nxt)
            sched.step(t)
        return [le.history for le in leases]

    assert run(premature=True) == run(premature=False)


def test_a_premature_end_needs_a_running_lease_that_ends_later():
    sched = LeaseScheduler(1)
    a, b = _be(0, 0, 1, 100), _be(1, 0, 1, 100)
    sched.submit(a)
    sched.submit(b)
    sched.step(0)
    assert not sched.premature_end(1, 10)  # not running
    assert not sched.premature_end(0, 100)  # its planned end
    assert not sched.premature_end(7, 10)  # no such lease


class _Counting(LeaseScheduler):
    """Records the lease of every fit tried (queue passes and reschedulings)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.tried: list[int] = []

    def _fit_be(self, lease, now, failed=None, *, queued=True):
        self.tried.append(lease.id)
        return super()._fit_be(lease, now, failed, queued=queued)


def test_a_queued_lease_is_not_tried_again_until_nodes_are_freed():
    # 3 nodes. Lease 0 holds 2 of them until 100, lease 1 (3 nodes) the one future reservation at
    # 100; lease 2 (2 nodes) cannot start on the one free node. Leases 3-5 arrive at 10, 20, 30 and
    # cannot backfill there either (500 s, the node is free until 100). Each arrival is a queue
    # pass; nothing that could let lease 2 fit changes before 100, so it is tried once, not 4
    # times, and every decision is the one of a scheduler that tries it every time.
    def run(skip: bool) -> tuple[list[int], list]:
        leases = [_be(0, 0, 2, 100), _be(1, 0, 3, 50), _be(2, 0, 2, 10),
                  *(_be(i, 10 * (i - 2), 1, 500) for i in (3, 4, 5))]
        sched = _Counting(3, skip_stale=skip)
        order = iter(leases)
        pending = next(order)
        t = 0
        while t < 100:
            while pending is not None and pending.submit <= t:
                sched.submit(pending)
                pending = next(order, None)
            sched.step(t)
            t = int(min(sched.next_event(t), pending.submit if pending is not None else math.inf))
        return sched.tried, [(le.id, le.state, le.history) for le in leases]

    tried, decisions = run(skip=True)
    tried_every_time, same = run(skip=False)
    assert decisions == same
    assert tried.count(2) == 1 and tried_every_time.count(2) == 4


def test_a_skipped_lease_is_tried_when_reservations_ended_unseen():
    # A caller that steps late (at 200, not at 100 or 150): the reservations of leases 0 and 1 are
    # still in the table but over, nothing was removed, and lease 2, which could not start at 0,
    # must be tried again (and start at 200), as without the skip.
    def run(skip: bool) -> list:
        sched = LeaseScheduler(3, skip_stale=skip)
        leases = [_be(0, 0, 2, 100), _be(1, 0, 3, 50), _be(2, 0, 2, 10)]
        for le in leases:
            sched.submit(le)
        sched.step(0)
        assert leases[2].state is LeaseState.PENDING
        sched.step(200)
        return [(le.id, le.state, le.history) for le in leases]

    assert run(skip=True) == run(skip=False)
    assert run(skip=True)[2][2] == [("schedule", 200), ("start", 200)]
