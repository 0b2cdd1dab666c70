"""Batch-mode mapping of independent tasks on heterogeneous machines (ETC model), after C. O. Diaz's
thesis chapter 3 (decisions A1-A10 in docs/decisions/thesis.md). A pure library over numpy arrays: no I/O, no
clock, no global state.
"""

from __future__ import annotations

from .energy import VOLTAGE_SETS, energy, random_voltages
from .heuristics import (
    HEURISTICS,
    LAMBDAS,
    best_performance,
    is_full_consistent,
    lambda_sweep,
    low1,
    low2,
    low3,
    luo1,
    luo2,
    luo2b,
    max_min,
    mct,
    met,
    min_min,
    olb,
    sufferage,
)
from .metrics import approximation_factor, best_counts, percent_gain, performance_profile, performance_ratios
from .schedule import Schedule, evaluate, flowtime_spt, lower_bound

__all__ = [
    "HEURISTICS",
    "LAMBDAS",
    "VOLTAGE_SETS",
    "Schedule",
    "approximation_factor",
    "best_counts",
    "best_performance",
    "energy",
    "evaluate",
    "flowtime_spt",
    "is_full_consistent",
    "lambda_sweep",
    "low1",
    "low2",
    "low3",
    "lower_bound",
    "luo1",
    "luo2",
    "luo2b",
    "max_min",
    "mct",
    "met",
    "min_min",
    "olb",
    "percent_gain",
    "performance_profile",
    "performance_ratios",
    "random_voltages",
    "sufferage",
]
