"""Watershed Monte Carlo calibration in a hybrid cloud: the single-model interval ILP (eqs. 18-25).

Time is split into intervals (10 min by default); x[i][j] instances of type j run during interval i;
counts never increase (eq. 22), so every instance starts at t=0 and is billed from job start.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from skylease.model.errors import UserError
from skylease.model.limits import check_size

from ._lanes import cover_runs, cover_table, least_horizon, pareto_lengths, run_price
from ._milp import Milp
from .catalog import CloudType
from .plan import Plan, infeasible

_EPS = 1e-9


@dataclass(frozen=True)
class WatershedJob:
    """The paper's use case: 1,000 tasks of 90 s on one core, 1 GB input, 16 free local cores [PAPER]."""

    n_tasks: int = 1000
    task_minutes: float = 1.5
    input_gb: float = 1.0
    local_cores: int = 16

    def __post_init__(self) -> None:
        if self.n_tasks < 1:
            raise UserError(f"must be >= 1, got {self.n_tasks}", field="n_tasks")
        if not math.isfinite(self.task_minutes) or self.task_minutes <= 0:
            raise UserError(f"must be > 0, got {self.task_minutes!r}", field="task_minutes")
        if self.local_cores < 0:
            raise UserError(f"must be >= 0, got {self.local_cores}", field="local_cores")


def availability(job: WatershedJob, t: CloudType) -> int:
    # Decision: the job's free local cores override a local type's catalog max_count (the catalog
    # describes the cluster, the job says how many cores are free now); a type without max_count is
    # capped at n_tasks instances (more can never be useful).
    if t.location == "local":
        return job.local_cores
    return t.max_count if t.max_count is not None else job.n_tasks


def interval_capacity(job: WatershedJob, t: CloudType, start: float, length: float,
                      capacity: str = "fluid") -> float:
    """Tasks one instance of type t completes in [start, start+length).

    ``"fluid"`` (the paper's model, eq. 19): useful minutes after the start-up delay / task time, fractions
    included. ``"whole"``: whole tasks finished in the interval by an instance that has run since
    t = 0 (instance counts only fall, so an instance in interval i ran in every earlier one), i.e.
    floor((end - init) / task) - floor((start - init) / task) per core: plans then count only
    tasks that really finish, and replay in the simulator without running late.
    """
    if capacity == "whole":
        tau = job.task_minutes / t.capacity
        done_by = lambda x: math.floor(max(0.0, x - t.init_minutes) / tau + _EPS)  # noqa: E731
        return float(t.cores * (done_by(start + length) - done_by(start)))
    if capacity != "fluid":
        raise UserError(f"capacity must be 'fluid' or 'whole', got {capacity!r}", field="capacity")
    useful = max(0.0, min(length, start + length - t.init_minutes))
    return t.cores * t.capacity * useful / job.task_minutes


def _tiebreak_weight(types: Sequence[CloudType], billing: str, interval_min: float,
                     n_int: int) -> float | None:
    """A weight for "fewest active intervals" that can never outweigh a cost difference, or None.

    Every plan's cost is an integer combination of the billed unit prices (per instance-hour, or
    per instance-interval with minute billing), so two different costs differ by at least the
    gcd g of those prices. With n intervals, weight g / (2 (n + 1)) keeps the whole tie-break
    term below g / 2: one solve of cost + weight * active intervals gives the lexicographic
    optimum. Prices that are not exact multiples of 1e-9 $ have no usable gcd: None (two solves).
    """
    units = []
    for t in types:
        p = t.price_hour if billing == "hourly" else t.minute_price * interval_min
        if p > 0:
            q = round(p * 1e9)
            if abs(q - p * 1e9) > 1e-3 * max(1.0, p * 1e9) * 1e-6:
                return None
            units.append(q)
    if not units:
        return None
    g = math.gcd(*units) / 1e9
    return g / (2 * (n_int + 1))


#: Bytes per interval and task of the lane DP's tables (its cover table and the back-pointer
#: array of run lengths and tasks: three arrays of 8-byte numbers): the size limit of a plan.
DP_CELL_BYTES = 24


