"""``skylease run``: a real bag of tasks on real workers (local processes, a Dask cluster or Slurm
jobs), driven by the same policies as the simulator.

:func:`run_job` takes a run checked by :func:`~skylease.experiments.run_prepare.prepare_run` (its
options: :mod:`~skylease.experiments.run_options`; its pools: :mod:`~skylease.experiments.run_pools`;
its policy, ``fixed:N``, ``a2ha[:conservative|aggressive]``, ``dask-adaptive`` or a ``Policy``
subclass of one's own: :mod:`~skylease.experiments.run_policies`; optionally a QoS tail policy on a
reliable pool: :mod:`~skylease.experiments.run_qos`), opens the crash-safe store in the output
folder, runs the :class:`~skylease.runtime.env.WorkerEnvironment` and writes ``summary.json`` and
``report.md`` (with what to do next: :mod:`~skylease.experiments.run_next`).

Decisions of ours (the issue is silent):

* A2HA's adjustment period is a twelfth of the billing unit (the paper's 300 s for an hour).
* Tasks are dispatched in the job's order, except under A2HA, which takes them in a random order
  drawn from ``--seed`` (its random task selection, as in the simulator).
* Ctrl-C ends the run as a stop, not a crash: the workers are released, the segment is closed
  with outcome ``interrupted``, and ``summary.json`` and ``report.md`` describe the partial run
  (with the command that finishes it). A second Ctrl-C while that is written aborts it.
* ``--retry-failed`` (with ``--resume``) moves each failed result to the attempts (outcome
  ``failed``) so that the task runs again; the tasks with an ``ok`` result are never rerun.
* A ``--resume`` with nothing to run (every task has a result, and no ``--retry-failed`` of a
  failed one) starts nothing: no segment, no worker, no service told; it returns the run's summary
  marked ``nothing_to_run`` (rebuilt from the store if the driver died before writing it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from skylease.control.env import Policy
from skylease.experiments.run_next import budget_ran_out, next_steps
from skylease.experiments.run_options import RunOptions
from skylease.experiments.run_pools import (
    billing_of,
    close_backends,
    host_notes,
    least_charge,
    make_backends,
    pool_itype,
    volatility_of,
)
from skylease.experiments.run_prepare import PreparedRun, check_resume, prepare_run
from skylease.experiments.run_qos import Policies, qos_relay, tail_policy
from skylease.experiments.run_reporter import close_reporter, observing, start_reporter
from skylease.experiments.run_results import FAILED_IN_SUMMARY, failed_tasks
from skylease.experiments.run_segments import record_segment, whole_run
from skylease.experiments.store import atomic_write_text, out_folder
from skylease.model.task import Task


def run_job(job_spec: str, opts: RunOptions, on_progress: Callable[[Any], None] | None = None,
            on_notice: Callable[[str], None] | None = None, stdin: IO[Any] | None = None) -> dict[str, Any]:
    """Run (or resume) a job; returns the summary also written to ``OUT/summary.json``.

    ``job_spec`` ``-`` reads the job's shell lines from ``stdin`` (a copy is kept in the output
    folder, which ``--resume`` reads: :mod:`skylease.experiments.run_stdin`).

    Ctrl-C (KeyboardInterrupt) during the run is a stop: the summary comes back with outcome
    ``interrupted`` and the run can be finished with ``--resume``.
    """
    from skylease.experiments.run_stdin import keep_stdin_job
    from skylease.runtime.env import WorkerEnvironment
    from skylease.runtime.retries import RetryRules
    from skylease.runtime.store import STORE_NAME, ResultStore

    prep = prepare_run(job_spec, opts, stdin)
    opts, job, retries, timeout = prep.opts, prep.job, prep.retries, prep.timeout
    specs, main_pool, itype0, policy, order = prep.specs, prep.main_pool, prep.itype, prep.policy, prep.order
    warnings, described = prep.warnings, prep.described
    out = Path(opts.out)
    store_path = out / STORE_NAME
    # A resumed run is checked before anything starts; a new run's folder and store are made only
    # once its pools are up, so a pool that cannot start leaves nothing behind to --resume.
    store = ResultStore(store_path) if opts.resume else None
    reporter = None
    try:
        if store is not None:
            check_resume(store, job.fingerprint(), out, opts.budget if hasattr(policy, "budget") else None)
            finished = _finished_run(store, prep, job_spec)
            if finished is not None:  # nothing to run: no service told, no worker rented
                return finished
        qos = tail_policy(opts, specs) if opts.tail_qos else None
        remote = None
        if opts.qos is not None:  # registered (and its credits ordered) before any work: a refusal stops here
            qos, remote = qos_relay(opts, len(job.tasks), on_notice or _stderr)
        volatility = volatility_of(opts, specs, main_pool) if opts.volatility else None
        # registered before any work (a refused token stops here); a resume continues its run
        reporter = start_reporter(opts, job_spec, job, store_path, store, remote, on_notice or _stderr)
        if reporter is not None:
            on_progress = observing(reporter, on_progress)
        backends = make_backends(opts, specs)
        warnings = [*warnings, *host_notes(backends)]  # hosts of a pool that could not be reached
        for w in warnings:  # (after every check that can refuse the run: a refusal stays one line)
            (on_notice or _stderr)(f"warning: {w}")
        try:
            if store is None:
                out_folder(out)
                keep_stdin_job(job, out)  # (before the store: a run from stdin can always resume)
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
            billing[str(segment)] = {n: billing_of(pool_itype(n, sp, "pools")) for n, sp in specs.items()}
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
                                  on_progress=on_progress, files=prep.files,
                                  rules=RetryRules(set_aside_after=opts.set_aside_after,
                                                   backoff_s=opts.backoff_s))
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
            report, reporter = close_reporter(reporter, store, res.outcome), None
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



def _finished_run(store: Any, prep: PreparedRun, job_spec: str) -> dict[str, Any] | None:
    """A resume with nothing to run (every task has a result; the failed ones are rerun only with
    ``--retry-failed``): the run's summary as it stands, marked ``nothing_to_run``; None otherwise.

    Nothing is started and nothing is written, except when ``summary.json`` does not describe the
    store (the driver died between the last result and the summary): it and ``report.md`` are
    then written from the store, as if a segment had run and rented nothing."""
    opts = prep.opts
    counts = store.counts()
    if "fingerprint" not in store.meta() or counts["left"] or (opts.retry_failed and counts["failed"]):
        return None
    segments = int(store.query("SELECT COALESCE(MAX(segment), -1) + 1 AS n FROM segments")[0]["n"])
    path = Path(opts.out) / "summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    if any(summary.get(k) != v for k, v in counts.items()) or summary.get("segments", 1) != segments:
        summary = _write_summary_of_store(store, prep, job_spec, segments)
    return {**summary, "nothing_to_run": True}


def _write_summary_of_store(store: Any, prep: PreparedRun, job_spec: str, segments: int) -> dict[str, Any]:
    """``summary.json`` and ``report.md`` of a run from its store alone: a segment numbered after
    the last that ran nothing adds nothing to the whole run's figures (:func:`whole_run`)."""
    from skylease.experiments.run_report import write_run_report
    from skylease.runtime.env import RealResult

    nothing = RealResult(outcome="done", elapsed_s=0.0, cost=0.0, done=0, failed=0, unfinished=(), hosts=0,
                         peak_hosts=0, lost=0, retried=0, duplicates_won=0, max_release_lag_s=0.0,
                         host_table=())
    opts = prep.opts
    summary = _summary(store, nothing, opts, job_spec, prep.job, segments, store.spent_before(), 0.0, None,
                       least_charge(prep.itype))
    summary["segment"] = segments - 1  # (the last that ran: the empty one is not in the store)
    del summary["this_segment"]
    summary["policy_class"] = prep.described
    atomic_write_text(Path(opts.out) / "summary.json", json.dumps(summary, indent=2, default=float))
    write_run_report(Path(opts.out), store, summary)
    return summary


def _stderr(text: str) -> None:
    print(f"skylease run: {text}", file=sys.stderr, flush=True)



def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}


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
        "set_aside": dict(res.set_aside or {}), "kept": dict(res.kept or {}),
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
