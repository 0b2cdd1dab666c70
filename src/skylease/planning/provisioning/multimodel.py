"""Watershed with k models, data location and transfer costs: the interval ILP of eqs. 28-37 (spec 002 §4.3).

x[i][j][k] instances of type j work on model k during interval i. The per-type total never increases
(eq. 30), so every instance starts at t=0. A machine may switch models; staging a model's input costs
``InitPenalty`` tasks of negative work per machine that ever processes it (eqs. 31-32). Running a model
at a location that does not hold its input costs one transfer of its input (eqs. 34-35).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from skylease.model.errors import UserError

from ._milp import Milp
from .catalog import CloudType
from .plan import Plan, infeasible
from .watershed import check_interval_args

_EPS = 1e-9

# [ASSUMPTION] spec §1.3 / M12: Azure egress $0.15/GB, ingress $0, the local site $0.
AZURE_OUT_PER_GB = 0.15
LOCAL = "local"
AZURE = "azure-chicago"  # the location of the Azure types in the shipped ``hybrid`` catalog


@dataclass(frozen=True)
class WatershedModel:
    """One calibration model: ``n_tasks`` tasks of ``task_minutes`` on one reference core; its input
    (``input_gb``) is stored at the locations in ``data_at``."""

    name: str
    n_tasks: int
    task_minutes: float
    input_gb: float
    data_at: frozenset[str]

    def __post_init__(self) -> None:
        if self.n_tasks < 1:
            raise UserError(f"must be >= 1, got {self.n_tasks}", field="n_tasks")
        if not math.isfinite(self.task_minutes) or self.task_minutes <= 0:
            raise UserError(f"must be > 0, got {self.task_minutes!r}", field="task_minutes")
        if not math.isfinite(self.input_gb) or self.input_gb < 0:
            raise UserError(f"must be >= 0, got {self.input_gb!r}", field="input_gb")
        if not self.data_at:
            raise UserError(f"model {self.name!r} has its data nowhere", field="data_at")


# Decision: the spec (M12) lacks the per-model task times ("from 1 minute to 7.5 minutes"); we use its
# default linspace(1, 7.5, 5) = 1, 2.625, 4.25, 5.875, 7.5 min for models 1..5, and 1 GB input each.
_TASK_MIN = (1.0, 2.625, 4.25, 5.875, 7.5)


def _scenario(local: set[int], azure: set[int]) -> tuple[WatershedModel, ...]:
    def where(k: int) -> frozenset[str]:
        return frozenset(({LOCAL} if k in local else set()) | ({AZURE} if k in azure else set()))

    return tuple(WatershedModel(f"m{k}", 200, _TASK_MIN[k - 1], 1.0, where(k)) for k in range(1, 6))


# [PAPER] §6.4: scenario A: models 1, 3, 4 local; 2, 3, 5 in Azure. Scenario B: 1-4 local; 3, 5 in Azure.
SCENARIO_A = _scenario({1, 3, 4}, {2, 3, 5})
SCENARIO_B = _scenario({1, 2, 3, 4}, {3, 5})


def default_transfer_out(location: str) -> float:
    """$/GB to move data out of ``location``: 0 for ``local``, Azure egress for anything else."""
    return 0.0 if location == LOCAL else AZURE_OUT_PER_GB


def transfer_price(model: WatershedModel, to: str, out_per_gb: Mapping[str, float] | None = None) -> float:
    """Cost of copying ``model``'s input to ``to`` (0 if it is there): from the cheapest holding site,
    ingress free (spec §1.3)."""
    if to in model.data_at:
        return 0.0
    prices = dict(out_per_gb or {})
    out = {loc: prices[loc] if loc in prices else default_transfer_out(loc) for loc in model.data_at}
    return model.input_gb * min(out.values())


def default_init_penalty(t: CloudType, m: WatershedModel) -> float:
    """Spec §4.3 InitPenalty_{j,k} = init_minutes_j · cores_j / task_minutes_k (tasks lost while one machine
    stages the model), scaled by the type's per-core speed."""
    return t.init_minutes * t.cores * t.capacity / m.task_minutes


