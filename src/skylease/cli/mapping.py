"""`skylease map`, `skylease etc` (thesis chapter 3) and `skylease place` (thesis chapter 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import app, etc_app
from skylease.cli.common import out


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
    table = fmt.table("heuristic", "tasks x machines", "λ", "makespan", "flowtime (SPT)", "energy")
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
    table = fmt.table("algorithm", "VMs placed", "desktops used", "with a user", "energy (Wh)",
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
    table = fmt.table("statistic", "value")
    for k, v in res.items():
        table.add_row(k, f"{v:,.4g}" if isinstance(v, float) else str(v))
    out.print(table)
