"""Dask distributed's own adaptive scaling rule, as a baseline that knows nothing of billing.

This reimplements, on the :class:`~skylease.control.env.Environment` protocol, what
``distributed.deploy.Adaptive`` does with its default configuration, following the code of
**distributed 2026.8.0** (the version installed with skylease):

* ``Adaptive`` / ``AdaptiveCore`` (``distributed/deploy/adaptive.py``, ``adaptive_core.py``):
  every ``interval`` (1 s) ``adapt()`` computes ``safe_target()`` (the scheduler's target clipped
  to ``[minimum, maximum]``) and ``recommendations(target)``. The first call comes one interval
  after the start (a tornado ``PeriodicCallback``).
* ``Scheduler.adaptive_target`` (``distributed/scheduler.py``): CPU occupancy of the processing
  and queued tasks, each costed at its prefix's duration estimate, divided by ``target_duration``
  (5 s) and rounded up; capped at the number of tasks ready plus processing ("avoid a few long
  tasks asking for many cores"); at least 1 while tasks wait and no worker is connected. If the
  result is below the number of connected workers, the target is instead the connected workers
  minus those ``Scheduler.workers_to_close()`` would retire (with no data held: the idle ones).
* ``TaskPrefix.add_duration`` / ``Scheduler._get_prefix_duration``: the estimate is
  ``distributed.scheduler.unknown-task-duration`` (500 ms) until a task finishes, then the first
  runtime, then ``0.5 * new + 0.5 * old`` at each completion. A bag is one prefix, so one
  estimate serves every task.
* ``AdaptiveCore.recommendations``: a target above the planned workers scales up at once; a
  target below closes hosts not yet arrived (booting) first, then asks ``workers_to_close``; a
  worker is really closed only once it has been proposed ``wait_count`` (3) consecutive times;
  counts are cleared whenever the target is not below the plan.

Mapping to the Environment: Dask's *plan* / *requested* workers are the live hosts of the pool
(booting included), its *observed* (scheduler-connected) workers are the hosts that are up (idle
or busy). A host that is down counts as not yet arrived.

Simplifications, on purpose:

* One thread per worker, one task at a time (the environment's model): the "divide by average
  nthreads" step is the identity, and Dask's queuing saturation (``ceil(1.1 * nthreads)`` tasks
  assigned per worker) is not modelled; occupancy counts the same tasks either way.
* No memory term (``2 * workers`` when more than 60 % of memory is used): tasks hold no data.
* ``TaskPrefix.add_exec_time`` is ignored: the real scheduler learns from worker heartbeats the
  time executing tasks have run and, once one exceeds twice the average, switches the estimate
  to twice the longest such time; here the estimate only moves when a task completes.
* No network term in the occupancy; durations are not rounded to microseconds.
* ``Scheduler.workers_to_close(target=...)`` would, when asked to close more workers than are
  idle, also retire busy ones (idle first, least data first). That only happens when ``maximum``
  clips the target below the busy count; this baseline **never releases a busy host** (it
  proposes idle hosts only), so no task is ever interrupted by it. Among booting hosts, the most
  recently rented are proposed first (Dask takes them from a ``set``, in no defined order); among
  idle hosts, the most recently rented first (Dask sorts by data held, all zero here).

When no task is pending the policy stops ticking and releases every host, as
:class:`~skylease.control.fixed.FixedPool` does, so a simulation ends.
"""

from __future__ import annotations

import math
from collections import defaultdict

from skylease.control.env import Environment, Handle, HostView, Policy
from skylease.model.host import HostId, HostState
from skylease.model.task import Task

UNKNOWN_TASK_DURATION = 0.5  # distributed.scheduler.unknown-task-duration: 500ms


