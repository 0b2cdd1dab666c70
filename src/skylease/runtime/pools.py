"""Pools of real workers: where a rented host comes from and where it goes back.

A host of the Environment protocol is one worker with one task slot. Renting it starts a worker
(its boot is the worker's start-up), giving it back ends the worker.

* :class:`LocalPool` (the default): worker processes on this machine, children of the driver fed
  over a pipe (:mod:`skylease.runtime.worker`), so ``skylease run jobs.txt`` needs nothing else and
  imports no Dask: a worker is up about 30 ms after it is started, and it can be killed and
  restarted (``--volatility``). Each call on it is a :class:`Call` (the driver's view of a Dask
  future: status, result, done callbacks, cancel).
* :class:`ClusterPool`: a Dask cluster, by configuration: a cluster class path and its
  keyword arguments (e.g. ``dask_jobqueue.SLURMCluster``, ``dask_cloudprovider.aws.EC2Cluster``),
  scaled one worker at a time; or the address of a running scheduler, whose existing workers are
  claimed as hosts (skylease does not start or stop those, it only bills them by its meter).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from skylease.model.errors import UserError
from skylease.model.instance import InstanceType
from skylease.runtime.backend import WorkerCall
from skylease.runtime.batch import run_batch
from skylease.runtime.worker import kill_children


def _quiet_dask() -> None:
    import logging

    for name in ("distributed", "distributed.worker", "distributed.scheduler", "distributed.core",
                 "distributed.nanny", "distributed.comm", "tornado"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # a client that loses its scheduler logs each reconnect attempt with a traceback; the run
    # reports the lost pool itself, in one line
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)


def kill_tree(pid: int, timeout: float = 5.0) -> None:
    """Kill a process and all its descendants at once (SIGKILL): a host that vanishes.

    Returns once each one is dead: gone, or a zombie (it runs nothing any more). It does not wait
    for the zombies to be reaped: a task's process whose worker died with it is reaped by init, and
    some inits (a container's) reap in rounds, about once a second; waiting for that held the run's
    loop (and its timers: the QoS reports) for over a second per host that left.
    """
    import psutil  # here: 20 ms a run that kills nothing need not pay

    try:
        proc = psutil.Process(pid)
        procs = [*proc.children(recursive=True), proc]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    deadline, pause = time.monotonic() + timeout, 0.0005
    while (procs := [p for p in procs if _running(p)]) and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(2 * pause, 0.02)


def _running(p: Any) -> bool:
    import psutil

    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class WorkerGone(ConnectionError):
    """A local worker died with calls of ours outstanding."""


class Call:
    """One call on a local worker: what Dask's future was to the driver (status, a result to wait
    for, done callbacks, cancel)."""

    __slots__ = ("_callbacks", "_done", "_lock", "_value", "id", "status", "worker")

    def __init__(self, worker: LocalWorker, cid: int) -> None:
        self.worker, self.id = worker, cid
        self.status = "pending"  # then "finished", "error" or "cancelled"
        self._value: Any = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[Call], None]] = []

    def add_done_callback(self, fn: Callable[[Call], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def result(self, timeout: float | None = None) -> Any:
        if not self._done.wait(timeout):
            raise TimeoutError
        if self.status == "finished":
            return self._value
        if self.status == "cancelled":
            raise CancelledError
        raise self._value

    def cancel(self) -> None:
        if self._settle("cancelled", None):
            self.worker.send({"op": "cancel", "id": self.id})

    def _settle(self, status: str, value: Any) -> bool:
        with self._lock:
            if self._done.is_set():
                return False
            self.status, self._value = status, value
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)
        return True


class LocalWorker:
    """The driver's end of one local worker process (:mod:`skylease.runtime.worker`)."""

    def __init__(self, env: Mapping[str, str], cwd: str, argv: Sequence[str] | None = None) -> None:
        # argv: another way to start the same program (ssh_pool.py: over an SSH channel)
        self.proc = subprocess.Popen(list(argv or [sys.executable, "-m", "skylease.runtime.worker"]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=dict(env), cwd=cwd,
                                     start_new_session=True)  # Ctrl-C is the driver's to handle
        self.started_at = time.monotonic()
        self.ready_at: float | None = None  # when it said it was ready (its start cost: ssh_pool.py)
        self.ready = False
        self.gone = False  # its output ended: it died or is ending; calls sent now fail at once
        self._calls: dict[int, Call] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, msg: Mapping[str, Any]) -> None:
        data = json.dumps(msg).encode() + b"\n"
        with self._lock, contextlib.suppress(OSError, ValueError):  # gone: its calls fail by _read
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def submit(self, op: str, args: Sequence[Any]) -> Call:
        cid = next(self._ids)
        call = Call(self, cid)
        with self._lock:
            if not self.gone:
                self._calls[cid] = call
        if cid not in self._calls:
            call._settle("error", WorkerGone(f"worker {self.proc.pid} is gone"))
            return call
        self.send({"id": cid, "op": op, "args": list(args)})
        return call

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "ready" in msg:
                self.ready_at = time.monotonic()
                self.ready = True
                continue
            call = self._calls.pop(int(msg["id"]), None)
            if call is None:
                continue
            if "error" in msg:
                call._settle("error", RuntimeError(msg["error"]))
            else:
                call._settle("finished", msg["result"])
        with self._lock:
            self.gone = True
        gone = WorkerGone(f"worker {self.proc.pid} is gone")
        for cid in list(self._calls):
            call = self._calls.pop(cid, None)
            if call is not None:
                call._settle("error", gone)

    def kill_call(self, call: WorkerCall) -> None:
        """Kill ``call``'s processes (or, if it is not yet running, the command it would start);
        the worker lives on."""
        self.send({"op": "kill", "id": call.id} if isinstance(call, Call) else {"op": "kill"})

    def close(self) -> None:
        """Released: the worker ends (its running task killed) when its input closes."""
        with self._lock, contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()