def solve_multimodel(models: Sequence[WatershedModel], types: Sequence[CloudType], deadline_min: float, *,
                     interval_min: float = 10, billing: str = "minute",
                     transfer_out_per_gb: Mapping[str, float] | None = None,
                     init_penalty_tasks: float | None = None, tiebreak: bool = True) -> Plan:
    """Minimum-cost plan running every model within ``deadline_min`` minutes (eqs. 18, 28-37).

    Capacities are un-reduced (spec §4.3: "Keep capacity un-reduced"); the start-up delay is the
    InitPenalty. ``init_penalty_tasks=None`` uses the spec's recommended default
    ``init_minutes_j·cores_j/task_minutes_k`` per (type, model); a number applies that many tasks to every
    (type, model). For one model this is the same cost as ``solve_watershed`` (which cuts capacity by the
    delay instead). ``billing``: "minute" (eq. 36, the paper's) or "hourly" (eqs. 23-24 on the per-type
    totals). ``tiebreak``: a lexicographic second solve for the fastest of the cheapest plans.
    """
    models, types = tuple(models), tuple(types)
    model_name = f"multimodel/{billing}"
    if not models:
        raise UserError("no models given", field="models")
    if len({m.name for m in models}) != len(models):
        raise UserError("model names must be unique", field="models")
    if not types:
        raise UserError("no instance types given", field="types")
    check_interval_args(deadline_min, interval_min, billing)
    if init_penalty_tasks is not None and (not math.isfinite(init_penalty_tasks) or init_penalty_tasks < 0):
        raise UserError(f"must be >= 0, got {init_penalty_tasks!r}", field="init_penalty_tasks")
    n_int = math.floor(deadline_min / interval_min + _EPS)
    deadline_s = deadline_min * 60.0
    msg = f"no plan runs the {len(models)} model(s) by {deadline_min:g} min"
    if n_int < 1:
        return infeasible(model_name, deadline_s, msg)
    total_tasks = sum(m.n_tasks for m in models)
    # Decision: as in watershed.availability, a type without max_count is capped at the total task count.
    avail = [t.max_count if t.max_count is not None else total_tasks for t in types]
    J, K, I = range(len(types)), range(len(models)), range(n_int)  # noqa: E741
    cap = [[t.cores * t.capacity * interval_min / m.task_minutes for m in models] for t in types]
    pen = [[default_init_penalty(t, m) if init_penalty_tasks is None else init_penalty_tasks for m in models]
           for t in types]
    locs = sorted({t.location for t in types})

    mp = Milp()
    cost = mp.var(cost=1.0)  # (18)
    transfer_cost = mp.var()
    compute_cost = mp.var()
    x = [[[mp.var(0, avail[j], integer=True) for _ in K] for j in J] for _ in I]
    mm = [[mp.var(0, avail[j], integer=True) for _ in K] for j in J]
    tw = [[mp.var(-math.inf) for _ in K] for _ in J]  # total_work: free sign (§4.3)
    # (28) is substituted: work_{i,j,k} = cap_{j,k}·x_{i,j,k} enters (31) directly.
    for j in J:
        for i in I:
            mp.row({x[i][j][k]: 1 for k in K}, hi=avail[j])  # (29)
            if i + 1 < n_int:
                mp.row({**{x[i][j][k]: 1 for k in K}, **{x[i + 1][j][k]: -1 for k in K}}, lo=0)  # (30)
        for k in K:
            mp.row({**{x[i][j][k]: cap[j][k] for i in I}, mm[j][k]: -pen[j][k], tw[j][k]: -1}, 0, 0)  # (31)
            for i in I:
                mp.row({mm[j][k]: 1, x[i][j][k]: -1}, lo=0)  # (32)
    for k, m in enumerate(models):
        mp.row({tw[j][k]: 1 for j in J}, lo=m.n_tasks - 1e-7)  # (33)
    tr: dict[tuple[int, str], int] = {}
    tr_price: dict[tuple[int, str], float] = {}
    for k, m in enumerate(models):
        for loc in locs:
            if loc in m.data_at:
                continue  # [ASSUMPTION] §4.3/M13: a binary only where the location lacks the data
            js = [j for j in J if types[j].location == loc]
            b = tr[k, loc] = mp.binary()
            tr_price[k, loc] = transfer_price(m, loc, transfer_out_per_gb)
            # (34) Decision: disaggregated, max_machines_{j,k} <= AVAILABILITY_j·t_{k,m} for each type j at m
            # (with (32) it bounds every x_{i,j,k}): the same integer solutions as Σ_i x <= MAX_TASKS·t, a
            # much tighter LP relaxation.
            for j in js:
                mp.row({mm[j][k]: 1, b: -avail[j]}, hi=0)
    mp.row({transfer_cost: 1, **{b: -tr_price[key] for key, b in tr.items()}}, 0, 0)  # (35)
    if billing == "minute":
        mp.row({compute_cost: 1, **{x[i][j][k]: -interval_min * types[j].minute_price
                                    for i in I for j in J for k in K}}, 0, 0)  # (36)
    else:
        bill: dict[tuple[int, int], int] = {}
        for i in I:
            h = math.floor(i * interval_min / 60.0 + _EPS)
            for j in J:
                if (h, j) not in bill:
                    bill[h, j] = mp.var(0, avail[j], integer=True)
                mp.row({bill[h, j]: 1, **{x[i][j][k]: -1 for k in K}}, lo=0)  # (23)
        mp.row({compute_cost: 1, **{b: -types[j].price_hour for (_, j), b in bill.items()}}, 0, 0)  # (24)
    mp.row({cost: 1, transfer_cost: -1, compute_cost: -1}, 0, 0)  # (37)
    active: list[int] = []
    if tiebreak:  # Decision: same lexicographic second solve as solve_watershed (min active intervals)
        active = [mp.binary() for _ in I]
        for i in I:
            for j in J:
                if avail[j]:
                    mp.row({**{x[i][j][k]: 1 for k in K}, active[i]: -avail[j]}, hi=0)
            if i + 1 < n_int:
                mp.row({active[i]: 1, active[i + 1]: -1}, lo=0)
    res, solve_ms, stages = mp.solve_lexicographic(cost, dict.fromkeys(active, 1.0), second=tiebreak)
    size = {"variables": mp.num_vars, "constraints": mp.num_rows, "stages": stages}
    if res.status == "infeasible":
        return infeasible(model_name, deadline_s, msg, solve_ms, **size)
    if res.status != "optimal":
        return Plan("error", math.nan, math.nan, {}, None, {}, solve_ms, model_name, deadline_s,
                    {"message": f"solver: {res.raw_status}", **size})

    xv = [[[round(res.x[x[i][j][k]]) for k in K] for j in J] for i in I]
    tot = [[sum(xv[i][j]) for j in J] for i in I]
    last = max((i for i in I if any(tot[i])), default=-1)
    billed: dict[str, int] = {}
    compute = 0.0
    for j, t in enumerate(types):
        if billing == "minute":
            units = round(sum(tot[i][j] for i in I) * interval_min)
            compute += units * t.minute_price
        else:
            hours: dict[int, int] = {}
            for i in I:
                h = math.floor(i * interval_min / 60.0 + _EPS)
                hours[h] = max(hours.get(h, 0), tot[i][j])
            units = sum(hours.values())
            compute += units * t.price_hour
        if units and t.price_hour > 0:
            billed[t.name] = units
    used = {(k, loc) for (k, loc) in tr
            if any(xv[i][j][k] for i in I for j in J if types[j].location == loc)}
    transfers = [{"model": models[k].name, "to": loc, "from": sorted(models[k].data_at),
                  "cost": tr_price[k, loc]} for (k, loc) in sorted(used)]
    transfer = sum(d["cost"] for d in transfers)
    assignment: dict[str, dict[str, dict]] = {}
    for k, m in enumerate(models):
        per: dict[str, dict] = {}
        for j, t in enumerate(types):
            counts = [xv[i][j][k] for i in range(last + 1)]
            if any(counts):
                machines = max(counts)
                per[t.name] = {"location": t.location, "counts": counts, "machines": machines,
                               "tasks": sum(counts) * cap[j][k] - pen[j][k] * machines,
                               "instance_minutes": sum(counts) * interval_min}
        assignment[m.name] = per
    inst = {t.name: [tot[i][j] for i in range(last + 1)] for j, t in enumerate(types)
            if any(tot[i][j] for i in I)}
    detail = {"interval_min": interval_min, "intervals": n_int, "billing": billing,
              "billing_unit": "instance-hour" if billing == "hourly" else "instance-minute",
              "assignment": assignment, "transfers": transfers, "transfer_cost": round(transfer, 10),
              "compute_cost": round(compute, 10),
              "init_penalty": ("spec default init*cores/task" if init_penalty_tasks is None
                               else init_penalty_tasks),
              **size}
    starts = [i * interval_min for i in range(last + 1)]
    return Plan("optimal", round(compute + transfer, 10), (last + 1) * interval_min * 60.0, inst,
                {"interval_starts_min": starts}, billed, solve_ms, model_name, deadline_s, detail)
