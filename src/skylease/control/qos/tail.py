"""The tail effect of a bag of tasks, measured on its completion times (decision S1 in
docs/decisions/spequlos.md).

Pure functions on ascending arrays of completion (or first-assignment) times, in seconds since
the bag's submission. ``n`` is the bag size used as the denominator: the tasks submitted so far
when the oracle looks online, the final size for offline metrics (S10); it defaults to the number
of times given. Used online by the oracle and offline by the experiments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

#: An array of times (or of any values): a sequence or a numpy array.
Times = Sequence[float] | np.ndarray

#: The fraction of the bag at which the ideal completion rate is measured (S1).
IDEAL_AT = 0.9


def rank(x: float, n: int) -> int:
    """How many tasks make a fraction ``x`` of ``n``: ``ceil(x·n)``, robust to float noise."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {x!r}")
    return max(0, math.ceil(x * n - 1e-9))


def _size(times: np.ndarray, n: int | None) -> int:
    return len(times) if n is None else n


def t_c(times: Times, x: float, n: int | None = None) -> float:
    """Time of the ``ceil(x·n)``-th completion (0 for none, ``inf`` when not reached yet)."""
    arr = np.asarray(times, dtype=float)
    k = rank(x, _size(arr, n))
    if k == 0:
        return 0.0
    return float(arr[k - 1]) if k <= len(arr) else math.inf


def ideal_time(times: Times, n: int | None = None, at: float = IDEAL_AT) -> float:
    """``T_ideal = t_c(at)/at``: the makespan had the rate measured at ``at`` held to the end."""
    if not 0.0 < at <= 1.0:
        raise ValueError(f"ideal fraction must be in (0, 1], got {at!r}")
    return t_c(times, at, n) / at


def completion_time(times: Times, n: int | None = None) -> float:
    """``T = t_c(1)``: when the last task completed (``inf`` if some never did)."""
    return t_c(times, 1.0, n)


def tail_slowdown(times: Times, n: int | None = None) -> float:
    """``T / T_ideal`` (actual over ideal, ≥ 1 in practice; S1)."""
    return completion_time(times, n) / ideal_time(times, n)


def tail_tasks(times: Times, n: int | None = None) -> int:
    """How many tasks completed after ``T_ideal``."""
    arr = np.asarray(times, dtype=float)
    return int(np.count_nonzero(arr > ideal_time(arr, n)))


def tail_task_share(times: Times, n: int | None = None) -> float:
    """Tail tasks over the bag size ("% of BoT in tail" / 100; ≤ 0.1 by construction)."""
    arr = np.asarray(times, dtype=float)
    return tail_tasks(arr, n) / _size(arr, n)


def tail_time_share(times: Times, n: int | None = None) -> float:
    """``(T − T_ideal) / T``: the part of the makespan spent in the tail."""
    arr = np.asarray(times, dtype=float)
    total = completion_time(arr, n)
    return (total - ideal_time(arr, n)) / total


def execution_variance(ctimes: Times, atimes: Times) -> np.ndarray:
    """``var(k/n) = t_c(k/n) − t_a(k/n)`` at task granularity, for k = 1..completions (rule V, decision
    S5)."""
    c = np.asarray(ctimes, dtype=float)
    a = np.asarray(atimes, dtype=float)
    k = min(len(c), len(a))
    return c[:k] - a[:k]


@dataclass(frozen=True, slots=True)
class TailStats:
    """The tail of one run: makespan, ideal time and the S1 ratios."""

    n: int
    completion_time: float
    ideal_time: float
    slowdown: float
    tail_tasks: int
    tail_task_share: float
    tail_time_share: float


def tail_stats(times: Times, n: int | None = None) -> TailStats:
    """Every tail metric of one run at once."""
    arr = np.asarray(times, dtype=float)
    size = _size(arr, n)
    total, ideal = completion_time(arr, size), ideal_time(arr, size)
    k = int(np.count_nonzero(arr > ideal))
    return TailStats(size, total, ideal, total / ideal, k, k / size, (total - ideal) / total)


class TRE(NamedTuple):
    """A Tail Removal Efficiency and whether the run is excluded (then ``value`` is NaN)."""

    value: float
    excluded: bool


NO_TAIL_RULES = ("exclude", "one")


def tail_removal_efficiency(t_speq: float, t_nospeq: float, t_ideal: float, *, eps: float = 1e-9,
                            no_tail: str = "exclude") -> TRE:
    """``1 − (t_speq − t_ideal)/(t_nospeq − t_ideal)`` with the S16 edge cases.

    ``t_ideal`` is the ideal time of the run without QoS. With no tail (``t_nospeq − t_ideal ≤
    eps``) the run is excluded, or with ``no_tail="one"`` scores 1 when QoS did not make it slower
    (else excluded). The value is clipped to ≤ 1 (finishing before ``t_ideal`` is full removal);
    it is negative when QoS made the run slower.
    """
    if no_tail not in NO_TAIL_RULES:
        raise ValueError(f"no_tail must be one of {NO_TAIL_RULES}, got {no_tail!r}")
    tail = t_nospeq - t_ideal
    if not tail > eps:
        if no_tail == "one" and t_speq <= t_nospeq:
            return TRE(1.0, False)
        return TRE(math.nan, True)
    return TRE(min(1.0, 1.0 - (t_speq - t_ideal) / tail), False)


def normalized_completion_times(times: Times) -> np.ndarray:
    """Each run's completion time over the mean of the runs of its environment (Fig. 9)."""
    arr = np.asarray(times, dtype=float)
    if arr.size == 0:
        return arr
    return arr / arr.mean()
