"""MapReduce on Amazon EMR: the paper's ILP (eqs. 1-17) and the single-cluster billing variant (decision M1
in docs/decisions/ilp.md).

Work is in Small-instance hours; time has quarter-hour resolution; billing is per started hour.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skylease.model.errors import UserError

from ._milp import Milp
from .catalog import CloudType
from .plan import Plan, infeasible

Q = 0.25  # quarter hour
_EPS = 1e-9


@dataclass(frozen=True)
class MapReduceJob:
    """The paper's use case: 1,000 Small-hours of map work and 50 of reduce work [PAPER]."""

    map_work: float = 1000.0
    reduce_work: float = 50.0

    def __post_init__(self) -> None:
        for f in ("map_work", "reduce_work"):
            v = getattr(self, f)
            if not math.isfinite(v) or v < 0:
                raise UserError(f"must be a finite number >= 0, got {v!r}", field=f)
        if self.map_work + self.reduce_work <= 0:
            raise UserError("the job has no work", field="map_work")


def _floor_q(x: float) -> float:
    return math.floor(x / Q + _EPS) * Q


def _ceil_q(x: float) -> float:
    return math.ceil(x / Q - _EPS) * Q


def _bounds(types: Sequence[CloudType], limit: int | None, limit_scope: str | None) -> list[float]:
    if limit_scope not in ("total", "per_type", None):
        raise UserError(f"limit_scope must be 'total', 'per_type' or None, got {limit_scope!r}",
                        field="limit_scope")
    ub = []
    for t in types:
        u = float(t.max_count) if t.max_count is not None else 1000.0  # Decision: finite box for big-M
        if limit_scope is not None and limit is not None:
            u = min(u, float(limit))
        ub.append(u)
    return ub


def _check(types: Sequence[CloudType], deadline_h: float) -> None:
    if not types:
        raise UserError("no instance types given", field="types")
    if not math.isfinite(deadline_h) or deadline_h <= 0:
        raise UserError(f"deadline must be a positive number of hours, got {deadline_h!r}", field="deadline")


def solve_mapreduce(job: MapReduceJob, types: Sequence[CloudType], deadline_h: float, *,
                    limit: int | None = 20, limit_scope: str | None = "total",
                    billing: str = "per_phase", method: str = "auto") -> Plan:
    """Minimum-cost EMR plan finishing within ``deadline_h`` hours.

    ``billing="per_phase"``: the literal ILP, eqs. 1-17 (map and reduce mixes billed separately).
    ``billing="single_cluster"``: one mix runs both phases and is billed ⌈T⌉ hours (variant B).
    ``limit_scope``: "total" (Σ_k n_k ≤ limit per phase, eq. 17), "per_type" (n_k ≤ limit) or None.
    ``method`` (per-phase billing): "ilp" solves eqs. 1-17 with HiGHS; "enumerate" solves the same
    model exactly by decomposition (each phase's cost depends only on its own mix, so enumerate
    every mix within the instance limit, keep each phase's cheapest mix per duration, and pair the
    phases under the deadline); "auto" enumerates when there are at most 200,000 mixes.
    """
    _check(types, deadline_h)
    if method not in ("auto", "ilp", "enumerate"):
        raise UserError(f"method must be 'auto', 'ilp' or 'enumerate', got {method!r}", field="method")
    if billing == "per_phase":
        enumerable = limit_scope == "total" and limit is not None and math.comb(limit + len(types),
                                                                                 len(types)) <= 200_000
        if method == "enumerate" and not enumerable:
            raise UserError("enumeration needs a total instance limit with few mixes", field="method")
        if method == "enumerate" or (method == "auto" and enumerable):
            return _per_phase_enumerated(job, tuple(types), deadline_h, limit)
        return _per_phase(job, tuple(types), deadline_h, limit, limit_scope)
    if billing == "single_cluster":
        return _single_cluster(job, tuple(types), deadline_h, limit, limit_scope)
    raise UserError(f"billing must be 'per_phase' or 'single_cluster', got {billing!r}", field="billing")


