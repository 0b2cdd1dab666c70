"""Schedules of independent tasks on unrelated machines, and their evaluation.

Follows the decisions of docs/decisions/thesis.md: A1 (model: tasks appended back-to-back from
time 0), A2.1 (makespan), A2.2 (flowtime; SPT per machine is the one used in comparisons), A2.3
(lower bound) and A3 (energy, computed in :mod:`.energy`). Inputs are validated once here, at
the API boundary; the numba kernels assume float64 C-contiguous ETCs with finite entries > 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ._inputs import _as_assignment, _as_etc, _as_order
from .energy import _as_voltages, _energy_terms

__all__ = ["Schedule", "evaluate", "flowtime_spt", "lower_bound"]


# Decision: eq=False. A generated __eq__ would compare numpy arrays and raise; schedules compare by
# identity, compare their fields explicitly. The arrays are made read-only so the dataclass is truly frozen.
@dataclass(frozen=True, eq=False)
class Schedule:
    """A mapping of every task to one machine, with its metrics (decisions A2, A3)."""

    heuristic: str
    assignment: np.ndarray  # int64 (n,), machine index per task
    order: np.ndarray  # int64 (n,), task ids in the order the heuristic mapped them
    makespan: float  # max(loads)
    flowtime: float  # SPT per machine (A2.2), the one used in comparisons
    flowtime_order: float  # flowtime with each machine's tasks run in mapping order
    loads: np.ndarray  # float64 (m,), machine finish times L_j, summed in task-index order
    lam: float | None = None  # λ used (Low heuristics), None otherwise
    energy: float | None = None  # total energy E_t (A3) when voltages were given


# --------------------------------------------------------------------------------------------- validation


# --------------------------------------------------------------------------------------------- kernels


@njit(cache=True)
def _summarize(etc, assign, order):  # pragma: no cover - compiled
    """Canonical loads, flowtime in mapping order, SPT flowtime (A2.1, A2.2)."""
    n, m = etc.shape
    loads = np.zeros(m)
    for i in range(n):  # canonical summation order (task index) -> same loads for same assignment
        loads[assign[i]] += etc[i, assign[i]]
    ready = np.zeros(m)
    ft_order = 0.0
    for k in range(n):
        i = order[k]
        j = assign[i]
        ready[j] += etc[i, j]
        ft_order += ready[j]
    # SPT: bucket the tasks by machine, sort each bucket ascending, sum the prefix sums.
    start = np.zeros(m + 1, np.int64)
    for i in range(n):
        start[assign[i] + 1] += 1
    for j in range(m):
        start[j + 1] += start[j]
    pos = start[:m].copy()
    vals = np.empty(n)
    for i in range(n):
        j = assign[i]
        vals[pos[j]] = etc[i, j]
        pos[j] += 1
    ft_spt = 0.0
    for j in range(m):
        vals[start[j]:start[j + 1]].sort()
        acc = 0.0
        for k in range(start[j], start[j + 1]):
            acc += vals[k]
            ft_spt += acc
    return loads, ft_order, ft_spt


# --------------------------------------------------------------------------------------------- builders


def _freeze(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _build(etc: np.ndarray, assign: np.ndarray, order: np.ndarray, heuristic: str,
           lam: float | None, volts: np.ndarray | None) -> Schedule:
    """Schedule from already-validated arrays (no checks; internal fast path)."""
    loads, ft_order, ft_spt = _summarize(etc, assign, order)
    makespan = float(loads.max())
    e = None if volts is None else _energy_terms(etc, assign, loads, makespan, volts)
    return Schedule(heuristic=heuristic, assignment=_freeze(assign), order=_freeze(order),
                    makespan=makespan, flowtime=float(ft_spt), flowtime_order=float(ft_order),
                    loads=_freeze(loads), lam=None if lam is None else float(lam), energy=e)


# --------------------------------------------------------------------------------------------- public


def evaluate(etc, assignment, order=None, *, heuristic="given", lam=None, voltages=None) -> Schedule:
    """Schedule (makespan, loads, flowtimes, energy) of a given assignment and mapping order."""
    a = _as_etc(etc)
    n, m = a.shape
    assign = _as_assignment(assignment, n, m)
    o = _as_order(order, n)
    volts = None if voltages is None else _as_voltages(voltages, m)
    return _build(a, assign, o, heuristic, lam, volts)


def lower_bound(etc) -> float:
    """LB = max(max_i min_j ETC, sum_i min_j ETC / m) on the optimal makespan (decision A2.3)."""
    a = _as_etc(etc)
    mins = a.min(axis=1)
    return float(max(mins.max(), mins.sum() / a.shape[1]))


def flowtime_spt(etc, assignment) -> float:
    """Total flowtime with each machine's tasks run shortest-first (decision A2.2)."""
    a = _as_etc(etc)
    assign = _as_assignment(assignment, *a.shape)
    return float(_summarize(a, assign, np.arange(a.shape[0], dtype=np.int64))[2])
