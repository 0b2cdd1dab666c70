"""`skylease demo`: the tour of every part of the project."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import app
from skylease.cli.common import _out_dir, out
from skylease.cli.live import _with_live_display
from skylease.model.errors import UserError


# -- demo ------------------------------------------------------------------------------------
@app.command()
def demo(
    out_dir: Annotated[Path | None, typer.Option("--out", parser=_out_dir, help="Keep results in this folder "
                                                 "(re-running skips finished cells).")] = None,
    seeds: Annotated[int, typer.Option(min=1, max=100, help="Repetitions per cell.")] = 5,
    inline: Annotated[bool, typer.Option("--inline", help="Run in this process, without worker "
                                         "processes.")] = False,
    workers: Annotated[int | None, typer.Option("--processes", min=1, help="Local processes the "
                                                "simulations are spread over (default: one per core).")]
    = None,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler "
                                                  "(e.g. tcp://host:8786) to use instead of a "
                                                  "local cluster.")] = None,
) -> None:
    """A short tour: a campaign of fixed-size pools on the simulator, on Dask."""
    import os

    from skylease.experiments.demo import (
        DEMO_MEAN_S,
        DEMO_SD_S,
        DEMO_TASKS,
        DEMO_VM,
        fixed_pool_table,
        run_fixed_pool_demo,
    )
    from skylease.experiments.store import out_folder
    from skylease.experiments.sweep import check_cluster

    workers = workers or os.cpu_count() or 1
    check_cluster(scheduler, workers)
    if out_dir is not None:
        out_folder(out_dir)  # before anything is shown: a bad --out is one line, not a half demo
    t0 = time.perf_counter()
    out.rule("[bold]skylease demo")
    out.print(f"Bag: {DEMO_TASKS} tasks, gamma runtimes {DEMO_MEAN_S:.0f} ± {DEMO_SD_S:.0f} s. "
              f"Hosts boot in {DEMO_VM.boot_time:.0f} s and cost ${DEMO_VM.price:.2f} per started "
              f"{DEMO_VM.billing_unit / 3600:.0f} h.")
    where = ("in this process" if inline else f"on the Dask cluster at {scheduler}" if scheduler
             else f"in parallel on {workers} local worker processes")
    out.print(f"1. Fixed pools of n hosts (the user guesses n up front), {seeds} random bags "
              f"each, simulated {where}:")
    with tempfile.TemporaryDirectory(prefix="skylease-demo-") as tmp:
        folder = out_dir if out_dir is not None else Path(tmp)
        res = run_fixed_pool_demo(folder, seeds=seeds, mode="inline" if inline else "processes",
                                  workers=workers, scheduler=scheduler,
                                  progress=sys.stderr.isatty())
        _fail_if_cells_failed(res.failed)
    t = fixed_pool_table(res)
    table = fmt.table("hosts", "makespan (s)", "± sd", "cost ($)", "charged hours", "utilisation",
                  title="FixedPool(n), mean over seeds")
    for row in t.itertuples(index=False):
        table.add_row(str(row.pool_size), f"{row.makespan_s_mean:,.0f}", f"{row.makespan_s_std:,.0f}",
                      f"{row.cost_mean:.2f}", f"{row.charged_units_mean:.1f}",
                      f"{row.utilisation_mean:.0%}")
    out.print(table)
    out.print(f"   {res.ran} cells run, {res.skipped} reused from {out_dir or 'a previous run'}"
              if res.skipped else f"   {res.ran} cells run in {res.elapsed_s:.1f} s.")
    if out_dir is not None:
        out.print(f"   Results: {out_dir / 'results.csv'}")
    out.print("More hosts finish sooner, but each one pays its started hours: picking n well "
              "is what the adaptive policies automate.")
    _demo_mapping()
    _demo_provisioning()
    _demo_a2ha()
    _demo_spequlos()
    _demo_leases()
    _demo_placement()
    _demo_real_run(out_dir)
    _demo_serve()
    _demo_qos_service()
    out.print(f"[dim]demo took {time.perf_counter() - t0:.1f} s[/dim]")


def _demo_mapping() -> None:
    from skylease.experiments.demo import mapping_demo

    out.print("\n2. Batch-mode mapping (thesis ch. 3): 1024 tasks on 32 heterogeneous machines "
              "(CVB, inconsistent), each machine with a random voltage set:")
    t = mapping_demo()
    table = fmt.table("heuristic", "makespan", "C/LB", "flowtime (SPT)", "energy (V²·s)", "time (ms)")
    for r in t.itertuples(index=False):
        table.add_row(r.heuristic, f"{r.makespan:,.0f}", f"{r.rho:.3f}", f"{r.flowtime:,.0f}",
                      f"{r.energy:,.0f}", f"{r.ms:.1f}")
    out.print(table)
    out.print("   Low_3 sweeps 11 values of λ and keeps the best; 'best' is the thesis's selector "
              "(Luo_1 on consistent matrices, a Low heuristic otherwise).")


def _demo_provisioning() -> None:
    from skylease.experiments.demo import provisioning_demo

    out.print("\n3. Provisioning by ILP (HiGHS): 1,000 tasks of 90 s, 16 free local cores plus "
              "Azure small instances at $0.12/h; each plan replayed in the event simulator:")
    t = provisioning_demo()
    table = fmt.table("plan", "time (min)", "cost ($)", "simulated", "solve (ms)")
    for r in t.itertuples(index=False):
        table.add_row(r.plan, f"{r.minutes:g}", f"{r.cost:.2f}",
                      f"{r.sim_minutes:g} min, ${r.sim_cost:.2f}",
                      f"{r.solve_ms:.1f}" if r.solve_ms else "-")
    out.print(table)
    out.print("   The paper's point: a naive fleet pays 91 % more for the same 61 minutes.")


def _demo_a2ha() -> None:
    from skylease.experiments.demo import a2ha_demo

    out.print("\n4. A2HA adaptive hosts (tasks' times unknown in advance): 256 tasks of 150 ± 30 s, "
              "hosts boot in 5 min and are billed per started hour; 20 random orderings:")
    res = a2ha_demo()
    runs = [("A2HA (conservative)", res), *res["baselines"].items()]
    table = fmt.table("policy", "hosts", "wall (min)", "speedup", "cost (host-hours)")
    for label, r in runs:
        table.add_row(label.replace("fixed:", "fixed pool of ").replace("dask", "Dask's adaptive rule"),
                      f"{r['hosts']['mean']:.1f}", f"{r['wall_s']['mean'] / 60:.0f}",
                      f"{r['speedup']['mean']:.1f}", f"{r['cost']['mean']:.1f}")
    out.print(table)
    out.print(f"   Without knowing a single task time, A2HA lands near the optimal "
              f"{res['optimal_hosts']} hosts; Dask's rule, blind to billing, rents a host per task.")


def _demo_spequlos() -> None:
    from skylease.experiments.demo import spequlos_demo

    out.print("\n5. SpeQuloS on a volatile desktop grid (Notre Dame-like, 183 nodes): 1000 tasks of 1 h; "
              "cloud workers bought with 10 % of the workload in credits; 5 paired seeds:")
    t = spequlos_demo()
    table = fmt.table("middleware", "strategy", "hours", "slowdown", "tail removed", "credits",
                  "cloud tasks")
    for r in t.itertuples(index=False):
        table.add_row(r.middleware, r.strategy, f"{r.completion_h:.1f}", f"{r.slowdown:.2f}",
                      "-" if r.tre is None or r.tre != r.tre else f"{r.tre:.0%}",
                      f"{r.credits_share:.0%}", f"{r.cloud_tasks:.1%}")
    out.print(table)
    out.print("   Reschedule (R) and Cloud Duplication (D) remove the tail; Flat (F) cloud workers only "
              "join the queue, which is empty by the time the tail starts. batch-accel is BOINC's own "
              "answer (2025, no cloud, no credits): the tail's jobs go only to its low-turnaround hosts, "
              "with extra copies; on this grid few hosts qualify and the bag ends later (on a SETI-like "
              "grid it ends sooner: skylease reproduce spequlos).")


def _demo_leases() -> None:
    from skylease.experiments.demo import leases_demo

    out.print("\n6. Leases (Haizea): 4 nodes; best-effort leases of 1 node x 1 h at 00:00 and 2 nodes x "
              "40 min at 00:05; at 00:15 an advance reservation asks for all 4 nodes from 00:30 to 01:00:")
    sr, nosr, h10 = leases_demo("NOVM-SR"), leases_demo("NOVM-NOSR"), leases_demo("haizea-1.0")
    for line in sr.timeline():
        out.line(f"   {line}")
    out.print(f"   With suspend/resume (NOVM-SR) the best-effort work is done at "
              f"{sr.summary()['all_best_effort_s'] / 3600:.2f} h; cancelled and restarted (NOVM-NOSR), at "
              f"{nosr.summary()['all_best_effort_s'] / 3600:.2f} h.", markup=False, highlight=False,
              soft_wrap=True)
    first = h10.timeline()[0]
    out.print("   The released Haizea 1.0 schedules otherwise (--config haizea-1.0: 2 s of enactment per "
              "VM, suspensions in that overhead, resumptions at 32 MB/s, shutdown reservations):"
              f"\n   {first}\n"
              f"   and the work is done at {h10.summary()['all_best_effort_s'] / 3600:.2f} h. "
              "Try: skylease leases simulate --help", markup=False, highlight=False, soft_wrap=True)


def _demo_real_run(out_dir: Path | None) -> None:
    from skylease.experiments.demo import real_run_demo

    out.print("\n8. A real run: 40 `sleep` commands (0.5-2 s) on worker processes of this machine, "
              "A2HA renting them at $0.01 per started 10 s with a $0.50 budget:")
    with tempfile.TemporaryDirectory(prefix="skylease-demo-run-") as tmp:
        folder = (out_dir / "real-run") if out_dir is not None else Path(tmp)
        res = _with_live_display(lambda on_progress: real_run_demo(folder, on_progress=on_progress), 0.5)
    out.print(f"   {res['ok']} of {res['tasks']} tasks done in {res['wall_s']:.1f} s on {res['hosts']} "
              f"workers (at most {res['peak_hosts']} at once), ${res['cost']:.2f} charged of the $0.50 "
              f"budget. Try: skylease run --help")


def _demo_serve() -> None:
    from skylease.service.demo import AR_AFTER_S, AR_DURATION_S, AR_NODES, BE_REQUEST, DEMO_SCALE, serve_demo

    out.print(f"\n9. The lease manager as a service: `skylease serve` on a free port of this machine, 2 "
              f"nodes, its clock at {DEMO_SCALE:g} lease seconds per second; a user asks for a best-effort "
              f"lease of {BE_REQUEST['nodes']} node x {BE_REQUEST['duration'] // 3600} h, then for an "
              f"advance reservation of {AR_NODES} nodes {AR_AFTER_S // 60} minutes later for "
              f"{AR_DURATION_S // 60} minutes:")
    from skylease.runtime.leases.sandbox import SandboxUnavailable

    with tempfile.TemporaryDirectory(prefix="skylease-demo-serve-") as tmp:
        try:
            res = serve_demo(tmp)
        except SandboxUnavailable as exc:  # (the server would refuse to start: it never runs a payload bare)
            out.line(f"   Skipped: {exc.message}.")
            return
    out.print(f"   server at {res.url}; times from the first request:", markup=False, highlight=False)
    for line in res.timeline:
        out.line(f"   {line}")
    if res.payload_pid is not None:
        during, after = (_proc_state_words(s) for s in [*res.payload_states, None, None][:2])
        out.print(f"   Lease 1's payload (pid {res.payload_pid}) in /proc: {during} while the reservation "
                  f"ran, {after} after it.", markup=False, highlight=False, soft_wrap=True)
    bars = ", ".join(f"{n} {kind}" for kind, n in sorted(res.dashboard_bars.items()))
    out.print(f"   Its dashboard (the leases page at {res.url}/ while it runs, logged in with the same "
              f"token) drew these leases on its Gantt chart as {bars or 'no'} bars. "
              "See docs/howto/dashboard.md.",
              markup=False, highlight=False, soft_wrap=True)
    out.print(f"   {res.seconds:.1f} s from the server's start to its stop. Try: skylease serve --help",
              markup=False, highlight=False)


def _demo_qos_service() -> None:
    from skylease.experiments.demo import qos_service_demo

    out.print("\n10. SpeQuloS as a service, in process on a database: an administrator deposits 5,000 "
              "credits for alice and for bob; each registers a simulated bag (1000 tasks of 1 h, XWHEP on a "
              "Notre Dame-like grid) with their own strategy and orders its credits; the service's "
              "Scheduler decides the cloud workers and bills each account:")
    with tempfile.TemporaryDirectory(prefix="skylease-demo-qos-") as tmp:
        rows = qos_service_demo(tmp)
    table = fmt.table("user", "strategy", "hours", "no QoS", "spent", "ordered", "predicted", "balance",
                  title="hours to complete the bag; credits")
    for r in rows:
        b = r["bag"]
        table.add_row(r["owner"], r["strategy"], f"{r['completion_s'] / 3600:.2f}",
                      f"{r['without_s'] / 3600:.2f}", f"{b['credits_spent']:,.0f}",
                      f"{b['credits_ordered']:,.0f}",
                      "-" if b["t_pred"] is None else f"{b['t_pred'] / 3600:.2f}", f"{r['balance']:,.0f}")
    out.print(table)
    out.print("   The same Scheduler serves real runs over HTTP: skylease run JOB --qos URL. Try: "
              "skylease qos --help", markup=False, highlight=False)


def _proc_state_words(state: str | None) -> str:
    return {"T": "stopped (T)", "S": "running (S, sleeping)", "R": "running (R)", None: "gone"}.get(
        state, f"in state {state}")


def _demo_placement() -> None:
    from skylease.experiments.demo import placement_demo

    out.print("\n7. VM placement on an opportunistic desktop cloud (thesis ch. 6): 130 VMs on the thesis's "
              "lab (70 x 4 + 39 x 8 cores), a student at half of the desktops; energy by Model C:")
    t = placement_demo()
    table = fmt.table("heuristic", "desktops used", "of which with a user", "energy (kWh)", "saving vs FF")
    for r in t.itertuples(index=False):
        table.add_row(r.algorithm, str(r.desktops_used), str(r.with_user), f"{r.kwh:,.0f}",
                      f"{r.saving_vs_ff:.0%}")
    out.print(table)
    out.print("   Sorting puts VMs on desktops already running one, then on those with a user (whose power "
              "is paid for anyway). Try: skylease place --help")


def _fail_if_cells_failed(failed: list[dict]) -> None:
    if failed:
        first = failed[0]
        raise UserError(f"{len(failed)} cell(s) failed; first {first['params']}: {first['error']}")