class DaskAdaptive(Policy):
    """Dask's ``Adaptive`` rule on one pool: a billing-blind, occupancy-driven baseline.

    Parameters mirror ``distributed.deploy.Adaptive`` (seconds instead of timedelta strings):
    ``target_duration`` is the time the queued plus running work should take on the target number
    of hosts, ``interval`` the period of the scaling loop, ``wait_count`` how many consecutive
    ticks a host must be proposed for closing before it is released, ``minimum``/``maximum`` the
    bounds of the target, ``unknown_duration`` the estimate of a task before any has finished.
    """

    def __init__(
        self,
        pool: str | None = None,
        target_duration: float = 5.0,
        interval: float = 1.0,
        wait_count: int = 3,
        minimum: int = 0,
        maximum: int | float = math.inf,
        unknown_duration: float = UNKNOWN_TASK_DURATION,
    ) -> None:
        if not target_duration > 0:
            raise ValueError(f"target_duration must be > 0, got {target_duration!r}")
        if not (interval > 0 and math.isfinite(interval)):
            raise ValueError(f"interval must be > 0 and finite, got {interval!r}")
        if wait_count < 1:
            raise ValueError(f"wait_count must be >= 1, got {wait_count!r}")
        if minimum < 0:
            raise ValueError(f"minimum must be >= 0, got {minimum!r}")
        if not (maximum >= minimum and (isinstance(maximum, int) or math.isinf(maximum))):
            raise ValueError(f"maximum must be an int >= minimum or inf, got {maximum!r}")
        if not unknown_duration >= 0:
            raise ValueError(f"unknown_duration must be >= 0, got {unknown_duration!r}")
        self.pool = pool
        self.target_duration = float(target_duration)
        self.interval = float(interval)
        self.wait_count = wait_count
        self.minimum = minimum
        self.maximum = maximum
        self.unknown_duration = float(unknown_duration)
        self.duration_average = -1.0  # TaskPrefix.duration_average: < 0 means no data yet
        self.close_counts: defaultdict[HostId, int] = defaultdict(int)
        self.log: list[tuple[float, str, int]] = []  # (time, "up"/"down", n) of each action
        self.env: Environment | None = None
        self._pool: str | None = None
        self._timer: Handle | None = None

    # -- callbacks -----------------------------------------------------------------------
    def on_start(self, env: Environment) -> None:
        self.env = env
        self._pool = self.pool if self.pool is not None else env.pools()[0]
        if not self._release_if_done():
            self._timer = env.call_later(self.interval, self._tick)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        self.add_duration(runtime)
        self._release_if_done()

    # -- Dask's estimates ----------------------------------------------------------------
    def add_duration(self, duration: float) -> None:
        """``TaskPrefix.add_duration`` for a "compute" action."""
        duration = max(duration, 0.0)
        old = self.duration_average
        self.duration_average = duration if old < 0 else 0.5 * duration + 0.5 * old

    def task_duration(self) -> float:
        """``Scheduler._get_prefix_duration`` (without the ``add_exec_time`` path)."""
        d = self.duration_average
        return self.unknown_duration if d < 0 else d

    def target(self) -> int:
        """``Scheduler.adaptive_target`` then ``AdaptiveCore.safe_target``."""
        env = self.env
        assert env is not None and self._pool is not None
        workers = [h for h in env.hosts(self._pool) if h.state in (HostState.IDLE, HostState.BUSY)]
        processing = sum(1 for h in workers if h.task is not None)
        queued = env.queued()
        occupancy = (processing + queued) * self.task_duration()
        cpu = math.ceil(occupancy / self.target_duration)
        # avoid a few long tasks asking for many cores
        cpu = min(cpu, queued + processing)
        if queued and not workers:
            cpu = max(1, cpu)
        if cpu >= len(workers):
            n = cpu
        else:  # scale down: Scheduler.workers_to_close() retires the idle workers
            idle = sum(1 for h in workers if h.task is None)
            n = len(workers) - idle
        return int(min(max(n, self.minimum), self.maximum))

    # -- the scaling loop ----------------------------------------------------------------
    def _tick(self) -> None:
        self._timer = None
        if self._release_if_done():
            return
        env = self.env
        assert env is not None
        self.adapt()
        self._timer = env.call_later(self.interval, self._tick)

    def adapt(self) -> None:
        """``AdaptiveCore.adapt``: target, recommendations, then scale up or down."""
        env = self.env
        assert env is not None and self._pool is not None
        target = self.target()
        plan = list(env.hosts(self._pool))
        if target == len(plan):
            self.close_counts.clear()
            return
        if target > len(plan):
            self.close_counts.clear()
            got = env.acquire(self._pool, target - len(plan))
            self.log.append((env.now, "up", len(got)))
            return
        # target < len(plan): booting hosts first, youngest first
        not_arrived = [h for h in plan if h.state in (HostState.BOOTING, HostState.DOWN)]
        not_arrived.sort(key=lambda h: (-h.requested_at, -h.id))
        to_close = [h.id for h in not_arrived[: len(plan) - target]]
        if target < len(plan) - len(to_close):
            to_close += self._workers_to_close(plan, target)
        firmly = []
        for hid in to_close:
            self.close_counts[hid] += 1
            if self.close_counts[hid] >= self.wait_count:
                firmly.append(hid)
        seen = set(to_close)
        for hid in list(self.close_counts):
            if hid in firmly or hid not in seen:
                del self.close_counts[hid]
        for hid in firmly:
            env.release(hid)
        if firmly:
            self.log.append((env.now, "down", len(firmly)))

    def _workers_to_close(self, plan: list[HostView], target: int) -> list[HostId]:
        """``Scheduler.workers_to_close(target=target)`` restricted to idle hosts.

        ``n`` is counted on connected workers, as in Dask; busy hosts are never proposed.
        """
        workers = [h for h in plan if h.state in (HostState.IDLE, HostState.BUSY)]
        n = max(len(workers) - target, 0)
        idle = [h for h in workers if h.state is HostState.IDLE and h.task is None]
        idle.sort(key=lambda h: (-h.requested_at, -h.id))
        return [h.id for h in idle[:n]]

    def _release_if_done(self) -> bool:
        env = self.env
        assert env is not None
        if env.pending() != 0:
            return False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for h in list(env.hosts()):
            env.release(h.id)
        self.close_counts.clear()
        return True

    def __repr__(self) -> str:
        return (f"DaskAdaptive(target_duration={self.target_duration:g}, "
                f"interval={self.interval:g}, wait_count={self.wait_count})")
