"""The simulated Environment: pools of rentable hosts with boot delay and per-unit billing.

A bag of tasks runs on hosts rented from one or more pools (each pool is one instance type). The
policy rents and releases hosts; the environment dispatches queued tasks FIFO to idle hosts, runs
them for ``work / speed`` seconds, and bills every host by the started units of its lifetime
(from the rent request, boot included, to release). See :mod:`skylease.control.env` for the
semantics shared with the real runtime.

Dispatch itself (queues, copies, requeue at the head, first result wins, idle after dispatch) is
:class:`skylease.control.dispatch.Dispatch`, shared with the real environment: this module keeps the
simulated clock, boots, task run times and billing.

The experiment ends when no task is pending (hosts still alive are then released and charged
their started units, as decision A25 in docs/decisions/a2ha.md does), when the policy calls
``finish``, or at the horizon; tasks not done by then are reported as unfinished, never dropped silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skylease.control.dispatch import Dispatch
from skylease.control.env import Policy
from skylease.model.host import Host, HostId, HostState
from skylease.model.instance import InstanceType
from skylease.model.task import Bag, Task
from skylease.sim.kernel import Kernel, Timer

DEFAULT_HORIZON = 365 * 86400.0


class PolicyTimer:
    """Handle of a policy's timer (two kernel hops; see :meth:`SimEnvironment.call_at`)."""

    __slots__ = ("args", "cancelled", "first", "fn")

    def __init__(self, fn: Callable[..., Any], args: tuple) -> None:
        self.fn = fn
        self.args = args
        self.cancelled = False
        self.first: Timer | None = None

    def cancel(self) -> None:
        self.cancelled = True
        if self.first is not None:
            self.first.cancel()


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One completed run of a task (the winning copy)."""

    task: int
    host: HostId
    pool: str
    start: float
    end: float


@dataclass(frozen=True)
class SimResult:
    """What one simulated run produced."""

    makespan: float
    cost: float
    charged_units: int
    hosts: int
    peak_hosts: int
    tasks: int
    done: int
    cancelled: int
    unfinished: tuple[int, ...]
    interrupted: int
    wasted_s: float
    events: int
    end_time: float
    records: tuple[TaskRecord, ...] = field(repr=False)
    host_table: tuple[Host, ...] = field(repr=False)

    def summary(self) -> dict[str, Any]:
        """One flat row for campaign tables."""
        return {
            "makespan_s": self.makespan,
            "cost": self.cost,
            "charged_units": self.charged_units,
            "hosts": self.hosts,
            "peak_hosts": self.peak_hosts,
            "tasks": self.tasks,
            "done": self.done,
            "cancelled": self.cancelled,
            "unfinished": len(self.unfinished),
            "interrupted": self.interrupted,
            "wasted_s": self.wasted_s,
            "events": self.events,
        }


class SimEnvironment:
    """An :class:`~skylease.control.env.Environment` on the discrete-event kernel."""

    def __init__(
        self,
        pools: Sequence[InstanceType] | Mapping[str, InstanceType],
        policy: Policy | None = None,
        kernel: Kernel | None = None,
    ) -> None:
        if isinstance(pools, Mapping):
            self._pools = dict(pools)
        else:
            self._pools = {t.name: t for t in pools}
            if len(self._pools) != len(pools):
                raise ValueError("pool names (instance type names) must be unique")
        if not self._pools:
            raise ValueError("at least one pool is needed")
        self.kernel = kernel if kernel is not None else Kernel()
        self.policy = policy if policy is not None else Policy()
        self._hosts: list[Host] = []
        self._live: dict[HostId, Host] = {}
        self._live_count = dict.fromkeys(self._pools, 0)
        self._epoch: list[int] = []  # per host: bumps on interrupt/release, stale events check it
        self._speed: list[float] = []  # per host: its pool's speed unless set_speed changed it
        self._tasks: dict[int, Task] = {}
        self.dispatch = Dispatch(self._pools, self._start, lambda h: self.policy.on_host_idle(h))
        self._closed = self.dispatch.closed  # done or cancelled
        self._done = 0
        self._cancelled = 0
        self._records: list[TaskRecord] = []
        self._released_costs: list[float] = []
        self._peak = 0
        self._interrupted = 0
        self._wasted = 0.0
        self._last_done = 0.0
        self._finished = False
        self._end_time: float | None = None

    # -- clock ------------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self.kernel.now

    def call_at(self, t: float, fn: Callable[..., Any], *args: Any) -> PolicyTimer:
        """A policy timer. It runs after every event already due at ``t`` (task completions,
        hosts coming up), so a policy acting at t sees the world as it is at t."""
        timer = PolicyTimer(fn, args)
        timer.first = self.kernel.call_at(t, self._second_hop, timer)
        return timer

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> PolicyTimer:
        return self.call_at(self.kernel.now + delay, fn, *args)

    def _second_hop(self, timer: PolicyTimer) -> None:
        self.kernel.schedule(self.kernel.now, self._fire, timer)

    def _fire(self, timer: PolicyTimer) -> None:
        if not self._finished and not timer.cancelled:
            timer.cancelled = True  # spent
            timer.fn(*timer.args)

    # -- hosts ------------------------------------------------------------------------------
    def pools(self) -> list[str]:
        return list(self._pools)

    def pool_type(self, pool: str) -> InstanceType:
        return self._pool(pool)

    def acquire(self, pool: str, n: int = 1) -> list[HostId]:
        itype = self._pool(pool)
        if n < 0:
            raise ValueError(f"cannot acquire {n} hosts")
        if self._finished:
            return []
        if itype.max_count is not None:
            n = min(n, itype.max_count - self._live_count[pool])
        now = self.kernel.now
        ids = []
        for _ in range(max(n, 0)):
            hid = len(self._hosts)
            host = Host(hid, pool, itype, requested_at=now)
            self._hosts.append(host)
            self._epoch.append(0)
            self._speed.append(itype.speed)
            self._live[hid] = host
            self.kernel.schedule(now + itype.boot_time, self._host_up, hid, 0)
            ids.append(hid)
        self._live_count[pool] += len(ids)
        self._peak = max(self._peak, len(self._live))
        return ids

    def release(self, host: HostId) -> None:
        h = self._live.get(host)
        if h is None:
            return  # already released: releasing twice is harmless
        if h.state is HostState.BUSY:
            self._interrupt(h, requeue=True)
        self._epoch[host] += 1
        h.state = HostState.RELEASED
        h.released_at = self.kernel.now
        h.task = None
        self.dispatch.leave(h)
        del self._live[host]
        self._live_count[h.pool] -= 1
        self._released_costs.append(h.cost(self.kernel.now))
        self._settle()

    def set_speed(self, host: HostId, speed: float) -> None:
        """``host`` runs the tasks it starts from now on at ``speed``, not its pool's: a volunteer's
        own machine (:mod:`skylease.sim.volatile`), where one pool per speed would make the dispatch
        core walk a hundred thousand pools at every event. Simulation only, not part of the
        Environment protocol."""
        if not (speed > 0 and math.isfinite(speed)):
            raise ValueError(f"host {host}: speed must be > 0, got {speed!r}")
        self._speed[host] = float(speed)

    def hosts(self, pool: str | None = None) -> list[Host]:
        if pool is None:
            return list(self._live.values())
        return [h for h in self._live.values() if h.pool == pool]

    def host(self, host: HostId) -> Host:
        return self._hosts[host]

    def _pool(self, pool: str) -> InstanceType:
        try:
            return self._pools[pool]
        except KeyError:
            raise KeyError(f"no pool {pool!r}; pools are {list(self._pools)}") from None

    def _host_up(self, hid: HostId, epoch: int) -> None:
        if self._epoch[hid] != epoch or self._finished:
            return
        h = self._hosts[hid]
        h.up_at = self.kernel.now
        self.dispatch.ready(h)
        self.policy.on_host_up(h)
        self._settle()

    # -- a host lost and back (its rent goes on) ----------------------------------------------
    def host_down(self, host: HostId) -> None:
        """The host becomes unavailable now: its task goes back to the head of the queue."""
        h = self._live.get(host)
        if h is None or h.state is HostState.DOWN or self._finished:
            return
        if h.state is HostState.BUSY:
            self._interrupt(h, requeue=True)
        self._epoch[host] += 1
        self.dispatch.leave(h)
        h.state, h.task, h.task_started_at = HostState.DOWN, None, None
        self.policy.on_host_down(h)
        self._settle()

    def host_back(self, host: HostId) -> None:
        """A host that was down boots again; it comes up after its pool's boot time."""
        h = self._live.get(host)
        if h is None or h.state is not HostState.DOWN or self._finished:
            return
        h.state = HostState.BOOTING
        self.kernel.schedule(self.kernel.now + h.itype.boot_time, self._host_up, host, self._epoch[host])

    # -- tasks ------------------------------------------------------------------------------
    def submit(self, tasks: Iterable[Task], pool: str | None = None) -> None:
        if pool is not None:
            self._pool(pool)
        now = self.kernel.now
        for t in tasks:
            if t.id in self._tasks:
                raise ValueError(f"task {t.id} was already submitted")
            self._tasks[t.id] = t
            if t.arrival > now:
                self.dispatch.expect(t.id)
                self.kernel.schedule(t.arrival, self._arrive, t.id, pool)
            else:
                self.dispatch.submit(t.id, pool)
        self._settle()

    def _arrive(self, tid: int, pool: str | None) -> None:
        self.dispatch.arrive(tid, pool)
        if tid not in self._closed:
            self._settle()

    def duplicate(self, task: int, pool: str) -> None:
        self._pool(pool)
        if task in self._tasks and self.dispatch.duplicate(task, pool):
            self._settle()

    def cancel(self, task: int) -> None:
        if task in self._closed or task not in self._tasks:
            return
        self._close(task)
        self._cancelled += 1
        self._settle()
        self._end_if_done()

    def queued(self) -> int:
        return self.dispatch.queued()

    def pending(self) -> int:
        return self.dispatch.pending()

    def spent(self) -> float:
        # fsum: ten hosts at $0.10 cost exactly $1.00, not 0.9999999999999999
        now = self.kernel.now
        return math.fsum([*self._released_costs, *(h.cost(now) for h in self._live.values())])

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True  # first: releases below must not dispatch or call the policy
        self._end_time = self.kernel.now
        for hid in list(self._live):
            self.release(hid)

    # -- internals --------------------------------------------------------------------------
    def _start(self, h: Host, tid: int) -> None:
        """The dispatch core gave ``tid`` to ``h``: it runs for work / speed seconds."""
        now = self.kernel.now
        h.task_started_at = now
        runtime = self._tasks[tid].work / self._speed[h.id]  # the pool's speed unless set_speed
        self.kernel.schedule(now + runtime, self._complete, h.id, self._epoch[h.id])

    def _complete(self, hid: HostId, epoch: int) -> None:
        if self._epoch[hid] != epoch or self._finished:
            return
        h = self._hosts[hid]
        tid = h.task
        assert tid is not None
        now = self.kernel.now
        started = h.task_started_at
        assert started is not None
        self.dispatch.unassign(tid, hid)
        self.dispatch.ready(h)
        self._records.append(TaskRecord(tid, hid, h.pool, started, now))
        self._close(tid)  # other copies stop: the first result wins
        self._done += 1
        self._last_done = now
        self.policy.on_task_done(self._tasks[tid], h, now - started)
        self._settle()
        self._end_if_done()

    def _close(self, tid: int) -> None:
        for other in self.dispatch.close(tid):  # its other copies stop at once
            oh = self._hosts[other]
            self._epoch[other] += 1
            self._wasted += self._elapsed(oh)
            self.dispatch.ready(oh)

    def _elapsed(self, h: Host) -> float:
        """Seconds the task on ``h`` has run so far."""
        started = h.task_started_at
        return 0.0 if started is None else self.kernel.now - started

    def _interrupt(self, h: Host, requeue: bool) -> None:
        tid = h.task
        assert tid is not None
        self._epoch[h.id] += 1
        elapsed = self._elapsed(h)
        if elapsed > 0:  # a task given to a host at the very moment it is released lost nothing
            self._interrupted += 1
        self._wasted += elapsed
        self.dispatch.unassign(tid, h.id)
        # Requeue unless another copy runs or waits in the shared queue: a duplicate waiting in a
        # pool's own queue does not count, as that pool may have no host to run it (found by
        # hypothesis: dup to an empty pool, then release the only running host -> a stall).
        if requeue:
            self.dispatch.requeue_head(tid)
        # idle, but not given to the dispatch core: the host is being released or lost (a policy
        # acting from on_task_lost must not have a task sent to it)
        h.state, h.task, h.task_started_at = HostState.IDLE, None, None
        if not self._finished:
            self.policy.on_task_lost(self._tasks[tid], h)

    def _settle(self) -> None:
        """Dispatch, then tell the policy which hosts are left idle (see the dispatch core)."""
        if not self._finished:
            self.dispatch.settle()

    def _end_if_done(self) -> None:
        if self.dispatch.pending() == 0 and not self._finished:
            self.finish()

    # -- results ----------------------------------------------------------------------------
    def result(self) -> SimResult:
        now = self._end_time if self._end_time is not None else self.kernel.now
        hosts = tuple(self._hosts)
        units = sum(h.charged_units(now) for h in hosts)
        cost = math.fsum(h.cost(now) for h in hosts)
        unfinished = tuple(t for t in self._tasks if t not in self._closed)
        return SimResult(
            makespan=self._last_done,
            cost=cost,
            charged_units=units,
            hosts=len(hosts),
            peak_hosts=self._peak,
            tasks=len(self._tasks),
            done=self._done,
            cancelled=self._cancelled,
            unfinished=unfinished,
            interrupted=self._interrupted,
            wasted_s=self._wasted,
            events=self.kernel.events,
            end_time=now,
            records=tuple(self._records),
            host_table=hosts,
        )


def simulate(
    policy: Policy,
    bag: Bag | Iterable[Task],
    pools: Sequence[InstanceType] | Mapping[str, InstanceType],
    *,
    order: str = "fifo",
    seed: int | np.random.Generator | None = None,
    horizon: float = DEFAULT_HORIZON,
) -> SimResult:
    """Run ``policy`` on a bag of tasks in simulation and return what happened.

    ``order="random"`` submits the bag in a random permutation drawn from ``seed`` (A2HA's
    "orderings"); ``"fifo"`` keeps the bag's order.
    """
    tasks = list(bag)
    if order == "random":
        rng = np.random.default_rng(seed)
        tasks = [tasks[i] for i in rng.permutation(len(tasks))]
    elif order != "fifo":
        raise ValueError(f"order must be 'fifo' or 'random', got {order!r}")
    env = SimEnvironment(pools, policy)
    env.submit(tasks)
    policy.on_start(env)
    env._end_if_done()
    env.kernel.run(until=horizon)
    if not env._finished:
        env.finish()  # horizon reached or no event left: charge what is alive, report the rest
    return env.result()
