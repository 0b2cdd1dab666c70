"""Time/cost Pareto frontier: sweep the deadline, solve min-cost at each, drop dominated plans (decision
MODES in docs/decisions/ilp.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .plan import Plan

_TOL = 1e-9


def sweep(solve_fn: Callable[[float], Plan], deadlines: Iterable[float]) -> list[Plan]:
    """``solve_fn(d)`` for every deadline, in the given order (infeasible plans included)."""
    return [solve_fn(d) for d in deadlines]


def nondominated(plans: Iterable[Plan]) -> list[Plan]:
    """Feasible plans not dominated in (cost, makespan), sorted by makespan; one plan per point."""
    ok = sorted((p for p in plans if p.ok), key=lambda p: (p.makespan_s, p.cost))
    out: list[Plan] = []
    for p in ok:
        if not out or p.cost < out[-1].cost - _TOL:
            if out and abs(p.makespan_s - out[-1].makespan_s) <= _TOL:
                continue  # same time, the earlier (cheaper) plan already kept
            out.append(p)
    return out


def front(solve_fn: Callable[[float], Plan], deadlines: Iterable[float]) -> list[Plan]:
    """The Pareto front over ascending ``deadlines``, without solving past the cheapest plan.

    The cheapest cost is the one at the longest deadline (min cost only falls as the deadline
    grows); once a shorter deadline reaches it, every later deadline is dominated (same cost,
    no faster), so the sweep stops there. Same frontier as ``nondominated(sweep(...))``.
    """
    ds = sorted(deadlines)
    if not ds:
        return []
    last = solve_fn(ds[-1])
    if not last.ok:
        return []
    plans = []
    for d in ds[:-1]:
        p = solve_fn(d)
        plans.append(p)
        if p.ok and p.cost <= last.cost + _TOL:
            break
    else:
        plans.append(last)
    return nondominated(plans)
