"""Watershed with k models, data location and transfer costs: the interval ILP of eqs. 28-37 (Sect. V-D;
decisions M12, M13 in docs/decisions/ilp.md).

x[i][j][k] instances of type j work on model k during interval i. The per-type total never increases
(eq. 30), so every instance starts at t=0. A machine may switch models; staging a model's input costs
``InitPenalty`` tasks of negative work per machine that ever processes it (eqs. 31-32). Running a model
at a location that does not hold its input costs one transfer of its input (eqs. 34-35). That is
``capacity="fluid"``; the default ``capacity="whole"`` plans explicit machines that each run one
model and do whole tasks (``_solve_whole``), so its plans replay exactly in the simulator.
"""

from __future__ import annotations

import contextvars
import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from skylease.model.errors import UserError
from skylease.model.limits import check_size

from ._lanes import cover_runs, cover_table, least_horizon, run_price
from ._milp import Milp
from .catalog import CloudType
from .plan import Plan, infeasible
from .watershed import DP_CELL_BYTES, check_interval_args, least_intervals

_EPS = 1e-9

# [ASSUMPTION] decision M12: Azure egress $0.15/GB, ingress $0, the local site $0.
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


# Decision M12: the paper lacks the per-model task times ("from 1 minute to 7.5 minutes"); we use
# linspace(1, 7.5, 5) = 1, 2.625, 4.25, 5.875, 7.5 min for models 1..5, and 1 GB input each.
_TASK_MIN = (1.0, 2.625, 4.25, 5.875, 7.5)


def _scenario(local: set[int], azure: set[int]) -> tuple[WatershedModel, ...]:
    def where(k: int) -> frozenset[str]:
        return frozenset(({LOCAL} if k in local else set()) | ({AZURE} if k in azure else set()))

    return tuple(WatershedModel(f"m{k}", 200, _TASK_MIN[k - 1], 1.0, where(k)) for k in range(1, 6))


# [PAPER] Sect. V-D (BASE): scenario A: models 1, 3, 4 local; 2, 3, 5 in Azure. Scenario B: 1-4 local; 3, 5
# in Azure.
SCENARIO_A = _scenario({1, 3, 4}, {2, 3, 5})
SCENARIO_B = _scenario({1, 2, 3, 4}, {3, 5})


def default_transfer_out(location: str) -> float:
    """$/GB to move data out of ``location``: 0 for ``local``, Azure egress for anything else."""
    return 0.0 if location == LOCAL else AZURE_OUT_PER_GB


def transfer_price(model: WatershedModel, to: str, out_per_gb: Mapping[str, float] | None = None) -> float:
    """Cost of copying ``model``'s input to ``to`` (0 if it is there): from the cheapest holding site,
    ingress free (decision M12)."""
    if to in model.data_at:
        return 0.0
    prices = dict(out_per_gb or {})
    out = {loc: prices[loc] if loc in prices else default_transfer_out(loc) for loc in model.data_at}
    return model.input_gb * min(out.values())


def default_init_penalty(t: CloudType, m: WatershedModel) -> float:
    """Decision M12: InitPenalty_{j,k} = init_minutes_j · cores_j / task_minutes_k (tasks lost while one
    machine
    stages the model), scaled by the type's per-core speed."""
    return t.init_minutes * t.cores * t.capacity / m.task_minutes


