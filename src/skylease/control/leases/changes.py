"""Changes to a lease (issue 40, item 2; docs/decisions/lease-extensions.md): a later end, asked for
by the lease's owner, within the site's :class:`ExtensionRules`, re-planned on a
:class:`~skylease.control.leases.scheduler.LeaseScheduler` as a new lease would be, with the
scheduler's own primitives (its slot table's ``reschedule``, ``_unplace``, ``_requeue``, ``_preempt``,
``_emit``): :func:`extend` is to changes what :func:`~skylease.control.leases.offers.offer` is to
dry runs, a function over the scheduler (the scheduler cannot import this module: it asks
offers.py, which imports the scheduler).

* An advance reservation or an immediate lease keeps its nodes: its VM reservation (and the
  shutdown after it) is extended where its nodes are free from its old end to the new end. Nothing
  is preempted for it (an extension is a late change: it takes what is free, no one's plan moves).
  Refused otherwise, with the latest end that fits on its nodes now (``latest_end``) and, for an
  advance reservation not started yet, the earliest start at which a reservation of its new length
  would fit (:func:`~skylease.control.leases.offers.offer`, its own plan left out).
* A best-effort lease gets more to run. Queued: its remaining time grows (the queue plans it so).
  Planned and stopping by a suspension: its next resumption is planned from what is left (more).
  Planned to finish: its reservation is extended where its nodes are free; where they are not, one
  that has not started is planned again from scratch (unscheduled, then fitted or queued as a new
  lease), and one that runs is suspended to be off its nodes by its old end and queued again (the
  rule of a best-effort lease that cannot finish: :meth:`LeaseScheduler._preempt`), or refused when
  the configuration does not suspend (that would lose its work).

A change is deterministic (the journal replays it): the same call on the same scheduler makes the
same plan and the same events. The rules are checked once, when the change is asked
(:func:`check_rules`); a replayed change is applied without them (the rules of a later start may
differ, and what was accepted stays accepted).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skylease.control.leases.fairness import OwnerHistory, admission
from skylease.control.leases.lease import Lease, LeaseKind, LeaseState, Reservation
from skylease.control.leases.offers import offer

if TYPE_CHECKING:
    from skylease.control.leases.scheduler import LeaseScheduler

__all__ = ["Change", "ExtensionRules", "check_rules", "current_end", "extend", "extensions_of"]

#: The event a change adds to the lease's history (its ``at``: the new end).
EXTENDED = "extended"
_OVER = (LeaseState.DONE, LeaseState.REJECTED, LeaseState.CANCELLED)


@dataclass(frozen=True)
class ExtensionRules:
    """A site's rules for extensions (None: no limit). ``max_duration``: the most a lease may last
    in all (its requested duration plus its extensions, lease seconds); ``extend_within``: an
    extension is accepted only in the last that many seconds before the lease's end (as Chameleon's
    Blazar allows); ``max_extensions``: the most extensions one lease may have."""

    max_duration: int | None = None
    extend_within: int | None = None
    max_extensions: int | None = None


@dataclass(frozen=True)
class Change:
    """What came of an extension: ``accepted``, the lease's ``old_end`` and ``new_end`` (None for a
    best-effort lease with no end planned yet), and when refused the ``reason``, the latest end
    that fits now (``latest_end``, None when none later than its end does) and, for an advance
    reservation not started, the earliest start that fits its new length (``earliest_start``)."""

    accepted: bool
    old_end: int | None
    new_end: int | None
    reason: str | None = None
    latest_end: int | None = None
    earliest_start: int | None = None


def extensions_of(lease: Lease) -> int:
    """How many extensions the lease was given (its history's ``extended`` events)."""
    return sum(1 for what, _ in lease.history if what == EXTENDED)


def current_end(sched: LeaseScheduler, lease: Lease) -> int | None:
    """When the lease leaves its nodes as planned now (its shutdown's end, where it has one), or
    None when that is not known: queued, or planned to stop by a suspension and resume later."""
    vm = sched.rr.get(lease.id)
    if vm is None or vm.suspend is not None:
        return None
    return vm.final_end


def check_rules(sched: LeaseScheduler, lease: Lease, seconds: int, now: int,
                rules: ExtensionRules) -> Change | None:
    """The refusal of extending ``lease`` by ``seconds`` at ``now`` under ``rules``, or None."""
    end = current_end(sched, lease)
    if lease.state in _OVER:
        return Change(False, end, None, f"lease {lease.id} is already {lease.state.value}")
    if rules.max_extensions is not None and extensions_of(lease) >= rules.max_extensions:
        return Change(False, end, None, f"lease {lease.id} was extended {extensions_of(lease)} time(s); "
                                        f"the site allows {rules.max_extensions}")
    if rules.max_duration is not None and lease.duration + seconds > rules.max_duration:
        room = rules.max_duration - lease.duration
        latest = end + room if end is not None and room > 0 else None
        return Change(False, end, None, f"lease {lease.id} would last {lease.duration + seconds} s in all; "
                                        f"the site allows {rules.max_duration} s", latest_end=latest)
    if rules.extend_within is not None and end is not None and now < end - rules.extend_within:
        within = rules.extend_within
        return Change(False, end, None, f"the site allows extensions only in the last {within} s of a "
                                        f"lease: from lease time {end - within}")
    why = admission_when_longer(sched, lease, seconds, now)
    if why is not None:
        return Change(False, end, None, f"the admission policy refuses lease {lease.id} at its new length: "
                                        f"{why}")
    return None


def admission_when_longer(sched: LeaseScheduler, lease: Lease, seconds: int, now: int) -> str | None:
    """The admission policy's say on ``lease`` as if it were asked for now ``seconds`` longer, with
    its owner's other leases as the history: a fairness rule (``max_duration``, ``node_hours``,
    ``min_gap``) cannot be passed by asking for a short lease and extending it. Asked when the change
    is asked, not at a replay, like the site's rules."""
    longer = copy.copy(lease)
    longer.duration += seconds
    longer.remaining += seconds
    others = [le for le in sched._owned.get(lease.owner, ()) if le.id != lease.id]
    return admission(sched.config.admission, longer, now,
                     lambda: OwnerHistory(lease.owner, others, sched.rr, now))


def extend(sched: LeaseScheduler, lease_id: int, seconds: int, now: int) -> Change:
    """Extend the lease ``lease_id`` of ``sched`` by ``seconds`` (> 0) at ``now`` as the module
    says; the scheduler's table changes only when the change is accepted. Call
    :meth:`LeaseScheduler.step` at ``now`` after an accepted change (a lease queued again is
    scheduled by a step)."""
    lease = sched.lease(lease_id)
    end = current_end(sched, lease)
    if lease.state in _OVER:
        return Change(False, end, None, f"lease {lease.id} is already {lease.state.value}")
    if seconds <= 0:
        return Change(False, end, None, "an extension must make the lease end later")
    vm = sched.rr.get(lease.id)
    if vm is None or vm.suspend is not None:  # queued, or its next run is planned from remaining
        if lease.kind is not LeaseKind.BEST_EFFORT:  # (an AR or IM lease always has its plan)
            return Change(False, end, None, f"lease {lease.id} has no reservation to extend")
        _grow(sched, lease, seconds)
        return _accepted(sched, lease, end, None, now)
    assert end is not None
    if _stretch(sched, vm, seconds):
        _grow(sched, lease, seconds)
        return _accepted(sched, lease, end, end + seconds, now)
    if lease.kind is LeaseKind.BEST_EFFORT:
        return _replan_be(sched, vm, seconds, end, now)
    return Change(False, end, None, f"lease {lease.id}'s nodes are not free until lease time {end + seconds}",
                  latest_end=_latest_end(sched, vm), earliest_start=_earliest_start(sched, vm, seconds, now))


def _grow(sched: LeaseScheduler, lease: Lease, seconds: int) -> None:
    """The lease asks for ``seconds`` more: its duration, and what is left to run (its real work
    too when it works its whole time)."""
    if lease.real_duration == lease.duration:
        lease.real_duration += seconds
        lease.real_remaining += seconds
    lease.duration += seconds
    lease.remaining += seconds
    sched._stale.pop(lease.id, None)  # (its last failed fit asked for less)


def _accepted(sched: LeaseScheduler, lease: Lease, old: int | None, new: int | None, now: int) -> Change:
    sched._emit(EXTENDED, lease, now if new is None else new)
    return Change(True, old, new)


def _stretch(sched: LeaseScheduler, vm: Reservation, seconds: int) -> bool:
    """Move the end of ``vm`` (and its shutdown) ``seconds`` later where its nodes are free; False,
    with nothing changed, where they are not. Its work's end moves too when it works to its end."""
    moved: list[Reservation] = []
    table = sched.table
    try:
        for part in (vm.shutdown, vm):  # (the shutdown first: out of the extended VM's way)
            if part is None:
                continue
            start = part.start if part is vm else part.start + seconds
            real_end = part.real_end + seconds if part.real_end == part.end else part.real_end
            table.reschedule(part, start, part.end + seconds, real_end)
            moved.append(part)
    except ValueError:
        for part in moved:
            start = part.start if part is vm else part.start - seconds
            real_end = part.real_end - seconds if part.real_end == part.end else part.real_end
            table.reschedule(part, start, part.end - seconds, real_end)
        return False
    return True


def _latest_end(sched: LeaseScheduler, vm: Reservation) -> int | None:
    """The latest end its nodes are free until, its own plan aside (None: no later end than now's)."""
    end = vm.final_end
    mine = {id(p) for p in vm.parts()}
    until = float("inf")
    for k in set(vm.nodes):
        need = vm.usage
        for _ in range(vm.nodes.count(k) - 1):  # (VMs of one lease may share a node)
            need = need.plus(vm.usage)
        until = min(until, sched.table.free_until(k, end, need, skip=lambda rr: id(rr) in mine))
    return int(until) if end < until < float("inf") else None


def _earliest_start(sched: LeaseScheduler, vm: Reservation, seconds: int, now: int) -> int | None:
    """For an advance reservation not started: the earliest start from its own on at which an
    advance reservation of its new length would be admitted, its own plan taken out of the table
    while it is asked (and put back as it was)."""
    lease = vm.lease
    if lease.kind is not LeaseKind.ADVANCE_RESERVATION or vm.state is not LeaseState.SCHEDULED:
        return None
    parts = [p for p in vm.parts() if p.state is LeaseState.SCHEDULED]
    for p in parts:
        sched.table.remove(p)
    try:
        o = offer(sched, lease.nodes, lease.per_node, lease.duration + seconds, now, lease.start)
    finally:
        for p in parts:
            sched.table.add(p)
    return o.earliest_start


def _replan_be(sched: LeaseScheduler, vm: Reservation, seconds: int, end: int, now: int) -> Change:
    """A best-effort lease whose nodes are not free after its plan: planned again from scratch if
    it has not started, else suspended by its old end and queued again (or refused, when the
    configuration does not suspend or the suspension does not fit before its old end)."""
    lease = vm.lease
    # (not started; a resumption under way is a run begun: the next case)
    if vm.state is LeaseState.SCHEDULED and (vm.resume is None or vm.resume.state is LeaseState.SCHEDULED):
        sched._unplace(vm, now)
        lease.state = LeaseState.SUSPENDED if vm.resume is not None else LeaseState.PENDING
        _grow(sched, lease, seconds)
        sched._emit("unschedule", lease, now)
        sched._requeue(lease)
        return _accepted(sched, lease, end, None, now)
    cfg = sched.config
    # (the condition of _preempt's suspension: never its other branch, which would lose the work)
    if (vm.state is LeaseState.ACTIVE and cfg.suspension and end - vm.start >= sched._preempt_threshold(lease)
            and end - cfg.suspend_s(lease, vm.nodes) >= max(now, vm.start + 1)):
        sched._preempt(vm, end, now)  # off its nodes by its old end (its shutdown's), as for an AR there
        _grow(sched, lease, seconds)
        return _accepted(sched, lease, end, None, now)
    return Change(False, end, None, f"lease {lease.id}'s nodes are not free until lease time {end + seconds} "
                                    "and it cannot be suspended to run later",
                  latest_end=_latest_end(sched, vm))
