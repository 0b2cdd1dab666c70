"""Leases and their resource reservations (spec 001 §1, §4): the lease manager's data model.

Times are integer seconds from the start of the simulation (spec 001 §12-P). A best-effort (BE)
lease carries two durations: the requested one, which the scheduler plans with, and the actual
one (at most the requested), which the simulator learns only when the lease ends early.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class LeaseKind(StrEnum):
    BEST_EFFORT = "BE"
    ADVANCE_RESERVATION = "AR"
    IMMEDIATE = "IM"


class LeaseState(StrEnum):
    PENDING = "pending"
    SCHEDULED = "scheduled"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    DONE = "done"
    REJECTED = "rejected"


@dataclass(eq=False)
class Lease:
    """One lease request and what happened to it."""

    id: int
    kind: LeaseKind
    submit: int
    nodes: int
    duration: int  # requested (maximum) duration, overheads included
    real_duration: int  # actual duration (<= duration), overheads included
    dedicated: int  # run time on a dedicated physical machine (bounded slowdown)
    start: int | None = None  # AR: the exact start requested
    cpu: int = 1
    memory: int = 1024
    image: str | None = None
    image_size: int = 0
    preemptible: bool = True
    state: LeaseState = LeaseState.PENDING
    first_start: int | None = None
    end: int | None = None
    history: list[tuple[str, int]] = field(default_factory=list)  # (event, time)

    @property
    def wait(self) -> int | None:
        return None if self.first_start is None else self.first_start - self.submit

    def bounded_slowdown(self, bound: int = 10) -> float | None:
        """``(t_e - t_a) / max(t_u, bound)`` with ``t_u`` the dedicated run time (spec 001 §9)."""
        if self.end is None:
            return None
        return (self.end - self.submit) / max(self.dedicated, bound)


@dataclass(eq=False)
class Reservation:
    """A VM resource reservation (RR) of a lease on a set of nodes, ``[start, end)``.

    ``end`` is planned from the requested duration; ``real_end`` (<= ``end``) is when the lease
    actually ends. ``backfill`` marks the one future reservation aggressive backfilling allows.
    """

    lease: Lease
    start: int
    end: int
    real_end: int
    nodes: tuple[int, ...]
    backfill: bool = False
    state: LeaseState = LeaseState.SCHEDULED

    def overlaps(self, a: int, b: int) -> bool:
        """Whether the reservation occupies some of ``[a, b)``."""
        return self.start < b and self.end > a
