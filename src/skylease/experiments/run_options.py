"""``skylease run``'s options (:class:`RunOptions`) and their checks, made before anything starts.

Decisions of ours (the issue is silent):

* Every option is checked (:func:`check_options`) before anything is started or written: a
  mistake leaves no folder, no store and no process behind. What needs the pools file (pool
  names, the main pool's billing unit) is checked by
  :func:`~skylease.experiments.run_prepare.prepare_run` right after it is read.
* A run's retries and task timeout come from the command line, else from the job file, else none
  (:func:`job_settings`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skylease.experiments.run_policies import parse_policy
from skylease.model.errors import UserError
from skylease.model.limits import MAX_RETRIES
from skylease.runtime.credentials import token_for

#: The pool of a run without a pools file (this machine's worker processes).
DEFAULT_POOL = "local"


@dataclass
class RunOptions:
    """Everything ``skylease run`` takes besides the job."""

    out: Path = Path("skylease-out")
    # one worker per core, as xargs -P 0 and GNU parallel (docs/cli.md)
    policy: str = field(default_factory=lambda: f"fixed:{os.cpu_count() or 1}")
    policy_args: list[str] = field(default_factory=list)  # KEY=VALUE for a MODULE:CLASS policy
    pools_file: Path | None = None
    hosts: str | None = None  # --hosts user@h1,user@h2[:port]: a pool of SSH hosts (run_hosts.py)
    slots: int | None = None  # --slots: each --hosts host's task slots (default: its cores)
    pool: str | None = None
    max_workers: int | None = None
    price: float = 0.0
    billing_unit: float = 60.0
    min_units: int = 1
    budget: float | None = None
    retries: int | None = None  # None: the job file's ``retries``, else 0 (see job_settings)
    task_timeout_s: float | None = None  # None: the job file's ``timeout``, else none
    backoff_s: float = 0.0  # the first retry's delay, doubled at each retry of a task (0: at once)
    set_aside_after: int = 3  # failed tasks in a row that set a machine aside (0: never)
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
    # a task's files (runtime/files.py): sent with it, brought back, its working folder removed;
    # --shared (the default without them) runs the tasks in the driver's folder
    transfer: list[str] = field(default_factory=list)
    returns: list[str] = field(default_factory=list)
    cleanup: bool = False
    shared: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def stored_options(meta: Mapping[str, Any]) -> RunOptions:
    """The options a run recorded in its store's meta (its last segment's)."""
    o = meta.get("options") or {}
    opts = RunOptions(**{k: v for k, v in o.items() if k in RunOptions.__dataclass_fields__})
    opts.out = Path(opts.out)
    opts.pools_file = Path(o["pools_file"]) if o.get("pools_file") else None
    return opts


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


def check_options(opts: RunOptions) -> None:
    """Every run option, checked before anything starts: a :class:`UserError` naming the option.

    What needs the pools file (pool names, the main pool's billing unit) is checked by
    :func:`~skylease.experiments.run_prepare.prepare_run` right after it is read, still before
    anything is written.
    """
    def number(value: float | None, name: str, *, positive: bool = False) -> None:
        if value is None:
            return
        ok = math.isfinite(value) and (value > 0 if positive else value >= 0)
        if not ok:
            raise UserError(f"must be a finite number {'> 0' if positive else '>= 0'}, got {value:g}",
                            field=name)

    _check_hosts(opts)
    number(opts.price, "--price")
    number(opts.billing_unit, "--billing-unit", positive=True)
    number(opts.budget, "--budget")
    number(opts.task_timeout_s, "--timeout", positive=True)
    number(opts.backoff_s, "--backoff")
    number(opts.tail_credits, "--tail-credits")
    number(opts.qos_credits, "--qos-credits")
    number(opts.tail_tick_s, "tail_tick_s", positive=True)
    number(opts.time_scale, "--trace-scale", positive=True)
    number(opts.trace_start, "--trace-start")
    for value, name, least in ((opts.max_workers, "--max-workers", 1), (opts.min_units, "min_units", 0),
                               (opts.seed, "--seed", 0), (opts.retries, "--retries", 0),
                               (opts.set_aside_after, "--set-aside-after", 0)):
        if value is not None and value < least:
            raise UserError(f"must be an integer >= {least}, got {value}", field=name)
    for value, name in ((opts.pool, "--pool"), (opts.reliable_pool, "--reliable-pool"),
                        (opts.volatile_pool, "--volatile-pool"), (opts.volatility, "--volatility"),
                        (opts.tail_qos, "--tail-qos"), (opts.policy, "--policy"), (opts.args, "--args")):
        if value is not None and not value.strip():  # an empty value is a mistake, not "not given"
            raise UserError("must not be empty (leave the option out instead)", field=name)
    _check_files(opts)
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
        tail_strategy(opts.tail_qos)
        if opts.reliable_pool is None:
            raise UserError("--tail-qos needs --reliable-pool NAME (a pool of the pools file)",
                            field="--reliable-pool")
    elif opts.qos is None and (opts.reliable_pool is not None or opts.tail_credits is not None):
        raise UserError("goes with --tail-qos", field="--reliable-pool" if opts.reliable_pool is not None
                        else "--tail-credits")
    if opts.volatility is None and (opts.volatile_pool is not None or opts.trace_start is not None):
        raise UserError("goes with --volatility", field="--volatile-pool" if opts.volatile_pool is not None
                        else "--trace-start")


def _check_files(opts: RunOptions) -> None:
    """``--transfer``, ``--return``, ``--cleanup`` and ``--shared`` fit together (each pattern is
    checked against the job's tasks by :func:`skylease.runtime.files.plan_files`)."""
    for option, patterns in (("--transfer", opts.transfer), ("--return", opts.returns)):
        for p in patterns:
            if not p.strip():
                raise UserError("must not be empty (leave the option out instead)", field=option)
    staged = bool(opts.transfer or opts.returns)
    if opts.shared and staged:
        raise UserError("the hosts share the driver's files: no --transfer or --return with it "
                        "(leave --shared out to give each task a working folder of its own)",
                        field="--shared")
    if opts.cleanup and not staged:
        raise UserError("goes with --transfer or --return (without them a task runs in the driver's "
                        "folder, which is not removed)", field="--cleanup")


def _check_hosts(opts: RunOptions) -> None:
    """``--hosts`` (its hosts parsed), alone of its kind; ``--slots`` with it."""
    if opts.hosts is None:
        if opts.slots is not None:
            raise UserError("goes with --hosts", field="--slots")
        return
    if opts.pools_file is not None:
        raise UserError("--hosts and --pools both say where workers come from: keep one", field="--hosts")
    if opts.slots is not None and not 1 <= opts.slots <= 1024:
        raise UserError(f"must be an integer from 1 to 1024, got {opts.slots}", field="--slots")
    from skylease.experiments.run_hosts import hosts_option

    hosts_option(opts.hosts, opts.slots)


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
    qos_strategy(opts.qos_strategy, "--qos-strategy")
    # the service's own bounds, checked here so that a mistake is told before any work
    if opts.qos_credits is not None and opts.qos_credits > MAX_CREDITS:
        raise UserError(f"at most {MAX_CREDITS:g} credits, got {opts.qos_credits:g}", field="--qos-credits")
    if opts.qos_infrastructure is not None and not re.fullmatch(INFRASTRUCTURE, opts.qos_infrastructure):
        raise UserError("must be 1 to 64 letters, digits or ._:/@+- (starting with a letter or digit), "
                        f"got {opts.qos_infrastructure!r}", field="--qos-infrastructure")


def qos_strategy(spec: str, option: str = "--tail-qos") -> Any:
    """A built-in tail strategy by name (``--qos-strategy``, ``--tail-qos``); ``none`` is refused."""
    from skylease.control.qos import parse_strategy

    try:
        strategy = parse_strategy(spec)
    except (UserError, ValueError) as e:
        raise UserError(getattr(e, "message", str(e)), field=option) from None
    if strategy is None:
        raise UserError(f"'none' cuts no tail: leave {option} out", field=option)
    return strategy


def tail_strategy(spec: str) -> Any:
    """``--tail-qos``: a built-in strategy's name or a strategy of one's own (``FILE.py:CLASS``,
    ``MODULE:CLASS``, built with its defaults); ``none`` is refused."""
    from skylease.control.qos import load_strategy

    strategy = load_strategy(spec, None, ("--tail-qos", "--tail-qos"))
    if strategy is None:
        raise UserError("'none' cuts no tail: leave --tail-qos out", field="--tail-qos")
    return strategy