def solve_multimodel(models: Sequence[WatershedModel], types: Sequence[CloudType], deadline_min: float, *,
                     interval_min: float = 10, billing: str = "minute",
                     transfer_out_per_gb: Mapping[str, float] | None = None,
                     init_penalty_tasks: float | None = None, tiebreak: bool = True,
                     capacity: str = "whole", method: str = "auto") -> Plan:
    """Minimum-cost plan running every model within ``deadline_min`` minutes (eqs. 18, 28-37).

    Capacities are un-reduced (as the paper says); the start-up delay is the
    InitPenalty. ``init_penalty_tasks=None`` uses our default (decision M12)
    ``init_minutes_j·cores_j/task_minutes_k`` per (type, model); a number applies that many tasks to every
    (type, model). For one model this is the same cost as ``solve_watershed`` (which cuts capacity by the
    delay instead). ``billing``: "minute" (eq. 36, the paper's) or "hourly" (eqs. 23-24 on the per-type
    totals). ``tiebreak``: a lexicographic second solve for the fastest of the cheapest plans.

    ``capacity``: "whole" (default) plans explicit machines that do whole tasks (see ``_solve_whole``),
    so the plan replays in the simulator on time and at its cost; "fluid" is the paper's literal
    eqs. 28-37 (fractions of tasks count, stagings per (type, model)), which reproduces our
    test vectors but whose plans can replay late (see :mod:`skylease.experiments.plan_replay`).

    ``method`` (whole capacity): "ilp" solves the whole-task ILP with HiGHS; "dp" solves the same
    model exactly by dynamic programming (``_whole_dp``: at most two usable instance types);
    "auto" (default) uses "dp" when it applies, else "ilp". The fluid model: "ilp" solves the ILP as
    built; "dp" (at most two usable types) solves it exactly by dynamic programming with
    minute billing (``_fluid_dp``, 2-10 ms instead of 0.2-2.7 s), and with hourly billing solves the
    ILP seeded with that DP's plan and bounded below by its cost. "auto" is "dp" with minute billing
    and at most two usable types, else the ILP as built. The optimal cost (and, with the tie-break,
    the makespan) is the same; the plan may be another of the tied optima.
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
    if capacity not in ("whole", "fluid"):
        raise UserError(f"capacity must be 'fluid' or 'whole', got {capacity!r}", field="capacity")
    if method not in ("auto", "ilp", "dp"):
        raise UserError(f"method must be 'auto', 'ilp' or 'dp', got {method!r}", field="method")
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
    if capacity == "whole":
        # stage-in minutes of one run: init_minutes_j, or the minutes in which a machine would do
        # ``init_penalty_tasks`` tasks when that is given
        stage = [[t.init_minutes if init_penalty_tasks is None
                  else init_penalty_tasks * m.task_minutes / (t.cores * t.capacity) for m in models]
                 for t in types]
        # A machine that runs past the intervals in which it alone would do all its model's tasks
        # could be the only machine of its model, for no more money and sooner; so no deadline past
        # the longest such run changes the plan (see watershed.plan_horizon).
        singles = [least_intervals(lambda n, t=t, m=m, st=stage[j][k]: run_tasks(t, m, n * interval_min, st),
                                   m.n_tasks)
                   for j, t in enumerate(types) if avail[j] > 0 and t.cores > 0 and t.capacity > 0
                   for k, m in enumerate(models)]
        if singles:
            n_int = min(n_int, max(singles))
        _check_plan_size(n_int, interval_min, total_tasks, len(models))
        return _solve_whole(models, types, n_int, interval_min, billing, transfer_out_per_gb, stage, avail,
                            tiebreak, model_name, deadline_s, msg, init_penalty_tasks, method)

    usable = [j for j in J if avail[j]]
    if method == "dp" and len(usable) > 2:
        raise UserError("method 'dp' needs at most two usable instance types", field="method")
    # Decision (issue 4, speed): with minute billing "auto" solves the fluid model by the DP (2-10 ms
    # against 0.2-2.7 s in HiGHS; same cost and tie-break makespan, tested against the ILP). Its
    # plan is another of the tied optima. Neither replays within one interval in general (fractions
    # of tasks are promised; see skylease.experiments.plan_replay): over scenarios A and B at 100-240
    # min, 9 of 30 plans of either route are later than one interval; the worst is 20.0 min late
    # and $0.40 over for the DP, 22.5 min and $0.36 for the ILP. The whole-task model (the
    # default capacity) is the one whose plans replay on time at their cost.
    if billing == "minute" and method != "ilp" and len(usable) <= 2 and not _CAPTURE.get():
        dp_price = {(k, loc): transfer_price(m, loc, transfer_out_per_gb)
                    for k, m in enumerate(models) for loc in locs if loc not in m.data_at}
        xdp, solve_ms, evals, _ = _fluid_dp(models, types, n_int, interval_min, avail, cap, pen, dp_price,
                                         usable, tiebreak)
        size = {"variables": 0, "constraints": 0, "stages": evals, "method": "dp"}
        if xdp is None:
            return infeasible(model_name, deadline_s, msg, solve_ms, **size)
        return _fluid_plan(xdp, models, types, n_int, interval_min, billing, dp_price, cap, pen,
                           init_penalty_tasks, solve_ms, model_name, deadline_s, size)
    mp = Milp()
    cost = mp.var(cost=1.0)  # (18)
    transfer_cost = mp.var()
    compute_cost = mp.var()
    x = [[[mp.var(0, avail[j], integer=True) for _ in K] for j in J] for _ in I]
    mm = [[mp.var(0, avail[j], integer=True) for _ in K] for j in J]
    tw = [[mp.var(-math.inf) for _ in K] for _ in J]  # total_work: free sign (eq. 31)
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
                continue  # [ASSUMPTION] decision M13: a binary only where the location lacks the data
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
    if billing == "hourly" and method == "dp":
        # Decision (speed, exact optima kept; 2 s worst case before): ``_fluid_dp`` gives (a) a valid
        # lower bound, the row cost >= lb: with each type's machine-intervals billed at the fewest
        # billing hours of machines from t=0 that hold them (eqs. 23-24 bill at least that; the DP
        # relaxes only how the models share the machines), and (b) feasible points (the fluid
        # constraints do not depend on the billing): the minute-billing plans within the deadline and
        # within each whole number of hours, and the bound's own plan; the cheapest at hourly prices is
        # HiGHS's first incumbent. On scenarios A/B (D = 100..240) the LP bound is 4-12% under the
        # optimum; this bound is the optimum on most deadlines, and then the incumbent decides the time.
        dp_price = {(k, loc): transfer_price(m, loc, transfer_out_per_gb)
                    for k, m in enumerate(models) for loc in locs if loc not in m.data_at}
        t0 = time.perf_counter()
        xl, _, _, lb = _fluid_dp(models, types, n_int, interval_min, avail, cap, pen, dp_price, usable,
                                 False, hour_rate=True)
        if xl is None:  # the same constraints: no hourly plan either
            return infeasible(model_name, deadline_s, msg, (time.perf_counter() - t0) * 1000.0,
                              variables=mp.num_vars, constraints=mp.num_rows, stages=0)
        cands = [xl]
        per_hour = round(60.0 / interval_min)
        for horizon in sorted({n_int, *range(per_hour, n_int + 1, per_hour)}, reverse=True):
            xh = _fluid_dp(models, types, horizon, interval_min, avail, cap, pen, dp_price, usable, False)[0]
            if xh is not None:
                cands.append(xh + [[[0] * len(models) for _ in types] for _ in range(n_int - horizon)])
        starts = [_fluid_start(x0, models, types, interval_min, cap, pen, tr_price, x, mm, tw, tr, bill,
                               cost, transfer_cost, compute_cost) for x0 in cands]
        mp.start = min(starts, key=lambda st: st[cost])
        mp.row({cost: 1}, lo=lb - 1e-6)
    # Decision: same lexicographic second solve as solve_watershed (min active intervals)
    res, solve_ms, size, failed = _solve_min_active(
        mp, cost, lambda i, j: {x[i][j][k]: 1 for k in K}, avail, n_int, tiebreak,
        model_name, deadline_s, msg)
    if failed is not None:
        return failed

    xv = [[[round(res.x[x[i][j][k]]) for k in K] for j in J] for i in I]
    return _fluid_plan(xv, models, types, n_int, interval_min, billing, tr_price, cap, pen,
                       init_penalty_tasks, solve_ms, model_name, deadline_s, size)


def _fluid_start(x0: list, models: tuple[WatershedModel, ...], types: tuple[CloudType, ...],
                 interval_min: float, cap: list[list[float]], pen: list[list[float]], tr_price: Mapping,
                 x: list, mm: list, tw: list, tr: Mapping, bill: Mapping, cost: int, transfer_cost: int,
                 compute_cost: int) -> dict[int, float]:
    """The fluid hourly ILP's columns at the counts ``x0[i][j][k]`` (a feasible point)."""
    I, J, K = range(len(x0)), range(len(types)), range(len(models))  # noqa: E741
    st: dict[int, float] = {}
    for j in J:
        for k in K:
            for i in I:
                st[x[i][j][k]] = x0[i][j][k]
            st[mm[j][k]] = max(x0[i][j][k] for i in I)
            st[tw[j][k]] = cap[j][k] * sum(x0[i][j][k] for i in I) - pen[j][k] * st[mm[j][k]]
    for (k, loc), b in tr.items():
        st[b] = float(any(st[mm[j][k]] for j in J if types[j].location == loc))
    st[transfer_cost] = sum(tr_price[key] * st[b] for key, b in tr.items())
    for (h, j), b in bill.items():
        st[b] = max(sum(x0[i][j]) for i in I if math.floor(i * interval_min / 60.0 + _EPS) == h)
    st[compute_cost] = sum(types[j].price_hour * st[b] for (_, j), b in bill.items())
    st[cost] = st[transfer_cost] + st[compute_cost]
    return st


