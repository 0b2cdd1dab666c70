"""Idle-lease reclaim, the fairness rule ``idle_reclaim`` (issue 40, item 5;
docs/decisions/fairness-rules.md).

A lease whose work has stopped while it still holds its nodes (a forgotten reservation, a payload
waiting on nothing) is ended by the site after ``idle_reclaim`` lease seconds of idleness, as a
testbed's reaper ends it. What "idle" means is the clock's: the lease service samples the CPU its
payloads use (idle: below ``idle_cpu`` of the cores the lease holds, over a whole sampling
interval), the simulator reads it off the workload (a lease's ``idle_after``: the lease seconds of
work after which it holds its nodes idle). :class:`IdleWatch` is what both do with those
observations: when each lease became idle, and when it is due to be reclaimed. The reclaim itself
is the scheduler's premature end (the lease's work ended then: the nodes go to the leases planned
after it), with the rule's reason kept on the lease.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from skylease.model.units import clock

__all__ = ["IdleReclaim", "IdleWatch"]


@dataclass(frozen=True)
class IdleReclaim:
    """The rule: a lease idle for ``after`` lease seconds (its payloads below ``cpu`` of the cores
    it holds) is ended."""

    after: int
    cpu: float = 0.05

    def __post_init__(self) -> None:
        if self.after < 1:
            raise ValueError("idle_reclaim: must be at least 1 s")
        if not 0.0 < self.cpu < 1.0:
            raise ValueError(f"idle_cpu: must be between 0 and 1, got {self.cpu:g}")

    def reason(self, since: int) -> str:
        """What the lease's record says of its reclaim (its rule's name first, as a refusal's)."""
        return f"idle_reclaim: idle from {clock(since)} for {clock(self.after)} (below {self.cpu:.0%} CPU)"


@dataclass
class IdleWatch:
    """Each running lease's idleness as observed (lease time): :meth:`busy` and :meth:`idle`
    observations in time order, :meth:`due` the leases idle long enough. A lease that stops running
    (suspended, over) is :meth:`forget`-ed: its idleness counts again from its next run."""

    rule: IdleReclaim
    since: dict[int, int] = field(default_factory=dict)  # lease -> when it became idle

    def busy(self, lease: int) -> None:
        """The lease worked: it is not idle (any more)."""
        self.since.pop(lease, None)

    def idle(self, lease: int, since: int) -> None:
        """The lease has been idle from ``since`` (kept when it was idle already: the earlier)."""
        self.since.setdefault(lease, since)

    def forget(self, lease: int) -> None:
        self.since.pop(lease, None)

    def due(self, now: int) -> list[tuple[int, int]]:
        """The leases idle for the rule's time by ``now``: (lease, idle since), in lease order."""
        return sorted((lid, s) for lid, s in self.since.items() if s + self.rule.after <= now)

    def next_due(self) -> float:
        """The earliest time a lease idle now falls due (infinity: none is idle)."""
        return min((s + self.rule.after for s in self.since.values()), default=math.inf)