def least_intervals(done: Callable[[int], float], need: float) -> int:
    """The least whole number of intervals L >= 1 with ``done(L) >= need`` (``done`` never falls
    and grows without bound), by doubling then bisection."""
    hi = 1
    while done(hi) < need - 1e-7:
        hi *= 2
    lo = hi // 2 + 1 if hi > 1 else 1
    while lo < hi:
        mid = (lo + hi) // 2
        if done(mid) >= need - 1e-7:
            hi = mid
        else:
            lo = mid + 1
    return hi


def plan_horizon(job: WatershedJob, types: Sequence[CloudType], interval_min: float,
                 capacity: str = "whole") -> int | None:
    """The intervals past which a longer deadline cannot change the cheapest plan (None: no type
    can do any task, and no deadline gives a plan).

    The cheapest plan, tie-broken to the fewest active intervals, never runs longer than this:

    * with a free type that can work, the free types alone (every instance of them) finish the job
      in some M intervals at cost 0; no plan is cheaper, so the plan has cost 0 and at most M;
    * otherwise a plan whose longest instance (type j) runs past M_j, the intervals in which that
      one instance alone does every task, costs at least that instance; the plan of that instance
      alone, cut to M_j, does the job for no more and is shorter, so the tie-broken plan is not
      longer than the largest M_j.

    A deadline past the horizon is solved as the horizon: the same plan, at a cost in time and
    memory that no longer grows with the deadline (a deadline of 1e12 min used to build 1e11
    intervals).
    """
    avail = [availability(job, t) for t in types]
    usable = [(t, a) for t, a in zip(types, avail, strict=True) if a > 0 and t.cores > 0 and t.capacity > 0]
    if not usable:
        return None

    def done(group: list[tuple[CloudType, int]], n_instances: bool) -> Callable[[int], float]:
        return lambda length: sum((a if n_instances else 1) * interval_capacity(
            job, t, 0.0, length * interval_min, capacity) for t, a in group)

    free = [(t, a) for t, a in usable if t.price_hour == 0]
    if free:
        return least_intervals(done(free, True), job.n_tasks)
    return max(least_intervals(done([u], False), job.n_tasks) for u in usable)


def check_interval_args(deadline_min: float, interval_min: float, billing: str) -> None:
    """Validate the arguments every interval model shares (one-line user errors)."""
    if not math.isfinite(deadline_min) or deadline_min <= 0:
        raise UserError(f"deadline must be a positive number of minutes, got {deadline_min!r}",
                        field="deadline")
    if not math.isfinite(interval_min) or interval_min <= 0:
        raise UserError(f"must be > 0, got {interval_min!r}", field="interval_min")
    if billing not in ("hourly", "minute"):
        raise UserError(f"billing must be 'hourly' or 'minute', got {billing!r}", field="billing")
    per_hour = 60.0 / interval_min
    if billing == "hourly" and abs(per_hour - round(per_hour)) > 1e-9:
        # Decision: intervals must not straddle a billing hour, so their length must divide 60.
        raise UserError(f"with hourly billing the interval length must divide 60 min, got {interval_min:g}",
                        field="interval_min")


