"""Host failures in the lease scheduler: nodes going down and coming up again
(docs/decisions/host-failures.md).

:func:`nodes_down` and :func:`nodes_up` are :meth:`LeaseScheduler.nodes_down` and
:meth:`LeaseScheduler.nodes_up`, kept here so that the scheduler's module stays about its
schedule. Both are pure functions of the scheduler's state and their arguments (no clock, no I/O,
sets walked in sorted order), so the lease service can journal the calls and replay them after a
crash to the same schedule and the same events.

A node that is down hosts nothing new (:meth:`SlotTable.set_down`); what it held:

* a best-effort lease whose work lives there (a reservation of it running there, or its memory
  state there: suspended and not resumed yet) loses that work: its plan is taken out (what runs of
  it is stopped) and it is queued again with its whole duration, event ``requeue``;
* a best-effort lease that only holds a future reservation there keeps its work: its plan is taken
  out and it is queued again as it is, event ``unschedule``;
* an advance reservation or immediate lease not started is moved to other nodes free for its whole
  window (same times; nothing is preempted for it) where it can be, else it stays where it is; a
  started one stays. One that stays is marked degraded (:attr:`Lease.degraded`), event ``degraded``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from skylease.control.leases.lease import Lease, LeaseKind, LeaseState, Reservation, RRKind

#: The scheduler these functions are the methods of (typed loosely: scheduler.py imports this module)
LeaseScheduler = Any


def nodes_down(s: LeaseScheduler, nodes: Iterable[int], now: int, reason: str) -> None:
    """``nodes`` are down from ``now`` (``reason``: why, kept by the leases degraded by it)."""
    new = sorted(_known(s, nodes) - s.table.down)
    if not new:
        return
    s.table.set_down(new, down=True)
    hit = set(new)
    freed: set[int] = set()  # nodes a running lease left before its plan's end
    placed = sorted(s.rr.values(), key=lambda vm: vm.lease.id)
    for vm in placed:  # best-effort leases first: the nodes they leave are free for the ARs' moves
        if vm.lease.kind is not LeaseKind.BEST_EFFORT:
            continue
        if _work_on(vm) & hit:
            if any(p.state is LeaseState.ACTIVE for p in vm.parts()):
                freed.update(vm.nodes)
            s._unplace(vm, now)
            _restart(s, vm.lease, now)
        elif _holds(vm, hit):
                s._unplace(vm, now)
                vm.lease.state = LeaseState.SUSPENDED if vm.resume is not None else LeaseState.PENDING
                s._emit("unschedule", vm.lease, now)
                s._requeue(vm.lease)
    for lease in list(s.queue):  # suspended and queued: its memory state is on its last nodes
        if lease.state is LeaseState.SUSPENDED and set(lease.last_nodes) & hit:
            s.queue.remove(lease)
            _restart(s, lease, now)
    for vm in placed:
        lease = vm.lease
        if lease.kind is not LeaseKind.BEST_EFFORT and _holds(vm, hit):
            started = any(p.state is not LeaseState.SCHEDULED for p in vm.parts())
            if started or not _move(s, vm):
                if lease.degraded is None:
                    lease.degraded = reason
                s._emit("degraded", lease, now)
    freed -= s.table.down
    if freed and s.config.backfilling:
        s._after_early_end(now, tuple(sorted(freed)))


def nodes_up(s: LeaseScheduler, nodes: Iterable[int], now: int) -> None:
    """``nodes`` are up again from ``now``: their configured capacity is offered again. Nothing
    else changes (``now`` is for the caller's journal and for symmetry with :func:`nodes_down`)."""
    back = sorted(_known(s, nodes) & s.table.down)
    if back:
        s.table.set_down(back, down=False)


def _known(s: LeaseScheduler, nodes: Iterable[int]) -> set[int]:
    """``nodes`` as a set; a node the scheduler does not have is the caller's bug (ValueError)."""
    ks = set(nodes)
    bad = sorted(k for k in ks if not 0 <= k < s.table.n_nodes)
    if bad:
        raise ValueError(f"node {bad[0]} is not one of the scheduler's {s.table.n_nodes} nodes")
    return ks


def _holds(vm: Reservation, hit: set[int]) -> bool:
    """Whether a lease's plan (some part not over) is on one of the nodes ``hit``."""
    return bool(set(vm.nodes) & hit) and any(p.state is not LeaseState.DONE for p in vm.parts())


def _work_on(vm: Reservation) -> set[int]:
    """The nodes a best-effort lease's work lives on: those of a part of its plan under way (the
    VMs, a suspension, a resumption; a migration moves it from its last nodes), or, while it has
    not resumed, where its memory state waits (its last nodes; the new ones once a reserved
    migration is over). A lease that has only its shutdown left has done its work: none."""
    lease = vm.lease
    if vm.state is LeaseState.DONE and vm.suspend is None:
        return set()  # its VMs ended (the shutdown runs): nothing to lose
    work: set[int] = set()
    for p in vm.parts():
        if p.state is LeaseState.ACTIVE:
            work.update(p.nodes)
            if p.kind is RRKind.MIGRATE:
                work.update(lease.last_nodes)
    if vm.resume is not None and vm.resume.state is LeaseState.SCHEDULED:
        moved = vm.migrate is not None and vm.migrate.state is LeaseState.DONE
        work.update(vm.nodes if moved else lease.last_nodes)
    return work


def _restart(s: LeaseScheduler, lease: Lease, now: int) -> None:
    """A best-effort lease lost its work: queued again as if it had never run (its first start
    is kept: it is its history)."""
    lease.remaining = s.config.planned(lease.duration)
    lease.real_remaining = s.config.planned(lease.real_duration)
    lease.last_nodes = ()
    lease.state = LeaseState.PENDING
    s._drop_memos(lease)
    s._emit("requeue", lease, now)
    s._requeue(lease)


def _move(s: LeaseScheduler, vm: Reservation) -> bool:
    """Move an AR (or IM) lease's plan, not started, off the nodes that are down: it keeps its nodes
    that are up and takes, for each node it loses, the free node of lowest id for its whole window
    (same times; nothing preempted); False, and nothing changes, if there are too few, or if its
    image could not be on the new nodes by its start."""
    table = s.table
    keep = [k for k in vm.nodes if k not in table.down]
    lacking = len(vm.nodes) - len(keep)
    a, b = vm.parts()[0].start, vm.final_end
    free = [k for k in table.free_on(a, b, vm.usage) if k not in vm.nodes]
    if len(free) < lacking:
        return False
    new = tuple(sorted([*keep, *free[:lacking]]))
    lease = vm.lease
    if s.config.transfers and lease.start is not None and not s.images.move_ar(lease, vm.nodes, new, b):
        return False
    parts = vm.parts()
    for p in parts:
        table.remove(p)
    for p in parts:
        p.nodes = new
        table.add(p)
    return True