def _fluid_plan(xv: list, models: tuple[WatershedModel, ...], types: tuple[CloudType, ...], n_int: int,
                interval_min: float, billing: str, tr_price: Mapping, cap: list[list[float]],
                pen: list[list[float]], init_penalty_tasks: float | None, solve_ms: float, model_name: str,
                deadline_s: float, size: dict) -> Plan:
    """The Plan of the fluid counts ``xv[i][j][k]`` (eqs. 28-37)."""
    I = range(n_int)  # noqa: E741
    tot, last, billed, compute, transfers, transfer = _bill_and_transfers(
        xv, models, types, interval_min, billing, tr_price)
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
              "init_penalty": ("default init*cores/task (decision M12)" if init_penalty_tasks is None
                               else init_penalty_tasks),
              "capacity": "fluid", **size}
    starts = [i * interval_min for i in range(last + 1)]
    return Plan("optimal", round(compute + transfer, 10), (last + 1) * interval_min * 60.0, inst,
                {"interval_starts_min": starts}, billed, solve_ms, model_name, deadline_s, detail)


def _fluid_work(cap: float, pen: float, horizon: int, s_max: int) -> np.ndarray:
    """Tasks done by ``s`` machine-intervals of one type on one model within ``horizon`` intervals,
    s = 0..s_max, on the fewest machines that can hold them (ceil(s / horizon), each paying ``pen``)."""
    s = np.arange(s_max + 1)
    return cap * s - pen * -(-s // horizon)


def _fluid_dp(models: tuple[WatershedModel, ...], types: tuple[CloudType, ...], n_int: int,
              interval_min: float, avail: list[int], cap: list[list[float]], pen: list[list[float]],
              tr_price: dict[tuple[int, str], float], usable: list[int], tiebreak: bool,
              hour_rate: bool = False):
    """The fluid ILP (eqs. 28-37, minute billing) solved exactly by dynamic programming, for at most
    two usable instance types. Returns the counts x[i][j][k] (None: infeasible), the solve ms and
    the number of cost evaluations.

    Decision (issue: fluid solves took 0.1-2.9 s in HiGHS): with minute billing the fluid model
    separates. Within L intervals, what model k gets from type j depends only on its machine
    intervals S_jk = Σ_i x_ijk and its machines mm_jk: work cap·S - pen·mm (eq. 31), and
    S <= mm·L; so mm = ceil(S/L) at an optimum. Any S_jk with Σ_k S_jk <= avail_j·L is realisable
    with non-rising per-type totals (eqs. 29, 30) and x_ijk <= ceil(S_jk/L): cut model k's S_jk into
    ceil(S_jk/L) pieces of at most L and lay the pieces one after the other over the avail_j
    machines, wrapping at L (McNaughton's rule: a piece never overlaps itself, and every machine
    but the last is full). The cost is Σ_j price_j·Σ_k S_jk plus the transfers of the locations
    each model uses (eqs. 34-36). So a DP over the models: V_t[a0] = least type-1 machine-intervals
    of the models so far using a0 type-0 ones and transfers of total t. c(L) never rises with L;
    the tie-break (fewest active intervals) is the least L with c(L) within the ILP's tolerance
    of c(n_int), as in ``_whole_dp``.
    """
    t0 = time.perf_counter()
    dims = [*usable, None][:2]
    room_of = [avail[j] if j is not None else 0 for j in dims]
    # ``hour_rate``: bill type j's Σ_k S_jk machine-intervals at the least number of billing hours that
    # hold them (machines from t=0, eqs. 23-24), a lower bound on hourly billing; else eq. 36
    price = [interval_min * types[j].minute_price if j is not None else 0.0 for j in dims]

    def bill_of(d: int, horizon: int) -> np.ndarray:
        j, room = dims[d], room_of[d] * horizon
        if j is None:
            return np.zeros(1)
        if not hour_rate:
            return price[d] * np.arange(room + 1)
        runs = [run_price(types[j], length, interval_min, "hourly") for length in range(horizon + 1)]
        return cover_table(list(range(horizon + 1)), runs, room_of[d], room, horizon)[room_of[d]]

    def evaluate(horizon: int):
        room = [r * horizon for r in room_of]
        layers: list[dict[float, np.ndarray]] = [{0.0: np.r_[0.0, np.full(room[0], np.inf)]}]
        picks = []
        for k, m in enumerate(models):
            need = m.n_tasks - 1e-7
            # per type: work prefix maximum over the machine-intervals, and the least amount reaching it
            best, first = [], []
            for d, j in enumerate(dims):
                if j is None:
                    best.append(np.zeros(1))
                    first.append(np.zeros(1, dtype=int))
                    continue
                w = _fluid_work(cap[j][k], pen[j][k], horizon, room[d])
                reach = np.nonzero(w >= need)[0]
                if len(reach):
                    w = w[:reach[0] + 1]
                hull = np.maximum.accumulate(w)
                best.append(hull)
                record = np.r_[True, w[1:] > hull[:-1]]
                first.append(np.maximum.accumulate(np.where(record, np.arange(len(w)), 0)))
            # option = which of the two types model k may use, with the transfers that costs
            opts = []
            for use in ((False, False), (True, False), (False, True), (True, True)):
                locs_used = {types[j].location for d, j in enumerate(dims) if use[d] and j is not None}
                extra = sum(tr_price.get((k, loc), 0.0) for loc in locs_used)
                s0 = best[0] if use[0] else best[0][:1]
                h1 = best[1] if use[1] else best[1][:1]
                rest = need - s0  # what type 1 must do for each type-0 amount
                pos = np.searchsorted(h1, rest, side="left")
                f = np.where(pos < len(h1), pos, np.inf).astype(float)
                f[rest <= 0] = 0.0
                opts.append((round(extra, 9), f, use))
            prev, new = layers[-1], {}
            for tv, u in prev.items():
                for extra, f, _ in opts:
                    key = round(tv + extra, 9)
                    fin = np.isfinite(f)
                    if not fin.any():
                        continue
                    n0 = len(u)
                    if len(f) == 1:
                        out = u + f[0]
                    else:
                        s = np.nonzero(fin)[0]
                        a = np.arange(n0)[:, None] - s[None, :]
                        cand = np.where(a >= 0, u[np.maximum(a, 0)] + f[s][None, :], np.inf)
                        out = cand.min(axis=1)
                    out[out > room[1]] = np.inf
                    if key in new:
                        np.minimum(new[key], out, out=new[key])
                    else:
                        new[key] = out
            # drop a transfer total whose table another no dearer one beats everywhere
            keys = sorted(new)
            kept: dict[float, np.ndarray] = {}
            for key in keys:
                tab = new[key]
                if not np.isfinite(tab).any():
                    continue
                if any(np.all(other <= tab) for other in kept.values()):
                    continue
                kept[key] = tab
            layers.append(kept)
            picks.append((opts, first))
        total = np.inf
        arg = None
        g0, g1 = bill_of(0, horizon), bill_of(1, horizon)
        for key, tab in layers[-1].items():
            ok = np.isfinite(tab)
            c = np.where(ok, g0 + g1[np.where(ok, tab, 0).astype(int)] + key, np.inf)
            i = int(np.argmin(c))
            if c[i] < total - 1e-12:
                total, arg = float(c[i]), (key, i)
        return total, layers, picks, arg

    full = evaluate(n_int)
    best_cost, evals, horizon = full[0], 1, n_int
    if math.isfinite(best_cost) and tiebreak and n_int > 1:
        horizon, full, more = least_horizon(evaluate, n_int, full)
        evals += more
    _, layers, picks, arg = full
    if not math.isfinite(best_cost):
        return None, (time.perf_counter() - t0) * 1000.0, evals, best_cost
    # walk back: each model's machine-intervals per type
    key, a0 = arg
    amounts = [(0, 0)] * len(models)
    for k in range(len(models) - 1, -1, -1):
        target = layers[k + 1][key][a0]
        opts, first = picks[k]
        found = None
        for tv, u in layers[k].items():
            for extra, f, _ in opts:
                if abs(round(tv + extra, 9) - key) > 1e-9:
                    continue
                for s0 in range(min(len(f), a0 + 1)):
                    if np.isfinite(f[s0]) and u[a0 - s0] + f[s0] <= target + 1e-9:
                        found = (tv, s0, int(f[s0]))
                        break
                if found:
                    break
            if found:
                break
        assert found is not None, "the fluid DP does not walk back"
        tv, s0, s1 = found
        s0 = int(first[0][s0]) if dims[0] is not None else 0
        amounts[k] = (s0, s1)
        key, a0 = tv, a0 - found[1]
    x = [[[0] * len(models) for _ in types] for _ in range(n_int)]
    for d, j in enumerate(dims):
        if j is None:
            continue
        machine, at = 0, 0
        for k in range(len(models)):
            s = amounts[k][d]
            if not s:
                continue
            pieces = -(-s // horizon)
            for p in range(pieces):
                length = s // pieces + (1 if p < s % pieces else 0)
                for _ in range(length):
                    x[at][j][k] += 1
                    at += 1
                    if at == horizon:
                        machine, at = machine + 1, 0
        assert machine < avail[j] or (machine == avail[j] and at == 0)
    return x, (time.perf_counter() - t0) * 1000.0, evals, best_cost


def _check_plan_size(n_int: int, interval_min: float, tasks: int, n_models: int) -> None:
    check_size(n_int * (tasks + n_models), "intervals x tasks", DP_CELL_BYTES,
               asked=f"{n_int:,} intervals of {interval_min:g} min (the deadline) x {tasks:,} tasks")


def run_tasks(t: CloudType, m: WatershedModel, run_min: float, stage_min: float) -> int:
    """Whole tasks of ``m`` one machine of type ``t`` finishes in a run of ``run_min`` minutes that
    begins with a ``stage_min`` stage-in (boot, or switching to ``m``): ``cores·floor(useful/task)``."""
    per_core = math.floor(max(0.0, run_min - stage_min) * t.capacity / m.task_minutes + _EPS)
    return t.cores * per_core


def _solve_whole(models: tuple[WatershedModel, ...], types: tuple[CloudType, ...], n_int: int,
                 interval_min: float, billing: str, transfer_out_per_gb: Mapping[str, float] | None,
                 stage: list[list[float]], avail: list[int], tiebreak: bool, model_name: str,
                 deadline_s: float, msg: str, init_penalty_tasks: float | None, method: str = "auto") -> Plan:
    """The whole-task multi-model ILP: every machine does whole tasks of one model from t=0.

    Decision (issue 4, replayable plans): y[j][k][L] machines of type j run model k from t=0 for
    L intervals (then stop); each stages the model once (its boot, ``stage[j][k]`` minutes) and
    finishes ``run_tasks`` whole tasks. The plan so names every machine, its model, its stop and
    its tasks, and the simulator can follow it exactly: no fractions of tasks, no staging count
    that machine identities would break, one host per machine for hourly billing. x[i][j][k] =
    Σ_{L>i} y[j][k][L] are the fluid model's counts (never rising, eq. 30, by construction), and
    eqs. 29 and 32-37 (availability, transfers, minute or hourly billing) and the tie-break are as
    in the fluid model; eqs. 31/33 become Σ_j Σ_L run_tasks·y >= n_tasks_k. A machine no longer
    switches models. Measured on scenarios A and B (100-240 min, both billings): a run-flow variant
    in which machines may switch (runs [a, b) chained per machine) saves at most $0.28 but solves in
    up to 121 s (9 s when only free machines switch, once) against at most 1.7 s here.
    """
    J, K, I = range(len(types)), range(len(models)), range(n_int)  # noqa: E741
    locs = sorted({t.location for t in types})
    work = [[[0] + [run_tasks(t, m, length * interval_min, stage[j][k]) for length in range(1, n_int + 1)]
             for k, m in enumerate(models)] for j, t in enumerate(types)]  # work[j][k][length in intervals]
    tr_price = {(k, loc): transfer_price(m, loc, transfer_out_per_gb)
                for k, m in enumerate(models) for loc in locs if loc not in m.data_at}
    usable = [j for j in J if avail[j] and any(any(w) for w in work[j])]
    if method == "dp" and len(usable) > 2:
        raise UserError("method 'dp' needs at most two usable instance types", field="method")
    if method != "ilp" and len(usable) <= 2:
        yv, solve_ms, evals = _whole_dp(models, types, n_int, interval_min, billing, avail, work, tr_price,
                                        usable, tiebreak)
        size = {"variables": 0, "constraints": 0, "stages": evals, "method": "dp"}
        if yv is None:
            return infeasible(model_name, deadline_s, msg, solve_ms, **size)
        machines = _machines(yv, models, types, interval_min, stage, work)
        return _whole_plan(machines, models, types, n_int, interval_min, billing, tr_price, solve_ms,
                           model_name, deadline_s, init_penalty_tasks, size)
    mp = Milp()
    cost = mp.var(cost=1.0)
    transfer_cost = mp.var()
    compute_cost = mp.var()
    y: dict[tuple[int, int, int, int], int] = {}  # (j, k, first interval, end interval)
    for j in J:
        for k in K:
            for length in range(1, n_int + 1):
                if work[j][k][length] and avail[j]:  # a run that cannot finish a task is never useful
                    y[j, k, 0, length] = mp.var(0, avail[j], integer=True)
    def alive(j: int, i: int, k: int | None = None) -> dict[int, float]:
        """x[i][j][k] (or Σ_k x[i][j][k]): the machines of type j still running in interval i."""
        return {v: 1 for (jj, kk, _, b), v in y.items() if jj == j and b > i and k in (None, kk)}

    for j in J:
        mp.row(alive(j, 0), hi=avail[j])  # (29); (30) holds by construction
    for k, m in enumerate(models):  # (31)/(33) with whole tasks
        mp.row({v: work[j][kk][b - a] for (j, kk, a, b), v in y.items() if kk == k}, lo=m.n_tasks)
    tr: dict[tuple[int, str], int] = {}
    for k, m in enumerate(models):
        for loc in locs:
            if loc in m.data_at:
                continue
            tb = tr[k, loc] = mp.binary()
            for j in J:
                if types[j].location == loc and avail[j]:
                    mp.row({**alive(j, 0, k), tb: -avail[j]}, hi=0)  # (32)+(34)
    mp.row({transfer_cost: 1, **{tb: -tr_price[key] for key, tb in tr.items()}}, 0, 0)  # (35)
    if billing == "minute":
        mp.row({compute_cost: 1, **{v: -(b - a) * interval_min * types[j].minute_price
                                    for (j, _, a, b), v in y.items()}}, 0, 0)  # (36)
    else:
        bill: dict[tuple[int, int], int] = {}
        for i in I:
            h = math.floor(i * interval_min / 60.0 + _EPS)
            for j in J:
                if (h, j) not in bill:  # counts never rise: the hour's first interval is its maximum
                    bill[h, j] = mp.var(0, avail[j], integer=True)
                    mp.row({bill[h, j]: 1, **{v: -1 for v in alive(j, i)}}, lo=0)  # (23)
        mp.row({compute_cost: 1, **{v: -types[j].price_hour for (_, j), v in bill.items()}}, 0, 0)  # (24)
    mp.row({cost: 1, transfer_cost: -1, compute_cost: -1}, 0, 0)  # (37)
    res, solve_ms, size, failed = _solve_min_active(
        mp, cost, alive, avail, n_int, tiebreak, model_name, deadline_s, msg, swap=True)
    if failed is not None:
        return failed
    yv = {key: round(res.x[v]) for key, v in y.items() if round(res.x[v]) > 0}
    machines = _machines(yv, models, types, interval_min, stage, work)
    return _whole_plan(machines, models, types, n_int, interval_min, billing, tr_price, solve_ms,
                       model_name, deadline_s, init_penalty_tasks, size)


def _whole_dp(models: tuple[WatershedModel, ...], types: tuple[CloudType, ...], n_int: int,
              interval_min: float, billing: str, avail: list[int], work: list[list[list[int]]],
              tr_price: dict[tuple[int, str], float], usable: list[int], tiebreak: bool
              ) -> tuple[dict[tuple[int, int, int, int], int] | None, float, int]:
    """The whole-task ILP (``_solve_whole``) solved exactly by dynamic programming, for at most two
    usable instance types. Returns the run counts y[(j, k, 0, length)] (None: infeasible), the
    solve ms and the number of cost evaluations.

    Decision (issue 4, speed: the ILP took 25-1100 ms on scenarios A and B, this 8-15 ms): the
    model separates. Every machine runs one model from t=0; its cost (eq. 36, or the billing hours
    it is alive at the start of, eq. 23) and its whole tasks depend only on its type and length;
    transfers (eqs. 34-35) only on the locations a model runs at; the models share only the
    machine counts per type (eq. 29). So for runs of at most M intervals: G_jk[n, r] = least cost
    of at most n machines of type j doing >= r tasks of model k (a DP over machines);
    h_k[n0, n1] = least cost of model k on at most n0, n1 machines of the two types (over the
    split of its tasks and the sets of away locations, paying their transfers); and the plan's
    cost c(M) = a min-plus convolution of the h_k over the machine counts, at the availability.
    c(M) never rises with M; the tie-break (fewest active intervals, i.e. the shortest longest
    run, as the ILP's second solve) is the least M with c(M) within the ILP's tolerance of
    c(n_int) (``least_horizon``). A machine that does no task is never needed, so n <= sum n_k.
    """
    t0 = time.perf_counter()
    cap = [min(avail[j], sum(m.n_tasks for m in models)) for j in usable] + [0] * (2 - len(usable))
    dims: list[int | None] = [*usable, None, None][:2]
    price = {j: [run_price(types[j], length, interval_min, billing) for length in range(n_int + 1)]
             for j in usable}
    none_table = {m.n_tasks: np.r_[0.0, np.full(m.n_tasks, np.inf)][None, :] for m in models}

    def options(k: int) -> list[tuple[tuple[bool, bool], float]]:
        """The types model k may use with the transfers they cost: per set of away locations."""
        m = models[k]
        away = sorted({types[j].location for j in usable} - m.data_at)
        out = []
        for used in itertools.product((False, True), repeat=len(away)):
            there = {loc for loc, u in zip(away, used, strict=True) if u}
            ok = tuple(j is not None and (types[j].location in m.data_at or types[j].location in there)
                       for j in dims)
            out.append((ok, sum(tr_price[k, loc] for loc in there)))
        return out

    def evaluate(longest: int):
        tabs, totals = [], []
        for k, m in enumerate(models):
            g = [cover_table(work[j][k], price[j], cap[d], m.n_tasks, longest) if j is not None
                 else none_table[m.n_tasks] for d, j in enumerate(dims)]
            h = np.full((cap[0] + 1, cap[1] + 1), np.inf)
            for ok, extra in options(k):
                g0 = g[0] if ok[0] else np.broadcast_to(g[0][:1], g[0].shape)
                g1 = g[1] if ok[1] else np.broadcast_to(g[1][:1], g[1].shape)
                np.minimum(h, (g0[:, None, ::-1] + g1[None, :, :]).min(axis=2) + extra, out=h)
            tabs.append((g, h))
            if not totals:
                totals.append(h)
                continue
            prev, new = totals[-1], np.full_like(h, np.inf)
            for a, b in zip(*np.nonzero(np.isfinite(h)), strict=True):
                v = h[a, b]
                if (a and h[a - 1, b] <= v) or (b and h[a, b - 1] <= v):
                    continue  # fewer machines do it as cheaply
                np.minimum(new[a:, b:], prev[:cap[0] + 1 - a, :cap[1] + 1 - b] + v, out=new[a:, b:])
            totals.append(new)
        return float(totals[-1][cap[0], cap[1]]), tabs, totals

    full = evaluate(n_int)
    best, evals, longest = full[0], 1, n_int
    if math.isfinite(best) and tiebreak and n_int > 1:
        longest, full, more = least_horizon(evaluate, n_int, full)
        evals += more
    _, tabs, totals = full
    if not math.isfinite(best):
        return None, (time.perf_counter() - t0) * 1000.0, evals
    # walk back: each model's machine counts, then its split of tasks and its runs
    s = [cap[0], cap[1]]
    alloc: list[tuple[int, int]] = [(0, 0)] * len(models)
    for k in range(len(models) - 1, 0, -1):
        h = tabs[k][1][:s[0] + 1, :s[1] + 1]
        cand = totals[k - 1][:s[0] + 1, :s[1] + 1][::-1, ::-1] + h
        a, b = np.unravel_index(int(np.argmin(cand)), cand.shape)
        alloc[k] = (int(a), int(b))
        s = [s[0] - int(a), s[1] - int(b)]
    alloc[0] = (s[0], s[1])
    yv: dict[tuple[int, int, int, int], int] = {}
    for k, m in enumerate(models):
        g, _ = tabs[k]
        a, b = alloc[k]
        pick_ = min(((g[0][a if ok[0] else 0, m.n_tasks - r] + g[1][b if ok[1] else 0, r] + extra, ok, r)
                     for ok, extra in options(k) for r in range(m.n_tasks + 1)), key=lambda z: z[0])
        _, ok, r = pick_
        for d, (j, n, need) in enumerate(((dims[0], a, m.n_tasks - r), (dims[1], b, r))):
            if j is None or not ok[d]:
                continue
            for length in cover_runs(g[d], work[j][k], price[j], longest, n, need):
                yv[j, k, 0, length] = yv.get((j, k, 0, length), 0) + 1
    return yv, (time.perf_counter() - t0) * 1000.0, evals


def _machines(yv: dict[tuple[int, int, int, int], int], models: tuple[WatershedModel, ...],
              types: tuple[CloudType, ...], interval_min: float, stage: list[list[float]],
              work: list[list[list[int]]]) -> dict[int, list[list[dict]]]:
    """Split the runs into machines (chains of runs from t=0; one run each in the current
    formulation, but the layout and the replay allow later runs) and give each run its tasks.

    Decision (task assignment): a model's tasks go to the earliest-finishing task slots of its runs
    (slot q of a core in a run [a, b) ends at a·interval + stage + q·task/capacity), ties by type,
    machine and run order; a run may so get fewer tasks than it could do, or none.
    """
    left = dict(yv)
    out: dict[int, list[list[dict]]] = {}
    for j in range(len(types)):
        chains: list[list[dict]] = []
        while True:
            first = [key for key in sorted(left) if key[0] == j and key[2] == 0 and left[key] > 0]
            if not first:
                break
            key = first[0]
            chain = []
            while True:
                left[key] -= 1
                _, k, a, b = key
                chain.append({"model": models[k].name, "k": k, "start_min": a * interval_min,
                              "end_min": b * interval_min, "stage_min": stage[j][k],
                              "capacity": work[j][k][b - a], "tasks": 0})
                nxt = [kk for kk in sorted(left) if kk[0] == j and kk[2] == b and left[kk] > 0]
                if not nxt:
                    break
                key = nxt[0]
            chains.append(chain)
        if chains:
            out[j] = chains
    assert not any(left.values()), "the run flow does not decompose"  # inflow >= outflow everywhere
    for k, m in enumerate(models):
        slots = []
        for j, chains in out.items():
            t = types[j]
            tau = m.task_minutes / t.capacity
            for mi, chain in enumerate(chains):
                for ri, run in enumerate(chain):
                    if run["k"] != k:
                        continue
                    for q in range(1, run["capacity"] // t.cores + 1):
                        end = run["start_min"] + run["stage_min"] + q * tau
                        slots += [(end, j, mi, ri)] * t.cores
        slots.sort()
        for _, j, mi, ri in slots[: m.n_tasks]:
            out[j][mi][ri]["tasks"] += 1
    for chains in out.values():
        for chain in chains:
            for run in chain:
                del run["k"]
    return out


def _whole_plan(machines: dict[int, list[list[dict]]], models: tuple[WatershedModel, ...],
                types: tuple[CloudType, ...], n_int: int, interval_min: float, billing: str,
                tr_price: dict[tuple[int, str], float], solve_ms: float, model_name: str, deadline_s: float,
                init_penalty_tasks: float | None, size: dict) -> Plan:
    index = {m.name: k for k, m in enumerate(models)}
    cover = [[[0] * len(models) for _ in types] for _ in range(n_int)]
    for j, chains in machines.items():
        for chain in chains:
            for run in chain:
                for i in range(round(run["start_min"] / interval_min), round(run["end_min"] / interval_min)):
                    cover[i][j][index[run["model"]]] += 1
    tot, last, billed, compute, transfers, transfer = _bill_and_transfers(
        cover, models, types, interval_min, billing, tr_price)
    assignment: dict[str, dict[str, dict]] = {}
    for k, m in enumerate(models):
        per: dict[str, dict] = {}
        for j, t in enumerate(types):
            counts = [cover[i][j][k] for i in range(last + 1)]
            if any(counts):
                runs = [r for chain in machines.get(j, []) for r in chain if r["model"] == m.name]
                per[t.name] = {"location": t.location, "counts": counts, "machines": len(runs),
                               "tasks": sum(r["tasks"] for r in runs),
                               "capacity_tasks": sum(r["capacity"] for r in runs),
                               "instance_minutes": sum(counts) * interval_min}
        assignment[m.name] = per
    inst = {t.name: [tot[i][j] for i in range(last + 1)] for j, t in enumerate(types)
            if any(tot[i][j] for i in range(n_int))}
    detail = {"interval_min": interval_min, "intervals": n_int, "billing": billing,
              "billing_unit": "instance-hour" if billing == "hourly" else "instance-minute",
              "assignment": assignment, "transfers": transfers, "transfer_cost": round(transfer, 10),
              "compute_cost": round(compute, 10),
              "init_penalty": ("init_minutes per run" if init_penalty_tasks is None else init_penalty_tasks),
              "capacity": "whole",
              "machines": {types[j].name: chains for j, chains in sorted(machines.items())}, **size}
    starts = [i * interval_min for i in range(last + 1)]
    return Plan("optimal", round(compute + transfer, 10), (last + 1) * interval_min * 60.0, inst,
                {"interval_starts_min": starts}, billed, solve_ms, model_name, deadline_s, detail)



_CAPTURE: contextvars.ContextVar[bool] = contextvars.ContextVar("multimodel_capture", default=False)


class _Built(Exception):
    """Carries the built ILP out of ``solve_multimodel`` (control flow for ``multimodel_milp``)."""

    def __init__(self, milp: Milp, cost: int, active: list[int]) -> None:
        super().__init__("built")
        self.milp, self.cost, self.active = milp, cost, active


def multimodel_milp(models: Sequence[WatershedModel], types: Sequence[CloudType], deadline_min: float,
                    **kw) -> tuple[Milp, int, list[int]]:
    """The ILP that ``solve_multimodel(..., method="ilp", **kw)`` would solve, unsolved: the model,
    its cost column and the tie-break's active-interval columns (empty without ``tiebreak``). For
    benchmarks that hand the very same model to another solver."""
    token = _CAPTURE.set(True)
    try:
        plan = solve_multimodel(models, types, deadline_min, **{**kw, "method": "ilp"})
    except _Built as built:
        return built.milp, built.cost, built.active
    finally:
        _CAPTURE.reset(token)
    raise UserError(f"no ILP to build: {plan.detail.get('message', plan.status)}", field="deadline")


def cost_if_stopped(plan: Plan, types: Sequence[CloudType], finish_min: float) -> float:
    """What following a multi-model ``plan`` costs when every machine is released as the job ends at
    ``finish_min``: its data transfers plus ``watershed.cost_if_stopped`` of its machine counts (the
    plan's own cost with hourly billing unless the job ends a billing hour early; with minute billing
    the machines still running are billed up to the last started minute). Never more than the plan."""
    from .watershed import cost_if_stopped as compute_if_stopped

    if not plan.ok:
        return plan.cost
    return round(compute_if_stopped(plan, types, finish_min) + plan.detail["transfer_cost"], 10)


def _solve_min_active(mp, cost: int, occupancy, avail: Sequence[int], n_int: int, tiebreak: bool,
                      model_name: str, deadline_s: float, msg: str, *, swap: bool = False):
    """Solve for least cost, then (``tiebreak``) for fewest active intervals; a failed Plan or None.

    ``occupancy(i, j)`` (or ``(j, i)`` with ``swap``) gives the variables counting type j's machines
    in interval i.
    """
    active: list[int] = []
    if tiebreak:
        active = [mp.binary() for _ in range(n_int)]
        for i in range(n_int):
            for j, cap in enumerate(avail):
                if cap:
                    occ = occupancy(j, i) if swap else occupancy(i, j)
                    mp.row({**occ, active[i]: -cap}, hi=0)
            if i + 1 < n_int:
                mp.row({active[i]: 1, active[i + 1]: -1}, lo=0)
    if _CAPTURE.get():
        raise _Built(mp, cost, active)
    res, solve_ms, stages = mp.solve_lexicographic(cost, dict.fromkeys(active, 1.0), second=tiebreak)
    size = {"variables": mp.num_vars, "constraints": mp.num_rows, "stages": stages}
    if res.status == "infeasible":
        return res, solve_ms, size, infeasible(model_name, deadline_s, msg, solve_ms, **size)
    if res.status != "optimal":
        return res, solve_ms, size, Plan("error", math.nan, math.nan, {}, None, {}, solve_ms, model_name,
                                         deadline_s, {"message": f"solver: {res.raw_status}", **size})
    return res, solve_ms, size, None


def _bill_and_transfers(occ: list, models: Sequence[WatershedModel], types: Sequence[CloudType],
                        interval_min: float, billing: str, tr_price: Mapping):
    """Bill the machines of ``occ[i][j][k]`` (interval, type, model) and list the data transfers used.

    Returns the per-interval totals, the last busy interval, billed units, compute cost, transfers
    and their cost.
    """
    n_int = len(occ)
    tot = [[sum(occ[i][j]) for j in range(len(types))] for i in range(n_int)]
    last = max((i for i in range(n_int) if any(tot[i])), default=-1)
    billed: dict[str, int] = {}
    compute = 0.0
    for j, t in enumerate(types):
        if billing == "minute":
            units = round(sum(tot[i][j] for i in range(n_int)) * interval_min)
            compute += units * t.minute_price
        else:
            hours: dict[int, int] = {}
            for i in range(n_int):
                h = math.floor(i * interval_min / 60.0 + _EPS)
                hours[h] = max(hours.get(h, 0), tot[i][j])
            units = sum(hours.values())
            compute += units * t.price_hour
        if units and t.price_hour > 0:
            billed[t.name] = units
    used = {(k, loc) for (k, loc) in tr_price
            if any(occ[i][j][k] for i in range(n_int) for j, t in enumerate(types) if t.location == loc)}
    transfers = [{"model": models[k].name, "to": loc, "from": sorted(models[k].data_at),
                  "cost": tr_price[k, loc]} for (k, loc) in sorted(used)]
    return tot, last, billed, compute, transfers, sum(d["cost"] for d in transfers)
