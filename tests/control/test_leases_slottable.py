"""The slot table: capacity checks, availability windows, change points (decisions H3-H4 in
docs/decisions/haizea.md)."""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.control.leases import Lease, LeaseKind, Reservation, ResourceTuple, SlotTable

NODE = ResourceTuple(1.0, 1024, 20000, 12.5)
VM = ResourceTuple(1.0, 1024, 0, 0.0)
HALF = ResourceTuple(0.5, 512, 0, 0.0)


def _rr(start: int, end: int, nodes: tuple[int, ...], usage: ResourceTuple = VM, real_end: int | None = None,
        lease_id: int = 0) -> Reservation:
    lease = Lease(lease_id, LeaseKind.BEST_EFFORT, 0, len(nodes), end - start, end - start, end - start)
    return Reservation(lease, start, end, end if real_end is None else real_end, nodes, usage=usage)


def test_add_refuses_a_reservation_over_a_nodes_capacity():
    t = SlotTable(2, NODE)
    t.add(_rr(0, 100, (0,)))
    with pytest.raises(ValueError, match="node 0 cannot host"):
        t.add(_rr(50, 150, (0, 1)))
    t.add(_rr(100, 150, (0, 1)))  # [start, end): touching is fine
    assert len(t.reservations) == 2


def test_two_half_size_vms_share_a_node_a_third_does_not_fit():
    t = SlotTable(1, NODE)
    t.add(_rr(0, 100, (0,), HALF))
    t.add(_rr(20, 80, (0,), HALF))
    assert t.free_until(0, 0, HALF) == 20 and t.free_until(0, 80, HALF) == math.inf
    with pytest.raises(ValueError):
        t.add(_rr(50, 60, (0,), HALF))
    assert t.free_until(0, 0, VM) == 0 and t.free_until(0, 100, VM) == math.inf


def test_a_request_larger_than_a_node_never_fits():
    t = SlotTable(1, NODE)
    assert t.free_until(0, 5, ResourceTuple(1.0, 2048, 0, 0.0)) == 5
    assert t.free_on(0, 10, ResourceTuple(2.0, 1, 0, 0.0)) == []


def test_availability_window_is_continuously_free_until():
    t = SlotTable(4, NODE)
    t.add(_rr(0, 50, (0,)))
    t.add(_rr(30, 60, (1,)))
    t.add(_rr(100, 200, (2,)))
    w = t.window(10, VM)
    assert w.until == {1: 30, 2: 100, 3: math.inf}  # node 0 is busy at 10
    assert w.nodes_free_until(90) == [2, 3] and w.count_free_until(30) == 3
    assert w.find_nodes(2, 500) == (100, [2, 3])  # two nodes stay free until 100
    assert w.find_nodes(1, 500) == (500, [3])
    assert w.find_nodes(4, 500)[1] == []
    assert t.window(10, VM) is w  # cached until the table changes
    t2 = SlotTable(5, NODE)
    for k in (0, 1, 2):
        t2.add(_rr(50, 60, (k,)))
    t2.add(_rr(80, 90, (3,)))
    # a lease that must stop at 50 gets the n nodes free longest (2008 findPhysNodesForVMs): node 4,
    # then node 3, then the highest id among those that stop at 50
    assert t2.window(0, VM).find_nodes(3, 500) == (50, [2, 3, 4])
    assert t2.window(0, VM).find_nodes(3, 40) == (40, [0, 1, 2, 3, 4])  # a full fit: all free nodes
    t.add(_rr(300, 400, (3,)))
    assert t.window(10, VM).until[3] == 300


def test_change_points_and_the_next_event_include_real_ends():
    t = SlotTable(2, NODE)
    a = _rr(0, 100, (0,), real_end=40)
    b = _rr(100, 130, (0, 1))
    t.add(a)
    t.add(b)
    assert t.changepoints_after(0) == [100, 130]
    assert t.next_changepoint(0) == 40 and t.next_changepoint(40) == 100
    assert t.changepoints_after(0, nodes=[1]) == [100, 130]
    assert t.changepoints_after(0, nodes=[0], skip=b) == [100]
    assert t.ending_at(40) == [a] and t.starting_at(100) == [b]
    assert {id(r) for r in t.reservations_at(10)} == {id(a)}
    with pytest.raises(ValueError):  # capacity is checked on planned ends: a holds node 0 until 100
        t.reschedule(b, 40, 70, 70)
    t.remove(a)  # a really ends at 40
    t.reschedule(b, 40, 70, 70)
    assert t.changepoints_after(0) == [40, 70] and t.starting_at(100) == [] and t.ending_at(70) == [b]
    t.remove(b)
    assert t.changepoints_after(-1) == [] and t.next_changepoint(0) == math.inf and not t.reservations


