"""Energy-aware VM placement on opportunistic desktops, after C. O. Diaz's thesis chapter 6.

Decisions B1-B6 in docs/decisions/thesis.md: First-Fit, First-Fit Decreasing, Best-Fit
(Decreasing), Sorting (Alg. 11), similar execution times (Alg. 12), the custom Round Robin; energy
under the thesis's three readings.
A pure library over numpy arrays: no I/O, no clock, no global state.
"""

from __future__ import annotations

from .algorithms import (
    ALGORITHMS,
    SECONDARY_KEYS,
    best_fit,
    desktop_order,
    first_fit,
    first_fit_decreasing,
    place,
    round_robin,
    similar_time,
    sorting,
    vm_order,
)
from .energy import ENERGY_MODELS, USER_SLOWDOWN, Energy, energy, run_minutes
from .placement import Placement

__all__ = [
    "ALGORITHMS",
    "ENERGY_MODELS",
    "SECONDARY_KEYS",
    "USER_SLOWDOWN",
    "Energy",
    "Placement",
    "best_fit",
    "desktop_order",
    "energy",
    "first_fit",
    "first_fit_decreasing",
    "place",
    "round_robin",
    "run_minutes",
    "similar_time",
    "sorting",
    "vm_order",
]