def _grids(work: float, d: float) -> tuple[list[int], list[float]]:
    """Billable-hour values and quarter-hour durations a phase may take (0 only for an empty phase)."""
    hours = list(range(0 if work <= 0 else 1, math.ceil(d - _EPS) + 1))
    n_q = round(_floor_q(d) / Q)
    quarters = [k * Q for k in range(0 if work <= 0 else 1, n_q + 1)]
    return hours, quarters


@functools.lru_cache(maxsize=32)
def _mixes(ub: tuple[int, ...], limit: int) -> np.ndarray:
    """Every integer vector n with 0 <= n_k <= ub_k and sum(n) <= limit, one per row.

    Memoised (a pure function of its integer arguments; the array is read-only): enumerating the
    53,130 mixes of 5 types under 20 instances is most of a solve's time otherwise.
    """
    rows = np.zeros((1, 0), dtype=np.int64)
    for u in ub:
        used = rows.sum(axis=1)
        reps = np.minimum(u, limit - used) + 1
        base = np.repeat(rows, reps, axis=0)
        counts = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
        rows = np.column_stack([base, counts])
    rows.setflags(write=False)
    return rows


@functools.lru_cache(maxsize=32)
def _efficient_mixes(ub: tuple[int, ...], limit: int, cap: tuple[float, ...],
                     price: tuple[float, ...]) -> np.ndarray:
    """The mixes not dominated in (work per hour, price per hour): no other mix has at least the
    capacity for at most the price. A phase's duration only falls with capacity and its cost only
    rises with price, so an optimal mix is always among these (a few hundred of 53,130)."""
    mixes = _mixes(ub, limit)
    tw = mixes @ np.array(cap)
    pr = mixes @ np.array(price)
    order = np.lexsort((-tw, pr))  # cheapest first; at equal price, most capacity first
    best_tw = np.maximum.accumulate(tw[order])
    keep = np.r_[True, tw[order][1:] > best_tw[:-1]]
    out = mixes[order][keep]
    out.setflags(write=False)
    return out


