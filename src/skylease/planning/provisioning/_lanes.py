"""Lanes: machines that run from t=0 for a whole number of intervals, then stop.

Instance counts that never rise (eqs. 22, 30) are a staircase of such lanes; a lane's cost and its
whole tasks depend only on its type and length. These helpers find the least cost of at most n lanes
doing at least r tasks (a DP over lanes), for the whole-task multi-model and hybrid models.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .catalog import CloudType


def run_price(t: CloudType, length: int, interval_min: float, billing: str) -> float:
    """What one machine of type ``t`` running from t=0 for ``length`` intervals adds to the ILP's
    cost: eq. 36 (minute billing), or with hourly billing the hours whose first interval it is
    alive in (eq. 23: counts never rise, so an hour's first interval holds its maximum)."""
    if billing == "minute":
        return length * interval_min * t.minute_price
    return t.price_hour * math.ceil(length / round(60.0 / interval_min))


def _useful(work: Sequence[int], longest: int) -> list[int]:
    """The run lengths up to ``longest`` that finish a task more than one interval shorter: a run no
    longer than another with the same work costs no more (prices never fall with length)."""
    return [length for length in range(1, longest + 1) if work[length] > work[length - 1]]


def pareto_lengths(work: Sequence[int], price: Sequence[float], longest: int) -> list[int]:
    """The run lengths up to ``longest`` that no other one beats: none at most as dear does at least
    as much work (with hourly billing only the longest run of each number of billed hours)."""
    keep: list[int] = []
    for length in reversed(_useful(work, longest)):
        if not keep or price[length] < price[keep[-1]] - 1e-12:
            keep.append(length)
    return keep[::-1]


def cover_table(work: Sequence[int], price: Sequence[float], n_max: int, need: int, longest: int,
                 lengths: Sequence[int] | None = None) -> np.ndarray:
    """G[n, r]: least cost of at most ``n`` machines (each one run from t=0 of at most ``longest``
    intervals, of one of ``lengths`` if given) doing at least ``r`` tasks, r = 0..need; inf where
    they cannot."""
    opts = _useful(work, longest) if lengths is None else list(lengths)
    g = np.full((n_max + 1, need + 1), np.inf)
    g[0, 0] = 0.0
    if not opts:
        g[:, 0] = 0.0
        return g
    w = np.array([work[length] for length in opts])
    c = np.array([price[length] for length in opts])
    back = np.maximum(0, np.arange(need + 1)[None, :] - w[:, None])  # (options, need + 1)
    for n in range(1, n_max + 1):
        prev = g[n - 1]
        g[n] = np.minimum(prev, (c[:, None] + prev[back]).min(axis=0))
        if np.array_equal(g[n], prev):  # more machines cannot help any more
            g[n + 1:] = prev
            break
    return g


def cover_runs(g: np.ndarray, work: Sequence[int], price: Sequence[float], longest: int, n: int,
                r: int, lengths: Sequence[int] | None = None) -> list[int]:
    """The run lengths behind ``g[n, r]`` (``cover_table``'s argmin, with the same ``lengths``)."""
    opts = _useful(work, longest) if lengths is None else list(lengths)
    runs = []
    while r > 0:
        v = g[n, r]
        if g[n - 1, r] <= v:
            n -= 1
            continue
        length = next(length for length in opts
                      if abs(price[length] + g[n - 1, max(0, r - work[length])] - v) <= 1e-9)
        runs.append(length)
        r, n = max(0, r - work[length]), n - 1
    return runs


def least_horizon(evaluate: Callable[[int], tuple[Any, ...]], n_int: int, full: tuple[Any, ...]
                  ) -> tuple[int, tuple[Any, ...], int]:
    """The tie-break of the lane DPs (fewest active intervals among the cheapest plans): the least
    horizon M <= ``n_int`` whose cost ``evaluate(M)[0]`` is within the two-stage ILP's tolerance of
    ``full[0]`` (``full = evaluate(n_int)``; costs never rise with M). One interval less is tried
    first (the cheapest plans mostly need the whole horizon), then bisection. Returns M, the
    evaluation at M and the number of evaluations made."""
    tol = 1e-6 + 1e-9 * abs(full[0])
    lo, hi, probe, horizon, best, evals = 1, n_int, n_int - 1, n_int, full, 0
    while lo < hi:
        got = evaluate(probe)
        evals += 1
        if got[0] <= full[0] + tol:
            hi, horizon, best = probe, probe, got
        else:
            lo = probe + 1
        probe = (lo + hi) // 2
    return horizon, best, evals