def solve_watershed(job: WatershedJob, types: Sequence[CloudType], deadline_min: float, *,
                    interval_min: float = 10, billing: str = "hourly", tiebreak: bool = True,
                    capacity: str = "whole", method: str = "auto") -> Plan:
    """Minimum-cost hybrid plan that completes ``job`` within ``deadline_min`` minutes.

    The deadline is rounded down to whole intervals ("73 min is processed as 70 min").
    ``billing``: "hourly" (max concurrent instances per clock hour from job start, eqs. 23-24) or
    "minute" (eq. 25). ``tiebreak``: lexicographic second solve that returns the fastest plan among
    the cheapest (decision M10 in docs/decisions/ilp.md); without it the makespan is whatever the solver
    returns.
    ``capacity``: "whole" (default) counts only tasks that finish, so the plan replays on time at its
    cost; "fluid" is the paper's literal eq. 19 (fractions of tasks count), which reproduces our
    test vectors (decision CHECKS) but can promise up to two task lengths too early with minute billing and
    short intervals.
    ``method``: "ilp" solves eqs. 18-25 with HiGHS; "dp" solves the same model exactly by dynamic
    programming over lanes (``_lane_dp``; whole capacity, at most two priced types); "auto" (default)
    uses "dp" when it applies, else "ilp". Same cost and, with the tie-break, the same makespan.
    """
    # Decision (issue 4): "whole" is the default because a plan users act on must be one the
    # simulator (and real machines) can follow; R11-R14 are the same under both readings.
    types = tuple(types)
    model = f"watershed/{billing}"
    if not types:
        raise UserError("no instance types given", field="types")
    check_interval_args(deadline_min, interval_min, billing)
    if method not in ("auto", "ilp", "dp"):
        raise UserError(f"method must be 'auto', 'ilp' or 'dp', got {method!r}", field="method")
    n_int = math.floor(deadline_min / interval_min + _EPS)
    deadline_s = deadline_min * 60.0
    if n_int < 1:
        return infeasible(model, deadline_s, f"no plan finishes by {deadline_min:g} min")
    horizon = plan_horizon(job, types, interval_min, capacity)
    if horizon is not None:
        n_int = min(n_int, horizon)
    check_size(n_int * (job.n_tasks + 1), "intervals x tasks", DP_CELL_BYTES,
               asked=f"{n_int:,} intervals of {interval_min:g} min (the deadline) x {job.n_tasks:,} tasks")
    starts = [i * interval_min for i in range(n_int)]
    avail = [availability(job, t) for t in types]
    cap = [[interval_capacity(job, t, s, interval_min, capacity) for t in types] for s in starts]
    priced = [j for j, t in enumerate(types) if avail[j] and t.price_hour > 0 and any(c[j] for c in cap)]
    if method == "dp" and (capacity != "whole" or len(priced) > 2):
        raise UserError("method 'dp' needs capacity 'whole' and at most two priced instance types",
                        field="method")
    if method != "ilp" and capacity == "whole" and len(priced) <= 2:
        counts, solve_ms, evals = _lane_dp(job, types, cap, avail, priced, interval_min, billing, tiebreak)
        size = {"variables": 0, "constraints": 0, "stages": evals, "method": "dp"}
        if counts is None:
            return infeasible(model, deadline_s, f"no plan finishes by {deadline_min:g} min", solve_ms,
                              **size)
        return _plan_from_counts(job, types, counts, interval_min, billing, solve_ms, model, deadline_s,
                                 {**size, "capacity": capacity}, capacity)

    m = Milp()
    cost = m.var(cost=1.0)  # (18) MIN cost
    x = [[m.var(0, a, integer=True) for a in avail] for _ in starts]
    work = [[m.var() for _ in types] for _ in starts]
    for i in range(n_int):
        for j in range(len(types)):
            m.row({work[i][j]: 1, x[i][j]: -cap[i][j]}, 0, 0)  # (19); (20) is the bound on x
    m.row({w: 1 for row in work for w in row}, lo=job.n_tasks - 1e-7)  # (21)
    for i in range(n_int - 1):
        for j in range(len(types)):
            m.row({x[i][j]: 1, x[i + 1][j]: -1}, lo=0)  # (22)
    hours = sorted({math.floor(s / 60.0 + _EPS) for s in starts})
    bill: dict[tuple[int, int], int] = {}
    if billing == "hourly":
        for h in hours:
            for j, a in enumerate(avail):
                b = bill[h, j] = m.var(0, a, integer=True)
                for i, s in enumerate(starts):
                    if math.floor(s / 60.0 + _EPS) == h:
                        m.row({b: 1, x[i][j]: -1}, lo=0)  # (23)
        m.row({cost: 1, **{b: -types[j].price_hour for (_, j), b in bill.items()}}, 0, 0)  # (24)
    else:
        m.row({cost: 1, **{x[i][j]: -interval_min * t.minute_price
                          for i in range(n_int) for j, t in enumerate(types)}}, 0, 0)  # (25)
    active: list[int] = []
    # Decision: the tie-break is a lexicographic second solve (min number of active intervals subject
    # to cost <= cost*), not an epsilon term: exact, and free of MIP-gap/epsilon scaling issues.
    if tiebreak:
        active = [m.binary() for _ in starts]
        for i in range(n_int):
            for j, a in enumerate(avail):
                if a:
                    m.row({x[i][j]: 1, active[i]: -a}, hi=0)
            if i + 1 < n_int:
                m.row({active[i]: 1, active[i + 1]: -1}, lo=0)
    weight = _tiebreak_weight(types, billing, interval_min, n_int)
    res, solve_ms, stages = m.solve_lexicographic(cost, dict.fromkeys(active, 1.0), second=tiebreak,
                                                  weight=weight)
    size = {"variables": m.num_vars, "constraints": m.num_rows, "stages": stages}
    if res.status == "infeasible":
        return infeasible(model, deadline_s, f"no plan finishes by {deadline_min:g} min", solve_ms, **size)
    if res.status != "optimal":
        return Plan("error", math.nan, math.nan, {}, None, {}, solve_ms, model, deadline_s,
                    {"message": f"solver: {res.raw_status}", **size})
    counts = [[round(res.x[x[i][j]]) for j in range(len(types))] for i in range(n_int)]
    return _plan_from_counts(job, types, counts, interval_min, billing, solve_ms, model, deadline_s,
                             {**size, "capacity": capacity}, capacity)


