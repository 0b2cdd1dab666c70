"""`skylease plan`: provisioning plans by ILP (HiGHS) and the cost/time Pareto front."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import plan_app
from skylease.cli.common import error_line, out
from skylease.model.errors import UserError

ConfigOption = Annotated[Path | None, typer.Option("--config", help="TOML file overriding the "
                                                   "paper's use case (catalog, types, [job], "
                                                   "[options], [grid]).")]


def _plan_cmd(model: str, config: Path | None, deadline: float | None, budget: float | None,
              weight: float | None, as_json: bool) -> None:
    from skylease.experiments.provisioning import load_problem, solve_mode

    problem = load_problem(model, config)
    if deadline is not None:  # given in seconds (a duration); the model counts in its own unit
        deadline /= 3600 if problem.unit == "h" else 60
    plan = solve_mode(problem, deadline=deadline, budget=budget, weight=weight)
    if as_json:
        print(json.dumps(plan.to_json()))
    if plan.status == "infeasible":  # an impossible request: bad input, exit 2, with --json too
        raise UserError(plan.detail.get("message", "no plan meets this request"))
    if not plan.ok:  # the solver failed: the work failed, exit 1 (docs/cli.md)
        if not as_json:
            error_line(plan.detail.get("message", f"no plan ({plan.status})"))
        raise typer.Exit(1)
    if not as_json:
        table = fmt.table("type", "instances (per phase or interval)", "billed units")
        for name, counts in plan.instances.items():
            if any(counts):
                table.add_row(name, " ".join(str(c) for c in counts),
                              str(plan.billed_units.get(name, 0)))
        out.print(table)
        out.print(f"cost {fmt.money(plan.cost)}, completes in {fmt.duration(plan.makespan_s)} "
                  f"(solved in {fmt.duration(plan.solve_ms / 1000)})")
        if "summary" in plan.detail:
            out.print(plan.detail["summary"])


Deadline = Annotated[float | None, typer.Option(metavar="DURATION", parser=fmt.duration_option(positive=True),
                                                help="Deadline, a duration (90m, 2h, 1:30:00; a bare "
                                                "number is seconds): the cheapest plan meeting it.")]
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
    table = fmt.table("completes in", "cost", title=f"{model}: Pareto front")
    for p in sorted(plans, key=lambda p: p.makespan_s):
        table.add_row(fmt.duration(p.makespan_s), fmt.money(p.cost))
    out.print(table)
    if plot is not None:
        out.print(f"plot: {plot}")
