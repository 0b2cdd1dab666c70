"""A policy that follows a provisioning plan: so many hosts of each pool from each moment on.

Offline planners (the ILP provisioning models, the naive and incremental baselines) decide host
counts per phase or per interval; replaying such a plan through the Environment protocol shows
what it really costs and how long it really takes, with boot delays, billing units and whole
tasks instead of the planner's fluid model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from skylease.control.env import Environment, Policy
from skylease.model.host import HostState


class ScheduledPool(Policy):
    """Keep ``schedule[pool]`` hosts alive: a step function given as ``[(time, count), ...]``.

    At each step time the pool grows (rent) or shrinks (release idle hosts first, then the
    youngest busy ones, whose tasks go back to the queue). After the last step the count stays.
    When no task is pending, every host is released.

    With ``drain=True`` a busy host that must go first finishes its task if that happens within
    the billing unit it has already paid for, and is released at the end of that unit otherwise:
    the bill is the same as stopping it at once, and less work is thrown away.
    """

    def __init__(self, schedule: Mapping[str, Sequence[tuple[float, int]]], *,
                 drain: bool = False) -> None:
        for pool, steps in schedule.items():
            times = [t for t, _ in steps]
            if times != sorted(times) or any(c < 0 for _, c in steps):
                raise ValueError(f"schedule of {pool!r} must be time-sorted with counts >= 0")
        self.schedule = {p: list(s) for p, s in schedule.items()}
        self.drain = drain
        self.draining: set[int] = set()
        self.env: Environment | None = None

    def on_start(self, env: Environment) -> None:
        self.env = env
        for pool, steps in self.schedule.items():
            for t, count in steps:
                if t <= env.now:
                    self._set(pool, count)
                else:
                    env.call_at(t, self._set, pool, count)

    def _set(self, pool: str, count: int) -> None:
        env = self.env
        assert env is not None
        if env.pending() == 0:
            return
        live = [h for h in env.hosts(pool) if h.id not in self.draining]
        if len(live) < count:
            env.acquire(pool, count - len(live))
            return
        # shrink: idle or booting hosts cost nothing to stop; busy ones lose their running task
        rank = {HostState.IDLE: 0, HostState.BOOTING: 1, HostState.DOWN: 1, HostState.BUSY: 2}
        victims = sorted(live, key=lambda h: (rank[h.state], -h.requested_at, -h.id))
        for h in victims[: len(live) - count]:
            until = h.charged_until(env.now)
            if self.drain and h.state is HostState.BUSY and until > env.now:
                self.draining.add(h.id)
                env.call_at(until, self._stop, h.id)
            else:
                env.release(h.id)

    def _stop(self, host: int) -> None:
        if host in self.draining:
            self.draining.discard(host)
            assert self.env is not None
            self.env.release(host)

    def on_task_done(self, task, host, runtime) -> None:  # type: ignore[no-untyped-def]
        env = self.env
        assert env is not None
        if host.id in self.draining:  # called before the host is given more work
            self._stop(host.id)
        if env.pending() == 0:
            for h in list(env.hosts()):
                env.release(h.id)