def _lane_dp(job: WatershedJob, types: tuple[CloudType, ...], cap: list[list[float]], avail: list[int],
             priced: list[int], interval_min: float, billing: str, tiebreak: bool
             ) -> tuple[list[list[int]] | None, float, int]:
    """Eqs. 18-25 with whole-task capacities solved exactly by dynamic programming over lanes.
    Returns the counts x[i][j] (None: infeasible), the solve ms and the number of cost evaluations.

    Decision (issue 4, speed: HiGHS took ~7 ms on the 1-min, 61-min model, PuLP/CBC ~30 ms):
    counts never rise (eq. 22), so type j's counts are a staircase of lanes, instances that run
    from t=0 for L intervals. With whole-task capacities (``interval_capacity(..., "whole")``
    telescopes) a lane's tasks are the sum of its intervals' capacities, w_j(L), and its cost is
    eq. 25's L·len·minuteCost_j, or with hourly billing hourlyCost_j per hour whose first
    interval it is alive in (eq. 23: an hour's first interval holds its maximum). Eq. 20 caps
    the lanes at AVAILABILITY_j. So for lanes of at most M intervals: a free type runs all its
    lanes for M intervals; G_j[n, r] = least cost of at most n priced lanes doing >= r tasks (a
    DP over lanes, only lengths no other beats on price and work); c(M) = the cheapest split of
    the tasks left between the (at most two) priced types. c(M) never rises with M; the
    tie-break (fewest active intervals) is the least M with c(M) within the two-stage ILP's
    tolerance of c(n_int) (``least_horizon``).
    """
    t0 = time.perf_counter()
    n_int = len(cap)
    work = [[0, *np.cumsum([round(c[j]) for c in cap]).tolist()] for j in range(len(types))]
    price = {j: [run_price(types[j], length, interval_min, billing) for length in range(n_int + 1)]
             for j in priced}
    free = [j for j, t in enumerate(types) if avail[j] and j not in priced]

    def evaluate(longest: int):
        rest = max(0, job.n_tasks - sum(avail[j] * work[j][longest] for j in free))
        tabs = []
        for j in priced:
            lengths = pareto_lengths(work[j], price[j], longest)
            n_max = min(avail[j], rest)  # a lane that does no task is never needed
            tabs.append((j, n_max, lengths, cover_table(work[j], price[j], n_max, rest, longest, lengths)))
        if not tabs:
            return (0.0 if rest == 0 else math.inf), tabs, rest, 0
        last = tabs[-1][3][tabs[-1][1]]  # the last type does r tasks, the first (if any) rest - r
        first = tabs[0][3][tabs[0][1]][::-1] if len(tabs) == 2 else np.r_[np.full(rest, np.inf), 0.0]
        total = first + last
        r = int(np.argmin(total))
        return float(total[r]), tabs, rest, r

    full = evaluate(n_int)
    if not math.isfinite(full[0]):
        return None, (time.perf_counter() - t0) * 1000.0, 1
    longest, evals = n_int, 1
    if tiebreak and n_int > 1:
        longest, full, more = least_horizon(evaluate, n_int, full)
        evals += more
    _, tabs, rest, split = full
    lanes: dict[int, list[int]] = {j: [longest] * avail[j] for j in free if work[j][longest] > 0}
    for d, (j, n_max, lengths, g) in enumerate(tabs):
        r = split if d == len(tabs) - 1 else rest - split
        lanes[j] = cover_runs(g, work[j], price[j], longest, n_max, r, lengths)
    counts = [[sum(1 for length in lanes.get(j, ()) if length > i) for j in range(len(types))]
              for i in range(n_int)]
    return counts, (time.perf_counter() - t0) * 1000.0, evals


