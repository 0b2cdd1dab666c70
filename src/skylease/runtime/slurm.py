"""Hosts rented from Slurm: one Slurm job runs one Dask worker, and Slurm's own clock bills it.

A pool whose ``cluster`` is ``dask_jobqueue.SLURMCluster`` (or a subclass) is a :class:`SlurmPool`.
dask-jobqueue gives it the scheduler and the job script (partition, account, walltime, memory,
prologue: every keyword of the pools file); skylease submits one job per rented host itself, with
``sbatch``, so that the job is the host:

* renting a host is ``sbatch`` of one job (named ``skylease-TOKEN-HOST``, its worker named after the
  host); releasing it is ``scancel`` of that job;
* the rent that billing uses is the job's start to its end **as Slurm reports them** (``squeue``,
  which reads the controller, so no accounting database is needed): a job waiting in Slurm's queue
  is not billed, and the charge of a released host is recomputed from Slurm's start and end;
* a job Slurm ends on its own (``scancel`` by someone else, its walltime, a node failure) takes its
  worker with it: the environment sees a lost host (its task requeued, the attempt recorded
  ``lost``) and starts it again, which is a new job;
* every job of a run carries the run's token (a digest of its output folder): a resumed run, or a
  run's cleanup, finds and cancels the jobs a killed driver left behind.

The module also checks a Slurm pool before anything starts (``sbatch`` on the path, the partition,
the walltime against the billing unit), so that a mistake is one line naming the pools-file field.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.runtime.pools import ClusterPool, _one_line, _quiet_dask, cluster_class

#: States of a job that holds (or will hold) its node: anything else has ended.
LIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "RESIZING",
                         "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT"})
#: How long Slurm's answer about the jobs is trusted before squeue is asked again.
JOBS_TTL_S = 0.5
#: How long a cancelled job may take to get its end time from the controller.
END_WAIT_S = 5.0
COMMAND_TIMEOUT_S = 30.0
JOB_PREFIX = "skylease-"


def is_slurm_cluster(path: str | None) -> bool:
    """Is the cluster class ``path`` dask-jobqueue's SLURMCluster (or one derived from it)?"""
    if not path:
        return False
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        return path.rpartition(".")[0].startswith("dask_jobqueue")
    with contextlib.suppress(UserError):
        klass = cluster_class(path, "cluster")
        return isinstance(klass, type) and issubclass(klass, SLURMCluster)
    return False


def run_token(out: str | Path) -> str:
    """The token in the job names of the run whose output folder is ``out`` (the same for every
    segment of the run, so a resume finds the jobs of the driver before it)."""
    return hashlib.sha1(str(Path(out).resolve()).encode()).hexdigest()[:10]


