"""A lease simulation's garbage collections do not walk the whole process (issue 25, item 5;
docs/performance.md, "Scaling"): a long run triggered full collections of everything (modules, the
input leases), a short one none, and the cost per lease grew with the run. The kernel pauses the
collector while it fires events (tests/sim/test_kernel_collector.py); what is left, the run's setup
around it, must not reach a full collection either."""

from __future__ import annotations

import gc
from typing import ClassVar

import pytest

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler
from skylease.sim.leases import simulate_leases


def _leases(n: int) -> list[Lease]:
    return [Lease(i, LeaseKind.BEST_EFFORT, 10 * i, 1 + i % 2, 40, 40 - 30 * (i % 3 == 0),
                  40 - 30 * (i % 3 == 0)) for i in range(n)]


@pytest.fixture
def collections():
    """(generation, objects frozen) at each collection while the fixture is active."""
    seen: list[tuple[int, int]] = []

    def cb(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append((info["generation"], gc.get_freeze_count()))

    gc.callbacks.append(cb)
    yield seen
    gc.callbacks.remove(cb)


class _Watched(LeaseScheduler):
    """The scheduler, noting whether the collector was on at each of its steps."""

    steps: ClassVar[list[bool]] = []

    def step(self, now: int) -> None:
        self.steps.append(gc.isenabled())
        super().step(now)


def test_the_schedulers_steps_run_with_the_collector_paused_and_it_is_given_back(collections):
    _Watched.steps = []
    gc.collect()  # (what earlier tests left is not this run's)
    collections.clear()
    simulate_leases(_leases(3_000), 4, scheduler=_Watched)
    assert len(_Watched.steps) > 3_000 and not any(_Watched.steps)
    assert [g for g, _ in collections if g == 2] == [], collections  # no full collection
    assert gc.isenabled()


def test_a_run_leaves_a_frozen_heap_as_it_was(collections):
    gc.freeze()  # as a fork server does before it forks
    try:
        leases = _leases(1_000)
        frozen = gc.get_freeze_count()
        collections.clear()
        simulate_leases(leases, 4)
        assert all(f == frozen for _, f in collections) and gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
