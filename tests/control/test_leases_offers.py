"""Counter-offers from the scheduler's slot table (skylease.control.leases.offers;
docs/decisions/lease-offers.md): the answers checked by hand on a small table, the table left as
it was, and each earliest start checked against the scheduler itself (an AR requested there is
accepted, one second earlier is refused)."""

from __future__ import annotations

import math
import random

import pytest

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler, LeaseState, ResourceTuple
from skylease.control.leases.offers import offer

ONE = ResourceTuple(1.0, 1024, 0, 0.0)


def _table() -> LeaseScheduler:
    """4 one-VM nodes at time 0: an AR on nodes 0-1 over [100, 200); a preemptible best-effort lease
    on node 2 over [0, 1000); a best-effort lease that may not be preempted on node 3 over [0, 300)."""
    sched = LeaseScheduler(4)
    sched.submit(Lease(1, LeaseKind.ADVANCE_RESERVATION, 0, 2, 100, 100, 100, start=100, preemptible=False))
    sched.submit(Lease(2, LeaseKind.BEST_EFFORT, 0, 1, 1000, 1000, 1000))
    sched.submit(Lease(3, LeaseKind.BEST_EFFORT, 0, 1, 300, 300, 300, preemptible=False))
    sched.step(0)
    where = {lid: (sched.rr[lid].start, sched.rr[lid].end, sched.rr[lid].nodes) for lid in (1, 2, 3)}
    assert where == {1: (100, 200, (0, 1)), 2: (0, 1000, (2,)), 3: (0, 300, (3,))}
    return sched


def _snapshot(sched: LeaseScheduler) -> list[tuple]:
    return sorted((rr.lease.id, rr.kind.value, rr.start, rr.end, rr.nodes)
                  for rr in sched.table.reservations.values())


@pytest.mark.parametrize(("nodes", "duration", "not_before", "earliest", "free", "with_preemption"), [
    (2, 100, 0, 0, 2, 3),        # nodes 0-1 are free until the AR at 100: exactly long enough
    (3, 100, 0, 0, 2, 3),        # and node 2's best-effort lease can be preempted
    (3, 150, 0, 200, 0, 1),      # [0, 150) meets the AR on 0-1: after it, 0, 1 and node 2 preempted
    (4, 150, 0, 300, 0, 1),      # node 3's lease may not be preempted: after it ends at 300
    (4, 150, 250, 300, 2, 3),    # (at 250 the AR is over; node 3 is busy until 300)
    (1, 50, 120, 120, 0, 1),     # during the AR: node 2's lease preempted
])
def test_the_earliest_start_and_the_nodes_free_checked_by_hand(nodes, duration, not_before, earliest,
                                                               free, with_preemption):
    sched = _table()
    before, version = _snapshot(sched), sched.table.version
    o = offer(sched, nodes, ONE, duration, now=0, not_before=not_before)
    assert (o.earliest_start, o.free, o.with_preemption, o.at) == (earliest, free, with_preemption,
                                                                     not_before)
    assert o.reason is None
    assert _snapshot(sched) == before and sched.table.version == version  # a pure query


def test_an_immediate_lease_fits_only_on_nodes_free_now_for_its_time():
    sched = _table()
    assert offer(sched, 2, ONE, 100, now=0).immediate  # nodes 0-1 until the AR
    assert not offer(sched, 1, ONE, 101, now=0).immediate  # (nothing is preempted for it)
    assert not offer(sched, 1, ONE, 10, now=0, not_before=5).immediate  # (not now: not immediate)


def test_a_request_the_cluster_cannot_hold_gets_no_start_and_the_reason():
    sched = _table()
    o = offer(sched, 5, ONE, 10, now=0)
    assert o.earliest_start is None and o.reason == "asks for 5 nodes; the cluster has 4"
    o = offer(sched, 1, ResourceTuple(2.0, 1024, 0, 0.0), 10, now=0)
    assert o.earliest_start is None and "too little cpu" in (o.reason or "")


def test_no_start_while_too_many_nodes_are_down():
    sched = _table()
    sched.table.set_down([3], True)
    o = offer(sched, 4, ONE, 10, now=0)
    assert o.earliest_start is None and o.reason == "3 of the 4 nodes are up"


def test_not_before_in_the_past_is_now():
    o = offer(_table(), 1, ONE, 10, now=50, not_before=10)
    assert (o.at, o.earliest_start) == (50, 50)


@pytest.mark.parametrize(("nodes", "duration", "not_before"), [
    (2, 100, 0), (3, 150, 0), (4, 150, 0), (4, 150, 250), (1, 50, 120), (2, 100, 150), (4, 1, 0),
])
def test_an_ar_at_the_earliest_start_is_accepted_and_one_second_earlier_refused(nodes, duration,
                                                                               not_before):
    earliest = offer(_table(), nodes, ONE, duration, now=0, not_before=not_before).earliest_start
    assert earliest is not None

    def ar_at(start: int) -> tuple[LeaseScheduler, Lease]:
        sched = _table()
        lease = Lease(9, LeaseKind.ADVANCE_RESERVATION, 0, nodes, duration, duration, duration, start=start,
                      preemptible=False)
        sched.submit(lease)
        sched.step(0)
        return sched, lease

    sched, accepted = ar_at(earliest)
    assert accepted.state is not LeaseState.REJECTED, accepted.reason
    assert (sched.rr[9].start, sched.rr[9].end) == (earliest, earliest + duration)
    if earliest > not_before:  # (at not_before itself, earlier is before what was asked)
        assert ar_at(earliest - 1)[1].state is LeaseState.REJECTED


@pytest.mark.parametrize("seed", range(6))
def test_ar_fits_answers_as_ar_room_counts_on_random_tables(seed):
    # the offers' walk asks ar_fits (which stops early) where _schedule_ar asks ar_room: one answer
    rng = random.Random(seed)
    sched = LeaseScheduler(12, max_reservations=math.inf)
    for i in range(1, 41):
        d = rng.randint(10, 500)
        if rng.random() < 0.3:
            sched.submit(Lease(i, LeaseKind.ADVANCE_RESERVATION, 0, rng.randint(1, 4), d, d, d,
                               start=rng.randint(0, 2000), preemptible=False))
        else:
            sched.submit(Lease(i, LeaseKind.BEST_EFFORT, 0, rng.randint(1, 6), d, d, d,
                               preemptible=rng.random() < 0.5))
    sched.step(0)
    for _ in range(60):
        nodes, d, s = rng.randint(1, 12), rng.randint(1, 600), rng.randint(0, 3000)
        probe = Lease(-1, LeaseKind.ADVANCE_RESERVATION, 0, nodes, d, d, d, start=s, preemptible=False)
        free, victims = sched.ar_room(probe, s, s + d)
        assert sched.ar_fits(probe, s, s + d) == (len(free) + len(victims) >= nodes), (nodes, s, d)
