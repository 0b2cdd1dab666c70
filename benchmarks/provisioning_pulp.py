"""The skylease provisioning ILPs (eqs. 1-37; decisions M1-M13 in docs/decisions/ilp.md) written again in
PuLP, solved by PuLP's bundled CBC.

This is how a PuLP-based multi-cloud broker (SkyPilot's optimizer) formulates and solves its models.
Every function mirrors the matching builder in ``skylease.planning.provisioning`` line by line: same
variables, bounds, rows (with the same equation numbers), objective and, for Watershed, the same
lexicographic tie-break (a second solve minimising the active intervals subject to cost <= cost*).
The data preparation (index grids, variable boxes, interval capacities) is taken from skylease's own
helpers so both sides see bit-identical coefficients. The multi-model ILP (§4.3) is not retyped: its
``Milp`` from skylease's builder is translated generically (``pulp_from_milp``), the same model.

Each ``pulp_*`` returns ``(optimal cost, n_variables, n_constraints)``; it raises if CBC is not optimal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pulp

from skylease.planning.provisioning._milp import Milp
from skylease.planning.provisioning.catalog import CloudType
from skylease.planning.provisioning.mapreduce import _EPS, MapReduceJob, _bounds, _floor_q, _grids
from skylease.planning.provisioning.multimodel import WatershedModel, multimodel_milp
from skylease.planning.provisioning.watershed import WatershedJob, availability, interval_capacity

#: The solver PuLP hands the models to: ``"cbc"`` (its bundled CBC, a subprocess per solve) or
#: ``"highs"`` (HiGHS in-process through highspy, PuLP's ``HiGHS`` solver).
SOLVER = "cbc"


def _solver() -> pulp.LpSolver:
    if SOLVER == "highs":
        return pulp.HiGHS(msg=False)
    return pulp.PULP_CBC_CMD(msg=False)


def _solve(prob: pulp.LpProblem) -> float:
    prob.solve(_solver())
    if pulp.LpStatus[prob.status] != "Optimal":
        raise RuntimeError(f"{SOLVER}: {pulp.LpStatus[prob.status]}")
    return float(pulp.value(prob.objective))


def _size(prob: pulp.LpProblem) -> tuple[int, int]:
    return len(prob.variables()), len(prob.constraints)


def pulp_mapreduce_per_phase(job: MapReduceJob, types: Sequence[CloudType], d: float, limit: int = 20,
                             scope: str = "total") -> tuple[float, int, int]:
    """mapreduce._per_phase: the literal ILP, eqs. 1-17."""
    types = tuple(types)
    ub = _bounds(types, limit, scope)
    hours_m, q_m = _grids(job.map_work, d)
    hours_r, q_r = _grids(job.reduce_work, d)
    prob = pulp.LpProblem("mr_per_phase", pulp.LpMinimize)
    nm = [pulp.LpVariable(f"nm_{k}", 0, u, pulp.LpInteger) for k, u in enumerate(ub)]
    nr = [pulp.LpVariable(f"nr_{k}", 0, u, pulp.LpInteger) for k, u in enumerate(ub)]
    cphm, cphr, twm, twr = (pulp.LpVariable(n, 0) for n in ("cphm", "cphr", "twm", "twr"))
    xm = {i: pulp.LpVariable(f"xm_{i}", cat=pulp.LpBinary) for i in hours_m}
    xr = {j: pulp.LpVariable(f"xr_{j}", cat=pulp.LpBinary) for j in hours_r}
    xml = {ll: pulp.LpVariable(f"xml_{k}", cat=pulp.LpBinary) for k, ll in enumerate(q_m)}
    xrm = {mm: pulp.LpVariable(f"xrm_{k}", cat=pulp.LpBinary) for k, mm in enumerate(q_r)}
    xmxr = {(i, j): pulp.LpVariable(f"xmxr_{i}_{j}", cat=pulp.LpBinary) for i in hours_m for j in hours_r}
    cost = {(i, j): pulp.LpVariable(f"cost_{i}_{j}", 0) for i in hours_m for j in hours_r}
    prob += pulp.lpSum(cost.values())  # (1)
    n_lim = limit if (scope == "total" and limit is not None) else sum(ub)
    big = 2 * (max(hours_m) + max(hours_r)) * max(t.price_hour for t in types) * n_lim + 1  # MAXMONEY
    for (i, j), c in cost.items():
        b = xmxr[i, j]
        prob += c - big * b <= 0  # (2)
        prob += c - i * cphm - j * cphr - big * b >= -big  # (3)
        prob += c - i * cphm - j * cphr + big * b <= big  # (4)
        prob += 0.5 * xm[i] + 0.5 * xr[j] - b >= 0  # (16)
    prob += cphm - pulp.lpSum(t.price_hour * v for v, t in zip(nm, types, strict=True)) == 0  # (5)
    prob += cphr - pulp.lpSum(t.price_hour * v for v, t in zip(nr, types, strict=True)) == 0  # (6)
    prob += pulp.lpSum(xmxr.values()) == 1  # (7)
    prob += twm - pulp.lpSum(t.capacity * v for v, t in zip(nm, types, strict=True)) == 0  # (8)
    prob += twr - pulp.lpSum(t.capacity * v for v, t in zip(nr, types, strict=True)) == 0  # (9)
    for i, v in xm.items():
        prob += i * twm - job.map_work * v >= 0  # (10)
    for j, v in xr.items():
        prob += j * twr - job.reduce_work * v >= 0  # (11)
    for ll, v in xml.items():
        prob += ll * twm - job.map_work * v >= 0  # (12)
    for mm, v in xrm.items():
        prob += mm * twr - job.reduce_work * v >= 0  # (13)
    prob += (pulp.lpSum(ll * v for ll, v in xml.items()) + pulp.lpSum(mm * v for mm, v in xrm.items())
             <= d + _EPS)  # (14)
    for group in (xm, xr, xml, xrm):
        prob += pulp.lpSum(group.values()) == 1  # (15)
    if scope == "total" and limit is not None:
        prob += pulp.lpSum(nm) <= limit  # (17)
        prob += pulp.lpSum(nr) <= limit
    return (_solve(prob), *_size(prob))


def pulp_mapreduce_single_cluster(job: MapReduceJob, types: Sequence[CloudType], d: float, limit: int = 20,
                                  scope: str = "total") -> tuple[float, int, int]:
    """mapreduce._single_cluster: one mix runs both phases, billed per started hour."""
    types = tuple(types)
    total = job.map_work + job.reduce_work
    dq = _floor_q(d)
    ub = _bounds(types, limit, scope)
    hours = list(range(1, math.ceil(dq - _EPS) + 1))
    prob = pulp.LpProblem("mr_single_cluster", pulp.LpMinimize)
    n = [pulp.LpVariable(f"n_{k}", 0, u, pulp.LpInteger) for k, u in enumerate(ub)]
    cph, tw = pulp.LpVariable("cph", 0), pulp.LpVariable("tw", 0)
    y = {h: pulp.LpVariable(f"y_{h}", cat=pulp.LpBinary) for h in hours}
    cost = {h: pulp.LpVariable(f"cost_{h}", 0) for h in hours}
    prob += pulp.lpSum(cost.values())
    n_lim = limit if (scope == "total" and limit is not None) else sum(ub)
    big = 2 * max(hours) * max(t.price_hour for t in types) * n_lim + 1
    for h in hours:
        prob += cost[h] - big * y[h] <= 0
        prob += cost[h] - h * cph - big * y[h] >= -big
        prob += cost[h] - h * cph + big * y[h] <= big
        prob += h * tw - total * y[h] >= 0
    prob += pulp.lpSum(y.values()) == 1
    prob += cph - pulp.lpSum(t.price_hour * v for v, t in zip(n, types, strict=True)) == 0
    prob += tw - pulp.lpSum(t.capacity * v for v, t in zip(n, types, strict=True)) == 0
    prob += dq * tw >= total - _EPS
    if scope == "total" and limit is not None:
        prob += pulp.lpSum(n) <= limit
    return (_solve(prob), *_size(prob))


def pulp_watershed(job: WatershedJob, types: Sequence[CloudType], deadline_min: float, *,
                   interval_min: float = 10, billing: str = "hourly",
                   tiebreak: bool = True, capacity: str = "whole") -> tuple[float, int, int]:
    """watershed.solve_watershed: eqs. 18-25 plus the lexicographic tie-break (second solve)."""
    types = tuple(types)
    n_int = math.floor(deadline_min / interval_min + _EPS)
    starts = [i * interval_min for i in range(n_int)]
    avail = [availability(job, t) for t in types]
    cap = [[interval_capacity(job, t, s, interval_min, capacity) for t in types] for s in starts]
    nt = len(types)
    prob = pulp.LpProblem("watershed", pulp.LpMinimize)
    cost = pulp.LpVariable("cost", 0)
    prob += cost  # (18)
    x = [[pulp.LpVariable(f"x_{i}_{j}", 0, a, pulp.LpInteger) for j, a in enumerate(avail)]
         for i in range(n_int)]
    work = [[pulp.LpVariable(f"work_{i}_{j}", 0) for j in range(nt)] for i in range(n_int)]
    for i in range(n_int):
        for j in range(nt):
            prob += work[i][j] - cap[i][j] * x[i][j] == 0  # (19); (20) is the bound on x
    prob += pulp.lpSum(w for row in work for w in row) >= job.n_tasks - 1e-7  # (21)
    for i in range(n_int - 1):
        for j in range(nt):
            prob += x[i][j] - x[i + 1][j] >= 0  # (22)
    hours = sorted({math.floor(s / 60.0 + _EPS) for s in starts})
    if billing == "hourly":
        bill = {}
        for h in hours:
            for j, a in enumerate(avail):
                b = bill[h, j] = pulp.LpVariable(f"bill_{h}_{j}", 0, a, pulp.LpInteger)
                for i, s in enumerate(starts):
                    if math.floor(s / 60.0 + _EPS) == h:
                        prob += b - x[i][j] >= 0  # (23)
        prob += cost - pulp.lpSum(types[j].price_hour * b for (_, j), b in bill.items()) == 0  # (24)
    else:
        prob += cost - pulp.lpSum(interval_min * t.minute_price * x[i][j]
                                  for i in range(n_int) for j, t in enumerate(types)) == 0  # (25)
    active = []
    if tiebreak:
        active = [pulp.LpVariable(f"active_{i}", cat=pulp.LpBinary) for i in range(n_int)]
        for i in range(n_int):
            for j, a in enumerate(avail):
                if a:
                    prob += x[i][j] - a * active[i] <= 0
            if i + 1 < n_int:
                prob += active[i] - active[i + 1] >= 0
    c_star = _solve(prob)
    if tiebreak:
        tol = 1e-6 + 1e-9 * abs(c_star)
        prob.setObjective(pulp.lpSum(active))
        prob += cost <= c_star + tol
        _solve(prob)
        c_star = float(cost.varValue)  # the plan's cost after the second stage
    return (c_star, *_size(prob))


def pulp_from_milp(mp: Milp, cost: int, active: Sequence[int]) -> tuple[float, int, int]:
    """Any skylease ``Milp`` (here the multi-model ILP of ``multimodel.multimodel_milp``) written in PuLP
    column for column and row for row: same bounds, integrality, rows and objective, so CBC solves the
    very same model. With ``active`` (the tie-break's columns) the second solve is mirrored as in
    ``pulp_watershed``: minimise the active intervals subject to cost <= cost*."""
    prob = pulp.LpProblem("milp", pulp.LpMinimize)
    ints = set(mp.integer)
    v = [pulp.LpVariable(f"v{i}", lb if math.isfinite(lb) else None, ub if math.isfinite(ub) else None,
                         pulp.LpInteger if i in ints else pulp.LpContinuous)
         for i, (lb, ub) in enumerate(zip(mp.lb, mp.ub, strict=True))]
    prob += pulp.lpSum(c * v[i] for i, c in enumerate(mp.cost) if c)
    for lo, hi, idx, val in zip(mp._lo, mp._hi, mp._idx, mp._val, strict=True):
        expr = pulp.lpSum(a * v[i] for i, a in zip(idx, val, strict=True))
        if lo == hi:
            prob += expr == lo
        else:
            if math.isfinite(lo):
                prob += expr >= lo
            if math.isfinite(hi):
                prob += expr <= hi
    c_star = _solve(prob)
    if active:
        tol = 1e-6 + 1e-9 * abs(c_star)
        prob.setObjective(pulp.lpSum(v[i] for i in active))
        prob += v[cost] <= c_star + tol
        _solve(prob)
        c_star = float(v[cost].varValue)
    return (c_star, *_size(prob))


def pulp_multimodel(models: Sequence[WatershedModel], types: Sequence[CloudType], deadline_min: float,
                    **kw) -> tuple[float, int, int]:
    """multimodel.solve_multimodel's ILP (eqs. 28-37; whole or fluid capacity, with the tie-break),
    built by skylease's own builder and handed to PuLP/CBC by ``pulp_from_milp``."""
    return pulp_from_milp(*multimodel_milp(models, types, deadline_min, **kw))
