"""Pools of real Dask workers: where a rented host comes from and where it goes back.

A host of the Environment protocol is one Dask worker with one thread (one task slot). Renting it
starts a worker (its boot is the worker's start-up), giving it back retires the worker gracefully.

* :class:`LocalPool` (the default): worker processes on this machine, started by skylease against
  a scheduler it runs itself, so ``skylease run jobs.txt`` needs nothing else. Each worker is a
  process of its own, forked by a fork server that has Dask imported already
  (:mod:`skylease.runtime.forkserver`), so a host boots in milliseconds and can be killed and
  restarted (``--volatility``).
* :class:`ClusterPool`: any other Dask cluster, by configuration: a cluster class path and its
  keyword arguments (e.g. ``dask_jobqueue.SLURMCluster``, ``dask_cloudprovider.aws.EC2Cluster``),
  scaled one worker at a time; or the address of a running scheduler, whose existing workers are
  claimed as hosts (skylease does not start or stop those, it only bills them by its meter).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from skylease.model.catalog import InstanceType
from skylease.model.errors import UserError
from skylease.runtime.forkserver import FORKSERVER_ENV, ForkedProcess, PrivateForkServer, fork_worker


def _quiet_dask() -> None:
    import logging

    for name in ("distributed", "distributed.worker", "distributed.scheduler", "distributed.core",
                 "distributed.nanny", "distributed.comm", "tornado"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # a client that loses its scheduler logs each reconnect attempt with a traceback; the run
    # reports the lost pool itself, in one line
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)


def kill_tree(pid: int) -> None:
    """Kill a process and all its descendants at once (SIGKILL): a host that vanishes."""
    try:
        proc = psutil.Process(pid)
        procs = [*proc.children(recursive=True), proc]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(procs, timeout=5)


def kill_children() -> int:
    """Run on a worker: kill the processes its running task started (a cancelled copy)."""
    n = 0
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
            n += 1
    return n


@dataclass
class LocalPool:
    """Worker processes on this machine, one per host, all on one local scheduler."""

    itype: InstanceType
    scheduler: Any = None  # a shared LocalScheduler; created on first use
    procs: dict[str, ForkedProcess] = field(default_factory=dict)
    claimed: bool = False

    def connect(self, scheduler: LocalScheduler) -> None:
        self.scheduler = scheduler

    @property
    def client(self) -> Any:
        return self.scheduler.client

    def start(self, name: str) -> None:
        env = dict(os.environ)
        env.pop(FORKSERVER_ENV, None)
        # python callables are found as they are by the driver: the working folder first
        env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *filter(None, [env.get("PYTHONPATH")])])
        # tasks may read where they run (a slow or special host in tests and demos)
        env.update(SKYLEASE_WORKER=name, SKYLEASE_POOL=self.itype.name, SKYLEASE_SPEED=repr(self.itype.speed))
        self.procs[name] = fork_worker(self.scheduler.forkserver, self.scheduler.address, name, env,
                                       os.getcwd())

    def stop(self, name: str, address: str | None) -> None:
        """Retire gracefully (the scheduler closes it), then make sure the process is gone."""
        proc = self.procs.pop(name, None)
        if address is not None:
            with contextlib.suppress(Exception):
                self.client.retire_workers(workers=[address], close_workers=True, remove=True)
        if proc is not None and proc.poll() is None:
            self.scheduler.reap(proc)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None:
            kill_tree(proc.pid)

    def bind(self, name: str, address: str) -> None:
        """Local workers are named by skylease: nothing to remember."""

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def unreachable_for(self) -> float:
        return 0.0  # its scheduler is ours, in this process

    def workers(self) -> dict[str, str]:
        return self.scheduler.workers()

    def gone(self, name: str) -> bool:
        """The worker process was started and has exited (killed or crashed)."""
        proc = self.procs.get(name)
        return proc is None or proc.poll() is not None

    def close(self) -> None:
        for name in list(self.procs):
            self.kill(name)


class LocalScheduler:
    """The driver's own Dask scheduler (no workers of its own), its client, and the fork server its
    local workers come from (the warm service's, or a private one started here)."""

    def __init__(self) -> None:
        warm = os.environ.get(FORKSERVER_ENV)
        # started first: it imports Dask while we do
        self._private = None if warm else PrivateForkServer()
        self.forkserver: str = warm or self._private.path  # type: ignore[union-attr]
        _quiet_dask()
        from distributed import Client, LocalCluster

        self.cluster = LocalCluster(n_workers=0, processes=True, threads_per_worker=1,
                                    dashboard_address=":0", silence_logs=50)
        self.client = Client(self.cluster)
        self.address: str = self.cluster.scheduler_address
        self._reaping: list[ForkedProcess] = []

    def reap(self, proc: ForkedProcess) -> None:
        """A retiring process: terminated at close if it has not exited by itself."""
        self._reaping.append(proc)

    def workers(self) -> dict[str, str]:
        """Connected workers: name -> address."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return {str(w.get("name")): addr for addr, w in info.items()}

    def close(self) -> None:
        for p in self._reaping:
            if p.poll() is None:
                kill_tree(p.pid)
        with contextlib.suppress(Exception):
            self.client.close(timeout=5)
            self.cluster.close(timeout=5)
        if self._private is not None:
            self._private.close()


CONNECT_TIMEOUT_S = 10
#: How long the list of a cluster's workers is trusted before the scheduler is asked again.
WORKERS_TTL_S = 0.5


def cluster_class(path: str, field: str, file: str | Path | None = None, line: int | None = None) -> Any:
    """The Dask cluster class named by ``path`` (``package.module.Class``)."""
    mod, _, cls = path.rpartition(".")
    try:
        return getattr(importlib.import_module(mod), cls)
    except ImportError as e:
        if (e.name or "").partition(".")[0] == "dask_jobqueue":
            raise UserError(f"{path} needs dask-jobqueue, which is not installed: "
                            "pip install 'skylease[slurm]'", file=file, line=line, field=field) from None
        raise UserError(f"cannot import cluster class {path!r}: {e}", file=file, line=line,
                        field=field) from None
    except (AttributeError, ValueError) as e:
        raise UserError(f"cannot import cluster class {path!r}: {e}", file=file, line=line,
                        field=field) from None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


@dataclass
class ClusterPool:
    """Hosts from another Dask cluster: ``cluster`` (class path) + ``kwargs``, or ``address``.

    Workers of such clusters are named by the cluster, not by skylease: a rented host is bound to
    the first new worker that connects.
    """

    itype: InstanceType
    cluster: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    address: str | None = None
    claimed: bool = True
    _cluster: Any = None
    _client: Any = None
    _target: int = 0
    _bound: dict[str, str] = field(default_factory=dict)  # host name -> its worker's address
    _seen_at: float = -math.inf
    _seen: frozenset[str] = frozenset()
    _unreachable_since: float | None = None

    def __post_init__(self) -> None:
        if (self.cluster is None) == (self.address is None):
            raise UserError("give exactly one of 'cluster' (a class path) and 'address'",
                            field=f"pools.{self.itype.name}")

    def connect(self, scheduler: LocalScheduler | None = None) -> None:
        _quiet_dask()
        from distributed import Client

        where = f"pools.{self.itype.name}"
        if self.cluster is not None:
            klass = cluster_class(self.cluster, f"{where}.cluster")
            try:
                self._cluster = klass(**dict(self.kwargs))
                # skylease owns the worker count: workers the cluster starts by itself (LocalCluster
                # starts one per core) would be hosts nobody rented
                self._cluster.scale(0)
                self._client = Client(self._cluster)
            except Exception as e:  # the cluster's own complaint (bad kwargs, no queue, no credentials)
                self.close()
                raise UserError(f"{self.cluster} did not start: {_one_line(e)}",
                                field=f"{where}.kwargs") from None
        else:
            try:
                self._client = Client(self.address, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, ValueError) as e:
                raise UserError(f"cannot reach the scheduler at {self.address}: {_one_line(e)}",
                                field=f"{where}.address") from None

    @property
    def client(self) -> Any:
        return self._client

    def workers(self) -> dict[str, str]:
        info = self._client.scheduler_info(n_workers=-1)["workers"]
        return {str(w.get("name")): addr for addr, w in info.items()}

    def bind(self, name: str, address: str) -> None:
        """The host ``name`` is now the worker at ``address`` (the env claimed it)."""
        self._bound[name] = address
        self._seen_at = -math.inf  # the workers seen before it connected must not call it dead

    def start(self, name: str) -> None:
        if self._bound.pop(name, None) is not None:
            # its worker died: the cluster manager replaces dead workers (a nanny restarts them)
            # and the host claims the next new one; the number of workers asked for is unchanged
            return
        if self._cluster is not None:
            self._target += 1
            self._cluster.scale(self._target)

    def stop(self, name: str, address: str | None) -> None:
        self._bound.pop(name, None)
        if self._cluster is not None and address is not None:
            self._target = max(0, self._target - 1)
            self._client.retire_workers(workers=[address], close_workers=True, remove=True)
            self._cluster.scale(self._target)

    def kill(self, name: str) -> None:
        raise UserError("volatility can only be played on local pools", field="--volatility")

    def _addresses(self) -> frozenset[str] | None:
        """The addresses of the cluster's workers now, or None while its scheduler is out of reach."""
        now = time.monotonic()
        if now - self._seen_at < WORKERS_TTL_S:
            return self._seen
        # a client that lost its scheduler answers scheduler_info() from its cache: ask only a
        # connected one
        if self._client is None or self._client.status != "running":
            if self._unreachable_since is None:
                self._unreachable_since = now
            return None
        self._unreachable_since = None
        self._seen_at, self._seen = now, frozenset(self._client.scheduler_info(n_workers=-1)["workers"])
        return self._seen

    def alive(self, name: str) -> bool:
        """The host's worker is still among the cluster's (a host not yet up counts as alive)."""
        address = self._bound.get(name)
        seen = self._addresses() if address is not None else None
        return seen is None or address in seen

    def unreachable_for(self) -> float:
        """Seconds the cluster's scheduler has been out of reach (0 when it answers)."""
        self._addresses()
        return 0.0 if self._unreachable_since is None else time.monotonic() - self._unreachable_since

    def gone(self, name: str) -> bool:
        return False

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close(timeout=5)
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close()
