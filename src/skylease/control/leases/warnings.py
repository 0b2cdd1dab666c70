"""When is a lease's warning before its end due (issue 40, item 4; docs/decisions/before-end-warnings.md)?

Pure: read from the scheduler's plan of one lease (its current VM reservation), no clock. A lease's
*planned end* is the end of the VM reservation that completes it: its current VM reservation when
no suspension is planned after it (a best-effort lease whose reservation ends in a planned
suspension has no planned end yet: it will run again later). A warning ``before_end`` lease seconds
before that end is due at ``end - before_end``, but not before the reservation starts (a lease
shorter than ``before_end`` is warned at its start). Each planned end is warned once: the caller
keeps which ``(lease, end)`` pairs it gave, so a plan that moves (a preemption, a premature end,
a resumption after a suspension) gets a new warning for its new end, and one that stays does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from skylease.control.leases.lease import LeaseState, Reservation

__all__ = ["Due", "due", "due_at", "planned_end"]

_PLANNED = (LeaseState.SCHEDULED, LeaseState.ACTIVE)


@dataclass(frozen=True)
class Due:
    """A warning: for the planned ``end`` of ``lease``, due at lease time ``at``."""

    lease: int
    end: int
    at: int


def planned_end(vm: Reservation | None) -> int | None:
    """The lease time ``vm``'s lease is planned to end at, or None (no VM reservation, one that ended,
    or one followed by a planned suspension: the lease is not planned to end there)."""
    if vm is None or vm.state not in _PLANNED or vm.suspend is not None:
        return None
    return vm.end


def due(vm: Reservation | None, before_end: int | None) -> Due | None:
    """The warning of ``vm``'s lease, ``before_end`` lease seconds before its planned end (None or 0:
    no warning), or None when it has no planned end."""
    at = due_at(vm, before_end)
    return None if at is None or vm is None else Due(vm.lease.id, vm.end, at)


def due_at(vm: Reservation | None, before_end: int | None) -> int | None:
    """When :func:`due`'s warning is due (its end is ``vm.end``), or None: the same rule without
    making a :class:`Due` (the lease manager asks it of every reservation under way, often)."""
    if not before_end or before_end <= 0 or vm is None or vm.suspend is not None \
            or vm.state not in _PLANNED:
        return None
    at = vm.end - before_end
    return at if at > vm.start else vm.start