def _phase_frontier(work: float, mixes: np.ndarray, cap: np.ndarray, price: np.ndarray,
                    d: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For one phase: scheduled duration (quarter hours), billed cost and mix of the cheapest mix
    for each duration <= d, sorted by duration, keeping only those cheaper than every shorter one."""
    tw = mixes @ cap
    if work <= 0:
        return np.zeros(1), np.zeros(1), np.zeros((1, mixes.shape[1]), dtype=np.int64)
    ok = tw > 0
    mix, tw = mixes[ok], tw[ok]
    t = work / tw
    dur = np.ceil(t / Q - _EPS) * Q
    keep = dur <= d + _EPS
    mix, tw, t, dur = mix[keep], tw[keep], t[keep], dur[keep]
    if len(dur) == 0:
        return dur, dur.copy(), mix
    cost = np.round(np.ceil(t - _EPS) * (mix @ price), 10)
    # Decision: among equally cheap mixes for a duration, the one with the most work capacity
    # (shortest true duration), then the first enumerated; the ILP may return another optimum.
    order = np.lexsort((-tw, cost, dur))
    dur, cost, mix = dur[order], cost[order], mix[order]
    best = np.minimum.accumulate(cost)
    first = np.r_[True, best[1:] < best[:-1] - 1e-12]
    return dur[first], cost[first], mix[first]


def _per_phase_enumerated(job: MapReduceJob, types: tuple[CloudType, ...], d: float,
                          limit: int) -> Plan:
    t0 = time.perf_counter()
    model = "mapreduce/per_phase"
    ub = [int(u) for u in _bounds(types, limit, "total")]
    cap = np.array([t.capacity for t in types])
    price = np.array([t.price_hour for t in types])
    mixes = _efficient_mixes(tuple(ub), limit, tuple(cap.tolist()), tuple(price.tolist()))
    dm, cm, xm = _phase_frontier(job.map_work, mixes, cap, price, d)
    dr, cr, xr = _phase_frontier(job.reduce_work, mixes, cap, price, d)
    best: tuple[float, int, int] | None = None
    for a in range(len(dm)):
        b = int(np.searchsorted(dr, d - dm[a] + _EPS, side="right")) - 1  # longest reduce that fits
        if b < 0:
            continue
        c = cm[a] + cr[b]  # reduce costs fall with duration along its frontier
        if best is None or c < best[0] - 1e-12:
            best = (c, a, b)
    solve_ms = (time.perf_counter() - t0) * 1000
    size = {"variables": 0, "constraints": 0, "efficient_mixes": len(mixes), "method": "enumerate"}
    if best is None:
        return infeasible(model, d * 3600, f"no plan finishes by {d:g} h", solve_ms, **size)
    _, a, b = best
    cm_l, cr_l = [int(v) for v in xm[a]], [int(v) for v in xr[b]]
    t_map = job.map_work / float(xm[a] @ cap) if job.map_work > 0 else 0.0
    t_red = job.reduce_work / float(xr[b] @ cap) if job.reduce_work > 0 else 0.0
    i_star = math.ceil(t_map - _EPS) if job.map_work > 0 else 0
    j_star = math.ceil(t_red - _EPS) if job.reduce_work > 0 else 0
    return _per_phase_plan(job, types, cm_l, cr_l, i_star, j_star, d, limit, "total", solve_ms, size)


def _per_phase_plan(job: MapReduceJob, types: tuple[CloudType, ...], cm: list[int], cr: list[int],
                    i_star: int, j_star: int, d: float, limit: int | None, scope: str | None,
                    solve_ms: float, size: dict[str, Any]) -> Plan:
    """A per-phase plan from the chosen map and reduce mixes and their billed hours."""
    tw_m = sum(c * t.capacity for c, t in zip(cm, types, strict=True))
    tw_r = sum(c * t.capacity for c, t in zip(cr, types, strict=True))
    t_map = job.map_work / tw_m if job.map_work > 0 else 0.0
    t_red = job.reduce_work / tw_r if job.reduce_work > 0 else 0.0
    # Decision: the true cost is recomputed from the integer mix (the objective differs only by
    # solver tolerances); makespan is the fluid duration MAP/twm + RED/twr (decisions M6
    # and CHECKS); the quarter-hour schedule ceil_q(t_map) + ceil_q(t_red) is in detail.
    cost_v = sum((a * i_star + b * j_star) * t.price_hour for a, b, t in zip(cm, cr, types, strict=True))
    inst = {t.name: [a, b] for a, b, t in zip(cm, cr, types, strict=True) if a or b}
    billed = {t.name: a * i_star + b * j_star for a, b, t in zip(cm, cr, types, strict=True) if a or b}
    detail = {
        "map_hours_billed": i_star, "reduce_hours_billed": j_star,
        "map_h": t_map, "reduce_h": t_red, "scheduled_h": _ceil_q(t_map) + _ceil_q(t_red),
        "billing": "per_phase", "billing_unit": "instance-hour", "limit": limit, "limit_scope": scope,
        "summary": _summary(inst, types, _ceil_q(t_map) + _ceil_q(t_red), cost_v, phases=True), **size,
    }
    return Plan("optimal", round(cost_v, 10), (t_map + t_red) * 3600.0, inst, None, billed, solve_ms,
                "mapreduce/per_phase", d * 3600.0, detail)


def _per_phase(job: MapReduceJob, types: tuple[CloudType, ...], d: float, limit: int | None,
               scope: str | None) -> Plan:
    model = "mapreduce/per_phase"
    ub = _bounds(types, limit, scope)
    hours_m, q_m = _grids(job.map_work, d)
    hours_r, q_r = _grids(job.reduce_work, d)
    if not q_m or not q_r:
        return infeasible(model, d * 3600, f"no plan finishes by {d:g} h")
    m = Milp()
    nm = [m.var(0, u, integer=True) for u in ub]
    nr = [m.var(0, u, integer=True) for u in ub]
    cphm, cphr, twm, twr = (m.var() for _ in range(4))
    xm = {i: m.binary() for i in hours_m}
    xr = {j: m.binary() for j in hours_r}
    xml = {ll: m.binary() for ll in q_m}
    xrm = {mm: m.binary() for mm in q_r}
    xmxr = {(i, j): m.binary() for i in hours_m for j in hours_r}
    cost = {(i, j): m.var(cost=1.0) for i in hours_m for j in hours_r}  # (1) MIN Σ cost_ij
    n_lim = limit if (scope == "total" and limit is not None) else sum(ub)
    big = 2 * (max(hours_m) + max(hours_r)) * max(t.price_hour for t in types) * n_lim + 1  # MAXMONEY
    for (i, j), c in cost.items():
        b = xmxr[i, j]
        m.row({c: 1, b: -big}, hi=0)  # (2)
        m.row({c: 1, cphm: -i, cphr: -j, b: -big}, lo=-big)  # (3)
        m.row({c: 1, cphm: -i, cphr: -j, b: big}, hi=big)  # (4)
        m.row({xm[i]: 0.5, xr[j]: 0.5, b: -1}, lo=0)  # (16)
    m.row({cphm: 1, **{v: -t.price_hour for v, t in zip(nm, types, strict=True)}}, 0, 0)  # (5)
    m.row({cphr: 1, **{v: -t.price_hour for v, t in zip(nr, types, strict=True)}}, 0, 0)  # (6)
    m.row(dict.fromkeys(xmxr.values(), 1.0), 1, 1)  # (7)
    m.row({twm: 1, **{v: -t.capacity for v, t in zip(nm, types, strict=True)}}, 0, 0)  # (8)
    m.row({twr: 1, **{v: -t.capacity for v, t in zip(nr, types, strict=True)}}, 0, 0)  # (9)
    for i, v in xm.items():
        m.row({twm: i, v: -job.map_work}, lo=0)  # (10)
    for j, v in xr.items():
        m.row({twr: j, v: -job.reduce_work}, lo=0)  # (11)
    for ll, v in xml.items():
        m.row({twm: ll, v: -job.map_work}, lo=0)  # (12)
    for mm, v in xrm.items():
        m.row({twr: mm, v: -job.reduce_work}, lo=0)  # (13)
    m.row({**{v: ll for ll, v in xml.items()}, **{v: mm for mm, v in xrm.items()}}, hi=d + _EPS)  # (14)
    for group in (xm, xr, xml, xrm):
        m.row(dict.fromkeys(group.values(), 1.0), 1, 1)  # (15)
    if scope == "total" and limit is not None:
        m.row(dict.fromkeys(nm, 1.0), hi=limit)  # (17)
        m.row(dict.fromkeys(nr, 1.0), hi=limit)
    res = m.solve()
    size = {"variables": m.num_vars, "constraints": m.num_rows}
    if res.status != "optimal":
        msg = f"no plan finishes by {d:g} h" if res.status == "infeasible" else f"solver: {res.raw_status}"
        return infeasible(model, d * 3600, msg, res.solve_ms, **size) if res.status == "infeasible" else \
            Plan("error", math.nan, math.nan, {}, None, {}, res.solve_ms, model, d * 3600,
                 {"message": msg, **size})
    x = res.x
    cm = [round(x[v]) for v in nm]
    cr = [round(x[v]) for v in nr]
    i_star = next(i for i, v in xm.items() if x[v] > 0.5)
    j_star = next(j for j, v in xr.items() if x[v] > 0.5)
    return _per_phase_plan(job, types, cm, cr, i_star, j_star, d, limit, scope, res.solve_ms, size)


def _single_cluster(job: MapReduceJob, types: tuple[CloudType, ...], d: float, limit: int | None,
                    scope: str | None) -> Plan:
    model = "mapreduce/single_cluster"
    total = job.map_work + job.reduce_work
    dq = _floor_q(d)  # Decision: the deadline is taken on the quarter-hour grid, as in the literal ILP
    if dq <= 0:
        return infeasible(model, d * 3600, f"no plan finishes by {d:g} h")
    ub = _bounds(types, limit, scope)
    hours = list(range(1, math.ceil(dq - _EPS) + 1))
    m = Milp()
    n = [m.var(0, u, integer=True) for u in ub]
    cph, tw = m.var(), m.var()
    y = {h: m.binary() for h in hours}
    cost = {h: m.var(cost=1.0) for h in hours}
    n_lim = limit if (scope == "total" and limit is not None) else sum(ub)
    big = 2 * max(hours) * max(t.price_hour for t in types) * n_lim + 1
    for h in hours:
        m.row({cost[h]: 1, y[h]: -big}, hi=0)
        m.row({cost[h]: 1, cph: -h, y[h]: -big}, lo=-big)
        m.row({cost[h]: 1, cph: -h, y[h]: big}, hi=big)
        m.row({tw: h, y[h]: -total}, lo=0)  # h billed hours cover the whole job
    m.row(dict.fromkeys(y.values(), 1.0), 1, 1)
    m.row({cph: 1, **{v: -t.price_hour for v, t in zip(n, types, strict=True)}}, 0, 0)
    m.row({tw: 1, **{v: -t.capacity for v, t in zip(n, types, strict=True)}}, 0, 0)
    m.row({tw: dq}, lo=total - _EPS)  # T = total / tw <= deadline
    if scope == "total" and limit is not None:
        m.row(dict.fromkeys(n, 1.0), hi=limit)
    res = m.solve()
    size = {"variables": m.num_vars, "constraints": m.num_rows}
    if res.status != "optimal":
        if res.status == "infeasible":
            return infeasible(model, d * 3600, f"no plan finishes by {d:g} h", res.solve_ms, **size)
        return Plan("error", math.nan, math.nan, {}, None, {}, res.solve_ms, model, d * 3600,
                    {"message": f"solver: {res.raw_status}", **size})
    c = [round(res.x[v]) for v in n]
    twv = sum(a * t.capacity for a, t in zip(c, types, strict=True))
    t_job = total / twv
    h_star = math.ceil(t_job - _EPS)
    cost_v = h_star * sum(a * t.price_hour for a, t in zip(c, types, strict=True))
    # Decision: instances is [map, reduce] in both variants; the single cluster repeats its mix.
    inst = {t.name: [a, a] for a, t in zip(c, types, strict=True) if a}
    billed = {t.name: a * h_star for a, t in zip(c, types, strict=True) if a}
    detail = {"hours_billed": h_star, "map_h": job.map_work / twv, "reduce_h": job.reduce_work / twv,
              "scheduled_h": _ceil_q(t_job), "billing": "single_cluster", "billing_unit": "instance-hour",
              "limit": limit, "limit_scope": scope,
              "summary": _summary(inst, types, t_job, cost_v, phases=False), **size}
    return Plan("optimal", round(cost_v, 10), t_job * 3600.0, inst, None, billed, res.solve_ms, model,
                d * 3600.0, detail)


def _summary(inst: dict[str, list[int]], types: tuple[CloudType, ...], hours: float, cost: float, *,
             phases: bool) -> str:
    def mix(k: int) -> str:
        return " and ".join(f"{v[k]} {name}" for name, v in inst.items() if v[k]) or "nothing"

    if phases:
        return f"Map on {mix(0)}; reduce on {mix(1)}; run for {hours:g} h; cost ${cost:.2f}"
    return f"Start {mix(0)}; run for {hours:g} h; cost ${cost:.2f}"
