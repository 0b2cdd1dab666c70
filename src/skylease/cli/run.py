"""`skylease run`, `status` and `export`: a bag of tasks on real workers, and its results (one task,
and the failed ones as a job: tasks.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import app
from skylease.cli.common import _out_dir, err, out
from skylease.cli.format import duration_option
from skylease.cli.live import _with_live_display


# -- run (real workers) ---------------------------------------------------------------------
@app.command("run")
def run_cmd(
    job: Annotated[str, typer.Argument(metavar="JOB", help="A text file (one shell command per line), a "
                                       ".toml job (command template + grid or CSV), "
                                       "package.module:function, or - for shell commands on standard "
                                       "input (one per line, as a text file; kept in --out, so --resume "
                                       "needs nothing piped in).")],
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Output folder: results.sqlite, summary.json, "
                                          "report.md and plots.")] = Path("skylease-out"),
    policy: Annotated[str | None, typer.Option(help="fixed:N | a2ha[:conservative|aggressive] | "
                                               "dask-adaptive[:MAX] | MODULE:CLASS | FILE.py:CLASS (a Policy "
                                               "subclass of your own) | an installed policy's name.",
                                               show_default="fixed:CORES, one worker per core")] = None,
    policy_arg: Annotated[list[str] | None, typer.Option("--policy-arg", help="KEY=VALUE: a parameter of "
                                                         "a MODULE:CLASS policy, converted by its "
                                                         "constructor's annotations (repeatable).")]
    = None,
    args: Annotated[str | None, typer.Option(help="For a callable: a JSON file with the list of "
                                             "arguments (one item per task).")] = None,
    pools: Annotated[Path | None, typer.Option(help="A TOML file of [pools.NAME] tables (price, "
                                               "billing_unit, boot_time, max_count; cluster + kwargs "
                                               "or address for other Dask clusters; hosts + ssh + "
                                               "slots for SSH hosts).")] = None,
    hosts: Annotated[str | None, typer.Option("--hosts", metavar="[USER@]HOST[:PORT],...",
                                              help="Run on these SSH hosts (your own ssh configuration, "
                                              "BatchMode): the pool 'hosts', one worker per slot.")] = None,
    slots: Annotated[int | None, typer.Option("--slots", min=1, max=1024, help="Task slots per --hosts "
                                              "host (default: its cores).")] = None,
    pool: Annotated[str | None, typer.Option(help="The pool the policy rents (default: the first).")]
    = None,
    max_workers: Annotated[int | None, typer.Option("--max-workers", min=1, help="Most workers of the "
                                                    "default local pool (its max_count; default: the "
                                                    "cores).")] = None,
    price: Annotated[float, typer.Option(min=0, help="Price ($) per billing unit of the default pool.")]
    = 0.0,
    billing_unit: Annotated[float, typer.Option(metavar="DURATION", parser=duration_option(positive=True),
                                                help="Billing unit of the default pool: a duration "
                                                "(60, 90s, 15m, 1h).")]
    = 60.0,
    budget: Annotated[float | None, typer.Option(help="Hard cap on money, $ (A2HA): the charged cost "
                                                 "never exceeds it.")] = None,
    retries: Annotated[int | None, typer.Option(min=0, help="Retries of a task that exits non-zero "
                                                "(default: the job file's retries, else 0).")] = None,
    backoff: Annotated[float, typer.Option(metavar="DURATION", parser=duration_option(),
                                           help="Wait before a failed task's retry: this long before "
                                           "the first, doubling at each (at most 5m; default 0: at "
                                           "once).")] = 0.0,
    set_aside_after: Annotated[int, typer.Option(min=0, help="Set a machine aside after this many "
                                                 "failed tasks in a row on it (its workers start again "
                                                 "on other machines; 0: never).")] = 3,
    timeout: Annotated[float | None, typer.Option(metavar="DURATION", parser=duration_option(positive=True),
                                                  help="How long before a task is killed, a duration "
                                                  "(exit 124; default: the job file's timeout, else "
                                                  "none).")]
    = None,
    tail_qos: Annotated[str | None, typer.Option(help="Cut the tail with a QoS strategy, e.g. 9A-C-D, "
                                                 "or one's own, FILE.py:CLASS or MODULE:CLASS "
                                                 "(needs --reliable-pool).")] = None,
    reliable_pool: Annotated[str | None, typer.Option(help="The pool the QoS policy rents.")] = None,
    tail_credits: Annotated[float | None, typer.Option(help="Credits for the QoS policy (15 per CPU "
                                                       "hour; default: from the budget).")] = None,
    qos: Annotated[str | None, typer.Option("--qos", help="A SpeQuloS service (`skylease serve` URL) "
                                            "that serves the tail (needs --reliable-pool).")] = None,
    qos_token: Annotated[str | None, typer.Option(help="Your token on the --qos service (default: "
                                                  "$SKYLEASE_TOKEN, else the token file of `skylease "
                                                  "login` for that server).")] = None,
    qos_credits: Annotated[float | None, typer.Option(help="Credits ordered for this run on the --qos "
                                                      "service (refused if your balance is short).")]
    = None,
    qos_strategy: Annotated[str, typer.Option(help="The --qos service's strategy for this run.")] = "9C-C-R",
    qos_infrastructure: Annotated[str | None, typer.Option(help="The infrastructure this run's history "
                                                           "counts for (default: local-POOL).")] = None,
    report: Annotated[str | None, typer.Option("--report", help="A `skylease serve` URL this run "
                                               "reports its task table to (its Runs page).")] = None,
    report_token: Annotated[str | None, typer.Option(help="Your token on the --report service (default: "
                                                        "$SKYLEASE_TOKEN, else the token file of "
                                                        "`skylease login` for that server).")] = None,
    volatility: Annotated[str | None, typer.Option(help="Kill and restart workers following an "
                                                   "availability trace (name or file).")] = None,
    volatile_pool: Annotated[str | None, typer.Option(help="The pool --volatility plays on.")] = None,
    trace_scale: Annotated[float, typer.Option("--trace-scale", help="Trace seconds per real "
                                               "second for --volatility (60: a trace hour per real "
                                               "minute).")] = 60.0,
    trace_start: Annotated[float | None, typer.Option(metavar="DURATION", parser=duration_option(),
                                                      help="Where in the trace the run starts, a "
                                                      "duration from its beginning "
                                                      "(default: drawn from --seed).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the task order (A2HA) and of the trace offset.")] = 0,
    resume: Annotated[bool, typer.Option("--resume", help="Finish a run that stopped: only tasks "
                                         "without a recorded result run again.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="With --resume: run the failed "
                                               "tasks again too (the ok ones are not rerun).")] = False,
    transfer: Annotated[list[str] | None, typer.Option("--transfer", metavar="PATTERN",
                                                       help="A file each task takes with it to a working "
                                                       "folder of its own, relative to this folder: {} is "
                                                       "the task's argument (a line's last word, or a "
                                                       "grid's one parameter), {.} without its "
                                                       "extension, {name} a parameter; *?[ glob "
                                                       "(repeatable).")] = None,
    returns: Annotated[list[str] | None, typer.Option("--return", metavar="PATTERN",
                                                      help="A file each task brings back from its "
                                                      "working folder into OUT/files/ID/, same "
                                                      "replacements (repeatable).")] = None,
    cleanup: Annotated[bool, typer.Option("--cleanup", help="Remove each task's working folder once "
                                          "its files are back (with --transfer/--return).")] = False,
    shared: Annotated[bool, typer.Option("--shared", help="The workers see this folder's files: "
                                         "tasks run here, nothing is copied (the default without "
                                         "--transfer/--return).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would run (tasks, first commands, "
                                          "policy, pools, limits, output folder) and exit: nothing is "
                                          "started or written.")] = False,
) -> None:
    """Run a bag of tasks on real Dask workers, with the same policies as the simulator."""
    from skylease.experiments.run import run_job
    from skylease.experiments.run_options import RunOptions

    opts = RunOptions(out=out_dir, policy_args=list(policy_arg or []), pools_file=pools,
                      hosts=hosts, slots=slots, pool=pool, max_workers=max_workers,
                      price=price, billing_unit=billing_unit, budget=budget, retries=retries,
                      backoff_s=backoff, set_aside_after=set_aside_after,
                      task_timeout_s=timeout, tail_qos=tail_qos, reliable_pool=reliable_pool,
                      tail_credits=tail_credits, volatility=volatility, volatile_pool=volatile_pool,
                      time_scale=trace_scale, trace_start=trace_start, seed=seed, resume=resume,
                      retry_failed=retry_failed, args=args, qos=qos, qos_token=qos_token,
                      qos_credits=qos_credits, qos_strategy=qos_strategy,
                      qos_infrastructure=qos_infrastructure, report=report, report_token=report_token,
                      transfer=list(transfer or []), returns=list(returns or []), cleanup=cleanup,
                      shared=shared)
    if policy is not None:
        opts.policy = policy
    if dry_run:
        from skylease.experiments.run_dry import dry_run as plan

        _print_dry_run(plan(job, opts, stdin=sys.stdin))
        return
    res = _with_live_display(lambda on_progress: run_job(job, opts, on_progress=on_progress,
                                                         on_notice=_notice, stdin=sys.stdin), budget)
    if res.get("nothing_to_run"):  # a resume of a run that has every task's result: one line
        _print_nothing_to_run(res)
        raise typer.Exit(1 if res["failed"] else 0)
    segments = f", {res['segments']} segments" if res.get("segments", 1) > 1 else ""
    table = fmt.table("", "value", title=f"{res['job']} ({res['outcome']}{segments})")
    shown = {"wall_s": fmt.duration, "cost": fmt.money}
    for k, label in (("tasks", "tasks"), ("ok", "succeeded"), ("failed", "failed"), ("left", "not run"),
                     ("wall_s", "wall time"), ("cost", "cost"), ("hosts", "workers rented"),
                     ("peak_hosts", "most at once"), ("lost", "tasks interrupted"), ("retried", "retries")):
        table.add_row(label, shown.get(k, fmt.number)(res[k]))
    out.print(table)
    out.print(f"Results: {Path(res['out']) / 'results.sqlite'}; report: {Path(res['out']) / 'report.md'}",
              markup=False, highlight=False, soft_wrap=True)
    _print_failed(res["failed_tasks"], res["failed"])
    for machine, why in (res.get("set_aside") or {}).items():
        out.print(f"set aside: {machine} ({why}); its workers ran on other machines", markup=False,
                  highlight=False, soft_wrap=True)
    for machine, why in (res.get("kept") or {}).items():
        out.print(f"kept: {machine} ({why}; its pool has no other machine to use)", markup=False,
                  highlight=False, soft_wrap=True)
    _print_next(res)
    if res["outcome"] == "interrupted":
        raise typer.Exit(130)  # main() says "interrupted" on stderr
    if res["failed"] or res["left"]:
        raise typer.Exit(1)


#: Failed tasks listed on the terminal (all are in report.md's table up to 50, and in the export).
FAILED_SHOWN = 10


def _print_dry_run(d: dict) -> None:
    """`skylease run --dry-run`: what would run, and that nothing was done."""
    t = fmt.table("", "value", title=f"dry run: {d['job']} (nothing started or written)")
    t.add_row("output folder", d["out"] + (" (would be created)" if d["creates_out"] else
                                           " (resumed)" if d["resume"] else ""))
    t.add_row("tasks to run", f"{d['to_run']:,} of {d['tasks']:,}" if d["resume"] else f"{d['to_run']:,}")
    t.add_row("policy", d["policy"] + "".join(f" --policy-arg {a}" for a in d["policy_args"]))
    t.add_row("task order", "random (from --seed)" if d["order"] == "random" else "job order")
    t.add_row("most workers", "no limit" if d["workers"] is None else str(d["workers"]))
    t.add_row("budget", "none" if d["budget"] is None else fmt.money(d["budget"]))
    if d["spent"]:
        t.add_row("already spent", fmt.money(d["spent"]))
    t.add_row("retries / task timeout", f"{d['retries']} / " + ("none" if d["timeout_s"] is None
                                                                  else fmt.duration(d["timeout_s"])))
    for name, p in d["pools"].items():
        most = "no limit" if p["max_count"] is None else str(p["max_count"])
        main = " (the policy's)" if name == d["pool"] else ""
        t.add_row(f"pool {name}{main}", f"{fmt.money(p['price'])} per {fmt.duration(p['billing_unit'])} "
                  f"(at least {p['min_units']} unit(s)), boot {fmt.duration(p['boot_time'])}, at most {most} "
                  f"workers, {p['workers_from']}")
    t.add_row("task files", d["files"] or "none: tasks run in this folder (--shared)")
    for key, label in (("tail_qos", "tail QoS strategy"), ("reliable_pool", "reliable pool"),
                       ("qos", "QoS service"), ("report", "reported to"), ("volatility", "volatility trace")):
        if d[key] is not None:
            t.add_row(label, str(d[key]))
    out.print(t)
    out.print(f"First {len(d['first'])} command(s):", markup=False)
    for c in d["first"]:
        out.line(f"  {c}")
    for w in d["warnings"]:
        out.line(f"warning: {w}")


def _print_nothing_to_run(res: dict) -> None:
    """`run --resume` of a run with nothing left to run (no worker was rented): where it stands."""
    where = f"results: {Path(res['out']) / 'results.sqlite'}, report: {Path(res['out']) / 'report.md'}"
    if res["failed"]:
        retry = (res.get("next") or {}).get("retry_failed", "the same command with --retry-failed")
        said = (f"every task has a result ({res['ok']} ok, {res['failed']} failed), nothing to resume; "
                f"run the failed ones again with: {retry}; {where}")
    else:
        said = f"the run is complete ({res['ok']} of {res['tasks']} tasks ok), nothing to resume; {where}"
    out.line(f"{res['out']}: {said}")


def _print_failed(failed: list[dict], total: int) -> None:
    if not total:
        return
    out.print(f"Failed tasks ({total}):", markup=False, highlight=False)
    for f in failed[:FAILED_SHOWN]:
        where = f"line {f['line']}, " if f.get("line") is not None else ""
        why = f" [{f['stderr']}]" if f.get("stderr") else ""
        out.print(f"  {where}exit code {f['exit_code']} ({f['attempts']} attempt(s)): {f['command']}{why}",
                  markup=False, highlight=False, soft_wrap=True)
    if total > FAILED_SHOWN:
        out.print(f"  and {total - FAILED_SHOWN} more", markup=False, highlight=False)


def _print_next(res: dict) -> None:
    """After a run that failed or stopped: finish it, rerun its failed tasks, export, the report."""
    nxt = res.get("next") or {}
    if not (res["failed"] or res["left"]):
        return
    lines = []
    out_of = res.get("budget_ran_out")
    if out_of:
        spent, allowed, least = (fmt.money(out_of[k]) for k in ("spent", "budget", "least_charge"))
        out.print(f"The budget ran out: {spent} spent of the {allowed} allowed (a worker costs at least "
                  f"{least}); {res['left']} task(s) not run.",
                  markup=False, highlight=False, soft_wrap=True)
    if "resume" in nxt:
        bigger = " with a larger --budget" if out_of else ""
        lines.append(f"finish the run ({res['left']} task(s) not run){bigger}: {nxt['resume']}")
    if "retry_failed" in nxt:
        lines.append(f"run the failed tasks again once fixed: {nxt['retry_failed']}")
    if "failed" in nxt:
        lines.append(f"or fix their commands in a job file of them: {nxt['failed']}")
    if "export" in nxt:
        lines.append(f"every task's result, one row each: {nxt['export']}")
    if "report" in nxt:
        lines.append(f"read the report: {nxt['report']}")
    if not lines:
        return
    out.print("Next:", markup=False)
    for line in lines:
        out.line(f"  {line}")


def _notice(text: str) -> None:
    err.line(f"skylease run: {text}")


@app.command("status")
def status_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show a running or finished run: tasks done, failed and left, money, workers (read-only)."""
    from skylease.experiments.run_status import status

    st = status(out_dir)
    if as_json:
        print(json.dumps(st))
        return
    t = fmt.table("", "value", title=f"{st['out']}: {st['state']}")
    shown = {"cost": fmt.money, "budget": lambda b: fmt.money(b, none="no budget")}
    for k in ("job", "tasks", "ok", "failed", "left", "cost", "budget", "segments"):
        t.add_row(k, shown.get(k, fmt.number)(st[k]))
    for p, n in st["workers"].items():
        t.add_row(f"workers {p}", str(n))
    out.print(t)
    _print_next(st)