def test_reschedule_into_a_conflict_restores_the_reservation():
    t = SlotTable(1, NODE)
    a = _rr(0, 10, (0,))
    b = _rr(20, 30, (0,))
    t.add(a)
    t.add(b)
    with pytest.raises(ValueError):
        t.reschedule(b, 5, 15, 15)
    assert (b.start, b.end) == (20, 30) and t.starting_at(20) == [b]


_usages = st.sampled_from([VM, HALF, ResourceTuple(0.25, 256, 0, 0.0), ResourceTuple(0.0, 1024, 0, 0.0)])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(1, 100), st.integers(0, 2), _usages),
                min_size=1, max_size=30),
       st.integers(0, 250), _usages)
def test_capacity_is_never_exceeded_and_fast_queries_match_the_sweep(specs, t, request):
    table = SlotTable(3, NODE)
    for i, (s, d, k, u) in enumerate(specs):
        with contextlib.suppress(ValueError):
            table.add(_rr(s, s + d, (k,), u, lease_id=i))
    rrs = list(table.reservations.values())
    # brute force: at every instant, on every node, the accepted reservations fit the node
    for p in {r.start for r in rrs}:
        for k in range(3):
            used = [r.usage for r in rrs if k in r.nodes and r.start <= p < r.end]
            assert sum(u.cpu for u in used) <= NODE.cpu and sum(u.memory for u in used) <= NODE.memory
    # the fast path (no skip) and the general usage sweep (a skip that skips nothing) agree
    for k in range(3):
        fast = table.free_until(k, t, request)
        swept = table.free_until(k, t, request, skip=lambda r: False)
        assert fast == swept
        # and the answer is right: it fits on [t, fast), not at fast
        if fast > t:
            assert table.fits(k, t, min(fast, t + 1), request)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 30), st.integers(1, 60), st.integers(0, 1), _usages),
                min_size=1, max_size=40), st.integers(0, 40))
def test_has_free_cpu_follows_every_change_as_a_scan_would(ops, at):
    # has_free_cpu keeps its last answer with a node that had CPU left (or none) across changes:
    # after each add or removal it must say what a scan of every node says
    table = SlotTable(2, NODE)
    held: list[Reservation] = []
    for i, (add, s, d, k, u) in enumerate(ops):
        if add or not held:
            rr = _rr(s, s + d, (k,), u, lease_id=i)
            with contextlib.suppress(ValueError):
                table.add(rr)
                held.append(rr)
        else:
            table.remove(held.pop(s % len(held)))
        for when in (at, at + i, s):  # the same time, later times, and any
            used = [sum(r.usage.cpu for r in held if k in r.nodes and r.start <= when < r.end)
                    for k in range(2)]
            assert table.has_free_cpu(when) == any(c < NODE.cpu for c in used)


def test_no_free_cpu_stands_only_until_a_reservation_ends_or_for_later_times():
    table = SlotTable(2, NODE)
    table.add(_rr(3, 10, (0,)))
    table.add(_rr(0, 20, (1,)))
    assert not table.has_free_cpu(5)
    assert table.has_free_cpu(2)  # earlier: node 0 is free before 3
    assert not table.has_free_cpu(5) and not table.has_free_cpu(9)
    assert table.has_free_cpu(10)  # node 0's reservation is over, though still in the table


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 100), st.integers(0, 1), _usages),
                min_size=1, max_size=40),
       st.integers(0, 250), _usages, st.booleans())
def test_free_until_is_the_first_time_the_request_does_not_fit(specs, t, request, skip_odd):
    """free_until's sweep stops at the first time that matters (it used to sort the node's whole row
    at every call): its answer is the definition's, brute force over every change point, with and
    without a skip, zero-length reservations included."""
    table = SlotTable(2, NODE)
    for i, (s, d, k, u) in enumerate(specs):
        with contextlib.suppress(ValueError):
            table.add(_rr(s, s + d, (k,), u, lease_id=i))
    skip = (lambda r: r.lease.id % 2 == 1) if skip_odd else None
    for k in range(2):
        rrs = [r for r in table.on_node(k) if r.end > t and not (skip and skip(r))]
        expected = math.inf
        for p in sorted({t} | {max(r.start, t) for r in rrs} | {r.end for r in rrs}):
            used = [r.usage for r in rrs if max(r.start, t) <= p < r.end]
            total = request
            for u in used:
                total = total.plus(u)
            if not total.fits_in(NODE):
                expected = p
                break
        assert table.free_until(k, t, request, skip) == expected
