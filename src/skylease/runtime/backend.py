"""What the real environment needs of a pool of workers: the :class:`WorkerBackend` protocol.

A host of the Environment protocol is one worker with one task slot. The real environment
(:mod:`skylease.runtime.env`) keeps the clock and the dispatch (:mod:`skylease.control.dispatch`);
a backend only starts, watches, feeds and ends workers. :class:`~skylease.runtime.pools.LocalPool`
(worker processes on this machine), :class:`~skylease.runtime.pools.ClusterPool` (a Dask cluster)
and :class:`~skylease.runtime.slurm.SlurmPool` (jobs of a Slurm cluster) implement it; a new kind
of pool implements it and joins the conformance suite (tests/conformance).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from skylease.model.instance import InstanceType


class WorkerCall(Protocol):
    """A call submitted to a worker (a Dask future, or a local worker's :class:`Call`)."""

    @property
    def status(self) -> str:
        """``pending``, ``finished``, ``error`` or ``cancelled``."""
        ...

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        """Call ``fn(call)`` once the call ended (from any thread)."""
        ...

    def result(self, timeout: float | None = None) -> Any:
        """Its return value; raises TimeoutError while it runs, and the call's error if it failed."""
        ...

    def cancel(self) -> Any:
        """Drop the call if it has not started; a running call goes on (its answer is ignored)."""
        ...


@runtime_checkable
class WorkerBackend(Protocol):
    """A pool of workers, each the host named ``name`` by the environment (``POOL-ID``)."""

    #: what a host of this pool is (price, billing unit, boot time, speed, limit)
    itype: InstanceType
    #: True when workers are not started by name but claimed as they connect (an external cluster)
    claimed: bool

    def connect(self) -> None:
        """Reach the pool's scheduler, if any, before the first host is rented."""
        ...

    def start(self, name: str) -> None:
        """Start the worker of host ``name`` (a rent, or a restart of a worker that died)."""
        ...

    def workers(self) -> dict[str, str]:
        """Workers up and alive now: worker name -> address."""
        ...

    def bind(self, name: str, address: str) -> None:
        """Host ``name`` is the worker at ``address`` from now on."""
        ...

    def alive(self, name: str) -> bool:
        """The host's worker still lives (a host not yet up may count as alive)."""
        ...

    def gone(self, name: str) -> bool:
        """The host's worker was started and has ended before it came up."""
        ...

    def submit(self, address: str, fn: Callable[..., Any], *args: Any) -> WorkerCall:
        """Call ``fn(*args)`` (run_task or run_batch) on the worker at ``address`` only."""
        ...

    def stop_task(self, address: str, call: WorkerCall) -> None:
        """Kill the processes of ``call``, the task the worker runs (a losing copy); the worker
        lives on."""
        ...

    def stop(self, name: str, address: str | None) -> None:
        """End the host's worker: it is released."""
        ...

    def kill(self, name: str) -> None:
        """End the host's worker at once (a volatile host leaves)."""
        ...

    def machine(self, name: str) -> str | None:
        """The machine the host's worker runs on (a host name or address; None while unknown). Failed
        tasks are retried on other machines, and a machine that keeps failing is set aside."""
        ...

    def set_aside(self, machine: str) -> bool:
        """Start no more workers on ``machine`` (it failed task after task). Returns whether the pool
        did. A pool that has no other machine, or does not choose where its workers run, returns
        False and keeps it."""
        ...

    def unreachable_for(self) -> float:
        """Seconds the pool's scheduler has been out of reach (0 when it answers)."""
        ...

    def started_at(self, name: str) -> float | None:
        """Unix time the host's job started, for a pool billed by its job's clock; else None."""
        ...

    def ended_at(self, name: str) -> float | None:
        """Unix time the host's job ended, for a pool billed by its job's clock; else None."""
        ...

    def close(self) -> None:
        """End every worker the pool started and let go of its scheduler."""
        ...