@dataclass
class LocalPool:
    """Worker processes on this machine, one per host, each fed by the driver over a pipe."""

    itype: InstanceType
    procs: dict[str, LocalWorker] = field(default_factory=dict)
    claimed: bool = False
    _retiring: list[LocalWorker] = field(default_factory=list)

    def connect(self) -> None:
        """Nothing to connect to: the workers are the driver's own children."""

    def start(self, name: str) -> None:
        self.procs[name] = LocalWorker(self.worker_env(name), os.getcwd())

    def worker_env(self, name: str) -> dict[str, str]:
        """The environment the worker of host ``name`` (and its tasks) gets."""
        env = dict(os.environ)
        # python callables are found as they are by the driver: the working folder first
        env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *filter(None, [env.get("PYTHONPATH")])])
        # tasks may read where they run (a slow or special host in tests and demos)
        env.update(SKYLEASE_WORKER=name, SKYLEASE_POOL=self.itype.name, SKYLEASE_SPEED=repr(self.itype.speed))
        return env

    def submit(self, address: str, fn: Callable[..., Any], *args: Any) -> Call:
        """Call ``fn`` (run_task or run_batch) with ``args`` on the worker at ``address``."""
        return self.procs[address].submit("batch" if fn is run_batch else "task", args)

    def stop_task(self, address: str, call: WorkerCall) -> None:
        """Kill the processes of ``call``, the task the worker runs (a losing copy); the worker
        lives on."""
        w = self.procs.get(address)
        if w is not None:
            w.kill_call(call)

    def stop(self, name: str, address: str | None) -> None:
        """Release: the worker's input is closed, it ends; killed at close if it has not."""
        w = self.procs.pop(name, None)
        if w is not None:
            w.close()
            self._retiring.append(w)

    def kill(self, name: str) -> None:
        w = self.procs.pop(name, None)
        # a worker already reaped may have its pid reused by another process: never kill by it
        if w is not None and w.proc.poll() is None:
            kill_tree(w.proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(timeout=1)  # our child, dead: reaped now, not left a zombie

    def bind(self, name: str, address: str) -> None:
        """Local workers are named by skylease: nothing to remember."""

    def alive(self, name: str) -> bool:
        w = self.procs.get(name)
        return w is not None and w.proc.poll() is None

    def unreachable_for(self) -> float:
        return 0.0  # its workers are our children

    def machine(self, name: str) -> str | None:
        """This machine, for every worker."""
        return socket.gethostname()

    def set_aside(self, machine: str) -> bool:
        """Never: a local pool has no other machine."""
        return False

    def workers(self) -> dict[str, str]:
        """Workers up and alive: name -> address (the name itself)."""
        return {name: name for name, w in self.procs.items() if w.ready and w.proc.poll() is None}

    def gone(self, name: str) -> bool:
        """The worker process was started and has exited (killed or crashed)."""
        return not self.alive(name)

    def started_at(self, name: str) -> float | None:
        """Local workers are billed by skylease's own meter, not by a job's clock."""
        return None

    def ended_at(self, name: str) -> float | None:
        return None

    def close(self) -> None:
        for name in list(self.procs):
            self.kill(name)
        deadline = time.monotonic() + 2.0
        for w in self._retiring:
            try:
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_tree(w.proc.pid)
                w.proc.wait()


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

    def connect(self) -> None:
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

    def submit(self, address: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn`` with ``args`` on the worker at ``address`` (that worker only); a Dask future."""
        return self._client.submit(fn, *args, workers=[address], allow_other_workers=False, pure=False)

    def stop_task(self, address: str, call: WorkerCall) -> None:
        """Kill the processes of the task the worker runs (a losing copy)."""
        with contextlib.suppress(Exception):
            self._client.run(kill_children, workers=[address], wait=False)

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

    def machine(self, name: str) -> str | None:
        """The host part of the address of the worker bound to ``name`` (None before it is)."""
        address = self._bound.get(name)
        if address is None:
            return None
        return urlsplit(address).hostname or address

    def set_aside(self, machine: str) -> bool:
        """Never: the cluster's manager, not skylease, chooses where its workers run."""
        return False

    def unreachable_for(self) -> float:
        """Seconds the cluster's scheduler has been out of reach (0 when it answers)."""
        self._addresses()
        return 0.0 if self._unreachable_since is None else time.monotonic() - self._unreachable_since

    def gone(self, name: str) -> bool:
        return False

    def started_at(self, name: str) -> float | None:
        """A cluster's workers are billed by skylease's own meter, not by a job's clock."""
        return None

    def ended_at(self, name: str) -> float | None:
        return None

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close(timeout=5)
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close()
