"""What ``skylease plan`` runs: a provisioning problem from a config file, solved in one mode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.model.limits import check_number
from skylease.planning.provisioning import (
    MapReduceJob,
    Plan,
    WatershedJob,
    load_catalog,
    modes,
    pareto,
    pick,
    solve_mapreduce,
    solve_multimodel,
    solve_watershed,
)

MODELS = ("mapreduce", "hybrid", "multi")


@dataclass(frozen=True)
class Problem:
    """A provisioning problem: a min-cost-under-deadline oracle and its deadline grid."""

    model: str
    solve: Callable[[float], Plan]
    unit: str  # deadline unit: "h" (MapReduce) or "min" (hybrid)
    lo: float
    hi: float
    step: float


def load_problem(model: str, config: str | Path | None = None) -> Problem:
    """The paper's use case for ``model``, with any field overridden by a TOML config file.

    Config keys (:mod:`skylease.experiments.plan_config`): ``catalog`` (a shipped name or a file),
    ``types`` (subset of type names), ``[job]`` (MapReduceJob / WatershedJob fields),
    ``scenario`` or ``[[models]]`` (multi), ``[options]`` (solver options), and ``[grid]``
    (``lo``, ``hi``, ``step`` of the deadline grid, in hours or minutes). Every mistake names the
    file, the line and the key.
    """
    from skylease.experiments.plan_config import MAX_DEADLINES, Grid, read_plan_config

    if model not in MODELS:
        raise UserError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    cfg, keys = read_plan_config(model, config)
    types = load_catalog(cfg.catalog or ("emr" if model == "mapreduce" else "hybrid"))
    if cfg.types is not None:
        try:
            types = pick(types, *cfg.types)
        except UserError as e:
            raise keys.error(e.message, "types") from None
    elif model == "multi":
        types = pick(types, "local", "azure-medium")  # the paper's multi-model setup
    opts: dict[str, Any] = cfg.options.model_dump(exclude_none=True) if cfg.options else {}
    if opts.get("limit_scope") == "none":
        opts["limit_scope"] = None
    job_keys = cfg.job.model_dump(exclude_none=True) if getattr(cfg, "job", None) else {}
    if model == "mapreduce":
        job = _job(MapReduceJob, job_keys, keys)
        def solve(d: float) -> Plan:
            return solve_mapreduce(job, types, d, **opts)
        lo, hi, step, unit = 0.25, 24.0, 0.25, "h"
    elif model == "multi":
        models = _models(cfg, keys)
        interval = float(opts.get("interval_min", 10))

        def solve(d: float) -> Plan:
            return solve_multimodel(models, types, d, **opts)
        lo, hi, step, unit = interval, 360.0, interval, "min"
    else:
        wjob = _job(WatershedJob, job_keys, keys)
        interval = float(opts.get("interval_min", 10))
        def solve(d: float) -> Plan:
            return solve_watershed(wjob, types, d, **opts)
        lo, hi, step, unit = interval, 240.0, interval, "min"
    grid = cfg.grid or Grid()
    lo = grid.lo if grid.lo is not None else lo
    hi = grid.hi if grid.hi is not None else hi
    step = grid.step if grid.step is not None else step
    if hi < lo:
        raise keys.error(f"must be >= lo ({lo:g}), got {hi:g}", "grid", "hi")
    if (hi - lo) / step + 1 > MAX_DEADLINES:
        raise keys.error(f"the grid would hold {(hi - lo) / step + 1:,.0f} deadlines; at most "
                         f"{MAX_DEADLINES:,} (a larger step)", "grid", "step")
    return Problem(model, solve, unit, float(lo), float(hi), float(step))


def _models(cfg: Any, keys: Any) -> tuple[Any, ...]:
    """The multi-model workload: ``scenario = "A"|"B"`` (the paper's) or ``[[models]]`` tables."""
    from skylease.planning.provisioning import SCENARIO_A, SCENARIO_B, WatershedModel

    if cfg.models is not None and cfg.scenario is not None:
        raise keys.error("give either scenario (the paper's) or [[models]], not both", "scenario")
    if cfg.models is None:
        return tuple(SCENARIO_B if cfg.scenario == "B" else SCENARIO_A)
    out = []
    for i, m in enumerate(cfg.models):
        try:
            out.append(WatershedModel(m.name, m.n_tasks, m.task_minutes, m.input_gb, frozenset(m.data_at)))
        except UserError as e:
            raise keys.error(e.message, "models", i, *([e.field] if e.field else [])) from None
    return tuple(out)


def _job(cls: type, values: dict[str, Any], keys: Any) -> Any:
    """The job with the file's ``[job]`` values; its own checks (e.g. no work at all) name the key."""
    try:
        return cls(**values)
    except UserError as e:
        raise keys.error(e.message, "job", *([e.field] if e.field else [])) from None


def solve_mode(problem: Problem, *, deadline: float | None = None, budget: float | None = None,
               weight: float | None = None) -> Plan:
    """One plan: cheapest by a deadline, fastest within a budget, a weighted choice, or the
    fastest overall when nothing is given."""
    if sum(x is not None for x in (deadline, budget, weight)) > 1:
        raise UserError("give at most one of --deadline, --budget, --weight")
    if deadline is not None:
        unit = "hours" if problem.unit == "h" else "minutes"
        check_number(deadline, "--deadline", above=0, hint=f"in {unit}")
    if budget is not None:
        check_number(budget, "--budget", minimum=0, hint="leave it out for the fastest plan")
    if weight is not None:
        check_number(weight, "--weight", minimum=0, maximum=1)
    p = problem
    if deadline is not None:
        return modes.cheapest_meeting_deadline(p.solve, deadline, step=p.step, upper=p.hi, unit=p.unit)
    if budget is not None:
        return modes.fastest_within_budget(p.solve, budget, p.lo, p.hi, p.step, unit=p.unit)
    if weight is not None:
        return modes.weighted(front(problem), weight)
    return modes.min_time(p.solve, p.lo, p.hi, p.step, unit=p.unit)


def front(problem: Problem) -> list[Plan]:
    """The cost/time Pareto front over the problem's deadline grid."""
    p = problem
    n = round((p.hi - p.lo) / p.step)
    deadlines = [round(p.lo + k * p.step, 9) for k in range(n + 1)]
    return pareto.front(p.solve, deadlines)


def plot_front(plans: list[Plan], out: str | Path, *, title: str,
               baselines: dict[str, list[Plan]] | None = None) -> None:
    """Time against cost, the frontier as a step line, baselines as markers (atomic write)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skylease.experiments.report import check_output, save_figure

    out = check_output(out, "--plot")
    fig, ax = plt.subplots(figsize=(6.5, 4.5), layout="constrained")
    pts = sorted((pl.cost, pl.makespan_s / 60) for pl in plans)
    if pts:
        ax.step([c for c, _ in pts], [t for _, t in pts], where="post", marker="o", ms=4,
                label="ILP Pareto front")
    for (name, bl), marker in zip((baselines or {}).items(), "s^vDx", strict=False):
        ok = [b for b in bl if b.ok]
        ax.scatter([b.cost for b in ok], [b.makespan_s / 60 for b in ok], marker=marker, label=name,
                   alpha=0.7)
    ax.set_xlabel("cost ($)")
    ax.set_ylabel("completion time (min)")
    ax.set_title(title)
    ax.legend()
    save_figure(fig, out)


def replay_watershed(plan: Plan, job: WatershedJob, types: tuple[Any, ...] | list[Any]) -> Any:
    """Run a hybrid (Watershed) plan in the event simulator: whole tasks, boot delays, billing.

    Each instance of a c-core type becomes c one-core hosts billed c-th of its price (price per
    core is what the paper's catalog holds constant). Paid instances follow the plan's counts per
    interval; free local cores stay until the job is done. Returns the simulator's result.
    """
    from skylease.control.scheduled import ScheduledPool
    from skylease.model.catalog import InstanceType
    from skylease.sim.env import simulate
    from skylease.traces.synthetic import constant_bag

    if not plan.ok:
        raise UserError(f"cannot replay a plan that is {plan.status}")
    hourly = plan.detail.get("billing", "hourly") == "hourly"
    by_name = {t.name: t for t in types}
    if plan.starts is None:  # a baseline: a fixed fleet from t=0 until the job is done
        starts, end = [0.0], None
    else:
        starts = [m * 60.0 for m in plan.starts["interval_starts_min"]]
        end = starts[-1] + plan.detail["interval_min"] * 60.0
    pools, schedule = [], {}
    for name, counts in plan.instances.items():
        t = by_name[name]
        free = t.price_hour == 0
        unit, price = (3600.0, t.price_hour / t.cores) if hourly else (60.0, t.minute_price / t.cores)
        pools.append(InstanceType(name, price=price, billing_unit=unit, boot_time=t.init_minutes * 60,
                                  min_units=0 if free else 1))
        steps = [(s, c * t.cores) for s, c in zip(starts, counts, strict=True)]
        if not free and end is not None:
            steps.append((end, 0))
        schedule[name] = _compress(steps)
    bag = constant_bag(job.n_tasks, job.task_minutes * 60.0, name="watershed")
    return simulate(ScheduledPool(schedule, drain=True), bag, pools)


def _compress(steps: list[tuple[float, int]]) -> list[tuple[float, int]]:
    out: list[tuple[float, int]] = []
    for t, c in steps:
        if not out or out[-1][1] != c:
            out.append((t, c))
    return out
