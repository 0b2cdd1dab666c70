"""``skylease run``: a real bag of tasks on Dask workers, driven by the same policies as the simulator.

:func:`run_job` builds the pools (a local pool by default, or those of a pools file), the policy
(``fixed:N``, ``a2ha[:conservative|aggressive]``, ``dask-adaptive``, or a ``Policy`` subclass of
one's own named ``MODULE:CLASS`` or ``FILE.py:CLASS``: :mod:`skylease.experiments.run_policies`;
optionally with the QoS tail policy on a reliable pool), opens the crash-safe store in the output
folder, runs the :class:`~skylease.runtime.env.WorkerEnvironment` and writes ``summary.json`` and
``report.md``.

Decisions of ours (the issue is silent):

* The default local pool is named ``local``: at most as many workers as this machine has cores,
  billed ``--price`` per started ``--billing-unit`` (default free, 60 s), boot estimate 2 s.
* A2HA's adjustment period is a twelfth of the billing unit (the paper's 300 s for an hour).
* Tasks are dispatched in the job's order, except under A2HA, which takes them in a random order
  drawn from ``--seed`` (its random task selection, as in the simulator).
* With ``--tail-qos``, the main policy runs the volatile pools and the QoS policy rents the
  reliable pool with credits: ``--tail-credits`` (default: the budget left, in the pool's price
  units converted at 15 credits per CPU hour).
* Every option is checked (:func:`check_options`) before anything is started or written: a
  mistake leaves no folder, no store and no process behind.
* Ctrl-C ends the run as a stop, not a crash: the workers are released, the segment is closed
  with outcome ``interrupted``, and ``summary.json`` and ``report.md`` describe the partial run
  (with the command that finishes it). A second Ctrl-C while that is written aborts it.
* ``--retry-failed`` (with ``--resume``) moves each failed result to the attempts (outcome
  ``failed``) so that the task runs again; the tasks with an ``ok`` result are never rerun.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from skylease.control.env import Environment, HostView, Policy
from skylease.experiments.run_policies import describe_policy, parse_policy
from skylease.experiments.run_results import FAILED_IN_SUMMARY, failed_tasks, open_run
from skylease.experiments.run_segments import record_segment, whole_run
from skylease.experiments.store import atomic_write_text, out_folder
from skylease.model.catalog import InstanceType
from skylease.model.errors import UserError
from skylease.model.files import FileModel, KeyLines, load_toml
from skylease.model.task import Task
from skylease.runtime.credentials import option_warning, token_for
from skylease.runtime.jobs import MAX_RETRIES

DEFAULT_POOL = "local"
DEFAULT_BOOT_S = 2.0


@dataclass
class RunOptions:
    """Everything ``skylease run`` takes besides the job."""

    out: Path = Path("skylease-out")
    policy: str = "fixed:2"
    policy_args: list[str] = field(default_factory=list)  # KEY=VALUE for a MODULE:CLASS policy
    pools_file: Path | None = None
    pool: str | None = None
    max_workers: int | None = None
    price: float = 0.0
    billing_unit: float = 60.0
    min_units: int = 1
    budget: float | None = None
    retries: int | None = None  # None: the job file's ``retries``, else 0 (see job_settings)
    task_timeout_s: float | None = None  # None: the job file's ``timeout``, else none
    tail_qos: str | None = None
    reliable_pool: str | None = None
    tail_credits: float | None = None
    tail_tick_s: float = 2.0
    qos: str | None = None  # a SpeQuloS service's URL: it serves the tail instead of --tail-qos
    qos_token: str | None = None
    qos_credits: float | None = None
    qos_strategy: str = "9C-C-R"
    qos_infrastructure: str | None = None  # default: local-<the volatile pool>
    report: str | None = None  # a `skylease serve` URL the run's task table is reported to
    report_token: str | None = None
    volatility: str | None = None
    volatile_pool: str | None = None
    time_scale: float = 60.0
    trace_start: float | None = None
    seed: int = 0
    resume: bool = False
    retry_failed: bool = False
    args: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Policies(Policy):
    """Two policies on one environment: the main one and the tail one (each sees every callback)."""

    def __init__(self, *policies: Policy) -> None:
        self.policies = policies

    def on_start(self, env: Environment) -> None:
        for p in self.policies:
            p.on_start(env)

    def on_host_up(self, host: HostView) -> None:
        for p in self.policies:
            p.on_host_up(host)

    def on_host_down(self, host: HostView) -> None:
        for p in self.policies:
            p.on_host_down(host)

    def on_host_idle(self, host: HostView) -> None:
        for p in self.policies:
            p.on_host_idle(host)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        for p in self.policies:
            p.on_task_done(task, host, runtime)

    def on_task_lost(self, task: Task, host: HostView) -> None:
        for p in self.policies:
            p.on_task_lost(task, host)


# -- pools ------------------------------------------------------------------------------------------
_NonNeg = Annotated[float, Field(ge=0)]


class PoolSpec(FileModel):
    """One ``[pools.NAME]`` table. Defaults: free (``price = 0``) unless a price is given, an hour's
    billing unit, no boot time, no limit on workers, the reference speed; local worker processes
    unless ``cluster`` (a Dask cluster class, with ``kwargs``) or ``address`` (a scheduler)."""

    price: _NonNeg = 0.0
    billing_unit: Annotated[float, Field(gt=0)] = 3600.0
    min_units: Annotated[int, Field(ge=0)] = 1
    boot_time: _NonNeg = 0.0
    max_count: Annotated[int, Field(ge=0)] | None = None
    speed: Annotated[float, Field(gt=0)] = 1.0
    cluster: Annotated[str, Field(min_length=1)] | None = None
    kwargs: dict[str, Any] | None = None
    address: Annotated[str, Field(min_length=1)] | None = None


class PoolsFile(FileModel):
    pools: Annotated[dict[str, PoolSpec], Field(min_length=1)]


def pool_types(opts: RunOptions) -> dict[str, dict[str, Any]]:
    """Pool name -> its description (instance type fields plus ``cluster``/``kwargs``/``address``)."""
    if opts.pools_file is None:
        cores = os.cpu_count() or 2
        return {DEFAULT_POOL: {"price": opts.price, "billing_unit": opts.billing_unit,
                               "min_units": opts.min_units, "boot_time": DEFAULT_BOOT_S,
                               "max_count": opts.max_workers or cores}}
    spec, keys = load_toml(Path(opts.pools_file), PoolsFile)
    for name, pool in spec.pools.items():
        _check_cluster_keys(pool, keys, name)
    return {name: pool.model_dump(exclude_none=True) for name, pool in spec.pools.items()}


def _check_cluster_keys(spec: PoolSpec, keys: KeyLines, name: str) -> None:
    """``cluster`` (an importable class path, with a ``kwargs`` table) or ``address``, not both."""
    from skylease.runtime.pools import cluster_class

    if spec.cluster is not None and spec.address is not None:
        raise keys.error("give exactly one of 'cluster' (a class path) and 'address'", "pools", name)
    if spec.kwargs is not None and spec.cluster is None:
        raise keys.error("kwargs go with 'cluster' (a class path)", "pools", name, "kwargs")
    if spec.cluster is not None:
        cluster_class(spec.cluster, f"pools.{name}.cluster", keys.file, keys.line("pools", name, "cluster"))
        from skylease.runtime.slurm import check_pool, is_slurm_cluster

        if is_slurm_cluster(spec.cluster):
            wrong = check_pool(spec.kwargs or {}, spec.billing_unit)
            if wrong is not None:
                raise keys.error(wrong[1], "pools", name, *wrong[0].split("."))


def _itype(name: str, spec: Mapping[str, Any], where: str) -> InstanceType:
    fields = {k: spec[k] for k in ("price", "billing_unit", "min_units", "boot_time", "max_count", "speed")
              if k in spec}
    try:
        return InstanceType(name, **fields)
    except (TypeError, ValueError) as e:
        raise UserError(str(e), file=where, field=f"pools.{name}") from None


def job_settings(job: Any, opts: RunOptions) -> tuple[int, float | None]:
    """A run's retries and task timeout: the command line's (``--retries``, ``--timeout``) when
    given, else the job file's (``retries``, ``timeout``), else no retry and no timeout."""
    retries = opts.retries if opts.retries is not None else job.options.get("retries", 0)
    timeout = opts.task_timeout_s if opts.task_timeout_s is not None else job.options.get("timeout")
    if retries < 0:
        raise UserError(f"must be >= 0, got {retries}", field="--retries")
    if timeout is not None and not timeout > 0:
        raise UserError(f"must be > 0, got {timeout:g}", field="--timeout")
    return retries, timeout


