"""What the lease scheduler keeps, and the work of a slideback, do not grow with the length of a
run (issue 25, item 5; docs/performance.md, "Scaling").

A full collection of the garbage collector walks every object a run keeps: what the scheduler
kept per lease after the lease was over (its overheads, worked out once) made each lease of a long
simulation dearer than one of a short one. A slideback tried the change points before the plan's
start one by one; a busy log has many.
"""

from __future__ import annotations

import gc
import types

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler, Reservation, SchedulerConfig

_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def _workload(n: int) -> list[Lease]:
    """``n`` best-effort leases of 1-2 nodes on 4, every 10 s; one in three ends early."""
    return [Lease(i, LeaseKind.BEST_EFFORT, 10 * i, 1 + i % 2, 40, 40 - 30 * (i % 3 == 0),
                  40 - 30 * (i % 3 == 0)) for i in range(n)]


def _tracked_beyond_leases(root: object) -> int:
    """Objects the collector tracks that ``root`` reaches, not counting the leases (the caller's)
    nor what is reached only through them, nor classes, modules and functions."""
    gc.collect()  # as a collection would: tuples of numbers stop being tracked
    seen: set[int] = set()
    todo = list(vars(root).values())
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, (Lease, *_OPAQUE)) or not gc.is_tracked(o):
            continue
        seen.add(id(o))
        todo.extend(gc.get_referents(o))
    return len(seen)


def test_a_finished_lease_leaves_nothing_behind_in_the_scheduler(run_leases):
    small = _tracked_beyond_leases(run_leases(_workload(100), 4))
    big = _tracked_beyond_leases(run_leases(_workload(600), 4))
    # before: 2 per lease (a tuple of its overheads and its per-node request, kept for good)
    assert big - small <= 0.1 * 500


def test_a_slideback_searches_the_change_points_before_the_plan_by_halves(monkeypatch):
    sched = LeaseScheduler(1, config=SchedulerConfig.conservative())
    table = sched.table
    usage = Lease(0, LeaseKind.BEST_EFFORT, 0, 1, 10, 10, 10).per_node
    for i in range(50):  # the node is busy on [10, 510) in 50 pieces, then free until 1000
        other = Lease(100 + i, LeaseKind.BEST_EFFORT, 0, 1, 10, 10, 10)
        table.add(Reservation(other, 10 + 10 * i, 20 + 10 * i, 20 + 10 * i, (0,), usage=usage))
    lease = Lease(1, LeaseKind.BEST_EFFORT, 0, 1, 100, 100, 100)
    vm = sched._place(lease, 1000, 1100, 1100, (0,))
    fits = table.fits
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return fits(*args, **kwargs)

    monkeypatch.setattr(table, "fits", counted)
    sched._slide(vm, 0)
    assert (vm.start, vm.end) == (510, 610) and lease.history[-1] == ("slideback", 510)
    assert len(calls) <= 8  # 52 (every point from 0 to 510) when tried in order
