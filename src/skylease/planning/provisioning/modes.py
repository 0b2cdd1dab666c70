"""User preference modes built on a min-cost-under-deadline oracle ``solve_fn(deadline) -> Plan`` (decision
MODES in docs/decisions/ilp.md).

Deadlines and grids are in the oracle's unit ("h" for MapReduce, "min" for Watershed).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from .pareto import nondominated
from .plan import Plan, infeasible

SolveFn = Callable[[float], Plan]
_SECONDS = {"h": 3600.0, "min": 60.0, "s": 1.0}


def _grid(lo: float, hi: float, step: float) -> list[float]:
    n = math.floor((hi - lo) / step + 1e-9)
    return [round(lo + k * step, 9) for k in range(n + 1)]


def _fmt(seconds: float, unit: str) -> str:
    return f"{round(seconds / _SECONDS[unit], 4):g} {unit}"


def _first_feasible(solve_fn: SolveFn, grid: Sequence[float],
                    accept: Callable[[Plan], bool] = lambda p: p.ok) -> Plan | None:
    """Binary search for the first grid deadline whose plan is accepted (acceptance is monotone)."""
    if not grid:
        return None
    top = solve_fn(grid[-1])
    if not accept(top):
        return None
    lo, hi, best = 0, len(grid) - 1, top
    while lo < hi:
        mid = (lo + hi) // 2
        p = solve_fn(grid[mid])
        if accept(p):
            hi, best = mid, p
        else:
            lo = mid + 1
    return best


def min_time(solve_fn: SolveFn, lo: float, hi: float, step: float, *, unit: str = "min") -> Plan:
    """The fastest plan: the smallest feasible deadline on the grid lo, lo+step, ..., hi, at min cost."""
    best = _first_feasible(solve_fn, _grid(lo, hi, step))
    if best is None:
        return infeasible("min_time", hi * _SECONDS[unit], f"no plan finishes by {hi:g} {unit}")
    return best


def min_cost(solve_fn: SolveFn, upper: float, *, lo: float, step: float, unit: str = "min") -> Plan:
    """The cheapest plan (deadline ``upper``), tie-broken by the shortest deadline with that cost."""
    top = solve_fn(upper)
    if not top.ok:
        return dataclasses.replace(top, detail={**top.detail,
                                                "message": f"no plan finishes by {upper:g} {unit}"})
    best = _first_feasible(solve_fn, _grid(lo, upper, step),
                           lambda p: p.ok and p.cost <= top.cost + 1e-9)
    return best if best is not None else top


def cheapest_meeting_deadline(solve_fn: SolveFn, deadline: float, *, step: float | None = None,
                              upper: float | None = None, unit: str = "min") -> Plan:
    """Min cost subject to the deadline [PAPER]. When infeasible, and a grid (``step``, ``upper``) is
    given, the one-line message names the fastest possible plan."""
    p = solve_fn(deadline)
    if p.status != "infeasible":
        return p
    msg = f"no plan finishes by {deadline:g} {unit}"
    if step is not None and upper is not None and upper > deadline:
        fast = _first_feasible(solve_fn, _grid(deadline + step, upper, step))
        if fast is not None:
            msg += f"; the fastest possible is {_fmt(fast.makespan_s, unit)} at ${fast.cost:.2f}"
        else:
            msg += f"; nothing finishes by {upper:g} {unit} either"
    return dataclasses.replace(p, detail={**p.detail, "message": msg})


def weighted(points: Sequence[Plan], w: float) -> Plan:
    """Argmin of w·cost_norm + (1-w)·time_norm over the non-dominated plans (ranges normalised to [0,1]).

    # Decision: w=1 means "cost only", w=0 "time only"; ties go to the faster plan.
    """
    if not 0.0 <= w <= 1.0:
        from skylease.model.errors import UserError

        raise UserError(f"weight must be in [0, 1], got {w!r}", field="weight")
    front = nondominated(points)
    if not front:
        return infeasible("weighted", None, "no feasible plan to choose from")
    cs = [p.cost for p in front]
    ts = [p.makespan_s for p in front]
    cr = (max(cs) - min(cs)) or 1.0
    tr = (max(ts) - min(ts)) or 1.0
    return min(front, key=lambda p: (w * (p.cost - min(cs)) / cr + (1 - w) * (p.makespan_s - min(ts)) / tr,
                                     p.makespan_s))


def fastest_within_budget(solve_fn: SolveFn, budget: float, lo: float, hi: float, step: float, *,
                          unit: str = "min") -> Plan:
    """The fastest plan whose cost is within ``budget`` (min cost at a deadline only falls as the
    deadline grows, so the first grid deadline whose cheapest plan fits the budget is the answer)."""
    if budget < 0:
        from skylease.model.errors import UserError

        raise UserError(f"budget must be >= 0, got {budget!r}", field="budget")
    best = _first_feasible(solve_fn, _grid(lo, hi, step), lambda p: p.ok and p.cost <= budget + 1e-9)
    if best is not None:
        return best
    cheapest = solve_fn(hi)
    msg = f"no plan costs at most ${budget:.2f}"
    if cheapest.ok:
        msg += f"; the cheapest is ${cheapest.cost:.2f} finishing in {_fmt(cheapest.makespan_s, unit)}"
    return infeasible("budget", None, msg)
