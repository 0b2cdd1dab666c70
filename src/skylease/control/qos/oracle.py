"""The Oracle's decisions: WHEN to start cloud workers and HOW MANY (decisions S2, S3, S5 in
docs/decisions/spequlos.md).

Online, the completion fraction's denominator is the number of tasks submitted so far (S10).
Counts of cloud workers use ``S``, the credits expressed in CPU.hours (credits / 15).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from skylease.control.qos.credits import CREDITS_PER_CPU_HOUR
from skylease.control.qos.tail import execution_variance, rank

#: WHEN rules: completion threshold, assignment threshold, execution variance, its [RC] variant.
WHEN = ("9C", "9A", "V", "V_rc")
#: HOW MANY rules: greedy, conservative.
HOW_MANY = ("G", "C")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the Oracle sees of a bag at one moment (times only when a rule needs them)."""

    elapsed: float
    submitted: int
    assigned: int
    completed: int
    ctimes: np.ndarray | None = None
    atimes: np.ndarray | None = None

    @property
    def completion(self) -> float:
        """The completion fraction ``x_e`` (0 before any task is submitted)."""
        return self.completed / self.submitted if self.submitted else 0.0


def when_completed(s: Snapshot, threshold: float = 0.9) -> bool:
    """9C: ``completed ≥ threshold · submitted``."""
    return s.submitted > 0 and s.completed >= rank(threshold, s.submitted)


def when_assigned(s: Snapshot, threshold: float = 0.9) -> bool:
    """9A: ``assigned ≥ threshold · submitted`` (distinct tasks ever sent to a worker)."""
    return s.submitted > 0 and s.assigned >= rank(threshold, s.submitted)


def _variance(s: Snapshot) -> tuple[np.ndarray, int]:
    """``var(k/n)`` for k = 1..completed, and how many k have ``k/n ≤ 0.5``."""
    if s.ctimes is None or s.atimes is None:
        raise ValueError("the execution-variance rules need completion and assignment times")
    var = execution_variance(s.ctimes[: s.completed], s.atimes)
    return var, min(len(var), s.submitted // 2)


def when_variance(s: Snapshot, factor: float = 2.0, after: float = 0.5) -> bool:
    """V (the paper): ``var(c) ≥ factor · max_{x ≤ 0.5} var(x)``, looked at only once ``c > after``."""
    if s.submitted == 0 or s.completion <= after:
        return False
    var, half = _variance(s)
    if half == 0 or len(var) < s.completed:
        return False
    return bool(var[s.completed - 1] >= factor * var[:half].max())


def when_variance_rc(s: Snapshot, threshold: float = 0.75, factor: float = 1.5) -> bool:
    """V_rc (the [RC] code): ``c ≥ threshold`` and ``max_{x>0.5} var > factor · max_{x≤0.5} var``."""
    if s.submitted == 0 or s.completed < rank(threshold, s.submitted):
        return False
    var, half = _variance(s)
    if half == 0 or half >= len(var):
        return False
    return bool(var[half:].max() > factor * var[:half].max())


def cpu_hours(credits: float) -> float:
    """``S``: credits as CPU.hours of cloud worker."""
    return credits / CREDITS_PER_CPU_HOUR


def _floor(x: float) -> int:
    return max(0, math.floor(x + 1e-9))


def greedy(credits: float) -> int:
    """G: ``floor(S)`` workers at once (S3)."""
    return _floor(cpu_hours(credits))


def remaining_time(elapsed: float, x_e: float) -> float:
    """``t_r = elapsed/x_e − elapsed`` in seconds, at a constant completion rate (inf if x_e = 0)."""
    return math.inf if x_e <= 0 else elapsed / x_e - elapsed


def conservative(credits: float, elapsed: float, x_e: float) -> int:
    """C: ``floor(S / max(t_r[h], 1))`` = ``min(S/t_r, S)`` (printed ``max`` is a typo, S2); 0 if x_e = 0."""
    if x_e <= 0:
        return 0
    return _floor(cpu_hours(credits) / max(remaining_time(elapsed, x_e) / 3600.0, 1.0))


@dataclass(frozen=True, slots=True)
class Oracle:
    """A WHEN rule and a HOW MANY rule with their thresholds (S5: 0.9 and factor 2)."""

    when: str = "9C"
    how_many: str = "C"
    threshold: float = 0.9
    variance_factor: float = 2.0
    variance_after: float = 0.5
    rc_threshold: float = 0.75
    rc_factor: float = 1.5

    def __post_init__(self) -> None:
        if self.when not in WHEN:
            raise ValueError(f"when must be one of {WHEN}, got {self.when!r}")
        if self.how_many not in HOW_MANY:
            raise ValueError(f"how_many must be one of {HOW_MANY}, got {self.how_many!r}")

    @property
    def needs_times(self) -> bool:
        """Whether :meth:`should_use_cloud` reads the completion and assignment times."""
        return self.when in ("V", "V_rc")

    def should_use_cloud(self, s: Snapshot) -> bool:
        """The WHEN rule on ``s``."""
        if self.when == "9C":
            return when_completed(s, self.threshold)
        if self.when == "9A":
            return when_assigned(s, self.threshold)
        if self.when == "V":
            return when_variance(s, self.variance_factor, self.variance_after)
        return when_variance_rc(s, self.rc_threshold, self.rc_factor)

    def cloud_workers_to_start(self, s: Snapshot, credits: float) -> int:
        """The HOW MANY rule for ``credits`` at ``s``."""
        if self.how_many == "G":
            return greedy(credits)
        return conservative(credits, s.elapsed, s.completion)
