"""Fixtures of the control-layer tests."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest

from skylease.control.leases import Enactment, Lease, LeaseScheduler, SchedulerConfig


def _drive(leases: Sequence[Lease], n_nodes: int, config: SchedulerConfig | None = None,
           enactment: Enactment | None = None) -> LeaseScheduler:
    """Submit arrivals, step, jump to the next event, until the best-effort work is done."""
    sched = LeaseScheduler(n_nodes, config=config, enactment=enactment)
    order = sorted(leases, key=lambda le: (le.submit, le.id))
    i, now = 0, 0
    while True:
        while i < len(order) and order[i].submit <= now:
            sched.submit(order[i])
            i += 1
        sched.step(now)
        if not sched.busy and i == len(order):
            return sched
        now = int(min(sched.next_event(now), order[i].submit if i < len(order) else math.inf))


@pytest.fixture
def run_leases() -> Callable[..., LeaseScheduler]:
    """Drive the lease scheduler alone, as an enactment would."""
    return _drive