ATTEMPTS_HELP = ("One row per try instead: each failed, lost or cancelled try and the one that gave the "
                 "result, with its worker and machine (default file OUT/attempts.FORMAT).")


@app.command("export")
def export_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a run.")],
    fmt: Annotated[str | None, typer.Option("--format", help="csv | json | parquet (parquet needs "
                                            "pyarrow) | jobs (a job file `skylease run` takes back); "
                                            "default: from --output's suffix, else csv.")]
    = None,
    output: Annotated[str | None, typer.Option("--output", help="The file to write (default: "
                                               "OUT/tasks.FORMAT, OUT/jobs.txt for jobs; - for standard "
                                               "output).")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only the tasks that failed or have no "
                                         "result.")] = False,
    attempts: Annotated[bool, typer.Option("--attempts", help=ATTEMPTS_HELP)] = False,
) -> None:
    """Write every task's result, one row per task: line, command, state, exit code, attempts,
    times, worker, cost share, stdout and stderr tails, result, and one param_NAME column per
    parameter of a grid or CSV job."""
    from skylease.experiments.run_results import export_run

    where, n, data = export_run(out_dir, fmt=fmt, output=output, failed=failed, attempts=attempts)
    if data is not None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    out.line(f"{n} {'tries' if attempts else 'task(s)'} written to {where}")
