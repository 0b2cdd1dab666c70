"""The simulated cloud's exact outcomes for the built-in policies (and a seeded random script that
rents, releases, duplicates and cancels), pinned by a hash of every record.

The hashes were taken on the simulator before its dispatch moved to ``skylease.control.dispatch``
(commit 4d7b4c3): the move must not change one task start, one host's rent or one float. A change
of behaviour that is meant must update a hash here, and say why in its commit.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from skylease.control.a2ha import A2HA
from skylease.control.dask_rule import DaskAdaptive
from skylease.control.env import Environment, HostView, Policy
from skylease.control.fixed import FixedPool
from skylease.control.scheduled import ScheduledPool
from skylease.model.instance import InstanceType
from skylease.model.task import Task
from skylease.sim.env import SimResult, simulate

CLOUD = InstanceType("cloud", price=1.0, billing_unit=3600.0, boot_time=300.0)
FAST = InstanceType("fast", speed=2.0, price=3.0, billing_unit=600.0, boot_time=60.0, max_count=4)


def _bag(seed: int, n: int, arrivals: bool = False) -> list[Task]:
    rng = np.random.default_rng(seed)
    works = rng.gamma(2.0, 300.0, n)
    times = np.sort(rng.uniform(0, 3000, n)) if arrivals else np.zeros(n)
    return [Task(i, float(w), float(a)) for i, (w, a) in enumerate(zip(works, times, strict=True))]


class Chaos(Policy):
    """Seeded random decisions every 97 s: rent, release (busy hosts too), duplicate, cancel."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.env: Environment | None = None
        self.ids: list[int] = []

    def on_start(self, env: Environment) -> None:
        self.env = env
        env.acquire("cloud", 2)
        env.call_later(97.0, self.tick)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        self.ids.append(task.id)

    def tick(self) -> None:
        env = self.env
        assert env is not None
        r = self.rng.integers(0, 6)
        live = list(env.hosts())
        if r == 0:
            env.acquire(str(self.rng.choice(["cloud", "fast"])), int(self.rng.integers(1, 3)))
        elif r == 1 and live:
            env.release(live[int(self.rng.integers(0, len(live)))].id)
        elif r in (2, 3):
            busy = [h for h in live if h.task is not None]
            if busy:
                h = busy[int(self.rng.integers(0, len(busy)))]
                env.duplicate(h.task, str(self.rng.choice(["cloud", "fast"])))
        elif r == 4 and self.rng.random() < 0.3:
            env.cancel(int(self.rng.integers(0, 60)))
        if not env.hosts():
            env.acquire("cloud")
        env.call_later(97.0, self.tick)


def fingerprint(res: SimResult) -> str:
    rows = [repr(sorted(res.summary().items())), repr(res.unfinished), repr(res.end_time), repr(res.makespan)]
    rows += [repr((r.task, r.host, r.pool, r.start, r.end)) for r in res.records]
    rows += [repr((h.id, h.pool, h.requested_at, h.up_at, h.released_at)) for h in res.host_table]
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


CASES = {
    "a2ha-conservative": (lambda: A2HA.preset("conservative"), [CLOUD], _bag(1, 200), "random", 3),
    "a2ha-aggressive-budget": (lambda: A2HA.preset("aggressive", budget=30.0), [CLOUD], _bag(2, 200),
                               "random", 4),
    "a2ha-arrivals": (lambda: A2HA(initial_hosts=2), [CLOUD], _bag(3, 150, arrivals=True), "fifo", 0),
    "fixed": (lambda: FixedPool(7), [CLOUD], _bag(4, 120), "fifo", 0),
    "dask-adaptive": (lambda: DaskAdaptive(), [CLOUD], _bag(5, 150), "random", 5),
    "scheduled-two-pools": (lambda: ScheduledPool({"cloud": [(0.0, 2), (2000.0, 5), (6000.0, 1)],
                                                   "fast": [(500.0, 3), (4000.0, 0)]}),
                            [CLOUD, FAST], _bag(6, 120), "fifo", 0),
    "chaos": (lambda: Chaos(7), [CLOUD, FAST], _bag(7, 60), "fifo", 0),
    "chaos-arrivals": (lambda: Chaos(8), [CLOUD, FAST], _bag(8, 60, arrivals=True), "fifo", 0),
}

EXPECTED = {
    "a2ha-conservative": "3546a9c0a5f56639",
    "a2ha-aggressive-budget": "076b77b6f89966ee",
    "a2ha-arrivals": "97c2352dc6565e27",
    "fixed": "f2327835dd442c69",
    "dask-adaptive": "49421a6bea09438c",
    "scheduled-two-pools": "546120cdaad020b2",
    "chaos": "7d51f4b88b0581fa",
    "chaos-arrivals": "11e177ecd3b762dc",
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_simulated_outcomes_are_those_of_before_the_dispatch_core(name: str) -> None:
    make, pools, bag, order, seed = CASES[name]
    res = simulate(make(), bag, pools, order=order, seed=seed, horizon=30 * 86400.0)
    assert res.tasks == len(bag)
    assert fingerprint(res) == EXPECTED[name]
