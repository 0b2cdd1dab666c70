"""A lease simulation's garbage collections do not walk what existed before the run (issue 25,
item 5; docs/performance.md, "Scaling"): a long run triggered full collections of the whole
process (modules, the input leases), a short one none, and the cost per lease grew with the run.
(The kernel now pauses the collector while it fires events, tests/sim/test_kernel_collector.py:
what is left is the run's setup around it.)"""

from __future__ import annotations

import gc

import pytest

from skylease.control.leases import Lease, LeaseKind
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


@pytest.mark.integration  # 3,000 leases simulated, 10-17 s: CI's second level
def test_a_run_leaves_what_existed_before_it_to_the_collector_frozen(collections):
    assert gc.get_freeze_count() == 0
    leases = _leases(3_000)
    before = len(gc.get_objects())
    collections.clear()
    simulate_leases(leases, 4)
    during = list(collections)
    assert all(frozen >= before for _, frozen in during)  # before: 0 frozen
    assert gc.get_freeze_count() == 0  # given back at the end
    gc.collect()
    assert collections[-1] == (2, 0)


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
