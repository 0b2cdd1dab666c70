"""The paper's baselines: naive fixed fleets and the incremental search (decision BASE in
docs/decisions/ilp.md)."""

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
    """n instances of one type run map then reduce (Sect. IV-B; BASE).

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
    """Discrete-task finish time (BASE): each core of type j completes a task every task/capacity
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
    """Naive: 16 local cores plus n Azure-small instances until the job completes (Sect. V-C; BASE)."""
    p = ws_simulate(job, n, **kw)
    return Plan(p.status, p.cost, p.makespan_s, p.instances, p.starts, p.billed_units, p.solve_ms,
                "watershed/naive", None, p.detail)


def ws_incremental(job: WatershedJob, deadline_min: float, limit: int = 44, **kw) -> Plan:
    """Incremental (decision M11): simulate 0..limit Azure-small instances next to the local cores and pick
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


def colocation(models, types, n_medium: int, *, billing: str = "minute") -> Plan:
    """Data co-location (Sect. V-D; BASE): each model runs where its input is. Local-only models on the free
    local
    cores; models with data in Azure (including those stored in both places, as in both of the paper's
    scenarios) on ``n_medium`` instances of ``azure-medium``.

    Discrete-task simulation consistent with ``ws_simulate``: every core first waits its type's
    ``init_minutes``, then runs tasks back to back (task_minutes/capacity each). Decision: within a pool each
    core is dedicated to one model (no switching, so one start-up delay per core), cores split among the
    pool's models to minimise the pool's finish time; with fewer cores than models, whole models go
    longest-first to the least-loaded core, paying ``init_minutes`` per model (the ILP's InitPenalty).
    Azure instances are released when the Azure pool finishes and billed per started minute (or hour);
    makespan = the later of the two pools.
    """
    from .multimodel import LOCAL

    if n_medium < 0:
        raise UserError(f"must be >= 0, got {n_medium}", field="n_medium")
    if billing not in ("hourly", "minute"):
        raise UserError(f"billing must be 'hourly' or 'minute', got {billing!r}", field="billing")
    by_name = {t.name: t for t in types}
    medium = by_name.get("azure-medium")
    local = next((t for t in types if t.location == LOCAL), None)
    if medium is None or local is None:
        raise UserError("co-location needs a 'local' type and 'azure-medium'", field="types")
    pools: dict[str, list] = {"local": [], "azure": []}
    for m in models:
        if medium.location in m.data_at:
            pools["azure"].append(m)
        elif LOCAL in m.data_at:
            pools["local"].append(m)
        else:
            raise UserError(f"model {m.name!r} has no data at {LOCAL!r} or {medium.location!r}",
                            field="models")
    fleet = {"local": (local, local.max_count if local.max_count is not None else 0),
             "azure": (medium, n_medium)}

    def finish(t: CloudType, n_cores: int, ms: list) -> float:
        if not ms:
            return 0.0
        if n_cores <= 0:
            return math.inf
        dur = [m.task_minutes / t.capacity for m in ms]
        if n_cores < len(ms):  # whole models, longest first, on the least-loaded core; init per model
            loads = [0.0] * n_cores
            for k in sorted(range(len(ms)), key=lambda k: -ms[k].n_tasks * dur[k]):
                c = loads.index(min(loads))
                loads[c] += t.init_minutes + ms[k].n_tasks * dur[k]
            return max(loads)
        # Dedicated cores: each model gets >= 1 core, every further core goes to the model finishing last
        # (optimal for this separable min-max); a model on c cores ends at init + ceil(n/c)·dur.
        cores = [1] * len(ms)

        def end(k: int) -> float:
            return t.init_minutes + math.ceil(ms[k].n_tasks / cores[k]) * dur[k]

        for _ in range(n_cores - len(ms)):
            cores[max(range(len(ms)), key=end)] += 1
        return max(end(k) for k in range(len(ms)))

    times = {p: finish(t, n * t.cores, pools[p]) for p, (t, n) in fleet.items()}
    t_min = max(times.values())
    if math.isinf(t_min):
        return infeasible("multimodel/colocation", None, "Azure models but no Azure instances")
    billed: dict[str, int] = {}
    cost = 0.0
    for p, (t, n) in fleet.items():
        if not pools[p] or n <= 0 or t.price_hour <= 0:
            continue
        if billing == "hourly":
            units = n * math.ceil(times[p] / 60.0 - _EPS)
            cost += units * t.price_hour
        else:
            units = n * math.ceil(times[p] - _EPS)
            cost += units * t.minute_price
        billed[t.name] = units
    inst = {t.name: [n] for p, (t, n) in fleet.items() if pools[p] and n > 0}
    unit = "instance-hour" if billing == "hourly" else "instance-minute"
    return Plan("optimal", round(cost, 10), t_min * 60.0, inst, None, billed, 0.0, "multimodel/colocation",
                None, {"billing": billing, "billing_unit": unit,
                 "local_min": times["local"], "azure_min": times["azure"],
                 "placement": {p: [m.name for m in ms] for p, ms in pools.items()},
                 "transfer_cost": 0.0, "compute_cost": round(cost, 10)})
