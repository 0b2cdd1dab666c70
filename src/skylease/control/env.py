"""The Environment protocol: the one interface through which online policies act.

Principle one of the architecture, *one policy, two clocks*: a policy (A2HA, the QoS policy,
the fixed pool below) is a plain object that reacts to callbacks and acts through an
:class:`Environment`. The simulator (:mod:`skylease.sim.env`) and the real runtime on Dask are two
implementations; a policy never imports either.

Semantics every implementation keeps:

* Time is float seconds since the experiment start; ``now`` never goes backwards.
* ``acquire`` rents hosts at once: they are charged from that moment, boot, then come up
  (``on_host_up``). It may grant fewer than asked when a pool is at its limit.
* ``release`` ends a host now; its charge is the whole billing units started (see
  :class:`skylease.model.Billing`). A task running on a released host is interrupted and put back at
  the head of the queue: work is never dropped.
* Tasks are dispatched FIFO, one per idle host; a host takes tasks of its own pool's queue first,
  then the shared queue. A task completes exactly once: the first copy to finish wins and the other
  copies (see ``duplicate``) are cancelled; ``on_task_done`` is called once per task.

These dispatch rules are written once, in :mod:`skylease.control.dispatch`, which both
implementations use (docs/decisions/dispatch-core.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # numpy is imported where arrays are made: a real run of commands never needs it
    import numpy as np

from skylease.model.host import HostId, HostState
from skylease.model.instance import InstanceType
from skylease.model.task import Task


@runtime_checkable
class Handle(Protocol):
    """A timer that can be cancelled."""

    def cancel(self) -> None: ...


class HostView(Protocol):
    """What a policy may read of a host (``skylease.model.Host`` satisfies it)."""

    @property
    def id(self) -> HostId: ...
    @property
    def pool(self) -> str: ...
    @property
    def state(self) -> HostState: ...
    @property
    def requested_at(self) -> float: ...
    @property
    def up_at(self) -> float | None: ...
    @property
    def task(self) -> int | None: ...
    @property
    def task_started_at(self) -> float | None: ...
    def charged_units(self, now: float) -> int: ...
    def cost(self, now: float) -> float: ...
    def charged_until(self, now: float) -> float: ...


@runtime_checkable
class Environment(Protocol):
    """Where a policy acts: the simulated world or real workers."""

    @property
    def now(self) -> float: ...

    def call_at(self, t: float, fn: Callable[..., Any], *args: Any) -> Handle:
        """Call ``fn(*args)`` at time ``t`` (a timer the policy may cancel)."""
        ...

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Handle: ...

    def pools(self) -> Sequence[str]:
        """Names of the pools hosts can be rented from."""
        ...

    def pool_type(self, pool: str) -> InstanceType:
        """What a host of ``pool`` is: price, billing unit, expected boot time, speed, limit."""
        ...

    def acquire(self, pool: str, n: int = 1) -> list[HostId]:
        """Rent up to ``n`` hosts of ``pool``; returns the ids actually rented."""
        ...

    def release(self, host: HostId) -> None:
        """Give a host back now (its running task, if any, is requeued at the head)."""
        ...

    def hosts(self, pool: str | None = None) -> Sequence[HostView]:
        """Hosts not yet released (booting, idle, busy or down), oldest first."""
        ...

    def host(self, host: HostId) -> HostView: ...

    def submit(self, tasks: Iterable[Task], pool: str | None = None) -> None:
        """Queue tasks (for any pool, or only for ``pool``)."""
        ...

    def duplicate(self, task: int, pool: str) -> None:
        """Queue one more copy of a running or queued task for ``pool``; first result wins.

        Also for the pool where the task runs: another idle host of that pool takes the copy.
        """
        ...

    def cancel(self, task: int) -> None:
        """Withdraw a task: its queued copies are dropped and running copies stopped."""
        ...

    def queued(self) -> int:
        """Tasks waiting for a host (not counting extra copies)."""
        ...

    def pending(self) -> int:
        """Tasks submitted and neither done nor cancelled."""
        ...

    def spent(self) -> float:
        """Money charged so far: released hosts' charge plus live hosts' units started."""
        ...

    def finish(self) -> None:
        """End the experiment: release every host; no callback follows."""
        ...


@dataclass(frozen=True, slots=True)
class BotProgress:
    """Counts of one bag of tasks: submitted so far, ever assigned (distinct tasks), completed."""

    submitted: int
    assigned: int
    completed: int


#: How a tail environment feeds rented cloud workers (SpeQuloS's HOW; decisions S13-S14 in
#: docs/decisions/spequlos.md).
CLOUD_USAGE = ("flat", "reschedule", "duplicate")


@runtime_checkable
class TailEnvironment(Environment, Protocol):
    """A bag of tasks on a volatile pool run by a middleware, plus rentable reliable workers.

    The QoS policy (:mod:`skylease.control.qos`) acts through this. Time 0 is the bag's submission.
    The volatile pool is not rented by the policy; the reliable pool is named ``"cloud"`` and is
    rented with :meth:`acquire` / given back with :meth:`release` as for any Environment. Calls
    ``on_host_up`` (a cloud worker booted), ``on_host_idle`` (a cloud worker asked for work and got
    none), and ``on_task_done`` once per task (whichever worker or copy finished it first).
    """

    def progress(self) -> BotProgress:
        """The bag's counts now."""
        ...

    def completion_times(self) -> np.ndarray:
        """Time of the k-th task completion, ascending (length ``progress().completed``)."""
        ...

    def assignment_times(self) -> np.ndarray:
        """Time of the k-th first assignment of a task to a worker, ascending."""
        ...

    def serve_cloud(self, how: str) -> None:
        """Set how cloud workers get work, one of :data:`CLOUD_USAGE`, before the first acquire.

        ``flat``: they join the middleware's server like any worker. ``reschedule``: the server
        gives them queued tasks first, else a copy of a task running on a volatile worker.
        ``duplicate``: every uncompleted task is copied once to a cloud server they serve from.
        The first result of any copy completes the task.
        """
        ...


class Policy:
    """Base class for online policies: every callback is optional and does nothing here.

    A policy of one's own derives from it and can be named to ``skylease run --policy`` as
    ``MODULE:CLASS`` or ``FILE.py:CLASS`` (:mod:`skylease.control.plugins`)."""

    def describe(self) -> str:
        """What ran, for a run's ``summary.json``: ``module:Class(param=value, ...)``, the
        constructor's parameters the policy keeps under the same names. Override it to say more."""
        from skylease.control.plugins import describe

        return describe(self)

    def on_start(self, env: Environment) -> None:
        """The experiment begins; tasks already submitted are queued."""

    def on_host_up(self, host: HostView) -> None:
        """A rented host finished booting (it is then given a queued task, if any)."""

    def on_host_down(self, host: HostView) -> None:
        """A volatile host became unavailable (its task, if any, was requeued)."""

    def on_host_idle(self, host: HostView) -> None:
        """A live host has nothing to run: no queued task it may take."""

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        """A task completed on ``host`` after ``runtime`` seconds (called once per task)."""

    def on_task_lost(self, task: Task, host: HostView) -> None:
        """A running copy of ``task`` was interrupted (host down or released) and requeued."""
