"""Every check of a run that starts nothing and writes nothing (:func:`prepare_run`): the options,
the job, the output folder, the pools and the policy. ``skylease run`` and ``skylease run
--dry-run`` share it; :func:`check_resume` is what a resume checks once its store is open.

Decisions of ours (the issue is silent):

* ``fixed:N`` over the main pool's most workers is said (one warning line, also kept in
  ``summary.json``), not refused: the cap is as often a default (the machine's cores) as a choice.
* A2HA on a pool whose boot time is not shorter than its billing unit is refused here rather than
  when the policy starts (after the store is made).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from skylease.control.env import Policy
from skylease.experiments.run_options import RunOptions, check_options, job_settings
from skylease.experiments.run_policies import describe_policy, parse_policy
from skylease.experiments.run_pools import pool_itype, pool_types
from skylease.model.errors import UserError
from skylease.model.instance import InstanceType


@dataclass
class PreparedRun:
    """What a run is, checked and built before anything starts or is written (:func:`prepare_run`):
    its options (policy files resolved), job, retries and timeout, pools, main pool and policy."""

    opts: RunOptions
    job: Any  # a skylease.runtime.jobs.Job
    retries: int
    timeout: float | None
    specs: dict[str, dict[str, Any]]
    main_pool: str
    itype: InstanceType
    policy: Policy
    order: str
    warnings: list[str]
    described: str
    files: Any = None  # a skylease.runtime.files.TaskFiles, with --transfer or --return


def prepare_run(job_spec: str, opts: RunOptions, stdin: IO[Any] | None = None) -> PreparedRun:
    """Every check of a run that starts nothing and writes nothing: the options, the job (read from
    ``stdin`` when ``job_spec`` is ``-``: :func:`~skylease.experiments.run_stdin.load_run_job`), the
    output folder, the pools and the policy. ``skylease run`` and ``skylease run --dry-run`` share it."""
    from skylease.control.plugins import find_in_working_folder, resolve_file_spec
    from skylease.experiments.run_stdin import load_run_job
    from skylease.runtime.store import STORE_NAME, store_kind

    find_in_working_folder()  # `package.module:function`, `--policy module:Class`: as `python -m` finds them
    opts = replace(opts, policy=resolve_file_spec(opts.policy),  # the same file from any folder (replay)
                   tail_qos=None if opts.tail_qos is None else resolve_file_spec(opts.tail_qos))
    check_options(opts)
    out = Path(opts.out)
    job = load_run_job(job_spec, opts.args, out, resume=opts.resume, stdin=stdin)
    retries, timeout = job_settings(job, opts)
    files = None
    if opts.transfer or opts.returns:  # every input found and measured before anything is made
        from skylease.runtime.files import plan_files

        files = plan_files(job, opts.transfer, opts.returns, cleanup=opts.cleanup, base=Path.cwd(),
                           out=out)
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
    itype0 = pool_itype(main_pool, specs[main_pool], "pools")
    policy, order = parse_policy(opts.policy, main_pool, opts.budget, itype0.billing_unit, opts.policy_args)
    _check_policy_fits(policy, itype0, opts)
    warnings = _policy_capped(policy, main_pool, itype0, opts)  # said once the run starts
    return PreparedRun(opts, job, retries, timeout, specs, main_pool, itype0, policy, order, warnings,
                       describe_policy(policy), files)


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
        why = "--max-workers"
    elif opts.hosts is not None:
        why = "--slots per host of --hosts"
    else:
        why = f"this machine's cores; --max-workers {policy.n} raises it"
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


def check_resume(store: Any, fingerprint: str, out: Path, budget: float | None) -> None:
    """A resumed run must be the same job, with money left under its budget."""
    meta = store.meta()
    if "fingerprint" in meta and meta["fingerprint"] != fingerprint:
        raise UserError(f"the job differs from the one this run started ({meta.get('job')})", file=out)
    spent = store.spent_before()
    if budget is not None and spent > budget:
        raise UserError(f"the budget is spent ({spent:g} of {budget:g})", field="--budget")