def make_backends(opts: RunOptions, specs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The backends (connected) of the pools ``specs`` (:func:`pool_types`)."""
    from skylease.runtime.pools import ClusterPool, LocalPool
    from skylease.runtime.slurm import SlurmPool, is_slurm_cluster, run_token

    where = str(opts.pools_file) if opts.pools_file else "--price/--billing-unit"
    backends: dict[str, Any] = {}
    for name, spec in specs.items():
        itype = _itype(name, spec, where)
        if is_slurm_cluster(spec.get("cluster")):
            backends[name] = SlurmPool(itype, cluster=spec["cluster"], kwargs=spec.get("kwargs", {}),
                                       token=run_token(opts.out))
        elif "cluster" in spec or "address" in spec:
            backends[name] = ClusterPool(itype, cluster=spec.get("cluster"), kwargs=spec.get("kwargs", {}),
                                         address=spec.get("address"))
        else:
            backends[name] = LocalPool(itype)
    try:
        for b in backends.values():
            b.connect()
    except UserError as e:
        close_backends(backends)
        raise UserError(e.message, file=e.file or where, line=e.line, field=e.field) from None
    except BaseException:
        close_backends(backends)
        raise
    return backends


def close_backends(backends: Mapping[str, Any]) -> None:
    for b in backends.values():
        with contextlib.suppress(Exception):
            b.close()


# -- checks -----------------------------------------------------------------------------------------
#: The most retries of a task: more is a typo, and each retry is a run of the task.


def check_options(opts: RunOptions) -> None:
    """Every run option, checked before anything starts: a :class:`UserError` naming the option.

    What needs the pools file (pool names, the main pool's billing unit) is checked by
    :func:`run_job` right after it is read, still before anything is written.
    """
    def number(value: float | None, name: str, *, positive: bool = False) -> None:
        if value is None:
            return
        ok = math.isfinite(value) and (value > 0 if positive else value >= 0)
        if not ok:
            raise UserError(f"must be a finite number {'> 0' if positive else '>= 0'}, got {value:g}",
                            field=name)

    number(opts.price, "--price")
    number(opts.billing_unit, "--billing-unit", positive=True)
    number(opts.budget, "--budget")
    number(opts.task_timeout_s, "--timeout", positive=True)
    number(opts.tail_credits, "--tail-credits")
    number(opts.qos_credits, "--qos-credits")
    number(opts.tail_tick_s, "tail_tick_s", positive=True)
    number(opts.time_scale, "--time-scale", positive=True)
    number(opts.trace_start, "--trace-start")
    for value, name, least in ((opts.max_workers, "--workers", 1), (opts.min_units, "min_units", 0),
                               (opts.seed, "--seed", 0), (opts.retries, "--retries", 0)):
        if value is not None and value < least:
            raise UserError(f"must be an integer >= {least}, got {value}", field=name)
    for value, name in ((opts.pool, "--pool"), (opts.reliable_pool, "--reliable-pool"),
                        (opts.volatile_pool, "--volatile-pool"), (opts.volatility, "--volatility"),
                        (opts.tail_qos, "--tail-qos"), (opts.policy, "--policy"), (opts.args, "--args")):
        if value is not None and not value.strip():  # an empty value is a mistake, not "not given"
            raise UserError("must not be empty (leave the option out instead)", field=name)
    if opts.retries is not None and opts.retries > MAX_RETRIES:
        raise UserError(f"at most {MAX_RETRIES}, got {opts.retries}", field="--retries")
    if opts.retry_failed and not opts.resume:
        raise UserError("goes with --resume (it reruns the failed tasks of a stopped or finished run)",
                        field="--retry-failed")
    try:
        parse_policy(opts.policy, DEFAULT_POOL, opts.budget, opts.billing_unit,  # its own checks
                     opts.policy_args)
    except ValueError as e:  # a value the policy itself refuses
        raise UserError(str(e), field="--policy") from None
    if opts.qos is not None:
        _check_qos(opts)
    elif opts.qos_token is not None or opts.qos_credits is not None or opts.qos_infrastructure is not None:
        raise UserError("goes with --qos URL", field="--qos-token" if opts.qos_token is not None
                        else "--qos-credits" if opts.qos_credits is not None else "--qos-infrastructure")
    if opts.report is not None:
        _service_url(opts.report, "--report")
        token_for(opts.report.strip(), opts.report_token, "--report-token")
    elif opts.report_token is not None:
        raise UserError("goes with --report URL", field="--report-token")
    if opts.tail_qos is not None:
        _tail_strategy(opts.tail_qos)
        if opts.reliable_pool is None:
            raise UserError("--tail-qos needs --reliable-pool NAME (a pool of the pools file)",
                            field="--reliable-pool")
    elif opts.qos is None and (opts.reliable_pool is not None or opts.tail_credits is not None):
        raise UserError("goes with --tail-qos", field="--reliable-pool" if opts.reliable_pool is not None
                        else "--tail-credits")
    if opts.volatility is None and (opts.volatile_pool is not None or opts.trace_start is not None):
        raise UserError("goes with --volatility", field="--volatile-pool" if opts.volatile_pool is not None
                        else "--trace-start")


def _service_url(url: str, option: str) -> None:
    """A `skylease serve` URL (http or https, a host, a port that can be one), or one line."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    try:
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port out of range
        valid = False
    if not valid:
        raise UserError(f"{url!r} is not a service URL: give http://HOST:PORT", field=option)


def _check_qos(opts: RunOptions) -> None:
    import re

    from skylease.runtime.qos.bots import NAME as INFRASTRUCTURE
    from skylease.runtime.qos.ledger import MAX_CREDITS

    if opts.tail_qos is not None:
        raise UserError("--qos and --tail-qos both cut the tail: keep one", field="--tail-qos")
    if opts.reliable_pool is None:
        raise UserError("--qos needs --reliable-pool NAME (the pool its cloud workers come from)",
                        field="--reliable-pool")
    _service_url(opts.qos, "--qos")
    token_for(opts.qos.strip(), opts.qos_token, "--qos-token")
    _strategy(opts.qos_strategy, "--qos-strategy")
    # the service's own bounds, checked here so that a mistake is told before any work
    if opts.qos_credits is not None and opts.qos_credits > MAX_CREDITS:
        raise UserError(f"at most {MAX_CREDITS:g} credits, got {opts.qos_credits:g}", field="--qos-credits")
    if opts.qos_infrastructure is not None and not re.fullmatch(INFRASTRUCTURE, opts.qos_infrastructure):
        raise UserError("must be 1 to 64 letters, digits or ._:/@+- (starting with a letter or digit), "
                        f"got {opts.qos_infrastructure!r}", field="--qos-infrastructure")


def _strategy(spec: str, option: str = "--tail-qos") -> Any:
    from skylease.control.qos import parse_strategy

    try:
        strategy = parse_strategy(spec)
    except (UserError, ValueError) as e:
        raise UserError(getattr(e, "message", str(e)), field=option) from None
    if strategy is None:
        raise UserError(f"'none' cuts no tail: leave {option} out", field=option)
    return strategy


def _tail_strategy(spec: str) -> Any:
    """``--tail-qos``: a built-in strategy's name or a strategy of one's own (``FILE.py:CLASS``,
    ``MODULE:CLASS``, built with its defaults); ``none`` is refused."""
    from skylease.control.qos import load_strategy

    strategy = load_strategy(spec, None, ("--tail-qos", "--tail-qos"))
    if strategy is None:
        raise UserError("'none' cuts no tail: leave --tail-qos out", field="--tail-qos")
    return strategy


# -- the run ----------------------------------------------------------------------------------------
def run_job(job_spec: str, opts: RunOptions, on_progress: Callable[[Any], None] | None = None,
            on_notice: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) a job; returns the summary also written to ``OUT/summary.json``.

    Ctrl-C (KeyboardInterrupt) during the run is a stop: the summary comes back with outcome
    ``interrupted`` and the run can be finished with ``--resume``.
    """
    from skylease.control.plugins import find_in_working_folder, resolve_file_spec
    from skylease.runtime.env import WorkerEnvironment
    from skylease.runtime.jobs import load_job
    from skylease.runtime.store import STORE_NAME, ResultStore, store_kind

    find_in_working_folder()  # `package.module:function`, `--policy module:Class`: as `python -m` finds them
    opts = replace(opts, policy=resolve_file_spec(opts.policy),  # the same file from any folder (replay)
                   tail_qos=None if opts.tail_qos is None else resolve_file_spec(opts.tail_qos))
    check_options(opts)
    job = load_job(job_spec, args=opts.args)
    retries, timeout = job_settings(job, opts)
    out = Path(opts.out)
    store_path = out / STORE_NAME
    if store_path.exists():
        store_kind(store_path)  # a file skylease did not make is named as such, and never opened
        if not opts.resume:
            raise UserError("already holds a run; pass --resume to finish it, or choose another --out",
                            file=out)
    elif opts.resume:
        raise UserError("no run to resume here", file=out)
    else:
        _check_out_folder(out)
    specs = pool_types(opts)  # validates the pools before anything is started
    names = list(specs)
    main_pool = opts.pool or next((n for n in names if n != opts.reliable_pool), names[0])
    for label, p in (("--pool", main_pool), ("--reliable-pool", opts.reliable_pool),
                     ("--volatile-pool", opts.volatile_pool)):
        if p is not None and p not in specs:
            raise UserError(f"no pool {p!r}; pools are {names}", field=label)
    itype0 = _itype(main_pool, specs[main_pool], "pools")
    policy, order = parse_policy(opts.policy, main_pool, opts.budget, itype0.billing_unit, opts.policy_args)
    _check_policy_fits(policy, itype0, opts)
    warnings = _policy_capped(policy, main_pool, itype0, opts)  # said once the run starts
    described = describe_policy(policy)
    qos = _tail_policy(opts, specs) if opts.tail_qos else None
    remote = None
    if opts.qos is not None:  # registered (and its credits ordered) before any work: a refusal stops here
        qos, remote = _qos_relay(opts, len(job.tasks), on_notice or _stderr)
    volatility = _volatility(opts, specs, main_pool) if opts.volatility else None

    # A resumed run is checked before anything starts; a new run's folder and store are made only
    # once its pools are up, so a pool that cannot start leaves nothing behind to --resume.
    store = ResultStore(store_path) if opts.resume else None
    reporter = None
    try:
        if store is not None:
            _check_resume(store, job.fingerprint(), out, opts.budget if hasattr(policy, "budget") else None)
        # registered before any work (a refused token stops here); a resume continues its run
        reporter = _reporter(opts, job_spec, job, store_path, store, remote, on_notice or _stderr)
        if reporter is not None:
            on_progress = _observing(reporter, on_progress)
        backends = make_backends(opts, specs)
        for w in warnings:  # (after every check that can refuse the run: a refusal stays one line)
            (on_notice or _stderr)(f"warning: {w}")
        try:
            if store is None:
                out_folder(out)
                store = ResultStore(store_path)
            store.adopt()  # a store of the previous format, resumed: marked as ours from now on
            if "fingerprint" not in store.meta():  # a new run, or one killed before it registered its tasks
                store.set_meta({"job": job.source, "fingerprint": job.fingerprint(),
                                "tasks": len(job.tasks), "started_unix": time.time()})
                store.add_tasks((t.id, t.to_json(), t.label) for t in job.tasks)
            if opts.retry_failed:
                store.forget_failed()
            segment = store.start_segment(os.getpid())
            billing = store.meta().get("billing") or {}
            billing[str(segment)] = {n: _billing_of(_itype(n, sp, "pools")) for n, sp in specs.items()}
            store.set_meta({"options": _jsonable(asdict(opts)), "billing": billing})
            if reporter is not None:
                if reporter.run_id is not None:
                    store.set_meta({"report": {"url": reporter.url, "run": reporter.run_id}})
                reporter.start()
            spent_before = store.spent_before(segment)
            done = store.done_tasks()
            todo = [t for t in job.tasks if t.id not in done]
            if order == "random":
                import numpy as np

                rng = np.random.default_rng(opts.seed + segment)
                todo = [todo[i] for i in rng.permutation(len(todo))]
            if opts.budget is not None and hasattr(policy, "budget"):
                policy.budget = opts.budget - spent_before
            policies: Policy = policy if qos is None else Policies(policy, qos)
            env = WorkerEnvironment(backends, [t.to_json() for t in job.tasks], store, policies,
                                  retries=retries, task_timeout_s=timeout,
                                  on_progress=on_progress)
            if qos is not None:
                env.set_tail_pool(opts.reliable_pool)
            if volatility is not None:
                volatility.attach(env)
            started = time.time()
            try:
                res = env.run([Task(t.id, 0.0) for t in todo])
            except KeyboardInterrupt:  # Ctrl-C: env.run released the workers; the run is a stop
                res = env.result()
            store.end_segment(res.cost, res.outcome)
            wall_s = time.time() - started  # (the figure the summary and a later resume both use)
            record_segment(store, segment, res, wall_s)
        finally:
            close_backends(backends)
            if remote is not None:
                remote.close()
        report = None
        if reporter is not None:
            report, reporter = _close_reporter(reporter, store, res.outcome), None
        summary = _summary(store, res, opts, job_spec, job, segment, spent_before, wall_s, qos,
                           least_charge(itype0))
        summary["policy_class"] = described
        if warnings:
            summary["warnings"] = warnings
        if report is not None:
            summary["report"] = report
        atomic_write_text(out / "summary.json", json.dumps(summary, indent=2, default=float))
        from skylease.experiments.run_report import write_run_report

        write_run_report(out, store, summary)
        return summary
    finally:
        if reporter is not None:  # the run did not get to its end: said as failed
            reporter.close("failed")
        if store is not None:
            store.close()


def _check_policy_fits(policy: Policy, itype: InstanceType, opts: RunOptions) -> None:
    """What the policy would refuse when it starts (after the store is made), refused now."""
    from skylease.control.a2ha import A2HA

    if isinstance(policy, A2HA) and itype.boot_time >= itype.billing_unit:
        where = {"file": opts.pools_file, "field": f"pools.{itype.name}.billing_unit"} if opts.pools_file \
            else {"field": "--billing-unit"}
        raise UserError(f"A2HA needs a billing unit longer than the pool's boot time "
                        f"({itype.boot_time:g} s), got {itype.billing_unit:g} s", **where)


def _policy_capped(policy: Policy, pool: str, itype: InstanceType, opts: RunOptions) -> list[str]:
    """``fixed:N`` with N over the pool's most workers: the run rents only that many. Said (one
    line, also in ``summary.json``) rather than refused: the cap is a default (the machine's cores)
    as often as a choice, and the run is still worth having (docs/howto/run.md)."""
    from skylease.control.fixed import FixedPool

    most = itype.max_count
    if not isinstance(policy, FixedPool) or most is None or policy.n <= most:
        return []
    if opts.pools_file is not None:
        why = f"its max_count in {opts.pools_file}"
    elif opts.max_workers is not None:
        why = "--workers"
    else:
        why = f"this machine's cores; --workers {policy.n} raises it"
    return [f"--policy {opts.policy} asks for {policy.n} workers, but pool {pool!r} has at most {most} "
            f"({why}): the run uses {most}"]


def _check_out_folder(out: Path) -> None:
    """The output folder is one, or can be made, and nothing is made yet (a mistake found later,
    say a pool that cannot start, must leave no folder behind)."""
    p = out
    while not p.exists() and p.parent != p:
        p = p.parent
    if not p.is_dir():
        raise UserError(f"cannot create the output folder: {p} is not a folder", file=out, field="--out")
    if not os.access(p, os.W_OK | os.X_OK):
        raise UserError(f"cannot create the output folder: {p} is not writable", file=out, field="--out")


def least_charge(it: InstanceType | Mapping[str, Any]) -> float:
    """The least a worker of a pool is charged: its price times its minimum units (at least one)."""
    b = _billing_of(it) if isinstance(it, InstanceType) else it
    return float(b["price"]) * max(1, int(b["min_units"]))


def _billing_of(it: InstanceType) -> dict[str, float]:
    return {"price": it.price, "billing_unit": it.billing_unit, "min_units": it.min_units}


def _check_resume(store: Any, fingerprint: str, out: Path, budget: float | None) -> None:
    """A resumed run must be the same job, with money left under its budget."""
    meta = store.meta()
    if "fingerprint" in meta and meta["fingerprint"] != fingerprint:
        raise UserError(f"the job differs from the one this run started ({meta.get('job')})", file=out)
    spent = store.spent_before()
    if budget is not None and spent > budget:
        raise UserError(f"the budget is spent ({spent:g} of {budget:g})", field="--budget")


def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}


def _tail_policy(opts: RunOptions, specs: Mapping[str, Mapping[str, Any]]) -> Policy:
    from skylease.control.qos import SpeQuloS
    from skylease.control.qos.credits import CREDITS_PER_CPU_HOUR

    strategy = _tail_strategy(opts.tail_qos or "")
    assert opts.reliable_pool is not None
    it = _itype(opts.reliable_pool, specs[opts.reliable_pool], "pools")
    if opts.tail_credits is not None:
        credits = opts.tail_credits
    elif opts.budget is not None and it.price > 0:
        credits = opts.budget / it.price * it.billing_unit / 3600.0 * CREDITS_PER_CPU_HOUR
    else:
        credits = 1e9  # no budget on a free pool: credits do not bind
    return SpeQuloS(strategy, credits, tick=opts.tail_tick_s, pool=opts.reliable_pool, predict_at=0.5)


def _qos_relay(opts: RunOptions, n_tasks: int, notice: Callable[[str], None]) -> tuple[Policy, Any]:
    """The relay to a SpeQuloS service, the bag registered there (or said unreachable, once)."""
    from skylease.control.qos.relay import QoSRelay, ServiceUnavailable
    from skylease.runtime.qos.remote import RemoteBag

    assert opts.qos is not None and opts.reliable_pool is not None
    infra = opts.qos_infrastructure or f"local-{opts.volatile_pool or opts.pool or 'default'}"
    strategy = _strategy(opts.qos_strategy, "--qos-strategy").name  # (the service lists 9C-C-R, not 9c-c-r)
    registration = {"infrastructure": infra, "n_tasks": n_tasks, "strategy": strategy,
                    "tick": opts.tail_tick_s, "pool": opts.reliable_pool, "credits": opts.qos_credits or 0.0}
    token = token_for(opts.qos.strip(), opts.qos_token, "--qos-token")
    bag = RemoteBag(opts.qos.strip(), token, registration)
    relay = QoSRelay(bag.send, opts.reliable_pool, period=opts.tail_tick_s, on_unavailable=notice)
    try:
        bag.register()
        notice(f"QoS: bag {bag.bot} registered at {opts.qos.strip()} ({opts.qos_strategy}, "
               f"{opts.qos_credits or 0:g} credits)")
    except ServiceUnavailable as exc:
        notice(f"the QoS service is unreachable ({exc}); the run goes on without QoS")
        relay.attached = False
    except BaseException:
        bag.close()
        raise
    if opts.qos_token is not None:  # (once the bag is registered: a refusal stays one line)
        notice(f"warning: {option_warning('--qos-token')}")
    return relay, bag


def _reporter(opts: RunOptions, job_spec: str, job: Any, store_path: Path, store: Any, remote: Any,
              notice: Callable[[str], None]) -> Any:
    """The run's reporter to the service of ``--report`` (else of ``--qos``, linked to its bag),
    registered; None without either. A resumed run continues its run on the same service."""
    from skylease.runtime.runs.reporter import RunReporter

    if opts.report is not None:
        url, token, option = opts.report.strip(), opts.report_token, "--report-token"
    elif opts.qos is not None:
        url, token, option = opts.qos.strip(), opts.qos_token, "--qos-token"
    else:
        return None
    given = token is not None and opts.report is not None  # (--qos-token is warned about with the bag)
    token = token_for(url, token, option)
    before = (store.meta().get("report") or {}) if store is not None else {}
    run_id = before.get("run") if before.get("url") == url.rstrip("/") else None
    bot = remote.bot if remote is not None and url.rstrip("/") == remote.url else None
    command = " ".join(["skylease run", shlex.quote(job_spec), "--out", shlex.quote(str(opts.out))])
    reporter = RunReporter(url, token, store_path, name=Path(str(job.source)).name or job_spec,
                           command=command, n_tasks=len(job.tasks), bot=bot, run_id=run_id, notice=notice)
    if reporter.register() is not None:
        notice(f"run {reporter.run_id} reported to {reporter.url}/runs/{reporter.run_id}")
    if given:  # (once registered: a refusal stays one line)
        notice(f"warning: {option_warning(option)}")
    return reporter


def _observing(reporter: Any, on_progress: Callable[[Any], None] | None) -> Callable[[Any], None]:
    """The run's progress hook, also telling the reporter which tasks run where."""
    def hook(env: Any) -> None:
        reporter.observe({h.task: (str(h.id), h.pool) for h in env.hosts() if h.task is not None})
        if on_progress is not None:
            on_progress(env)
    return hook


def _close_reporter(reporter: Any, store: Any, outcome: str) -> dict[str, Any]:
    """The run's end said to the service: done (every task ok), stopped (interrupted) or failed."""
    counts = store.counts()
    state = "stopped" if outcome == "interrupted" else \
        "done" if outcome == "done" and counts["left"] == 0 and counts["failed"] == 0 else "failed"
    report = reporter.close(state)
    if report["run"] is not None:  # (registered late, when the service came back)
        store.set_meta({"report": {"url": report["url"], "run": report["run"]}})
    return report


def _stderr(text: str) -> None:
    print(f"skylease run: {text}", file=sys.stderr, flush=True)


def _volatility(opts: RunOptions, specs: Mapping[str, Any], main_pool: str) -> Any:
    from skylease.runtime.volatility import Volatility

    pool = opts.volatile_pool or main_pool
    if "cluster" in specs[pool] or "address" in specs[pool]:
        raise UserError("volatility can only be played on local pools", field="--volatile-pool")
    return Volatility.from_trace(opts.volatility or "", pool, opts.time_scale, seed=opts.seed,
                                 start=opts.trace_start)


def _summary(store: Any, res: Any, opts: RunOptions, job_spec: str, job: Any, segment: int,
             spent_before: float, wall_s: float, qos: Policy | None, least: float) -> dict[str, Any]:
    counts = store.counts()
    pools: dict[str, int] = {}
    for h in res.host_table:
        pools[h.pool] = pools.get(h.pool, 0) + 1
    outcome = res.outcome if counts["left"] == 0 or res.outcome != "done" else "incomplete"
    spent = spent_before + res.cost
    ran_out = counts["left"] > 0 and budget_ran_out(opts, spent, least)
    if ran_out and outcome == "stalled":  # nothing could rent a worker: the budget is why
        outcome = "budget spent"
    s = {
        "job": job.source, "out": str(opts.out), "policy": opts.policy, "policy_args": list(opts.policy_args),
        "tail_qos": opts.tail_qos,
        "segment": segment, "outcome": outcome,
        "tasks": counts["tasks"], "ok": counts["ok"], "failed": counts["failed"], "left": counts["left"],
        "wall_s": wall_s, "elapsed_s": res.elapsed_s, "cost": spent_before + res.cost,
        "cost_this_segment": res.cost, "budget": opts.budget, "hosts": res.hosts,
        "hosts_per_pool": pools, "peak_hosts": res.peak_hosts, "lost": res.lost, "retried": res.retried,
        "duplicate_races": res.duplicates_won, "max_release_lag_s": res.max_release_lag_s,
        "failed_tasks": failed_tasks(store, FAILED_IN_SUMMARY),
        "next": next_steps(job_spec, opts, counts, spent=spent, least_charge=least),
    }
    # the whole run, over its segments (a resume's summary is not its last segment's alone)
    this = {k: s[k] for k in ("segment", "outcome", "wall_s", "elapsed_s", "cost_this_segment", "hosts",
                              "hosts_per_pool", "peak_hosts", "lost", "retried", "duplicate_races",
                              "max_release_lag_s")}
    s.update(whole_run(store, segment, {**this, "hosts_per_pool": dict(pools)}))
    s["this_segment"] = this
    if ran_out:
        s["budget_ran_out"] = {"spent": spent, "budget": opts.budget, "least_charge": least}
    if qos is not None:
        s["qos"] = qos.summary()  # type: ignore[attr-defined]
    return s


#: ``skylease run`` options as RunOptions fields, in the order a command shows them. (Never the
#: --qos-token: a command shown or saved in a report must not hold a secret; $SKYLEASE_TOKEN is
#: read when it is left out.)
_FLAGS = (("args", "--args"), ("policy", "--policy"), ("pools_file", "--pools"), ("pool", "--pool"),
          ("max_workers", "--workers"), ("price", "--price"), ("billing_unit", "--billing-unit"),
          ("budget", "--budget"), ("retries", "--retries"), ("task_timeout_s", "--timeout"),
          ("tail_qos", "--tail-qos"), ("reliable_pool", "--reliable-pool"),
          ("tail_credits", "--tail-credits"), ("qos", "--qos"), ("qos_credits", "--qos-credits"),
          ("qos_strategy", "--qos-strategy"), ("qos_infrastructure", "--qos-infrastructure"),
          ("report", "--report"),
          ("volatility", "--volatility"),
          ("volatile_pool", "--volatile-pool"), ("time_scale", "--time-scale"),
          ("trace_start", "--trace-start"), ("seed", "--seed"))


def resume_command(job_spec: str, opts: RunOptions, *, retry_failed: bool = False) -> str:
    """The ``skylease run`` command that finishes this run: the same job, folder and options (each
    option that differs from its default; a resume reads none of them from the store)."""
    default = RunOptions()
    words = ["skylease", "run", job_spec, "--out", str(opts.out)]
    for name, flag in _FLAGS:
        value = getattr(opts, name)
        if value is not None and value != getattr(default, name):
            words += [flag, str(value)]
            if name == "policy":
                for arg in opts.policy_args:
                    words += ["--policy-arg", arg]
    words.append("--resume")
    if retry_failed:
        words.append("--retry-failed")
    return " ".join(shlex.quote(w) for w in words)


def budget_ran_out(opts: RunOptions, spent: float, least_charge: float) -> bool:
    """The run's ``--budget`` cannot rent one more worker: what is left of it is under the least
    charge of a worker of the main pool (its price times its minimum billed units, at least one)."""
    return opts.budget is not None and opts.budget - spent < least_charge - 1e-9


def budget_to_finish(spent: float, counts: Mapping[str, int], least_charge: float,
                     budget: float) -> float:
    """A ``--budget`` that can finish a run whose budget ran out: what was spent, plus the tasks left
    at the run's cost per finished task so far, plus one more worker's least charge (the margin a
    budget-watching policy needs to rent at all), rounded up to the cent; at least twice the old
    budget when no task finished (there is nothing to estimate from)."""
    finished = counts["ok"] + counts["failed"]
    more = spent / finished * counts["left"] + least_charge if finished else max(budget, least_charge)
    return math.ceil((spent + more) * 100 - 1e-6) / 100


def next_steps(job_spec: str, opts: RunOptions, counts: Mapping[str, int], *, spent: float = 0.0,
               least_charge: float = 0.0) -> dict[str, str]:
    """What the user can do next with a run: finish it, rerun its failed tasks, export, read.

    When the budget ran out (:func:`budget_ran_out`), resuming with the same ``--budget`` would stop
    again at once: the command to finish the run then gives a larger one (:func:`budget_to_finish`)."""
    steps = {}
    finish = opts
    if opts.budget is not None and (counts["left"] or counts["failed"]) \
            and budget_ran_out(opts, spent, least_charge):
        finish = replace(opts, budget=budget_to_finish(spent, counts, least_charge, opts.budget))
    if counts["left"]:
        steps["resume"] = resume_command(job_spec, finish)
    if counts["failed"]:
        steps["retry_failed"] = resume_command(job_spec, finish, retry_failed=True)
    steps["export"] = f"skylease export {shlex.quote(str(opts.out))}"
    steps["report"] = str(Path(opts.out) / "report.md")
    return steps


def _stored_options(meta: Mapping[str, Any]) -> RunOptions:
    """The options a run recorded (its last segment's)."""
    o = meta.get("options") or {}
    opts = RunOptions(**{k: v for k, v in o.items() if k in RunOptions.__dataclass_fields__})
    opts.out = Path(opts.out)
    opts.pools_file = Path(o["pools_file"]) if o.get("pools_file") else None
    return opts


def status(out: str | Path) -> dict[str, Any]:
    """What ``skylease status`` shows of a running or finished run (read-only)."""
    store = open_run(out)
    try:
        meta = store.meta()
        counts = store.counts()
        seg = store.query("SELECT * FROM segments ORDER BY segment DESC LIMIT 1")
        last = dict(seg[0]) if seg else {}
        running = bool(last) and last.get("ended_unix") is None and _pid_alive(int(last["pid"])) \
            and time.time() - float(last.get("heartbeat_unix") or 0) < 10
        spent = store.spent_before()
        live = store.query("SELECT pool, COUNT(*) AS n FROM hosts WHERE released_s IS NULL AND segment = ? "
                           "GROUP BY pool", (last.get("segment", -1),)) if running else []
        registered = "fingerprint" in meta
        state = "running" if running else ("finished" if registered and counts["left"] == 0 else "stopped")
        opts = _stored_options(meta)
        st = {"out": str(out), "job": meta.get("job"), "state": state,
              "segments": last.get("segment", -1) + 1, **counts, "cost": spent,
              "budget": opts.budget, "workers": {r["pool"]: r["n"] for r in live}}
        if registered and state != "running" and meta.get("options"):
            opts.out = Path(out)
            billing = (meta.get("billing") or {}).get(str(last.get("segment"))) or {}
            main = opts.pool if opts.pool in billing else next(
                (n for n in billing if n != opts.reliable_pool), None)
            least = least_charge(billing[main]) if main is not None else 0.0
            st["next"] = next_steps(str(meta["job"]), opts, counts, spent=spent, least_charge=least)
        return st
    finally:
        store.close()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


#: The most simulated runs one replay makes (each is a column of the table it prints).
MAX_REPLAY_SEEDS = 100


def replay(out: str | Path, seeds: Sequence[int] = (0,)) -> dict[str, Any]:
    """Simulate a finished real run again: its measured task runtimes, its policy and pools.

    Boot time is the run's measured mean boot; the simulated hosts and cost sit beside the real.
    A run with tasks left (stopped, interrupted) is refused: its measured times are a part of the
    bag, and its real cost is that of a part, so the comparison would mean nothing.
    """
    from skylease.control.plugins import find_in_working_folder
    from skylease.sim.env import simulate

    find_in_working_folder()  # the run's `--policy module:Class` is found as `skylease run` found it
    if len(seeds) > MAX_REPLAY_SEEDS:
        raise UserError(f"at most {MAX_REPLAY_SEEDS} (one simulated run, and one column, per seed), "
                        f"got {len(seeds):,}", field="--seeds")
    store = open_run(out)
    try:
        meta = store.meta()
        counts = store.counts()
        rows = store.query("SELECT task, runtime_s FROM results ORDER BY task")
        # boot is from the rent request (its "acquire" event) to the worker up: a host billed from
        # its job's start (Slurm) waited in the queue before, and the simulator must wait too
        hosts = store.query(
            "SELECT h.pool, COALESCE((SELECT MIN(e.t_s) FROM events e WHERE e.segment = h.segment AND "
            "e.host = h.host AND e.kind = 'acquire'), h.requested_s) AS requested_s, h.up_s "
            "FROM hosts h WHERE h.up_s IS NOT NULL")
        sfile = Path(out) / "summary.json"
        summary = json.loads(sfile.read_text()) if sfile.exists() else {}
    finally:
        store.close()
    if "fingerprint" not in meta or not rows:
        raise UserError("the run has no recorded task", file=out)
    opts = _stored_options(meta)
    if counts["left"]:
        opts.out = Path(out)
        raise UserError(f"the run did not finish ({counts['left']} of {counts['tasks']} tasks have no "
                        f"result); finish it with `{resume_command(str(meta['job']), opts)}`, then "
                        "replay it", file=out)
    specs = pool_types(opts)
    boots = [h["up_s"] - h["requested_s"] for h in hosts]
    import numpy as np

    boot = float(np.mean(boots)) if boots else DEFAULT_BOOT_S
    pools = {}
    for name, spec in specs.items():
        spec = dict(spec, boot_time=boot)
        pools[name] = _itype(name, spec, "pools")
    main_pool = opts.pool or next(iter(pools))
    from skylease.model.task import Bag

    bag = Bag.from_runtimes([max(0.0, float(r["runtime_s"] or 0.0)) for r in rows], name="replay")
    sims = []
    described = None
    for seed in seeds:
        try:
            policy, order = parse_policy(opts.policy, main_pool, opts.budget, pools[main_pool].billing_unit,
                                         opts.policy_args)
            described = describe_policy(policy)
        except UserError as e:  # the run's own policy, gone or changed since it ran (say a file)
            raise UserError(f"cannot load the run's policy {opts.policy!r}: {e}", file=out) from None
        r = simulate(policy, bag, pools, order=order, seed=seed)
        sims.append({"seed": seed, "hosts": r.hosts, "peak_hosts": r.peak_hosts, "cost": r.cost,
                     "makespan_s": r.makespan, "charged_units": r.charged_units})
    return {"out": str(out), "policy": opts.policy, "policy_args": list(opts.policy_args),
            "policy_class": described, "boot_s": boot, "tasks": len(rows),
            "real": {"hosts": summary.get("hosts"), "peak_hosts": summary.get("peak_hosts"),
                     "cost": summary.get("cost"), "elapsed_s": summary.get("elapsed_s")},
            "simulated": sims}
