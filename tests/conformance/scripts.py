"""Scripted bag-of-tasks policies and the clock-free record of what they decided and saw.

Each script is a :class:`~skylease.control.env.Policy` that reacts only to events (a host up, a task
done, a host idle, ...), never to the time, so the same script makes the same decisions on any clock
as long as the events come in the same order. Task times are chosen so that no two events are
closer than about 0.2 s: a real worker's start-up or a shell's spawn (tens of milliseconds) cannot
reorder them.

The record is a list of tuples: every decision as it is taken, then what it returned and the hosts'
view once it returned (callbacks it caused come in between), and every callback with the hosts' view
at that moment (``host -> task`` it runs, or its state). A host is told idle once per
idle spell: the record notes the first notice of a spell (an environment may repeat it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skylease.control.env import Environment, HostView, Policy
from skylease.model.host import HostState
from skylease.model.instance import InstanceType
from skylease.model.task import Task

Entry = tuple[Any, ...]


def view(env: Environment) -> tuple[tuple[int, str], ...]:
    """Live hosts and what each does: the task it runs, or ``idle``/``booting``/``down``.

    A host whose losing copy is still being stopped (a real worker's call not yet back) runs no task
    of the bag any more: it is shown idle, as the simulator's host is at once.
    """
    out = []
    for h in env.hosts():
        if h.task is not None:
            out.append((h.id, f"task {h.task}"))
        elif h.state is HostState.BUSY:
            out.append((h.id, "idle"))
        else:
            out.append((h.id, h.state.name.lower()))
    return tuple(sorted(out))


class Script(Policy):
    """A scripted policy that records its decisions and the callbacks it gets."""

    def __init__(self) -> None:
        self.log: list[Entry] = []
        self.env: Environment | None = None
        self.done: list[int] = []
        self._last: dict[int, str] = {}  # host -> "idle" while an idle spell is recorded

    # -- the record ---------------------------------------------------------------------------
    def note(self, *entry: Any) -> None:
        assert self.env is not None
        hosts = view(self.env)
        for hid, what in hosts:
            if what != "idle":
                self._last.pop(hid, None)
        self.log.append((*entry, hosts))

    # -- decisions (recorded with what they returned) -------------------------------------------
    def decide(self, *decision: Any) -> None:
        self.log.append(decision)

    def acquire(self, pool: str, n: int = 1) -> list[int]:
        assert self.env is not None
        self.decide("acquire", pool, n)
        ids = self.env.acquire(pool, n)
        self.note("acquired", tuple(ids))
        return ids

    def release(self, host: int) -> None:
        assert self.env is not None
        self.decide("release", host)
        self.env.release(host)
        self.note("after release")

    def duplicate(self, task: int, pool: str) -> None:
        assert self.env is not None
        self.decide("duplicate", task, pool)
        self.env.duplicate(task, pool)
        self.note("after duplicate")

    def cancel(self, task: int) -> None:
        assert self.env is not None
        self.decide("cancel", task)
        self.env.cancel(task)
        self.note("after cancel")

    def finish(self) -> None:
        assert self.env is not None
        self.decide("finish", self.env.pending())
        self.env.finish()
        self.note("after finish")

    # -- callbacks ------------------------------------------------------------------------------
    def on_start(self, env: Environment) -> None:
        self.env = env
        self.note("start", env.pending())
        self.start()

    def on_host_up(self, host: HostView) -> None:
        self._last.pop(host.id, None)
        self.note("up", host.id)
        self.up(host)

    def on_host_idle(self, host: HostView) -> None:
        if self._last.get(host.id) == "idle":
            return  # the same idle spell, told again
        self._last[host.id] = "idle"
        self.note("idle", host.id)
        self.idle(host)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        self._last.pop(host.id, None)
        self.done.append(task.id)
        self.note("done", task.id, host.id)
        self.task_done(task, host)

    def on_task_lost(self, task: Task, host: HostView) -> None:
        self._last.pop(host.id, None)
        self.note("lost", task.id, host.id)

    def on_host_down(self, host: HostView) -> None:
        self._last.pop(host.id, None)
        self.note("down", host.id)
        self.down(host)

    # -- what a script does (nothing by default) -------------------------------------------------
    def start(self) -> None: ...
    def up(self, host: HostView) -> None: ...
    def idle(self, host: HostView) -> None: ...
    def task_done(self, task: Task, host: HostView) -> None: ...
    def down(self, host: HostView) -> None: ...


# -- the scripts ------------------------------------------------------------------------------------
class RentRelease(Script):
    """Rent a host, a second once the first is up; give back a host that idles with nothing queued."""

    def start(self) -> None:
        self.acquire("a")

    def up(self, host: HostView) -> None:
        if host.id == 0 and self.env is not None and len(self.env.hosts()) == 1:
            self.acquire("a")

    def idle(self, host: HostView) -> None:
        if self.env is not None and self.env.queued() == 0:
            self.release(host.id)


class DuplicateSamePool(RentRelease):
    """The second host of the pool, once up, is given a copy of the task the first one runs."""

    def up(self, host: HostView) -> None:
        super().up(host)
        if host.id == 1:
            self.duplicate(0, "a")


class DuplicateOtherPool(Script):
    """A slow host runs the task; a fast host of another pool gets a copy, which wins."""

    def start(self) -> None:
        self.acquire("a")

    def up(self, host: HostView) -> None:
        if host.id == 0:
            self.acquire("b")
        else:
            self.duplicate(0, "b")


class Cancel(RentRelease):
    """When the second host's first task is done, the long task on the first host is withdrawn."""

    def task_done(self, task: Task, host: HostView) -> None:
        if task.id == 1:
            self.cancel(0)


class BudgetStop(Script):
    """Rent hosts while the budget allows; stop with work left once the money is spent."""

    budget = 2.0

    def start(self) -> None:
        self.acquire("a")

    def up(self, host: HostView) -> None:
        env = self.env
        assert env is not None
        if env.spent() + env.pool_type("a").price <= self.budget:
            self.acquire("a")

    def task_done(self, task: Task, host: HostView) -> None:
        env = self.env
        assert env is not None
        if len(self.done) >= 2 and env.spent() >= self.budget and env.pending() > 0:
            self.finish()


class HostLost(RentRelease):
    """The first host goes down mid-task (its task is requeued at the head) and comes back."""

    def task_done(self, task: Task, host: HostView) -> None:
        if task.id == 1:
            self.decide("host_down", 0)
            self.env.host_down(0)  # type: ignore[union-attr]
            self.note("after host_down")

    def down(self, host: HostView) -> None:
        self.decide("host_back", host.id)
        self.env.host_back(host.id)  # type: ignore[union-attr]
        self.note("after host_back")

    def idle(self, host: HostView) -> None:
        if self.env is not None and self.env.queued() == 0 and self.done:
            self.release(host.id)


class DuplicateWhenIdle(RentRelease):
    """A host that idles with nothing queued takes a copy of the task still running (a speculative
    copy, asked from ``on_host_idle``: it must start before the notice returns)."""

    copied = False

    def idle(self, host: HostView) -> None:
        env = self.env
        assert env is not None
        running = [h.task for h in env.hosts() if h.task is not None]
        if not self.copied and running:
            self.copied = True
            self.duplicate(running[0], host.pool)
            env.call_later(0.3, self.note, "look")  # while both copies run: who runs what
        else:
            super().idle(host)


class ReleaseBusy(RentRelease):
    """When the second host's first task ends, the first host is given back mid-task: its task goes
    back to the head of the queue, before the task that waited, and the second host takes it."""

    def task_done(self, task: Task, host: HostView) -> None:
        if task.id == 1:
            self.release(0)


@dataclass(frozen=True)
class Scenario:
    """A script, its pools and its task times (seconds on a host of speed 1)."""

    name: str
    script: Callable[[], Script]
    pools: Sequence[InstanceType]
    works: Sequence[float]
    extra: dict[str, Any] = field(default_factory=dict)

    def tasks(self) -> list[Task]:
        return [Task(i, w) for i, w in enumerate(self.works)]


def _a(**kw: Any) -> InstanceType:
    return InstanceType("a", boot_time=0.05, **kw)


SCENARIOS = [
    # t0 on host 0 the whole time; host 1 runs t1 then t2, then both are given back
    Scenario("rent-release", RentRelease, [_a()], [1.6, 0.4, 0.4]),
    # host 1 comes up with nothing queued and takes a copy of t0; t0's first copy wins
    Scenario("duplicate-same-pool", DuplicateSamePool, [_a()], [1.0]),
    # host 1 (speed 4) takes a copy of t0 that ends in 0.3 s and wins; host 0's copy is stopped
    Scenario("duplicate-other-pool", DuplicateOtherPool,
             [_a(), InstanceType("b", speed=4.0, boot_time=0.05)], [1.2]),
    # t0 (long) is cancelled when t1 ends: host 1 takes t2, host 0 idles and is given back
    Scenario("cancel", Cancel, [_a()], [1.5, 0.4, 0.4]),
    # two hosts are affordable (1 per started hour each); at the second completion the money is spent
    Scenario("budget-stop", BudgetStop, [_a(price=1.0)], [0.4, 0.8, 1.2, 0.6, 0.6]),
    # host 1 idles after t1 and copies t0 (still running on host 0), whose first copy wins
    Scenario("duplicate-when-idle", DuplicateWhenIdle, [_a()], [1.6, 0.4]),
    # host 0 is given back running t0 when t1 ends: t0 is requeued ahead of t2, host 1 runs it
    Scenario("release-busy", ReleaseBusy, [_a()], [1.6, 0.4, 0.4]),
    # host 0 is lost when t1 ends: t0 goes back to the head of the queue, host 1 takes it
    Scenario("host-lost", HostLost, [_a()], [1.2, 0.4]),
]
