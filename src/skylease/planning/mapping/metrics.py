"""Aggregate comparison metrics over instances x heuristics (decisions A2 in docs/decisions/thesis.md).

A2.4 approximation factor rho = C_max / LB; A2.5 performance ratio gamma = C_max / best C_max on the same
instance; A2.6 performance profile (Dolan & Moré); A2.7 B / EB counts (ties within rtol 1e-9);
A2.8 %Gain of mean flowtime.
"""

from __future__ import annotations

import numpy as np

__all__ = ["approximation_factor", "best_counts", "percent_gain", "performance_profile",
           "performance_ratios"]


def _scalar_or_array(x: np.ndarray) -> float | np.ndarray:
    return float(x) if x.ndim == 0 else x


def _as_makespans(makespans: object) -> np.ndarray:
    a = np.asarray(makespans, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"makespans must be a non-empty 2-D array (instances x heuristics), got {a.shape}")
    if not np.isfinite(a).all() or not (a > 0).all():
        raise ValueError("makespans must be finite and > 0")
    return a


def approximation_factor(makespan, lb):
    """rho = makespan / lower bound (decision A2.4); scalars give a float, arrays broadcast."""
    mk = np.asarray(makespan, dtype=np.float64)
    b = np.asarray(lb, dtype=np.float64)
    if not (b > 0).all():
        raise ValueError("lower bound must be > 0")
    return _scalar_or_array(mk / b)


def performance_ratios(makespans: np.ndarray) -> np.ndarray:
    """gamma[i, h] = makespan[i, h] / min_h makespan[i, h] (decision A2.5)."""
    a = _as_makespans(makespans)
    return a / a.min(axis=1, keepdims=True)


def performance_profile(ratios: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """Fraction of instances with ratio <= tau, for each tau (decision A2.6)."""
    r = np.asarray(ratios, dtype=np.float64)
    t = np.asarray(taus, dtype=np.float64)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"ratios must be a non-empty 1-D array (one per instance), got shape {r.shape}")
    if np.isnan(r).any() or np.isnan(t).any():
        raise ValueError("ratios and taus must not be NaN")
    return np.searchsorted(np.sort(r), t, side="right") / r.size


def best_counts(makespans: np.ndarray, rtol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """(B, EB): per heuristic, instances where it is the unique best / tied for best (decision A2.7)."""
    a = _as_makespans(makespans)
    if not (rtol >= 0):
        raise ValueError(f"rtol must be >= 0, got {rtol!r}")
    best = a.min(axis=1, keepdims=True)
    win = a <= best * (1.0 + rtol)
    unique = win.sum(axis=1) == 1
    b = win[unique].sum(axis=0).astype(np.int64)
    eb = win[~unique].sum(axis=0).astype(np.int64)
    return b, eb


def percent_gain(flow_a, flow_b):
    """%Gain = (1 - flow_a / flow_b) * 100, positive when a is better (decision A2.8)."""
    a = np.asarray(flow_a, dtype=np.float64)
    b = np.asarray(flow_b, dtype=np.float64)
    if not (b != 0).all():
        raise ValueError("flow_b must be non-zero")
    return _scalar_or_array((1.0 - a / b) * 100.0)