# -- Slurm's commands -----------------------------------------------------------------------------
def _slurm(args: list[str], *, stdin: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """Run a Slurm command; its output, or a RuntimeError with its complaint in one line."""
    try:
        res = subprocess.run(args, input=stdin, capture_output=True, text=True, env=env,
                             timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{args[0]}: {_one_line(e)}") from None
    if res.returncode != 0:
        raise RuntimeError(f"{args[0]}: {_one_line(RuntimeError(res.stderr or res.stdout))}")
    return res.stdout


@dataclass(frozen=True)
class SlurmJob:
    """One job as the controller reports it; times are Unix seconds (Slurm's whole seconds)."""

    id: str
    name: str
    state: str
    start: float | None  # None: it never ran (still pending, or cancelled while pending)
    end: float | None  # None: not ended

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES


def _epoch(text: str) -> float | None:
    """Slurm's local-time stamp (``2024-05-01T10:00:00``) as Unix seconds; None for N/A, Unknown."""
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def parse_squeue(text: str) -> list[SlurmJob]:
    """Lines of ``squeue -h --states=all -o '%i|%j|%T|%S|%e|%N'``."""
    jobs = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 6:
            continue
        jid, name, state, start, end, nodes = parts
        state = state.split()[0].rstrip("+") if state.strip() else "UNKNOWN"
        ran = bool(nodes.strip()) and nodes.strip() not in ("(null)", "None assigned")
        s = _epoch(start) if ran and state != "PENDING" else None
        e = _epoch(end) if s is not None and state not in LIVE_STATES else None
        jobs.append(SlurmJob(jid.strip(), name.strip(), state, s, e))
    return jobs


def jobs(ids: Iterable[str] | None = None) -> list[SlurmJob]:
    """The controller's jobs (all of them, or those of ``ids``), ended ones included while it
    remembers them (its MinJobAge)."""
    args = ["squeue", "-h", "--states=all", "-o", "%i|%j|%T|%S|%e|%N"]
    if ids is not None:
        ids = list(ids)
        if not ids:
            return []
        args += ["-j", ",".join(ids)]
    try:
        return parse_squeue(_slurm(args))
    except RuntimeError as e:
        if ids is not None and "Invalid job id" in str(e):  # forgotten by the controller
            return []
        raise


def submit(script: str, name: str, env: Mapping[str, str]) -> str:
    """``sbatch`` the job script (from standard input) as job ``name``; its job id."""
    out = _slurm(["sbatch", "--parsable", f"--job-name={name}", "--output=/dev/null"], stdin=script, env=env)
    return out.strip().split(";")[0]


def cancel(ids: Iterable[str]) -> None:
    ids = list(ids)
    if ids:
        _slurm(["scancel", *ids])


def cancel_leftovers(token: str) -> list[str]:
    """Cancel the live jobs of the run ``token`` (those of a driver that was killed); their ids."""
    prefix = f"{JOB_PREFIX}{token}-"
    left = [j.id for j in jobs() if j.name.startswith(prefix) and j.live]
    cancel(left)
    return left


def walltime_s(text: Any) -> float:
    """Slurm's time formats (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``)
    in seconds; ValueError otherwise."""
    s = str(text).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", s)
    if m is None:
        raise ValueError(f"not a Slurm time: {s!r}")
    days, a, b, c = (int(g) if g is not None else None for g in m.groups())
    if days is not None:  # D-HH[:MM[:SS]]
        return days * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    if c is not None:
        return a * 3600 + b * 60 + c  # type: ignore[operator]
    if b is not None:
        return a * 60 + b
    return a * 60.0


# -- checks before anything starts ---------------------------------------------------------------
def check_pool(kwargs: Mapping[str, Any], billing_unit: float) -> tuple[str, str] | None:
    """What is wrong with a Slurm pool before anything starts: ``(field, message)`` with the field
    under the pool (``cluster``, ``kwargs.queue``...), or None."""
    if shutil.which("sbatch") is None:
        return "cluster", "sbatch is not on the PATH: this machine cannot submit Slurm jobs"
    import dask

    processes = kwargs.get("processes")
    if processes is not None and processes != 1:
        return "kwargs.processes", f"a host is one Slurm job with one Dask worker: must be 1, not {processes}"
    walltime = kwargs.get("walltime", dask.config.get("jobqueue.slurm.walltime", None))
    if walltime is not None:
        key = "kwargs.walltime"
        try:
            seconds = walltime_s(walltime)
        except ValueError:
            return key, f"not a Slurm time (HH:MM:SS, MM:SS, D-HH:MM...): {walltime!r}"
        if seconds < billing_unit:
            return key, (f"{walltime} ({seconds:g} s) is shorter than the billing unit ({billing_unit:g} s): "
                         "a job ends before the unit it paid for")
    queue = kwargs.get("queue", dask.config.get("jobqueue.slurm.queue", None))
    if queue is not None:
        try:
            known = _slurm(["sinfo", "-h", "-o", "%R"]).split()
        except RuntimeError as e:
            return "cluster", f"Slurm does not answer: {e}"
        if str(queue) not in known:
            return "kwargs.queue", f"no partition {queue!r}; partitions are {sorted(set(known))}"
    return None


# -- the pool ---------------------------------------------------------------------------------
@dataclass
class SlurmPool(ClusterPool):
    """Hosts that are Slurm jobs (see the module docstring); workers are named by skylease."""

    token: str = "run"
    claimed: bool = False
    _jobs: dict[str, list[str]] = field(default_factory=dict)  # host name -> its jobs, oldest first
    _ended: dict[str, str] = field(default_factory=dict)  # host name -> its last (cancelled) job
    _known: dict[str, SlurmJob] = field(default_factory=dict)
    _known_at: float = -1e18

    def connect(self, scheduler: Any = None) -> None:
        _quiet_dask()
        from distributed import Client

        where = f"pools.{self.itype.name}"
        klass = cluster_class(self.cluster or "", f"{where}.cluster")
        kwargs = dict(self.kwargs)
        # Dask's dashboard on a fixed port would clash with the next run's
        kwargs.setdefault("scheduler_options", {"dashboard_address": ":0"})
        try:
            cancel_leftovers(self.token)  # a resumed run: the old driver's jobs hold nodes and money
            self._cluster = klass(**kwargs)
            self._cluster.scale(0)
            self._client = Client(self._cluster)
        except Exception as e:  # the cluster's own complaint (bad kwargs), or Slurm's
            self.close()
            raise UserError(f"{self.cluster} did not start: {_one_line(e)}",
                            field=f"{where}.kwargs") from None

    def _script(self, name: str) -> str:
        spec = self._cluster.new_spec
        job = spec["cls"](self._cluster.scheduler_address, name=name, **spec["options"])
        return job.job_script()

    def start(self, name: str) -> None:
        self._bound.pop(name, None)
        old = self._jobs.get(name)
        if old:  # its worker died: the job that ran it goes too, if Slurm has not ended it yet
            with contextlib.suppress(RuntimeError):
                cancel(old[-1:])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *filter(None, [env.get("PYTHONPATH")])])
        env.update(SKYLEASE_WORKER=name, SKYLEASE_POOL=self.itype.name,
                   SKYLEASE_SPEED=repr(self.itype.speed))
        jid = submit(self._script(name), f"{JOB_PREFIX}{self.token}-{name}", env)
        self._jobs.setdefault(name, []).append(jid)
        self._known_at = -1e18

    def stop(self, name: str, address: str | None) -> None:
        self._bound.pop(name, None)
        ids = self._jobs.pop(name, [])
        if ids:
            with contextlib.suppress(RuntimeError):
                cancel(ids[-1:])
            self._ended[name] = ids[-1]
        self._known_at = -1e18

    def _job_table(self) -> dict[str, SlurmJob]:
        now = time.monotonic()
        if now - self._known_at >= JOBS_TTL_S:
            ids = [j for js in self._jobs.values() for j in js[-1:]]
            with contextlib.suppress(RuntimeError):
                self._known = {j.id: j for j in jobs(ids)}
                self._known_at = now
        return self._known

    def gone(self, name: str) -> bool:
        """The host's job has ended before its worker came up (it failed, or was cancelled)."""
        ids = self._jobs.get(name)
        if not ids:
            return True
        job = self._job_table().get(ids[-1])
        return job is not None and not job.live

    def job_ids(self, name: str) -> list[str]:
        return list(self._jobs.get(name, ()))

    def started_at(self, name: str) -> float | None:
        """Unix time at which Slurm started the host's current job (None if it has not)."""
        ids = self._jobs.get(name)
        if not ids:
            return None
        found = jobs(ids[-1:])
        return found[0].start if found else None

    def ended_at(self, name: str) -> float | None:
        """Unix time at which Slurm ended the host's last job (after :meth:`stop`), waiting a moment
        for the controller to finish the cancel; None if the job never ran or is unknown."""
        jid = self._ended.pop(name, None)
        if jid is None:
            return None
        deadline = time.monotonic() + END_WAIT_S
        while True:
            found = jobs([jid])
            if not found or found[0].start is None:
                return None
            if found[0].end is not None or time.monotonic() > deadline:
                return found[0].end
            time.sleep(0.05)

    def kill(self, name: str) -> None:
        raise UserError("volatility can only be played on local pools", field="--volatility")

    def close(self) -> None:
        ours = {j for js in self._jobs.values() for j in js}
        self._jobs.clear()
        with contextlib.suppress(RuntimeError):
            cancel(j.id for j in jobs(ours) if j.live)
        super().close()
