"""The ``skylease`` command. It parses options and prints; the work is done by the library."""

from __future__ import annotations

import copy
import functools
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from skylease.model.errors import UserError

if TYPE_CHECKING:
    import click

app = typer.Typer(
    name="skylease",
    help="Plan, run and simulate bags of tasks and resource leases on clouds, clusters and grids.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
data_app = typer.Typer(help="List, fetch and import the public data sets used by reproductions.",
                       invoke_without_command=True, no_args_is_help=False)
app.add_typer(data_app, name="data")
etc_app = typer.Typer(help="Generate and inspect ETC (expected time to compute) instances.",
                      no_args_is_help=True)
app.add_typer(etc_app, name="etc")
traces_app = typer.Typer(help="Inspect availability traces (desktop grids, best-effort grids, spot).",
                         no_args_is_help=True)
app.add_typer(traces_app, name="traces")
plan_app = typer.Typer(help="Provision cloud (and free local) instances for min cost under a "
                       "deadline, with HiGHS; or the cost/time Pareto front.", no_args_is_help=True)
app.add_typer(plan_app, name="plan")
simulate_app = typer.Typer(help="Simulate online provisioning policies on bags of tasks.",
                           no_args_is_help=True)
app.add_typer(simulate_app, name="simulate")
reproduce_app = typer.Typer(help="Regenerate a paper's tables and figures, ours beside theirs.",
                            no_args_is_help=True)
app.add_typer(reproduce_app, name="reproduce")
leases_app = typer.Typer(help="Simulate lease workloads (best-effort, advance-reservation and immediate "
                         "leases) with the lease scheduler; request, list, show and cancel leases on a "
                         "`skylease serve` server.", no_args_is_help=True)
app.add_typer(leases_app, name="leases")
serve_app = typer.Typer(help="Run the lease manager as a server (HTTP API, OpenAPI at /docs); `serve user "
                        "add NAME` gives a user a token.", invoke_without_command=True, no_args_is_help=False)
app.add_typer(serve_app, name="serve")
serve_user_app = typer.Typer(help="Add, list and remove the server's users.", no_args_is_help=True)
serve_app.add_typer(serve_user_app, name="user")
qos_app = typer.Typer(help="SpeQuloS on a `skylease serve` server: accounts and credits, bags of tasks, "
                      "predictions (runs use it with `skylease run --qos URL`).", no_args_is_help=True)
app.add_typer(qos_app, name="qos")

# no emoji codes: a user's text such as 'nonsense:abc:' must print as typed
out = Console(emoji=False)
err = Console(stderr=True, emoji=False)


def _version(value: bool) -> None:
    if value:
        from skylease import __version__  # importlib.metadata: tens of ms, only for --version

        out.print(f"skylease {__version__}")
        raise typer.Exit()


def _out_dir(text: str | Path) -> Path:
    """An --out folder as typed: "" would be the working folder (Path("") is "."), and " " a folder
    named by a space, so a blank name is refused before anything is written."""
    if not str(text).strip():
        raise UserError(f"{str(text)!r} is not a folder name (give one; . is the working folder)",
                        field="--out")
    return Path(text)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """skylease: plan, run and simulate bags of tasks and resource leases."""


# -- demo ------------------------------------------------------------------------------------
@app.command()
def demo(
    out_dir: Annotated[Path | None, typer.Option("--out", parser=_out_dir, help="Keep results in this folder "
                                                 "(re-running skips finished cells).")] = None,
    seeds: Annotated[int, typer.Option(min=1, max=100, help="Repetitions per cell.")] = 5,
    inline: Annotated[bool, typer.Option("--inline", help="Run in this process, without worker "
                                         "processes.")] = False,
    workers: Annotated[int, typer.Option(min=1, help="Local worker processes.")] = 2,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler "
                                                  "(e.g. tcp://host:8786) to use instead of a "
                                                  "local cluster.")] = None,
) -> None:
    """A short tour: a campaign of fixed-size pools on the simulator, on Dask."""
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
    table = Table("hosts", "makespan (s)", "± sd", "cost ($)", "charged hours", "utilisation",
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
    table = Table("heuristic", "makespan", "C/LB", "flowtime (SPT)", "energy (V²·s)", "time (ms)")
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
    table = Table("plan", "time (min)", "cost ($)", "simulated", "solve (ms)")
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
    table = Table("policy", "hosts", "wall (min)", "speedup", "cost (host-hours)")
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
    table = Table("middleware", "strategy", "hours", "slowdown", "tail removed", "credits",
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
        out.print(f"   {line}", markup=False, highlight=False, soft_wrap=True)
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
            out.print(f"   Skipped: {exc.message}.", markup=False, highlight=False, soft_wrap=True)
            return
    out.print(f"   server at {res.url}; times from the first request:", markup=False, highlight=False)
    for line in res.timeline:
        out.print(f"   {line}", markup=False, highlight=False, soft_wrap=True)
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
    table = Table("user", "strategy", "hours", "no QoS", "spent", "ordered", "predicted", "balance",
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
    table = Table("heuristic", "desktops used", "of which with a user", "energy (kWh)", "saving vs FF")
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


# -- data ------------------------------------------------------------------------------------
DirOption = Annotated[Path | None, typer.Option("--dir", help="Data folder (default: "
                                                "$SKYLEASE_DATA or ~/.local/share/skylease).")]


@data_app.callback()
def data_list(ctx: typer.Context, data_dir: DirOption = None) -> None:
    """List the data sets, where they come from, their license, and whether they are here."""
    if ctx.invoked_subcommand is not None:
        return
    from skylease.traces import datasets

    folder = data_dir or datasets.default_data_dir()
    present = {s["name"]: s for s in datasets.status(folder)}
    table = Table("name", "here", "files", "source", "license", title=f"Data in {folder}")
    for d in datasets.DATASETS:
        st = present[d.name]
        table.add_row(d.name, "yes" if st["present"] else "no",
                      f"{st['files_present']}/{len(d.files)}", d.source, d.license)
    out.print(table)
    out.print("Where each comes from:")
    width = max(len(d.name) for d in datasets.DATASETS)
    for d in datasets.DATASETS:  # whole, never wrapped or cut, so that they can be copied
        print(f"  {d.name:<{width}}  {d.homepage or (d.urls[0] if d.urls else '-')}")
    out.print("Get one: skylease data fetch NAME   (or, offline: skylease data import NAME PATH)")


@data_app.command("fetch")
def data_fetch(name: str, data_dir: DirOption = None) -> None:
    """Download a data set from its public source into the data folder."""
    from skylease.traces import datasets

    path = datasets.fetch(name, data_dir)
    out.print(f"{name}: {path}")


@data_app.command("import")
def data_import(
    name: str,
    path: Annotated[Path, typer.Argument(help="Folder holding a local copy of the data set.")],
    link: Annotated[bool, typer.Option(help="Symlink the files instead of copying.")] = False,
    data_dir: DirOption = None,
) -> None:
    """Import a local copy of a data set (checked file by file) into the data folder."""
    from skylease.traces import datasets

    dest = datasets.import_local(name, path, data_dir, link=link)
    out.print(f"{name}: {dest}")


@data_app.command("path")
def data_path(name: str, data_dir: DirOption = None) -> None:
    """Print the folder holding a data set (error if it is not here)."""
    from skylease.traces import datasets

    print(datasets.locate(name, data_dir))


# -- mapping (thesis chapter 3) --------------------------------------------------------------
@app.command("map")
def map_cmd(
    etc_file: Annotated[Path, typer.Argument(help="ETC file in the Braun format.")],
    heuristic: Annotated[str, typer.Option(help="min-min, max-min, sufferage, mct, met, olb, luo1, "
                                           "luo2, luo2b, low1, low2, low3 or best; or MODULE:CLASS | "
                                           "FILE.py:CLASS (a MappingHeuristic subclass of your own) | an "
                                           "installed heuristic's name.")] = "min-min",
    heuristic_arg: Annotated[list[str] | None, typer.Option("--heuristic-arg", help="KEY=VALUE: a parameter "
                                                            "of a MODULE:CLASS heuristic, converted by its "
                                                            "constructor's annotations (repeatable).")]
    = None,
    lam: Annotated[float | None, typer.Option("--lambda", help="λ of low1/low2/low3 (default: "
                                              "best of 0, 0.1, ..., 1).")] = None,
    voltages: Annotated[int | None, typer.Option(help="Seed drawing each machine's voltage set; "
                                                 "adds the energy.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (with the assignment).")]
    = False,
) -> None:
    """Map the tasks of an ETC instance onto its machines with one heuristic."""
    from skylease.experiments.mapping import map_file

    res = map_file(etc_file, heuristic, lam=lam, voltage_seed=voltages,
                   heuristic_args=list(heuristic_arg or []))
    if as_json:
        print(json.dumps(res))
        return
    table = Table("heuristic", "tasks x machines", "λ", "makespan", "flowtime (SPT)", "energy")
    table.add_row(res["heuristic"], f"{res['tasks']} x {res['machines']}",
                  "-" if res["lambda"] is None else f"{res['lambda']:.1f}",
                  f"{res['makespan']:,.2f}", f"{res['flowtime']:,.2f}",
                  "-" if res["energy"] is None else f"{res['energy']:,.2f}")
    out.print(table)


# -- placement (thesis chapter 6) ------------------------------------------------------------
@app.command("place")
def place_cmd(
    desktops: Annotated[str, typer.Option(help="thesis-lab (the thesis's 109 desktops, 70 x 4 + 39 x 8 "
                                          "cores, in a random order drawn with --seed) or a desktops "
                                          "CSV file (cores[, name, power, monitor_w, user_w, "
                                          "user_minutes]).")],
    vms: Annotated[str, typer.Option(help="synthetic:N (N requests from the stand-in UnaCloud trace) or "
                                     "a VMs CSV file (cores, minutes[, name, memory_gb, disk_gb]).")],
    users: Annotated[float | None, typer.Option(help="Share of desktops with a user (0-1), chosen at "
                                                "random, each for U[60, 240] minutes; replaces the "
                                                "file's users (default: the file's; none on thesis-lab).")]
    = None,
    algorithm: Annotated[str, typer.Option(help="ff, ffd, bf (Best-Fit Decreasing), sorting (Alg. 11), "
                                           "similar (Alg. 12); also rr (Round Robin = ff) and "
                                           "bf-trace (Best-Fit in request order); or MODULE:CLASS | "
                                           "FILE.py:CLASS (a PlacementAlgorithm subclass of your own) | "
                                           "an installed algorithm's name.")] = "sorting",
    algorithm_arg: Annotated[list[str] | None, typer.Option("--algorithm-arg", help="KEY=VALUE: a parameter "
                                                            "of a MODULE:CLASS algorithm, converted by its "
                                                            "constructor's annotations (repeatable).")]
    = None,
    energy_model: Annotated[str, typer.Option(help="Energy accounting: c (incremental, desktop state "
                                              "at placement; the default), b (incremental while the "
                                              "user is there) or a (Eqs. 6.2-6.11 literally).")] = "c",
    secondary: Annotated[str, typer.Option(help="Sorting's second VM key: time_desc, none or "
                                           "time_asc.")] = "time_desc",
    seed: Annotated[int, typer.Option(min=0, help="Seed of the lab order, synthetic VMs and users.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: desktops_used, energy_wh, "
                                          "placement, unplaced, per_desktop, ...")] = False,
) -> None:
    """Place VMs on desktops shared with their users (thesis chapter 6) and report energy."""
    from skylease.experiments.placement import place_request

    res = place_request(desktops, vms, algorithm=algorithm, users=users, energy_model=energy_model,
                        seed=seed, secondary=secondary, algorithm_args=list(algorithm_arg or []))
    if as_json:
        print(json.dumps(res))
        return
    table = Table("algorithm", "VMs placed", "desktops used", "with a user", "energy (Wh)",
                  title=f"energy model {res['energy_model'].upper()}")
    table.add_row(res["algorithm"], f"{res['vms'] - len(res['unplaced'])} of {res['vms']}",
                  f"{res['desktops_used']} of {res['desktops']}",
                  f"{res['desktops_used_with_user']} of {res['desktops_with_user']}",
                  f"{res['energy_wh']:,.1f}")
    out.print(table)
    for u in res["unplaced"]:
        out.print(f"  not placed: {u['vm']}: {u['reason']}", markup=False, highlight=False)


@etc_app.command("generate")
def etc_generate(
    out_file: Annotated[Path, typer.Argument(help="Where to write the instance (Braun format).")],
    tasks: Annotated[int, typer.Option(min=1)] = 512,
    machines: Annotated[int, typer.Option(min=1)] = 16,
    method: Annotated[str, typer.Option(help="cvb (Ali et al.) or range (Braun et al.).")] = "cvb",
    v_task: Annotated[float, typer.Option(help="CVB task heterogeneity (CV).")] = 0.6,
    v_mach: Annotated[float, typer.Option(help="CVB machine heterogeneity (CV).")] = 0.3,
    mu: Annotated[float, typer.Option(help="CVB mean task time.")] = 1000.0,
    r_task: Annotated[float, typer.Option(help="Range-based task range (hi 3000, lo 100).")]
    = 3000.0,
    r_mach: Annotated[float, typer.Option(help="Range-based machine range (hi 1000, lo 10).")]
    = 1000.0,
    consistency: Annotated[str, typer.Option(help="fc, pc-half, pc-even, pc-quarter or oc.")]
    = "oc",
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Generate an ETC instance (seeded) and write it in the Braun file format."""
    from skylease.experiments.mapping import generate_file

    res = generate_file(out_file, tasks=tasks, machines=machines, method=method, v_task=v_task,
                        v_mach=v_mach, mu=mu, r_task=r_task, r_mach=r_mach,
                        consistency=consistency, seed=seed)
    out.print(f"wrote {out_file}: {tasks} x {machines}, mean {res['mean']:,.1f}")


@etc_app.command("stats")
def etc_stats_cmd(
    etc_file: Annotated[Path, typer.Argument(help="ETC file in the Braun format.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Print an instance's size, mean, heterogeneities and consistency."""
    from skylease.experiments.mapping import stats_file

    res = stats_file(etc_file)
    if as_json:
        print(json.dumps(res, default=float))
        return
    table = Table("statistic", "value")
    for k, v in res.items():
        table.add_row(k, f"{v:,.4g}" if isinstance(v, float) else str(v))
    out.print(table)


@traces_app.command("stats")
def traces_stats_cmd(
    traces: Annotated[list[str], typer.Argument(help="Trace names (seti, nd, g5klyo, g5kgre, spot10, "
                                                "spot100, lanl) or files: FTA .tab(.gz), spot .json(.gz), "
                                                "SWF .swf(.gz), or a directory of .tr files.")],
    seed: Annotated[int, typer.Option(help="Seed of the generated traces (seti, nd).")] = 0,
    nodes: Annotated[int | None, typer.Option(min=1, help="Nodes (generated traces, spot ladders).")] = None,
    days: Annotated[float | None, typer.Option(min=0.001, help="Keep only the first DAYS days.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Table 2/3 statistics (node counts; availability and unavailability quartiles) of traces."""
    from skylease.traces.avail import format_stats_table, stats_with_paper

    rows = stats_with_paper(traces, seed, n_nodes=nodes, duration_s=None if days is None else days * 86400)
    if as_json:
        print(json.dumps(rows, default=float))
        return
    out.print(format_stats_table(rows), markup=False, highlight=False, soft_wrap=True)


ConfigOption = Annotated[Path | None, typer.Option("--config", help="TOML file overriding the "
                                                   "paper's use case (catalog, types, [job], "
                                                   "[options], [grid]).")]


def _plan_cmd(model: str, config: Path | None, deadline: float | None, budget: float | None,
              weight: float | None, as_json: bool) -> None:
    from skylease.experiments.provisioning import load_problem, solve_mode

    problem = load_problem(model, config)
    plan = solve_mode(problem, deadline=deadline, budget=budget, weight=weight)
    if as_json:
        print(json.dumps(plan.to_json()))
    elif not plan.ok:
        raise UserError(plan.detail.get("message", f"no plan ({plan.status})"))
    else:
        table = Table("type", "instances (per phase or interval)", "billed units")
        for name, counts in plan.instances.items():
            if any(counts):
                table.add_row(name, " ".join(str(c) for c in counts),
                              str(plan.billed_units.get(name, 0)))
        out.print(table)
        unit = 3600 if problem.unit == "h" else 60
        out.print(f"cost ${plan.cost:.2f}, completes in {plan.makespan_s / unit:g} {problem.unit} "
                  f"(solved in {plan.solve_ms:.1f} ms)")
        if "summary" in plan.detail:
            out.print(plan.detail["summary"])
    if not plan.ok:
        raise typer.Exit(1)


Deadline = Annotated[float | None, typer.Option(help="Deadline (hours for mapreduce, minutes for "
                                                "hybrid): cheapest plan meeting it.")]
Budget = Annotated[float | None, typer.Option(help="Budget ($): fastest plan within it.")]
Weight = Annotated[float | None, typer.Option(help="0..1: weight of cost against time on the "
                                              "Pareto front (1 = cost only).")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")]


@plan_app.command("mapreduce")
def plan_mapreduce(config: ConfigOption = None, deadline: Deadline = None, budget: Budget = None,
                   weight: Weight = None, as_json: JsonFlag = False) -> None:
    """MapReduce on EC2/EMR: instance mix for the map and reduce phases (paper eqs 1-17).

    Without --deadline, --budget or --weight: the fastest feasible plan."""
    _plan_cmd("mapreduce", config, deadline, budget, weight, as_json)


@plan_app.command("hybrid")
def plan_hybrid(config: ConfigOption = None, deadline: Deadline = None, budget: Budget = None,
                weight: Weight = None, as_json: JsonFlag = False) -> None:
    """Free local cores plus cloud instances per time interval (paper eqs 18-25, Watershed).

    Without --deadline, --budget or --weight: the fastest feasible plan."""
    _plan_cmd("hybrid", config, deadline, budget, weight, as_json)


@plan_app.command("multi")
def plan_multi(config: ConfigOption = None, deadline: Deadline = None, budget: Budget = None,
               weight: Weight = None, as_json: JsonFlag = False) -> None:
    """Several Watershed models whose input data sit in different places (paper eqs 28-37): where
    each runs, moving data at a price. Config: scenario = "A" | "B" or [[models]] tables."""
    _plan_cmd("multi", config, deadline, budget, weight, as_json)


@plan_app.command("pareto")
def plan_pareto(
    model: Annotated[str, typer.Argument(help="mapreduce, hybrid or multi.")],
    config: ConfigOption = None,
    plot: Annotated[Path | None, typer.Option(help="Write the front as a PNG/PDF/SVG plot.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """The cost/time Pareto front: min cost at every deadline of the grid, dominated points dropped."""
    from skylease.experiments.provisioning import front, load_problem, plot_front
    from skylease.experiments.report import check_output

    if plot is not None:
        check_output(plot, "--plot")  # before the front is solved and printed
    problem = load_problem(model, config)
    plans = front(problem)
    if plot is not None:
        plot_front(plans, plot, title=f"{model}: cost vs completion time")
    if as_json:
        print(json.dumps([p.to_json() for p in plans]))
        return
    unit = 3600 if problem.unit == "h" else 60
    table = Table(f"completes in ({problem.unit})", "cost ($)", title=f"{model}: Pareto front")
    for p in sorted(plans, key=lambda p: p.makespan_s):
        table.add_row(f"{p.makespan_s / unit:g}", f"{p.cost:.2f}")
    out.print(table)
    if plot is not None:
        out.print(f"plot: {plot}")


@reproduce_app.command("ilp")
def reproduce_ilp_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for tables, plots and report.md.")],
) -> None:
    """ILP provisioning paper: R11-R14, the 91 % / 11.4 % comparisons, MapReduce points, fronts."""
    from skylease.experiments.ilp_report import reproduce_ilp

    rep = reproduce_ilp(out_dir)
    table = Table("claim", "paper", "ours (plan)", "ours (simulated)", title="Watershed points")
    for r in rep.points.itertuples(index=False):
        table.add_row(r.claim, f"{r.paper_min:g} min, ${r.paper_cost:.2f}",
                      f"{r.ours_min:g} min, ${r.ours_cost:.2f}", f"{r.sim_min:g} min, ${r.sim_cost:.2f}")
    out.print(table)
    for r in rep.ratios.itertuples(index=False):
        out.print(f"  {r.claim}: paper {r.paper:g}, ours {r.ours:.2f}")
    out.print(f"Report: {out_dir / 'report.md'}")


@reproduce_app.command("a2ha")
def reproduce_a2ha_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for tables, plots and report.md.")],
    quick: Annotated[bool, typer.Option(help="20 orderings and a smaller grid (seconds, not minutes).")]
    = False,
    orderings: Annotated[int | None, typer.Option(min=1, help="Orderings per configuration (default: "
                                                  "200, the paper's; 20 with --quick).")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Dask worker processes for the grid.")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler.")] = None,
) -> None:
    """A2HA paper: Figures 9-12, Tables 1-2, Figures 4b/6b and what billing awareness buys."""
    from rich.progress import Progress

    from skylease.experiments.a2ha_report import reproduce_a2ha

    kwargs = dict(quick=quick, orderings=orderings, workers=workers, scheduler=scheduler)
    if err.is_terminal:
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task("simulated runs", total=None)
            rep = reproduce_a2ha(out_dir, progress=lambda d, t: bar.update(task, completed=d, total=t),
                                 **kwargs)
    else:
        rep = reproduce_a2ha(out_dir, **kwargs)
    table = Table("claim", "paper", "ours", "holds", title=f"A2HA, {rep['orderings']} orderings per "
                  f"configuration ({rep['seconds']:.0f} s)")
    for c in rep["claims"]:
        table.add_row(c["claim"], str(c["paper"]), str(c["ours"]), "yes" if c["holds"] else "no")
    out.print(table)
    out.print(f"{rep['held']} of {rep['checked']} checks hold; the report says why the others differ.")
    out.print(f"Report: {Path(rep['out']) / 'report.md'}")


@reproduce_app.command("spequlos")
def reproduce_spequlos_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for runs.csv, tables, plots and report.md.")],
    quick: Annotated[bool, typer.Option(help="Two traces (nd, spot10) and 2 seeds: seconds, not minutes.")]
    = False,
    seeds: Annotated[int | None, typer.Option(min=1, help="Runs per environment (default 10; 2 with "
                                              "--quick; the paper's scale is about 37).")] = None,
    traces: Annotated[str | None, typer.Option(help="Comma-separated traces (default: all six).")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Dask worker processes.")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler.")] = None,
    cloud_buffer: Annotated[int, typer.Option(min=1, help="BOINC: replicas a cloud worker asks for per "
                                              "request (its work buffer; 3 as a BOINC client).")] = 3,
) -> None:
    """SpeQuloS paper: Table 1, Figure 2, the 18 strategies (Figures 6-7), 9C-C-R (Figures 8-9), Table 7."""
    from skylease.experiments.spequlos_report import reproduce_spequlos

    chosen = None if traces is None else [t.strip() for t in traces.split(",") if t.strip()]
    if chosen is not None and not chosen:
        raise UserError("no trace given", field="--traces")
    rep = reproduce_spequlos(out_dir, quick=quick, seeds=seeds, traces=chosen, workers=workers,
                             scheduler=scheduler, progress=err.is_terminal, cloud_buffer=cloud_buffer)
    table = Table("claim", "paper", "ours", "holds", "gated", title=f"SpeQuloS, {rep['runs']} runs "
                  f"({rep['seconds']:.0f} s)")
    for c in rep["claims"]:
        table.add_row(c["claim"], str(c["paper"]), str(c["ours"]), "yes" if c["holds"] else "no",
                      "gated" if c["gated"] else "reported")
    out.print(table)
    out.print(f"{rep['held']} of {rep['checked']} gated checks hold ({rep['reported']} values reported); "
              "the report says why the others differ.")
    out.print(f"Report: {Path(rep['out']) / 'report.md'}")


@reproduce_app.command("haizea")
def reproduce_haizea_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for runs.csv, tables, plots and report.md.")],
    quick: Annotated[bool, typer.Option(help="The three Table 1 workloads only, one image draw "
                                        "(about 2.5 minutes instead of about 31 on 2 cores).")] = False,
    workloads: Annotated[str | None, typer.Option(help="Comma-separated RHO/DELTA/SIZE workloads, e.g. "
                                                  "10/3/medium,30/1/small (default: all 72).")] = None,
    configs: Annotated[str | None, typer.Option(help="Comma-separated configurations (default: all six: "
                                                "NOVM-NOSR, NOVM-SR, VM-PREDEPLOY, VM-MULT, "
                                                "VM-REUSE-UNIFORM, VM-REUSE-SKEWED).")] = None,
    image_seeds: Annotated[int | None, typer.Option(min=1, help="Image draws for the Table 1 rows of the "
                                                    "image configurations (default 5; 1 with --quick).")]
    = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Dask worker processes.")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler.")] = None,
) -> None:
    """Haizea paper: the no-AR baseline, Table 1 and Figure 2 (72 workloads x 6 configurations)."""
    from skylease.experiments.haizea_report import reproduce_haizea

    def split(text: str | None, name: str) -> list[str] | None:
        if text is None:
            return None
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise UserError("nothing given", field=name)
        return items

    rep = reproduce_haizea(out_dir, quick=quick, workloads=split(workloads, "--workloads"),
                           configs=split(configs, "--configs"), image_seeds=image_seeds, workers=workers,
                           scheduler=scheduler, progress=err.is_terminal)
    table = Table("claim", "paper", "ours", "holds",
                  title=f"Haizea, {rep['runs']} runs ({rep['seconds']:.0f} s)")
    for c in rep["claims"]:
        table.add_row(c["claim"], str(c["paper"]), str(c["ours"]), "yes" if c["holds"] else "no")
    out.print(table)
    out.print(f"{rep['held']} of {rep['checked']} checks hold; the report says why the others differ.")
    out.print(f"Report: {Path(rep['out']) / 'report.md'}")


@reproduce_app.command("thesis-mapping")
def reproduce_thesis_mapping_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir, help="Folder for tables, plots and "
                                          "report.md (re-running resumes).")],
    quick: Annotated[bool, typer.Option(help="A few instances per cell (minutes, not days).")]
    = False,
    instances: Annotated[int | None, typer.Option(min=1, help="Instances per cell (default: "
                                                  "3 with --quick, else the thesis's 1000).")]
    = None,
    sizes: Annotated[str, typer.Option(help="Comma-separated sizes.")] = "512x16,1024x32,2048x64",
    workers: Annotated[int | None, typer.Option(min=1, help="Dask worker processes.")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler.")]
    = None,
) -> None:
    """Thesis chapter 3: the section 3.4 example, Tables 3.6-3.8, Figure 3.14 and the energy study."""
    from skylease.experiments.thesis.mapping_report import reproduce_thesis_mapping
    from skylease.experiments.thesis.mapping_study import SIZES

    chosen = tuple(s.strip() for s in sizes.split(",") if s.strip())
    bad = [s for s in chosen if s not in SIZES]
    if bad or not chosen:
        raise UserError(f"sizes must be among {', '.join(SIZES)}, got {sizes!r}", field="--sizes")
    rep = reproduce_thesis_mapping(out_dir, quick=quick, instances=instances, sizes=chosen,
                                   workers=workers, scheduler=scheduler,
                                   progress=sys.stderr.isatty())
    oc = rep.gains[(rep.gains["consistency"] == "oc")].dropna(subset=["thesis_gain"])
    table = Table("heuristic", "makespan", "thesis", title="Section 3.4 example (λ = 0.8)")
    for r in rep.example.itertuples(index=False):
        table.add_row(r.heuristic, f"{r.makespan:,.0f}", f"{r.thesis_makespan:,.0f}")
    out.print(table)
    out.print(f"Table 3.8, OC cells within 2 pp of the thesis: "
              f"{int((oc['diff_pp'].abs() <= 2).sum())} of {len(oc)} "
              f"(max |diff| {oc['diff_pp'].abs().max():.2f} pp, {rep.instances} instances/cell)")
    for c in rep.claims:
        mark = "ok" if c["holds"] else "differs"
        out.print(f"  \\[{mark}] {c['claim']}: {c['ours']}")
    out.print(f"Report: {out_dir / 'report.md'}")


@reproduce_app.command("thesis-placement")
def reproduce_thesis_placement_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for CSVs, plots and report.md "
                                          "(re-running resumes).")],
    quick: Annotated[bool, typer.Option(help="5 instances, 4 sizes, a short online study (seconds).")]
    = False,
    instances: Annotated[int | None, typer.Option(min=1, help="Instances per cell (default: the "
                                                  "thesis's 30; 5 with --quick).")] = None,
    online: Annotated[bool, typer.Option(help="Also run the placement-over-time study.")] = True,
) -> None:
    """Thesis chapter 6: the worked example, Figures 6.2-6.3 (0-50 % users, 40-130 VMs), online variant."""
    from skylease.experiments.thesis.placement_report import reproduce_thesis_placement

    rep = reproduce_thesis_placement(out_dir, quick=quick, instances=instances, online=online,
                                     progress=err.is_terminal)
    table = Table("claim", "thesis", "ours", "holds",
                  title=f"Thesis ch. 6, {rep.instances} instances per cell (grid {rep.grid_s:.1f} s)")
    for c in rep.claims:
        table.add_row(c["claim"], c["thesis"], c["ours"], "yes" if c["holds"] else "no")
    out.print(table)
    dw = rep.done_when
    out.print(f"Sorting saves {', '.join(f'{v:.1f} % vs {a.upper()}' for a, v in dw['savings'].items())} "
              f"at 50 % busy, {dw['n_vms']} VMs; 50 % busy below 0 % in {dw['lower_at_50']} of "
              f"{dw['cells']} cells.")
    out.print(f"Report: {out_dir / 'report.md'}")


# -- simulate -------------------------------------------------------------------------------
@simulate_app.command("a2ha")
def simulate_a2ha_cmd(
    workload: Annotated[str, typer.Option(help="image | synthetic | outsystems | long (the paper's), "
                                          "a WfCommons .json(.gz), a .csv of runtimes, or "
                                          "normal|gamma|lognormal:N:MEAN:SD, constant:N:SECONDS.")],
    preset: Annotated[str | None, typer.Option(help="conservative (0.5/0.5, default) or aggressive "
                                               "(0.75/0.75).")] = None,
    creation_ratio: Annotated[float | None, typer.Option(help="Initial creationRatio, 0..1.")] = None,
    increase_ratio: Annotated[float | None, typer.Option(help="increaseRatio, 0..1.")] = None,
    budget: Annotated[float | None, typer.Option(help="Hard cap on money: the charged cost never "
                                                 "exceeds it.")] = None,
    budget_factor: Annotated[float, typer.Option(help="The paper's soft budget: beta x the minimum "
                                                 "cost (hosts work (unit - boot)/beta).")] = 1.0,
    initial_hosts: Annotated[int, typer.Option(help="Hosts rented at t = 0.")] = 1,
    orderings: Annotated[int, typer.Option(help="Random task orderings (runs).")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the orderings (and of redrawn task times).")] = 0,
    boot: Annotated[float, typer.Option(help="Host boot time, seconds (charged, no work).")] = 300.0,
    unit: Annotated[float, typer.Option(help="Billing unit, seconds.")] = 3600.0,
    price: Annotated[float, typer.Option(help="Price per billing unit.")] = 1.0,
    compare: Annotated[bool, typer.Option("--compare", help="Also run a fixed pool of the optimal "
                                          "size and Dask's adaptive rule on the same orderings.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """A2HA: budget-aware adaptive host allocation for a bag of tasks with unknown task times."""
    from rich.progress import Progress

    from skylease.experiments.a2ha import study

    kwargs = dict(preset=preset, creation_ratio=creation_ratio, increase_ratio=increase_ratio,
                  budget=budget, budget_factor=budget_factor, initial_hosts=initial_hosts,
                  orderings=orderings, seed=seed, boot_s=boot, unit_s=unit, price=price, compare=compare)
    if as_json or not err.is_terminal:
        res = study(workload, **kwargs)
        if as_json:
            print(json.dumps(res))
            return
    else:
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task("orderings", total=orderings)
            res = study(workload, progress=lambda i: bar.update(task, completed=i), **kwargs)
    out.print(f"{res['workload']}: {res['tasks']} tasks, {res['orderings']} orderings, "
              f"{res['policy']}; optimal hosts {res['optimal_hosts']}")
    cols = [("hosts", 1, "hosts created"), ("wall_s", 1 / 60, "wall time (min)"), ("speedup", 1, "speedup"),
            ("charged_hours", 1, "charged (h)"), ("cost", 1, "cost"),
            ("interrupted_tasks", 1, "interrupted tasks"), ("wasted_s", 1 / 60, "wasted (min)"),
            ("continued_hosts", 1, "continued hosts")]
    runs = [("A2HA", res), *res.get("baselines", {}).items()]
    table = Table("mean ± sd", *(label for label, _ in runs))
    for k, f, label in cols:
        table.add_row(label, *(f"{r[k]['mean'] * f:.1f} ± {r[k]['std'] * f:.1f}" for _, r in runs))
    out.print(table)
    if res["unfinished_runs"]:
        out.print(f"{res['unfinished_runs']} of {res['orderings']} runs stopped with tasks unfinished "
                  f"(on average {res['unfinished']['mean']:.1f}): the budget could not buy another unit")


@simulate_app.command("bag")
def simulate_bag_cmd(
    workload: Annotated[str, typer.Option(help="What `simulate a2ha --workload` takes: image | synthetic "
                                          "| outsystems | long, a WfCommons .json(.gz), a .csv of "
                                          "runtimes, normal|gamma|lognormal:N:MEAN:SD, constant:N:SECONDS.")],
    policy: Annotated[str, typer.Option(help="As `skylease run --policy`: fixed:N | a2ha[:PRESET] | "
                                        "dask-adaptive[:MAX] | MODULE:CLASS | FILE.py:CLASS | an "
                                        "installed policy's name.")],
    policy_arg: Annotated[list[str] | None, typer.Option("--policy-arg", help="KEY=VALUE: a parameter of "
                                                         "a MODULE:CLASS policy (repeatable).")] = None,
    budget: Annotated[float | None, typer.Option(help="Hard cap on money, given to a policy that "
                                                 "takes `budget`.")] = None,
    orderings: Annotated[int, typer.Option(help="Runs (A2HA: random task orders; redrawn workloads: "
                                           "new task times).")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the runs: the same seed gives every policy the "
                                      "same bags.")] = 0,
    boot: Annotated[float, typer.Option(help="Host boot time, seconds (charged, no work).")] = 300.0,
    unit: Annotated[float, typer.Option(help="Billing unit, seconds.")] = 3600.0,
    price: Annotated[float, typer.Option("--price", "--hosts-price", help="Price of a host per billing "
                                         "unit.")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Any bag policy (a built-in or your own class) on the simulated cloud of `simulate a2ha`."""
    import os

    from skylease.experiments.bag import study

    if os.getcwd() not in sys.path:  # `--policy module:Class` is found as `skylease run` finds it
        sys.path.insert(0, os.getcwd())
    res = study(workload, policy, policy_arg or (), budget=budget, orderings=orderings, seed=seed,
                boot_s=boot, unit_s=unit, price=price)
    if as_json:
        print(json.dumps(res))
        return
    out.print(f"{res['workload']}: {res['tasks']} tasks, {res['orderings']} run(s), {res['order']} order",
              markup=False, highlight=False, soft_wrap=True)
    out.print(f"policy: {res['policy_class']}", markup=False, highlight=False, soft_wrap=True)
    table = Table("mean ± sd", "value")
    for k, f, label in (("wall_s", 1 / 60, "makespan (min)"), ("cost", 1, "cost"), ("hosts", 1, "hosts"),
                        ("charged_hours", 1, "charged (h)"), ("speedup", 1, "speedup"),
                        ("interrupted_tasks", 1, "interrupted tasks"), ("unfinished", 1, "unfinished tasks")):
        table.add_row(label, f"{res[k]['mean'] * f:.1f} ± {res[k]['std'] * f:.1f}")
    out.print(table)
    if res["unfinished_runs"]:
        out.print(f"{res['unfinished_runs']} of {res['orderings']} run(s) ended with tasks unfinished (on "
                  f"average {res['unfinished']['mean']:.1f}): no host was left to run them", markup=False,
                  highlight=False, soft_wrap=True)


@simulate_app.command("spequlos")
def simulate_spequlos_cmd(
    middleware: Annotated[str, typer.Option(help="boinc or xwhep.")],
    trace: Annotated[str, typer.Option(help="seti, nd, g5klyo, g5kgre, spot10, spot100, lanl, or a "
                                       "trace file (FTA .tab, spot .json, SWF .swf, .tr directory).")],
    bot: Annotated[str, typer.Option(help="small (1000 x 1 h), big (10000 x 1 min) or random "
                                     "(Table 6 of the paper).")],
    strategy: Annotated[str, typer.Option(help="WHEN-HOWMANY-HOW: WHEN 9C|9A|V, HOWMANY G|C, "
                                          "HOW F|R|D (e.g. 9A-G-D), or none; a strategy of "
                                          "one's own: FILE.py:CLASS or MODULE:CLASS (a "
                                          "skylease.control.qos.CloudStrategy); BOINC only: "
                                          "batch-accel (BOINC's own batch acceleration) or "
                                          "batch-accel+STRATEGY.")] = "9C-C-R",
    strategy_arg: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE: a parameter of a strategy of one's own (repeatable).")] = None,
    seed: Annotated[int, typer.Option(help="Seed: submission time, BoT draw, node powers, boots.")] = 0,
    credits: Annotated[float | None, typer.Option(help="Credits ordered for the BoT (default: 10 % "
                                                  "of its workload, 15 credits per CPU hour).")] = None,
    alpha: Annotated[float, typer.Option(help="Correction factor of the completion-time "
                                         "prediction (fitted from past runs).")] = 1.0,
    random_arrivals: Annotated[str | None, typer.Option(help="RANDOM only: quantile (default: task i of n "
                                                        "at the (i - 1/2)/n quantile of the Weibull), "
                                                        "iid (i.i.d. Weibull offsets) or epsilon "
                                                        "(iid with every gap capped, 60 s unless "
                                                        "--random-epsilon says).")] = None,
    random_epsilon: Annotated[float | None, typer.Option(help="RANDOM only: the epsilon reading's cap on "
                                                         "the gap between two arrivals, in seconds "
                                                         "(the paper's epsilon, typically 60); alone, "
                                                         "it implies --random-arrivals epsilon.")]
    = None,
    cloud_buffer: Annotated[int, typer.Option(min=1, help="BOINC: replicas a cloud worker asks for per "
                                              "request (its work buffer; 3 as a BOINC client).")] = 3,
    accel_min_frac_done: Annotated[float | None, typer.Option(
        help="batch-accel: accelerate once more than this fraction of the jobs is done "
             "(BOINC's BATCH_ACCEL_MIN_FRAC_DONE, default 0.85).")] = None,
    accel_max_not_done: Annotated[int | None, typer.Option(
        help="batch-accel: ... or once fewer than this many jobs are not done "
             "(BATCH_ACCEL_MAX_NOT_DONE, default 20).")] = None,
    accel_period: Annotated[float | None, typer.Option(
        help="batch-accel: seconds between two runs of BOINC's batch_accel.php (default 300).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """SpeQuloS: a bag of tasks on a volatile desktop grid, its tail cut with cloud workers."""
    from skylease.control.plugins import parse_args
    from skylease.experiments.spequlos import batch_accel, simulate

    given = (accel_min_frac_done, accel_max_not_done, accel_period)
    accel = None if given == (None, None, None) else batch_accel(*given)
    args = parse_args(strategy_arg or [], "--strategy-arg")
    res = simulate(middleware, trace, bot, strategy, seed, credits=credits, alpha=alpha,
                   arrivals=random_arrivals, epsilon=random_epsilon, cloud_buffer=cloud_buffer, accel=accel,
                   strategy_args=args)
    if as_json:
        print(json.dumps(res, default=float, allow_nan=False) if _all_finite(res)
              else json.dumps(_finite_or_none(res)))
        return
    base = res["baseline"]

    def t(x: float) -> str:
        return f"{x:,.0f}" if math.isfinite(x) else "not finished"

    def ratio(x: float) -> str:
        return f"{x:.2f}" if math.isfinite(x) else "-"

    rd = res["readings"]
    arrivals = "" if res["bot"] != "RANDOM" else f"; arrivals: {rd['random_arrivals']}" + (
        f" (gaps capped at {rd['random_epsilon_s']:g} s)" if rd["random_epsilon_s"] is not None else "")
    out.print(f"{res['middleware']} on {res['trace']}: {res['n_tasks']} {res['bot']} tasks submitted at "
              f"{res['submit_s'] / 86400:.2f} days into the trace{arrivals}; strategy {res['strategy']}, "
              f"{res['credits_ordered']:.0f} credits ordered")
    table = Table("", "without QoS", res["strategy"])
    table.add_row("completion (s)", t(base["completion_s"]), t(res["completion_s"]))
    table.add_row("ideal time (s)", t(base["ideal_s"]), t(res["ideal_s"]))
    table.add_row("tail slowdown", ratio(base["tail_slowdown"]), ratio(res["tail_slowdown"]))
    table.add_row("tasks in tail", f"{base['tail_task_share']:.1%}", f"{res['tail_task_share']:.1%}")
    table.add_row("credits used", "0", f"{res['credits_used']:.0f} ({res['credits_share']:.0%})")
    table.add_row("cloud workers", "0", str(res["cws"]))
    table.add_row("tasks done in the cloud", "0", f"{res['cloud_work_share']:.1%}")
    if res["strategy"].startswith("batch-accel"):
        table.add_row("batch accelerated at (s)", "-", t(res["accel_at_s"]) if res["accel_at_s"] is not None
                      else "never")
        table.add_row("extra results created", "0", f"{res['extra_results']:,}")
    table.add_row("predicted at 50 % (s)", t(base["predicted_s"]) if base["predicted_s"] else "-",
                  t(res["predicted_s"]) if res["predicted_s"] else "-")
    out.print(table)
    if res["tre_note"] is not None:
        out.print(res["tre_note"], markup=False, highlight=False, soft_wrap=True)
    else:
        out.print(f"Tail removal efficiency {res['tre']:.0%}; completion {res['speedup']:.2f}x as fast "
                  "as without QoS.")


def _all_finite(d: dict) -> bool:
    return all(not isinstance(v, float) or math.isfinite(v) for v in d.values()) and all(
        _all_finite(v) for v in d.values() if isinstance(v, dict))


def _finite_or_none(d: dict) -> dict:
    return {k: (_finite_or_none(v) if isinstance(v, dict) else
                None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


# -- leases ----------------------------------------------------------------------------------
@leases_app.command("simulate")
def leases_simulate_cmd(
    workload: Annotated[Path, typer.Option(help="Lease workload: SWF (best-effort leases, e.g. "
                                           "blue_30days.swf), plain LWF (advance reservations) or XML LWF "
                                           "(Haizea 1.0, with its site).")],
    inject: Annotated[Path | None, typer.Option(help="Plain LWF file of advance reservations to add "
                                                "(as the Haizea experiments inject them).")] = None,
    config: Annotated[str, typer.Option(help="NOVM-NOSR, NOVM-SR, VM-PREDEPLOY, VM-MULT, VM-REUSE-UNIFORM, "
                                        "VM-REUSE-SKEWED (the paper's), haizea-1.0, haizea-1.0-transfers, "
                                        "haizea-1.0-transfers-reuse (Haizea 1.0's test configurations), "
                                        "or a TOML file of scheduler options.")]
    = "NOVM-NOSR",
    image_seed: Annotated[int | None, typer.Option(min=0, help="Seed of the image draw (configurations "
                                                   "that move images; default: the TOML's seed, or 0).")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document: leases and summary.")]
    = False,
    gantt: Annotated[Path | None, typer.Option(help="Also draw a Gantt chart (.png, .pdf or .svg).")] = None,
) -> None:
    """Simulate a lease workload: what happened to each lease, and the paper's metrics."""
    from skylease.experiments.leases import clock, simulate_workload

    if gantt is not None:
        from skylease.experiments.report import check_output  # pandas: only with a chart

        check_output(gantt, "--gantt")  # before a long run
    sim = simulate_workload(workload, inject, config, image_seed)
    if gantt is not None:
        sim.gantt(gantt)
    if as_json:
        print(json.dumps(sim.to_json(), allow_nan=False))
        return
    s = sim.summary()
    out.print(f"{s['workload']} ({s['format']}, {s['nodes']} nodes) under {s['configuration']}: "
              f"{s['leases']:,} leases, simulated in {s['wall_s']:.2f} s", markup=False, highlight=False,
              soft_wrap=True)
    table = Table("metric", "value")
    table.add_row("all best-effort done", f"{s['all_best_effort_s']:,} s ({clock(s['all_best_effort_s'])})")
    for key, label in (("mean_wait_s", "mean wait (s)"), ("mean_bounded_slowdown", "mean bounded slowdown")):
        v = s[key]
        table.add_row(label, "-" if math.isnan(v) else f"{v:,.2f}")
    table.add_row("advance reservations accepted / rejected", f"{s['ar_accepted']} / {s['ar_rejected']}")
    if s["transfers"]:
        table.add_row("image transfers", f"{s['transfers']:,}")
    out.print(table)
    out.print("Leases by state: " + (", ".join(f"{k} {v:,}" for k, v in s["states"].items()) or "none"))
    if s["leases"] <= 12:  # every lease's story, rejected ones with their reason
        for line in sim.timeline():
            out.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    rejected = sim.rejected()
    if rejected and s["leases"] > 12:
        out.print(f"Rejected ({len(rejected)}):")
        for lid, why in rejected[:10]:
            out.print(f"  lease {lid}: {why}", markup=False, highlight=False, soft_wrap=True)
        if len(rejected) > 10:
            out.print(f"  and {len(rejected) - 10} more")
    if gantt is not None:
        out.print(f"Gantt chart: {gantt}", markup=False, highlight=False, soft_wrap=True)


# -- leases on a server (the client of `skylease serve`) -------------------------------------------
ServerOption = Annotated[str | None, typer.Option("--server", help="The server's URL (default: "
                                                  "$SKYLEASE_SERVER, else the server of `skylease login`, "
                                                  "else http://127.0.0.1:8642).")]
TokenOption = Annotated[str | None, typer.Option("--token", help="Your token (default: $SKYLEASE_TOKEN, else "
                                                "the token file of `skylease login`; here, other local "
                                                "users can read it: a warning says so).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the server's JSON answer.")]
# a list's page (src/skylease/service/paging.py: its MAX_LIMIT and DEFAULT_LIMIT; not imported here,
# it would load the server's libraries into every command's start)
LimitOption = Annotated[int | None, typer.Option("--limit", min=1, max=1000, help="At most this many (the "
                                                 "server's page: default 100, at most 1000); with --all, "
                                                 "the size of each page asked for.")]
AllOption = Annotated[bool, typer.Option("--all", help="All of them: the client asks for page after page "
                                         "until the last.")]


def _listed(what: str, items: list) -> str:
    """A list's title: how many, and how to see the rest when the server has more."""
    more = "; more on the server: --all (or a larger --limit)" if getattr(items, "more", False) else ""
    return f"{len(items)} {what}{more}"


def _ask(server: str | None, token: str | None, as_json: bool, call, render) -> None:
    """Send ``call(client)`` to the server and print its answer: JSON with ``--json``, else the
    tables ``render(client module, answer)`` makes. A failing or unreachable server is one line
    and exit status 1 (a refusal, 4xx, is a UserError: exit 2)."""
    from skylease.service import client as sc

    c = sc.Client.from_options(server, token)
    try:
        answer = call(c)
    except sc.ServiceError as e:
        err.print(f"skylease: error: {e}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    if token is not None:  # (after the answer: an error stays one line)
        _token_warning("--token")
    if as_json:
        print(json.dumps(answer, allow_nan=False))
        return
    for table in render(sc, answer):
        out.print(table)


@leases_app.command("request")
def leases_request_cmd(
    file: Annotated[Path | None, typer.Argument(help="A lease request: JSON, or a Haizea XML <lease> element "
                                                "(- reads standard input). Or give the options below.")]
    = None,
    nodes: Annotated[int | None, typer.Option(min=1, help="Nodes (VMs) of the lease (default 1).")] = None,
    duration: Annotated[str | None, typer.Option(help="How long: seconds, or [D:]HH:MM:SS.")] = None,
    start: Annotated[str | None, typer.Option(help="Start of an advance reservation, in lease time "
                                              "(seconds or [D:]HH:MM:SS since the server's epoch).")] = None,
    start_in: Annotated[str | None, typer.Option(help="Start of an advance reservation, from now "
                                                 "(seconds or [D:]HH:MM:SS).")] = None,
    lease_type: Annotated[str | None, typer.Option("--type", help="best-effort, advance-reservation or "
                                                   "immediate (default: best-effort; with a start, "
                                                   "advance-reservation).")] = None,
    cpu: Annotated[float | None, typer.Option(help="CPUs per node (default 1).")] = None,
    memory: Annotated[int | None, typer.Option(min=0, help="Memory per node, MB (default 1024).")] = None,
    disk: Annotated[int | None, typer.Option(min=0, help="Disk per node, MB (default 0).")] = None,
    image: Annotated[str | None, typer.Option(help="Disk image name (from the site's repository).")] = None,
    image_size: Annotated[int | None, typer.Option(min=0, help="Disk image size, MB.")] = None,
    preemptible: Annotated[bool | None, typer.Option("--preemptible/--not-preemptible", help="Whether an "
                                                     "advance reservation may preempt it (default: "
                                                     "best-effort leases are).")] = None,
    command: Annotated[str | None, typer.Option(help="Payload of each VM, a shell line (default: one that "
                                                "lasts the lease's duration).")] = None,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """Request a lease from a server: it is scheduled, reserved, queued, or refused with the reason."""
    from skylease.service.client import parse_seconds, read_request_file, request_from_options

    options = {"nodes": nodes, "type": lease_type, "cpu": cpu, "memory": memory, "disk": disk, "image": image,
               "image_size": image_size, "preemptible": preemptible, "command": command,
               "duration": None if duration is None else parse_seconds(duration, "--duration"),
               "start": None if start is None else parse_seconds(start, "--start"),
               "start_in": None if start_in is None else parse_seconds(start_in, "--start-in")}
    if file is not None:
        extra = [f"--{k.replace('_', '-')}" for k, v in options.items() if v is not None]
        if extra:
            raise UserError(f"give a FILE or options, not both ({', '.join(extra)} with FILE)",
                            field=extra[0])
        body, content_type = read_request_file(file)
    else:
        body = request_from_options(**options).model_dump_json(exclude_unset=True).encode()
        content_type = "application/json"
    _ask(server, token, as_json, lambda c: c.request(body, content_type),
         lambda sc, v: [sc.leases_table([v])])


# parsed here, so that "-5" is a wrong id (not an unknown option) and the error shows the value
LeaseIdArgument = Annotated[str, typer.Argument(metavar="ID", help="The lease's id.")]
_ID_SETTINGS = {"ignore_unknown_options": True}


def _lease_id(text: str) -> int:
    if not text.strip().isdigit() or len(text.strip()) > 16:
        raise UserError(f"{text!r} is not a lease id (a whole number >= 0)", field="ID")
    return int(text)


@leases_app.command("cancel", context_settings=_ID_SETTINGS)
def leases_cancel_cmd(
    lease_id: LeaseIdArgument,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """Cancel a lease on a server: it leaves the queue or its reservations, its payloads are stopped."""
    lid = _lease_id(lease_id)
    _ask(server, token, as_json, lambda c: c.cancel(lid), lambda sc, v: [sc.leases_table([v])])


@leases_app.command("list")
def leases_list_cmd(server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
                    limit: LimitOption = None, every: AllOption = False) -> None:
    """Your leases on a server (an administrator's: every lease), by id: the first page, or --all."""
    _ask(server, token, as_json, lambda c: c.leases(limit, every),
         lambda sc, vs: [sc.leases_table(vs, title=_listed("lease(s)", vs))])


@leases_app.command("show", context_settings=_ID_SETTINGS)
def leases_show_cmd(
    lease_id: LeaseIdArgument,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """One lease on a server: its state, events, reservations, where it runs and its payloads."""
    lid = _lease_id(lease_id)
    _ask(server, token, as_json, lambda c: c.lease(lid), lambda sc, v: sc.lease_detail(v))


@leases_app.command("queue")
def leases_queue_cmd(server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
                     limit: LimitOption = None, every: AllOption = False) -> None:
    """The best-effort leases waiting on a server, in queue order: the first page, or --all."""
    _ask(server, token, as_json, lambda c: c.queue(limit, every),
         lambda sc, vs: [sc.leases_table(vs, title="queue: " + _listed("lease(s)", vs))])


@leases_app.command("hosts")
def leases_hosts_cmd(server: ServerOption = None, token: TokenOption = None,
                     as_json: JsonOption = False) -> None:
    """A server's nodes: capacity, leases running now, cached images (administrators only)."""
    _ask(server, token, as_json, lambda c: c.hosts(), lambda sc, hs: [sc.hosts_table(hs)])


# -- qos (SpeQuloS on a server) ----------------------------------------------------------------
BotIdArgument = Annotated[int, typer.Argument(metavar="BOT", min=0, max=2**53, help="The bag's id.")]
CreditsArgument = Annotated[float, typer.Argument(metavar="CREDITS", help="Credits (15 per CPU hour of "
                                                  "cloud worker).")]
_BOT_COLUMNS = ("id", "owner", "infrastructure", "n_tasks", "state", "completed", "strategy",
                "credits_ordered", "credits_spent", "t_pred")  # (t_pred: the Oracle's, s since registered)


def _credits(value: float, option: str = "CREDITS") -> float:
    import math

    from skylease.runtime.qos.ledger import MAX_CREDITS

    if not (math.isfinite(value) and 0 < value <= MAX_CREDITS):
        raise UserError(f"must be a number of credits in (0, {MAX_CREDITS:g}], got {value:g}", field=option)
    return value


@qos_app.command("account")
def qos_account_cmd(
    user: Annotated[str | None, typer.Argument(help="Whose account (default: yours; another's only for "
                                               "an administrator).")] = None,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """An account's balance and its last movements (deposits, orders, bills, refunds)."""
    _ask(server, token, as_json, lambda c: c.qos_account(user),
         lambda sc, a: [sc.record_table(f"account {a['user']}", a),
                        sc.rows_table("last movements", a.get("movements") or [],
                                      ("at", "kind", "amount", "bot", "worker", "note"))])


@qos_app.command("deposit", context_settings=_ID_SETTINGS)  # (a negative number is a value)
def qos_deposit_cmd(
    user: Annotated[str, typer.Argument(help="Whose account.")], credits: CreditsArgument,
    note: Annotated[str | None, typer.Option(help="Why (kept in the ledger).")] = None,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """Credit a user's account (administrators only)."""
    amount = _credits(credits)
    _ask(server, token, as_json, lambda c: c.qos_deposit(user, amount, note),
         lambda sc, a: [sc.record_table("deposit", a)])


@qos_app.command("order", context_settings=_ID_SETTINGS)  # (a negative number is a value)
def qos_order_cmd(bot: BotIdArgument, credits: CreditsArgument, server: ServerOption = None,
                  token: TokenOption = None, as_json: JsonOption = False) -> None:
    """Order credits for one of your bags: refused (exit 2, with the reason) when the balance is short."""
    amount = _credits(credits)
    _ask(server, token, as_json, lambda c: c.qos_order(bot, amount),
         lambda sc, o: [sc.record_table(f"order of bag {bot}", o)])


@qos_app.command("predict", context_settings=_ID_SETTINGS)  # (a negative number is a value)
def qos_predict_cmd(bot: BotIdArgument, server: ServerOption = None, token: TokenOption = None,
                    as_json: JsonOption = False) -> None:
    """The Oracle's predicted completion time of a bag, its ±20 % band and the success rate."""
    _ask(server, token, as_json, lambda c: c.qos_predict(bot),
         lambda sc, p: [sc.record_table(f"prediction for bag {bot}", p)])


@qos_app.command("bots")
def qos_bots_cmd(server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
                 limit: LimitOption = None, every: AllOption = False) -> None:
    """Your bags of tasks (an administrator's: all), oldest first, with progress, prediction and
    credits: the first page, or --all."""
    _ask(server, token, as_json, lambda c: c.qos_bots(limit, every),
         lambda sc, bs: [sc.rows_table(_listed("bag(s) of tasks", bs), bs, _BOT_COLUMNS)])


@qos_app.command("history")
def qos_history_cmd(
    infrastructure: Annotated[str, typer.Argument(help="The infrastructure's name (as runs register it).")],
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """Finished bags of an infrastructure: what the Oracle learns α from."""
    _ask(server, token, as_json, lambda c: c.qos_history(infrastructure),
         lambda sc, h: [sc.record_table(f"{infrastructure}: α learned from {h['runs']} finished bag(s)", h),
                        sc.rows_table("finished bags (yours; an administrator's: all)", h["bots"],
                                      ("id", "owner", "n_tasks", "p_half", "completion_time"))])


# -- login: the client's token file -----------------------------------------------------------
def _token_warning(option: str, prefix: str = "skylease") -> None:
    from skylease.runtime.credentials import option_warning

    err.print(f"{prefix}: warning: {option_warning(option)}", markup=False, highlight=False, soft_wrap=True)


def _read_token(url: str) -> str:
    """The token typed without echo on a terminal, else the first line of standard input."""
    if sys.stdin is not None and sys.stdin.isatty():
        import getpass

        try:
            return getpass.getpass(f"Token for {url}: ")
        except EOFError:
            return ""
    line = sys.stdin.readline() if sys.stdin is not None else ""
    if not line.strip():
        raise UserError("no token on standard input: pipe the line `skylease serve user add` printed, or "
                        "run skylease login in a terminal")
    return line


@app.command("login")
def login_cmd(server: ServerOption = None) -> None:
    """Save your token for a server (0600, ~/.config/skylease/token), after checking it there: typed
    without echo, or piped on standard input. The client commands then need no --token."""
    from skylease.service import client as sc
    from skylease.service.login import login

    url = sc.server_url(server)  # a wrong URL is said before the token is asked for
    try:
        done = login(url, _read_token(url))
    except sc.ServiceError as e:
        err.print(f"skylease: error: {e}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    out.print(f"logged in to {done.server} as {done.name}{' (administrator)' if done.admin else ''}; token "
              f"saved in {done.path}", markup=False, highlight=False, soft_wrap=True)
    import os

    if os.environ.get("SKYLEASE_TOKEN", "").strip():
        err.print("skylease: note: SKYLEASE_TOKEN is set, and wins over the token file while it is",
                  markup=False, highlight=False, soft_wrap=True)


@app.command("logout")
def logout_cmd() -> None:
    """Remove your token file (written by `skylease login`)."""
    from skylease.runtime.credentials import remove_login, token_path

    path = token_path()
    removed = remove_login(path)
    out.print(f"token file {path} removed" if removed else f"no token file ({path})", markup=False,
              highlight=False, soft_wrap=True)


# -- serve ------------------------------------------------------------------------------------
ServeConfigOption = Annotated[Path | None, typer.Option("--config", help="The server's TOML file "
                                                        "(options given here win over it).")]
DbOption = Annotated[str | None, typer.Option("--db", help="Database URL: sqlite:///FILE or "
                                              "postgresql://USER@HOST/DB, without a password (default: "
                                              "SQLite in the data folder).")]
DbPasswordFileOption = Annotated[Path | None, typer.Option("--db-password-file", help="A file holding the "
                                                           "PostgreSQL password (default: "
                                                           "$SKYLEASE_DB_PASSWORD).")]
DataDirOption = Annotated[Path | None, typer.Option("--data-dir", help="The server's data folder (default: "
                                                    "$SKYLEASE_DATA/serve, ~/.local/share/skylease/serve).")]


@serve_app.callback()
def serve_cmd(
    ctx: typer.Context,
    config: ServeConfigOption = None,
    db: DbOption = None,
    db_password_file: DbPasswordFileOption = None,
    host: Annotated[str | None, typer.Option(help="Address to listen on (default 127.0.0.1; another than "
                                             "loopback needs --allow-remote and TLS).")] = None,
    port: Annotated[int | None, typer.Option(min=0, max=65535, help="Port (default 8642; 0: a free one).")]
    = None,
    time_scale: Annotated[float | None, typer.Option(help="Lease seconds per real second (default 1; 60 runs "
                                                     "an hour of leases in a minute).")] = None,
    data_dir: DataDirOption = None,
    site: Annotated[Path | None, typer.Option(help="Site file (TOML: nodes, image repository; default: one "
                                              "node per core).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Scheduler configuration: NOVM-SR (default), "
                                                  "NOVM-NOSR, ... or a TOML file, as `leases simulate "
                                                  "--config`.")] = None,
    grace: Annotated[float | None, typer.Option(help="Seconds from SIGTERM to SIGKILL of a payload that "
                                                "ends (default 5).")] = None,
    allow_remote: Annotated[bool, typer.Option("--allow-remote", help="Allow an address other than "
                                               "loopback (with --tls-cert and --tls-key).")] = False,
    tls_cert: Annotated[Path | None, typer.Option(help="TLS certificate (PEM): serve HTTPS.")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="TLS private key (PEM).")] = None,
) -> None:
    """Run the lease manager as a server until SIGTERM or Ctrl-C."""
    if ctx.invoked_subcommand is not None:
        return
    from skylease.service.server import load_serve_config, serve

    cfg = load_serve_config(config, host=host, port=port, db=db, db_password_file=db_password_file,
                            data_dir=data_dir, time_scale=time_scale, site=site, scheduler=scheduler,
                            grace=grace, tls_cert=tls_cert, tls_key=tls_key,
                            allow_remote=allow_remote or None)
    served = serve(cfg, announce=lambda s: out.print(s.line(), markup=False, highlight=False,
                                                     soft_wrap=True), warn=_serve_warning)
    out.print(f"skylease serve: stopped ({served.url})", markup=False, highlight=False, soft_wrap=True)


def _serve_warning(text: str) -> None:
    err.print(f"skylease serve: warning: {text}", markup=False, highlight=False, soft_wrap=True)


def _serve_database(config: Path | None, db: str | None, data_dir: Path | None, password_file: Path | None,
                    *, create: bool = True):
    from skylease.service.server import load_serve_config, open_database

    return open_database(load_serve_config(config, db=db, data_dir=data_dir, db_password_file=password_file),
                         _serve_warning, create=create)


@serve_user_app.command("add")
def serve_user_add_cmd(
    name: Annotated[str, typer.Argument(help="The user's name (letters, digits, . _ @ -).")],
    admin: Annotated[bool, typer.Option("--admin", help="An administrator: sees and cancels every lease, "
                                        "lists the hosts.")] = False,
    db: DbOption = None, config: ServeConfigOption = None, data_dir: DataDirOption = None,
    db_password_file: DbPasswordFileOption = None,
) -> None:
    """Add a user to the server's database and print its token (once: only a hash is kept)."""
    from skylease.service.auth import add_user, check_name

    check_name(name)  # before the database is opened (or created)
    token = add_user(_serve_database(config, db, data_dir, db_password_file), name, admin)
    print(token)
    err.print(f"user {name!r}{' (admin)' if admin else ''} added; the line above is its token, shown only "
              "now: its user saves it with `skylease login` (or sets SKYLEASE_TOKEN)", markup=False,
              highlight=False, soft_wrap=True)


@serve_user_app.command("list")
def serve_user_list_cmd(db: DbOption = None, config: ServeConfigOption = None, data_dir: DataDirOption = None,
                        db_password_file: DbPasswordFileOption = None, as_json: JsonOption = False) -> None:
    """The server's users."""
    from skylease.service.auth import list_users

    users = list_users(_serve_database(config, db, data_dir, db_password_file, create=False))
    if as_json:
        print(json.dumps([{"name": u.name, "admin": u.admin, "created": u.created.isoformat()}
                          for u in users]))
        return
    t = Table("user", "admin", "created", title=f"{len(users)} user(s)")
    for u in users:
        t.add_row(u.name, "yes" if u.admin else "no", u.created.isoformat(timespec="seconds"))
    out.print(t)


@serve_user_app.command("remove")
def serve_user_remove_cmd(
    name: Annotated[str, typer.Argument(help="The user's name.")],
    db: DbOption = None, config: ServeConfigOption = None, data_dir: DataDirOption = None,
    db_password_file: DbPasswordFileOption = None,
) -> None:
    """Remove a user: its token stops working (its leases stay)."""
    from skylease.service.auth import remove_user

    remove_user(_serve_database(config, db, data_dir, db_password_file, create=False), name)
    out.print(f"user {name!r} removed", markup=False, highlight=False)


# -- run (real workers) ---------------------------------------------------------------------
@app.command("run")
def run_cmd(
    job: Annotated[str, typer.Argument(help="A text file (one shell command per line), a .toml job "
                                       "(command template + grid or CSV), package.module:function, or - "
                                       "for shell commands on standard input (one per line, as a text "
                                       "file; kept in --out, so --resume needs nothing piped in).")],
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Output folder: results.sqlite, summary.json, "
                                          "report.md and plots.")] = Path("skylease-out"),
    policy: Annotated[str, typer.Option(help="fixed:N | a2ha[:conservative|aggressive] | "
                                        "dask-adaptive[:MAX] | MODULE:CLASS | FILE.py:CLASS (a Policy "
                                        "subclass of your own) | an installed policy's name.")] = "fixed:2",
    policy_arg: Annotated[list[str] | None, typer.Option("--policy-arg", help="KEY=VALUE: a parameter of "
                                                         "a MODULE:CLASS policy, converted by its "
                                                         "constructor's annotations (repeatable).")]
    = None,
    args: Annotated[str | None, typer.Option(help="For a callable: a JSON file with the list of "
                                             "arguments (one item per task).")] = None,
    pools: Annotated[Path | None, typer.Option(help="A TOML file of [pools.NAME] tables (price, "
                                               "billing_unit, boot_time, max_count; cluster + kwargs "
                                               "or address for other Dask clusters).")] = None,
    pool: Annotated[str | None, typer.Option(help="The pool the policy rents (default: the first).")]
    = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Most workers of the default local pool "
                                                "(default: the cores).")] = None,
    price: Annotated[float, typer.Option(min=0, help="Price per billing unit of the default pool.")] = 0.0,
    billing_unit: Annotated[float, typer.Option(help="Billing unit of the default pool, seconds.")] = 60.0,
    budget: Annotated[float | None, typer.Option(help="Hard cap on money (A2HA): the charged cost "
                                                 "never exceeds it.")] = None,
    retries: Annotated[int | None, typer.Option(min=0, help="Retries of a task that exits non-zero "
                                                "(default: the job file's retries, else 0).")] = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds before a task is killed (exit 124; "
                                                  "default: the job file's timeout, else none).")]
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
    time_scale: Annotated[float, typer.Option(help="Trace seconds per real second for --volatility.")]
    = 60.0,
    trace_start: Annotated[float | None, typer.Option(help="Trace second at which the run starts "
                                                      "(default: drawn from --seed).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the task order (A2HA) and of the trace offset.")] = 0,
    resume: Annotated[bool, typer.Option("--resume", help="Finish a run that stopped: only tasks "
                                         "without a recorded result run again.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="With --resume: run the failed "
                                               "tasks again too (the ok ones are not rerun).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would run (tasks, first commands, "
                                          "policy, pools, limits, output folder) and exit: nothing is "
                                          "started or written.")] = False,
) -> None:
    """Run a bag of tasks on real Dask workers, with the same policies as the simulator.

    Example: skylease run jobs.txt --out runs/f --policy fixed:4; seq 3 | sed 's/^/echo /' | skylease run -"""
    import os

    from skylease.experiments.run import RunOptions, run_job

    if os.getcwd() not in sys.path:  # `package.module:function` is found as `python -m` finds it
        sys.path.insert(0, os.getcwd())
    opts = RunOptions(out=out_dir, policy=policy, policy_args=list(policy_arg or []), pools_file=pools,
                      pool=pool, max_workers=workers,
                      price=price, billing_unit=billing_unit, budget=budget, retries=retries,
                      task_timeout_s=timeout, tail_qos=tail_qos, reliable_pool=reliable_pool,
                      tail_credits=tail_credits, volatility=volatility, volatile_pool=volatile_pool,
                      time_scale=time_scale, trace_start=trace_start, seed=seed, resume=resume,
                      retry_failed=retry_failed, args=args, qos=qos, qos_token=qos_token,
                      qos_credits=qos_credits, qos_strategy=qos_strategy,
                      qos_infrastructure=qos_infrastructure, report=report, report_token=report_token)
    if dry_run:
        from skylease.experiments.run_dry import dry_run as plan

        _print_dry_run(plan(job, opts, stdin=sys.stdin))
        return
    res = _with_live_display(lambda on_progress: run_job(job, opts, on_progress=on_progress,
                                                         on_notice=_notice, stdin=sys.stdin), budget)
    segments = f", {res['segments']} segments" if res.get("segments", 1) > 1 else ""
    table = Table("", "value", title=f"{res['job']} ({res['outcome']}{segments})")
    for k, label in (("tasks", "tasks"), ("ok", "succeeded"), ("failed", "failed"), ("left", "not run"),
                     ("wall_s", "wall time (s)"), ("cost", "cost"), ("hosts", "workers rented"),
                     ("peak_hosts", "most at once"), ("lost", "tasks interrupted"), ("retried", "retries")):
        v = res[k]
        table.add_row(label, f"{v:,.2f}" if isinstance(v, float) else str(v))
    out.print(table)
    out.print(f"Results: {Path(res['out']) / 'results.sqlite'}; report: {Path(res['out']) / 'report.md'}",
              markup=False, highlight=False, soft_wrap=True)
    _print_failed(res["failed_tasks"], res["failed"])
    _print_next(res)
    if res["outcome"] == "interrupted":
        raise typer.Exit(130)  # main() says "interrupted" on stderr
    if res["failed"] or res["left"]:
        raise typer.Exit(1)


#: Failed tasks listed on the terminal (all are in report.md's table up to 50, and in the export).
FAILED_SHOWN = 10


def _duration(seconds: float | None) -> str:
    """A duration as a person reads it: 12.3 ms, 2.50 s, 42 s, 3m 05s, 2h 07m; "-" when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    m, s = divmod(round(seconds), 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m"


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _print_dry_run(d: dict) -> None:
    """`skylease run --dry-run`: what would run, and that nothing was done."""
    t = Table("", "value", title=f"dry run: {d['job']} (nothing started or written)")
    t.add_row("output folder", d["out"] + (" (would be created)" if d["creates_out"] else
                                           " (resumed)" if d["resume"] else ""))
    t.add_row("tasks to run", f"{d['to_run']:,} of {d['tasks']:,}" if d["resume"] else f"{d['to_run']:,}")
    t.add_row("policy", d["policy"] + "".join(f" --policy-arg {a}" for a in d["policy_args"]))
    t.add_row("task order", "random (from --seed)" if d["order"] == "random" else "job order")
    t.add_row("most workers", "no limit" if d["workers"] is None else str(d["workers"]))
    t.add_row("budget", "none" if d["budget"] is None else _money(d["budget"]))
    if d["spent"]:
        t.add_row("already spent", _money(d["spent"]))
    t.add_row("retries / task timeout", f"{d['retries']} / " + ("none" if d["timeout_s"] is None
                                                                  else _duration(d["timeout_s"])))
    for name, p in d["pools"].items():
        most = "no limit" if p["max_count"] is None else str(p["max_count"])
        main = " (the policy's)" if name == d["pool"] else ""
        t.add_row(f"pool {name}{main}", f"{_money(p['price'])} per {_duration(p['billing_unit'])} "
                  f"(at least {p['min_units']} unit(s)), boot {_duration(p['boot_time'])}, at most {most} "
                  f"workers, {p['workers_from']}")
    for key, label in (("tail_qos", "tail QoS strategy"), ("reliable_pool", "reliable pool"),
                       ("qos", "QoS service"), ("report", "reported to"), ("volatility", "volatility trace")):
        if d[key] is not None:
            t.add_row(label, str(d[key]))
    out.print(t)
    out.print(f"First {len(d['first'])} command(s):", markup=False)
    for c in d["first"]:
        out.print(f"  {c}", markup=False, highlight=False, soft_wrap=True)
    for w in d["warnings"]:
        out.print(f"warning: {w}", markup=False, highlight=False, soft_wrap=True)


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
        out.print(f"The budget ran out: {out_of['spent']:,.2f} spent of the {out_of['budget']:,.2f} allowed "
                  f"(a worker costs at least {out_of['least_charge']:,.2f}); {res['left']} task(s) not run.",
                  markup=False, highlight=False, soft_wrap=True)
    if "resume" in nxt:
        bigger = " with a larger --budget" if out_of else ""
        lines.append(f"finish the run ({res['left']} task(s) not run){bigger}: {nxt['resume']}")
    if "retry_failed" in nxt:
        lines.append(f"run the failed tasks again once fixed: {nxt['retry_failed']}")
    if "export" in nxt:
        lines.append(f"every task's result, one row each: {nxt['export']}")
    if "report" in nxt:
        lines.append(f"read the report: {nxt['report']}")
    if not lines:
        return
    out.print("Next:", markup=False)
    for line in lines:
        out.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


def _notice(text: str) -> None:
    err.print(f"skylease run: {text}", markup=False, highlight=False, soft_wrap=True)


def _with_live_display(run, budget: float | None) -> dict:
    """``run(on_progress)`` with the live display of a real run on a terminal (none otherwise)."""
    if not err.is_terminal:
        return run(None)
    from rich.live import Live

    with Live(console=err, refresh_per_second=4, transient=True) as live:
        return run(lambda env: live.update(_run_progress(env, budget)))


def _run_progress(env, budget: float | None) -> Table:
    """The live display of a real run."""
    pr = env.progress()
    running = sum(1 for h in env.hosts() if h.task is not None)
    t = Table("", "now", title=f"skylease run, {env.now:,.0f} s")
    t.add_row("tasks done / running / left", f"{pr.completed} / {running} / {env.pending() - running}")
    for p in env.pools():
        hs = env.hosts(p)
        up = sum(1 for h in hs if h.up_at is not None and h.state.value in ("idle", "busy"))
        t.add_row(f"workers {p} (up / rented)", f"{up} / {len(hs)}")
    spent = env.spent()
    t.add_row("spent" + (" / budget" if budget is not None else ""),
              f"{spent:,.2f}" + (f" / {budget:,.2f}" if budget is not None else ""))
    from skylease.experiments.run_eta import run_eta

    t.add_row("time left (ETA)", _duration(run_eta(env)))
    pred = _predicted(env.policy)
    if pred is not None:
        t.add_row("predicted completion (QoS oracle)", f"{pred:,.0f} s")
    for p in getattr(env.policy, "policies", (env.policy,)):
        last = getattr(p, "last", None)  # a run served by a QoS service: its last answer
        if last is not None:
            t.add_row("QoS credits spent / ordered" + ("" if p.attached else " (service unreachable)"),
                      f"{last.credits_spent:,.2f} / {last.credits_ordered:,.2f}")
    return t


def _predicted(policy) -> float | None:
    for p in getattr(policy, "policies", (policy,)):
        pr = getattr(p, "prediction", None)
        if pr is not None:
            return float(pr.t_pred)
    return None


@app.command("status")
def status_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show a running or finished run: tasks done, failed and left, money, workers (read-only)."""
    from skylease.experiments.run import status

    st = status(out_dir)
    if as_json:
        print(json.dumps(st))
        return
    t = Table("", "value", title=f"{st['out']}: {st['state']}")
    for k in ("job", "tasks", "ok", "failed", "left", "cost", "budget", "segments"):
        t.add_row(k, str(st[k]))
    for p, n in st["workers"].items():
        t.add_row(f"workers {p}", str(n))
    out.print(t)
    _print_next(st)


@app.command("export")
def export_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a run.")],
    fmt: Annotated[str | None, typer.Option("--format", help="csv | json | parquet (parquet needs "
                                            "pyarrow) | jobs (a job file `skylease run` takes back); "
                                            "default: from --output's suffix, else csv.")]
    = None,
    output: Annotated[str | None, typer.Option("--output", help="The file to write (default: "
                                               "OUT/tasks.FORMAT, tasks.txt for jobs; - for standard "
                                               "output).")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only the tasks that failed or have no "
                                         "result.")] = False,
) -> None:
    """Write every task's result, one row per task: line, command, state, exit code, attempts,
    times, worker, cost share, stdout and stderr tails, result, and one param_NAME column per
    parameter of a grid or CSV job.

    Example: skylease export runs/f --format json --output f.json"""
    from skylease.experiments.run_results import export_run

    where, n, data = export_run(out_dir, fmt=fmt, output=output, failed=failed)
    if data is not None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    out.print(f"{n} task(s) written to {where}", markup=False, highlight=False, soft_wrap=True)


@app.command("show")
def show_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a run.")],
    task: Annotated[str, typer.Argument(help="The task: its id (the id column of `skylease export`, "
                                        "0-based) or line:N (the task of line N of the job file).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show one task of a run: its command, parameters, state and exit code, attempts, worker,
    times, stdout and stderr tails, and a callable's result (read-only).

    Example: skylease show runs/f 3; skylease show runs/f line:12"""
    from skylease.experiments.run_show import show_task

    t = show_task(out_dir, task)
    if as_json:
        print(json.dumps(t))
        return
    line = f", line {t['line']}" if t["line"] is not None else ""
    table = Table("", "value", title=f"{t['out']}: task {t['id']}{line}")
    table.add_row("command" if t["kind"] == "shell" else "call", t["command"])
    for name, value in t["params"].items():
        table.add_row(f"parameter {name}", str(value))
    exit_code = "" if t["exit_code"] is None else f", exit code {t['exit_code']}"
    table.add_row("state", f"{t['state']}{exit_code}")
    table.add_row("attempts", str(t["attempts"]))
    if t["worker"] is not None:
        table.add_row("worker", f"{t['worker']} on {t['machine']}")
    if t["started_at"] is not None:
        table.add_row("started / ended (UTC)", f"{t['started_at']} / {t['ended_at']}")
        table.add_row("duration (runtime)", f"{_duration(t['duration_s'])} ({_duration(t['runtime_s'])})")
    if t.get("result") is not None:
        table.add_row("result", t["result"])
    for a in t["earlier_attempts"]:
        code = "" if a["exit_code"] is None else f", exit code {a['exit_code']}"
        table.add_row(f"attempt {a['attempt']}", f"{a['outcome']}{code} at {a['at']}")
    out.print(table)
    for stream in ("stdout", "stderr"):
        tail = t[f"{stream}_tail"]
        out.print(f"--- {stream} (last 2 KiB)" + ("" if tail else ": empty") + " ---", markup=False)
        if tail:
            out.print(tail.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)


@app.command("failed")
def failed_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a run.")],
    failed_only: Annotated[bool, typer.Option("--failed-only", help="Leave out the tasks with no result "
                                              "(not run, or running when the run stopped).")] = False,
) -> None:
    """Print the run's failed tasks, and those with no result, as a job file `skylease run` takes
    back (one shell command a line, a comment before each saying why; a callable's: the JSON list
    of --args). Fix the commands, then run the file.

    Example: skylease failed runs/f > fixed.txt; skylease run fixed.txt --out runs/fixed"""
    from skylease.experiments.run_show import failed_job

    f = failed_job(out_dir, failed_only=failed_only)
    sys.stdout.write(f["text"])
    sys.stdout.flush()
    if not f["text"]:
        what = "failed" if failed_only else "failed or without a result"
        err.print(f"skylease failed: no task of {out_dir} is {what}", markup=False, highlight=False,
                  soft_wrap=True)
        return
    how = f"skylease run {f['target']} --args FILE" if f["kind"] == "python" else "skylease run FILE"
    err.print(f"skylease failed: {f['failed']} failed and {f['not_run']} not run of {f['tasks']} task(s); "
              f"saved to FILE and fixed, run them with `{how} --out NEW_DIR`", markup=False,
              highlight=False, soft_wrap=True)


@simulate_app.command("replay")
def simulate_replay_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a finished real run.")],
    seeds: Annotated[int, typer.Option(min=1, help="Task orderings to simulate (A2HA).")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Simulate a finished real run again: its measured task times, its policy and pools."""
    import os

    from skylease.experiments.run import replay

    if os.getcwd() not in sys.path:  # a run's `--policy module:Class` is found as `skylease run` found it
        sys.path.insert(0, os.getcwd())
    res = replay(out_dir, seeds=range(seeds))
    if as_json:
        print(json.dumps(res))
        return
    t = Table("", "real", *(f"sim seed {s['seed']}" for s in res["simulated"]),
              title=f"{res['policy']}: {res['tasks']} tasks, boot {res['boot_s']:.1f} s")
    real = res["real"]

    def num(v: float | None, spec: str) -> str:  # "-" where summary.json is gone
        return "-" if v is None else format(v, spec)

    t.add_row("workers rented", num(real["hosts"], "d"), *(str(s["hosts"]) for s in res["simulated"]))
    t.add_row("cost", num(real["cost"], ".2f"), *(f"{s['cost']:.2f}" for s in res["simulated"]))
    t.add_row("makespan (s)", num(real["elapsed_s"], ".1f"),
              *(f"{s['makespan_s']:.1f}" for s in res["simulated"]))
    out.print(t)


# -- entry point -----------------------------------------------------------------------------
@functools.cache
def click_command(group: str | None = None) -> click.Command:
    """The app as a click command, built once (typer rebuilds it at every call: 0.06 s). With
    ``group`` (a command group's name, such as ``simulate``), the root holds that group alone: a call
    under it converts only its commands (the whole tree costs 0.03 s)."""
    if group is None:
        return typer.main.get_command(app)
    pruned = copy.copy(app)
    pruned.registered_commands = []
    pruned.registered_groups = [g for g in app.registered_groups if g.name == group]
    return typer.main.get_command(pruned)


def _command_for(argv: list[str] | None) -> click.Command:
    first = (sys.argv[1:] if argv is None else argv)[:1]
    if first and any(g.name == first[0] for g in app.registered_groups):
        return click_command(first[0])
    return click_command()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user mistakes become one line on stderr and exit code 2."""
    try:
        rv = _command_for(argv)(args=argv, prog_name="skylease", standalone_mode=False)
    except UserError as e:
        err.print(f"skylease: error: {e}", markup=False, highlight=False, soft_wrap=True)
        return 2
    except _EXIT as e:
        return int(getattr(e, "exit_code", 0) or 0)
    except (*_ABORT, KeyboardInterrupt):
        err.print("skylease: interrupted", markup=False)
        return 130
    except _CLICK_ERRORS as e:  # bad option, unknown command, missing argument: usage errors
        msg = " ".join(e.format_message().split())
        ctx = getattr(e, "ctx", None)
        path = ctx.command_path.removeprefix("skylease").strip() if ctx is not None else ""
        cmd = f" {path}" if path else ""
        err.print(f"skylease{cmd}: error: {msg} (see --help)", markup=False, highlight=False,
                  soft_wrap=True)
        return 2
    if rv == 130:  # typer turns Ctrl-C inside a command into Exit(130), silently
        err.print("skylease: interrupted", markup=False)
    return rv if isinstance(rv, int) else 0  # typer.Exit(code) inside a command


# Recent typer vendors click (its errors derive from typer.TyperException); older typer raises
# click's own exceptions. Accept both, so the one-line error holds whichever typer is installed
# (click itself is imported only for an older typer: 15 ms of every call otherwise).
if hasattr(typer, "TyperException"):
    _EXIT: tuple[type[BaseException], ...] = (typer.Exit,)
    _ABORT: tuple[type[BaseException], ...] = (typer.Abort,)
    _CLICK_ERRORS: tuple[type[Exception], ...] = (typer.TyperException,)
else:  # pragma: no cover - typer < 0.24 (click not vendored)
    import click

    _EXIT = (typer.Exit, click.exceptions.Exit)
    _ABORT = (typer.Abort, click.exceptions.Abort)
    _CLICK_ERRORS = (click.ClickException,)


def console_main() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
