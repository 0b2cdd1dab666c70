"""The paper's baselines: naive fixed fleets and the incremental search (spec 002 §6)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from skylease.model.errors import UserError

from .catalog import CloudType, load_catalog, pick
from .mapreduce import MapReduceJob
from .plan import Plan, infeasible
from .watershed import WatershedJob

_EPS = 1e-9


def mr_naive(job: MapReduceJob, type_: CloudType, n: int, *, billing: str = "single_cluster") -> Plan:
    """n instances of one type run map then reduce (§6.1).

    ``billing="single_cluster"``: n·price·⌈T⌉ (continuous); ``"per_phase"``: n·price·(⌈t_map⌉+⌈t_red⌉).
    """
    if n < 1:
        raise UserError(f"must be >= 1, got {n}", field="n")
    rate = n * type_.capacity
    t_map, t_red = job.map_work / rate, job.reduce_work / rate
    if billing == "single_cluster":
        hours = math.ceil(t_map + t_red - _EPS)
    elif billing == "per_phase":
        hours = math.ceil(t_map - _EPS) + math.ceil(t_red - _EPS)
    else:
        raise UserError(f"billing must be 'per_phase' or 'single_cluster', got {billing!r}", field="billing")
    cost = n * type_.price_hour * hours
    return Plan("optimal", round(cost, 10), (t_map + t_red) * 3600.0, {type_.name: [n, n]}, None,
                {type_.name: n * hours}, 0.0, "mapreduce/naive", None,
                {"billing": billing, "billing_unit": "instance-hour", "map_h": t_map, "reduce_h": t_red,
                 "hours_billed": hours})


def _default_pair() -> tuple[CloudType, CloudType]:
    local, small = pick(load_catalog("hybrid"), "local", "azure-small")
    return local, small


def completion_minutes(job: WatershedJob, fleet: Mapping[CloudType, int]) -> float:
    """Discrete-task finish time (§6.5): each core of type j completes a task every task/capacity
    minutes after its start-up delay; T = min{t : done(t) >= n_tasks} (inf if nothing runs)."""
    events: list[float] = []
    for t, count in fleet.items():
        if count <= 0:
            continue
        per = job.task_minutes / t.capacity
        k = math.ceil(job.n_tasks / (count * t.cores))  # this type alone finishes by its k-th round
        events.extend(t.init_minutes + per * r for r in range(1, k + 1))
    if not events:
        return math.inf
    events.sort()

    def done(x: float) -> int:
        return sum(c * t.cores * max(0, math.floor((x - t.init_minutes) * t.capacity / job.task_minutes
                                                   + _EPS))
                   for t, c in fleet.items() if c > 0)

    lo, hi = 0, len(events) - 1  # binary search the first event time at which enough tasks are done
    while lo < hi:
        mid = (lo + hi) // 2
        if done(events[mid]) >= job.n_tasks:
            hi = mid
        else:
            lo = mid + 1
    return events[lo]


def ws_simulate(job: WatershedJob, n_small: int, *, extra: Mapping[CloudType, int] | None = None,
                local: CloudType | None = None, small: CloudType | None = None,
                billing: str = "hourly") -> Plan:
    """All free local cores plus ``n_small`` Azure-small (and any ``extra`` instances) run to completion.

    Hourly billing: count·price·⌈T/60⌉; minute billing: count·price_minute·⌈T⌉.
    """
    if n_small < 0:
        raise UserError(f"must be >= 0, got {n_small}", field="n_small")
    d_local, d_small = _default_pair()
    local = local or d_local
    small = small or d_small
    fleet: dict[CloudType, int] = {local: job.local_cores, small: n_small}
    for t, c in (extra or {}).items():
        fleet[t] = fleet.get(t, 0) + c
    t_min = completion_minutes(job, fleet)
    if math.isinf(t_min):
        return infeasible("watershed/simulate", None, "no instances to run the job on")
    billed: dict[str, int] = {}
    cost = 0.0
    for t, c in fleet.items():
        if c <= 0 or t.price_hour <= 0:
            continue
        if billing == "hourly":
            units = c * math.ceil(t_min / 60.0 - _EPS)
            cost += units * t.price_hour
        elif billing == "minute":
            units = c * math.ceil(t_min - _EPS)
            cost += units * t.minute_price
        else:
            raise UserError(f"billing must be 'hourly' or 'minute', got {billing!r}", field="billing")
        billed[t.name] = units
    inst = {t.name: [c] for t, c in fleet.items() if c > 0}
    return Plan("optimal", round(cost, 10), t_min * 60.0, inst, None, billed, 0.0, "watershed/simulate", None,
                {"billing": billing,
                 "billing_unit": "instance-hour" if billing == "hourly" else "instance-minute"})


def ws_naive(job: WatershedJob, n: int, **kw) -> Plan:
    """Naive: 16 local cores plus n Azure-small instances until the job completes (§6.2)."""
    p = ws_simulate(job, n, **kw)
    return Plan(p.status, p.cost, p.makespan_s, p.instances, p.starts, p.billed_units, p.solve_ms,
                "watershed/naive", None, p.detail)


def ws_incremental(job: WatershedJob, deadline_min: float, limit: int = 44, **kw) -> Plan:
    """Incremental (§6.3, M11): simulate 0..limit Azure-small instances next to the local cores and pick
    the cheapest configuration finishing by the deadline, ties broken by shorter time."""
    t0 = time.perf_counter()
    best: Plan | None = None
    for n in range(limit + 1):
        p = ws_simulate(job, n, **kw)
        if p.ok and p.makespan_s <= deadline_min * 60.0 + 1e-6 and (
                best is None or (round(p.cost, 9), p.makespan_s) < (round(best.cost, 9), best.makespan_s)):
            best = p
    ms = (time.perf_counter() - t0) * 1000.0
    if best is None:
        fastest = min((ws_simulate(job, n, **kw) for n in range(limit + 1)), key=lambda q: q.makespan_s)
        return infeasible("watershed/incremental", deadline_min * 60.0,
                          f"no configuration finishes by {deadline_min:g} min; the fastest possible is "
                          f"{fastest.makespan_min:g} min at ${fastest.cost:.2f}", ms)
    return Plan("optimal", best.cost, best.makespan_s, best.instances, None, best.billed_units, ms,
                "watershed/incremental", deadline_min * 60.0, {**best.detail, "limit": limit})
