"""Two-level voltage energy model of the thesis (decision A3, thesis §3.7, Eqs. 3.8-3.10).

E_t = E_c + E_i with E_c = sum_i Vmax[M[i]]^2 * ETC[i][M[i]] (busy) and
E_i = sum_j Vmin[j]^2 * (C_max - L_j) (idle): A*C_eff*f = 1 and the only idle slot of machine j is
[L_j, C_max] (decision A3). Units are arbitrary (V^2 * time).
"""

from __future__ import annotations

import numpy as np

from ._inputs import _as_assignment, _as_etc

__all__ = ["VOLTAGE_SETS", "energy", "random_voltages"]

#: The three (V_max, V_min) sets of thesis §3.7.2.1, one row per set.
VOLTAGE_SETS = np.array([[1.95, 0.8], [1.75, 0.9], [1.60, 0.7]])
VOLTAGE_SETS.setflags(write=False)


def _as_voltages(voltages: object, m: int) -> np.ndarray:
    """Validated float64 (m, 2) array of [V_max, V_min] per machine."""
    try:
        v = np.asarray(voltages, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"voltages must be an (m, 2) array of numbers: {exc}") from None
    if v.shape != (m, 2):
        raise ValueError(f"voltages must have shape ({m}, 2) = [V_max, V_min] per machine, got {v.shape}")
    if not np.isfinite(v).all() or not (v > 0).all():
        raise ValueError("voltages must be finite and > 0")
    return v


def _energy_terms(etc: np.ndarray, assign: np.ndarray, loads: np.ndarray, makespan: float,
                  volts: np.ndarray) -> float:
    """E_c + E_i from validated arrays (no checks)."""
    vmax2 = volts[:, 0] ** 2
    vmin2 = volts[:, 1] ** 2
    busy = float(np.dot(vmax2, loads))  # sum_i Vmax[M[i]]^2 ETC[i][M[i]] grouped by machine
    idle = float(np.dot(vmin2, makespan - loads))
    return busy + idle


def random_voltages(m: int, seed: int | np.random.Generator) -> np.ndarray:
    """(m, 2) [V_max, V_min] per machine, each machine's set drawn uniformly from VOLTAGE_SETS."""
    if int(m) != m or m < 1:
        raise ValueError(f"m must be a positive integer, got {m!r}")
    rng = np.random.default_rng(seed)
    return VOLTAGE_SETS[rng.integers(0, len(VOLTAGE_SETS), size=int(m))].copy()


def energy(etc, assignment, voltages) -> float:
    """Total energy E_t = E_c + E_i of an assignment (decision A3)."""
    a = _as_etc(etc)
    n, m = a.shape
    assign = _as_assignment(assignment, n, m)
    volts = _as_voltages(voltages, m)
    loads = np.bincount(assign, weights=a[np.arange(n), assign], minlength=m)
    return _energy_terms(a, assign, loads, float(loads.max()), volts)
