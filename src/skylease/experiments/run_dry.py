"""``skylease run --dry-run``: what a run would do, from every check a run makes before it starts,
and nothing started or written (no output folder, no store, no worker, no request to a service).

Decisions of ours (the issue is silent):

* The first :data:`FIRST_SHOWN` commands are those the run would dispatch first: job order, or
  under A2HA the random order the run draws from ``--seed`` (and the segment number on a resume).
* ``--resume --dry-run`` reads the store read-only: the tasks without a result (and the failed
  ones with ``--retry-failed``) are those that would run; the money already charged is shown.
* A ``--qos`` service and a ``--report`` server are named, not contacted (the token is checked
  as a run checks it, from the options and files only).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from skylease.experiments.run_options import RunOptions
from skylease.experiments.run_pools import volatility_of
from skylease.experiments.run_prepare import PreparedRun, check_resume, prepare_run
from skylease.experiments.run_qos import tail_policy
from skylease.experiments.run_results import open_run, task_text

#: Commands a dry run lists (the first ones the run would dispatch).
FIRST_SHOWN = 5


def dry_run(job_spec: str, opts: RunOptions, stdin: IO[Any] | None = None) -> dict[str, Any]:
    """What ``skylease run`` would run with these options (see the module docstring)."""
    prep = prepare_run(job_spec, opts, stdin)
    opts = prep.opts
    if opts.tail_qos:
        tail_policy(opts, prep.specs)  # its strategy and credits, checked as the run checks them
    if opts.volatility:
        volatility_of(opts, prep.specs, prep.main_pool)  # the trace is read (a wrong one is refused)
    done, failed, segment, spent = _resumed(prep) if opts.resume else (set(), set(), 0, 0.0)
    if opts.retry_failed:
        done -= failed
    todo = [t for t in prep.job.tasks if t.id not in done]
    if prep.order == "random":
        import numpy as np

        rng = np.random.default_rng(opts.seed + segment)
        todo = [todo[i] for i in rng.permutation(len(todo))]
    out = Path(opts.out)
    return {
        "job": prep.job.source, "out": str(out), "creates_out": not out.exists(), "resume": opts.resume,
        "tasks": len(prep.job.tasks), "to_run": len(todo), "already_done": len(prep.job.tasks) - len(todo),
        "first": [task_text(t.to_json()) for t in todo[:FIRST_SHOWN]], "order": prep.order,
        "policy": opts.policy, "policy_args": list(opts.policy_args), "policy_class": prep.described,
        "pool": prep.main_pool, "pools": _pools(prep), "workers": _most_workers(prep),
        "budget": opts.budget, "spent": spent, "retries": prep.retries, "timeout_s": prep.timeout,
        "tail_qos": opts.tail_qos, "reliable_pool": opts.reliable_pool, "qos": opts.qos,
        "report": opts.report, "volatility": opts.volatility, "warnings": list(prep.warnings),
        "files": _files(prep),
    }


def _files(prep: PreparedRun) -> str | None:
    """What a task takes and brings back (``--transfer``, ``--return``), or None (``--shared``)."""
    f = prep.files
    if f is None:
        return None
    sent = sum(len(v) for v in f.inputs.values())
    said = [f"{sent:,} file(s) sent" if f.inputs else "none sent",
            f"{', '.join(prep.opts.returns)} brought back to {Path(prep.opts.out) / 'files'}"
            if f.returns else "none brought back",
            "working folders removed" if f.cleanup else "working folders kept"]
    return "; ".join(said)


def _resumed(prep: PreparedRun) -> tuple[set[int], set[int], int, float]:
    """A resumed run's tasks with a result, failed ones, next segment number and money spent."""
    store = open_run(prep.opts.out)
    try:
        policy_budget = prep.opts.budget if hasattr(prep.policy, "budget") else None
        check_resume(store, prep.job.fingerprint(), Path(prep.opts.out), policy_budget)
        rows = store.query("SELECT task, status FROM results")
        seg = store.query("SELECT COALESCE(MAX(segment), -1) + 1 AS n FROM segments")
        spent = store.spent_before()
    finally:
        store.close()
    return ({int(r["task"]) for r in rows}, {int(r["task"]) for r in rows if r["status"] == "failed"},
            int(seg[0]["n"]), spent)


def _pools(prep: PreparedRun) -> dict[str, dict[str, Any]]:
    """Each pool's billing and limits, and where its workers come from."""
    shown = {}
    for name, spec in prep.specs.items():
        where = ("Slurm" if "slurm" in str(spec.get("cluster", "")).lower() else "Dask cluster "
                 f"{spec['cluster']}") if "cluster" in spec else \
            f"Dask scheduler {spec['address']}" if "address" in spec else \
            f"SSH hosts {', '.join(h['address'] for h in spec['hosts'])}" if "hosts" in spec else \
            "local processes"
        shown[name] = {k: spec.get(k, d) for k, d in (("price", 0.0), ("billing_unit", 3600.0),
                                                      ("min_units", 1), ("boot_time", 0.0),
                                                      ("max_count", None))}
        shown[name]["workers_from"] = where
    return shown


def _most_workers(prep: PreparedRun) -> int | None:
    """The most workers the policy can have of the main pool at once (None: no limit known)."""
    most = prep.itype.max_count
    n = getattr(prep.policy, "n", None)  # fixed:N
    if isinstance(n, int):
        return n if most is None else min(n, most)
    maximum = getattr(prep.policy, "maximum", None)  # dask-adaptive:MAX
    if isinstance(maximum, int):
        return maximum if most is None else min(maximum, most)
    return most