def _plan_from_counts(job: WatershedJob, types: tuple[CloudType, ...], counts: list[list[int]],
                      interval_min: float, billing: str, solve_ms: float, model: str, deadline_s: float,
                      extra: dict, capacity: str = "fluid") -> Plan:
    n_int = len(counts)
    starts = [i * interval_min for i in range(n_int)]
    last = max((i for i in range(n_int) if any(counts[i])), default=-1)
    makespan_min = (last + 1) * interval_min  # [PAPER] the end of the last interval with any x > 0
    billed: dict[str, int] = {}
    cost = 0.0
    for j, t in enumerate(types):
        if billing == "hourly":
            per_hour: dict[int, int] = {}
            for i, s in enumerate(starts):
                h = math.floor(s / 60.0 + _EPS)
                per_hour[h] = max(per_hour.get(h, 0), counts[i][j])
            units = sum(per_hour.values())
            cost += units * t.price_hour
        else:
            units = round(sum(counts[i][j] for i in range(n_int)) * interval_min)
            cost += units * t.minute_price
        if units and t.price_hour > 0:
            billed[t.name] = units
    work = sum(interval_capacity(job, t, s, interval_min, capacity) * counts[i][j]
               for i, s in enumerate(starts) for j, t in enumerate(types))
    inst = {t.name: [counts[i][j] for i in range(last + 1)] for j, t in enumerate(types)
            if any(counts[i][j] for i in range(n_int))}
    detail = {"interval_min": interval_min, "intervals": n_int, "billing": billing,
              "billing_unit": "instance-hour" if billing == "hourly" else "instance-minute",
              "work_tasks": work, "n_tasks": job.n_tasks, **extra}
    # Decision: billed_units lists only priced types; starts holds the interval start minutes (every
    # instance starts at t=0 by eq. 22), instances[type][i] is the count in interval i up to the last used.
    return Plan("optimal", round(cost, 10), makespan_min * 60.0, inst,
                {"interval_starts_min": starts[: last + 1]}, billed, solve_ms, model, deadline_s, detail)


def cost_if_stopped(plan: Plan, types: Sequence[CloudType], finish_min: float) -> float:
    """What following ``plan`` costs when every instance is released as the job ends at ``finish_min``.

    A plan is priced to the end of its last interval; a job that finishes inside that interval
    (whole tasks rarely end on the grid) and releases its instances pays less with per-minute
    billing: the plan's counts up to the last started minute. With hourly billing it is the
    plan's cost unless the job ends a whole billing hour early.
    """
    if not plan.ok or plan.starts is None:
        return plan.cost
    interval = plan.detail["interval_min"]
    starts = plan.starts["interval_starts_min"]
    by_name = {t.name: t for t in types}
    end_min = math.ceil(finish_min - _EPS)  # the last started minute (the simulator's billing grain)
    total = 0.0
    for name, counts in plan.instances.items():
        t = by_name[name]
        if plan.detail["billing"] == "hourly":
            per_hour: dict[int, int] = {}
            for s, c in zip(starts, counts, strict=True):
                if s < finish_min - _EPS:
                    h = math.floor(s / 60.0 + _EPS)
                    per_hour[h] = max(per_hour.get(h, 0), c)
            total += sum(per_hour.values()) * t.price_hour
        else:
            minutes = sum(c * max(0.0, min(s + interval, end_min) - s)
                          for s, c in zip(starts, counts, strict=True))
            total += round(minutes) * t.minute_price
    return round(total, 10)
