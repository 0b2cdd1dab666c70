"""The simplest provisioning policy: rent a fixed number of hosts, give them back when done."""

from __future__ import annotations

from skylease.control.env import Environment, HostView, Policy
from skylease.model.task import Task


class FixedPool(Policy):
    """Rent ``n`` hosts of ``pool`` at the start; release them all once no task is pending.

    A reference point for every adaptive policy (A2HA, Dask's adaptive rule): what a user gets
    who guesses the pool size up front.
    """

    def __init__(self, n: int, pool: str | None = None) -> None:
        if n < 1:
            raise ValueError(f"FixedPool needs n >= 1 hosts, got {n}")
        self.n = n
        self.pool = pool
        self.env: Environment | None = None

    def on_start(self, env: Environment) -> None:
        self.env = env
        pool = self.pool if self.pool is not None else env.pools()[0]
        env.acquire(pool, self.n)
        self._release_if_done()

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        self._release_if_done()

    def _release_if_done(self) -> None:
        env = self.env
        assert env is not None
        if env.pending() == 0:
            for h in list(env.hosts()):
                env.release(h.id)

    def __repr__(self) -> str:
        return f"FixedPool({self.n})"
