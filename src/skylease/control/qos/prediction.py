"""Completion-time prediction ``t_p = α · t_c(r)/r`` and the fitting of α (decision S15 in
docs/decisions/spequlos.md).

``p = t_c(r)/r`` is the naive prediction at completion ratio ``r``; ``α`` corrects it from past
runs on the same BE-DCI. A prediction succeeds when the actual time lies within ±20 % of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from skylease.control.qos.tail import Times

#: α fitting objectives: L1 (weighted median, the default), least squares, mean of ratios.
FIT_METHODS = ("l1", "lsq", "mean")
#: The success band of a prediction: ±20 %.
TOLERANCE = 0.2


@dataclass(frozen=True, slots=True)
class Prediction:
    """One prediction: made at ``t`` with completion ratio ``r``; ``p = t_c(r)/r``; ``t_pred = α·p``."""

    t: float
    r: float
    p: float
    alpha: float
    t_pred: float
    success_rate: float | None = None


def predict(t_c_r: float, r: float, alpha: float = 1.0) -> float:
    """``α · t_c(r) / r``."""
    if not 0.0 < r <= 1.0:
        raise ValueError(f"completion ratio must be in (0, 1], got {r!r}")
    return alpha * t_c_r / r


def weighted_median(values: Times, weights: Times) -> float:
    """A minimiser of ``Σ w_i |v_i − a|`` (the lower weighted median; weights > 0)."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    if v.size == 0 or v.shape != w.shape:
        raise ValueError("weighted_median needs as many weights as values, at least one")
    if not np.all(w > 0):
        raise ValueError("weights must be > 0")
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    i = int(np.searchsorted(cum, cum[-1] / 2.0, side="left"))
    return float(v[order][min(i, v.size - 1)])


def fit_alpha(p: Times, actual: Times, method: str = "l1") -> float:
    """α from past runs' naive predictions ``p_i`` and actual times ``T_i`` (1 with no history).

    ``l1``: argmin ``Σ |α p_i − T_i|`` = weighted median of ``T_i/p_i`` with weights ``p_i``;
    ``lsq``: ``Σ p_i T_i / Σ p_i²``; ``mean``: mean of ``T_i/p_i``.
    """
    if method not in FIT_METHODS:
        raise ValueError(f"method must be one of {FIT_METHODS}, got {method!r}")
    pa = np.asarray(p, dtype=float)
    ta = np.asarray(actual, dtype=float)
    if pa.shape != ta.shape:
        raise ValueError("p and actual must have the same length")
    if pa.size == 0:
        return 1.0
    if not np.all(pa > 0):
        raise ValueError("naive predictions p must be > 0")
    if method == "l1":
        return weighted_median(ta / pa, pa)
    if method == "lsq":
        return float(np.dot(pa, ta) / np.dot(pa, pa))
    return float(np.mean(ta / pa))


def l1_error(alpha: float, p: np.ndarray, actual: np.ndarray) -> float:
    """``Σ |α p_i − T_i|``, the objective the default fit minimises."""
    return float(np.abs(alpha * np.asarray(p, dtype=float) - np.asarray(actual, dtype=float)).sum())


def succeeded(t_pred: float | Times, actual: float | Times, tolerance: float = TOLERANCE) -> np.ndarray:
    """Whether ``(1−tol)·t_p ≤ T ≤ (1+tol)·t_p`` (elementwise)."""
    tp = np.asarray(t_pred, dtype=float)
    ta = np.asarray(actual, dtype=float)
    return ((1.0 - tolerance) * tp <= ta) & (ta <= (1.0 + tolerance) * tp)


def success_rate(p: Times, actual: Times, alpha: float,
                 tolerance: float = TOLERANCE) -> float:
    """Share of runs whose prediction ``α·p_i`` succeeded (NaN with no runs)."""
    pa = np.asarray(p, dtype=float)
    if pa.size == 0:
        return float("nan")
    return float(succeeded(alpha * pa, actual, tolerance).mean())


def loo_success_rate(p: Times, actual: Times, method: str = "l1",
                     tolerance: float = TOLERANCE) -> float:
    """Leave-one-out: each run predicted with α fitted on the others (S15's variant)."""
    pa = np.asarray(p, dtype=float)
    ta = np.asarray(actual, dtype=float)
    if pa.size == 0:
        return float("nan")
    keep = ~np.eye(pa.size, dtype=bool)
    hits = [bool(succeeded(fit_alpha(pa[keep[i]], ta[keep[i]], method) * pa[i], ta[i], tolerance))
            for i in range(pa.size)]
    return float(np.mean(hits))


@dataclass(frozen=True, slots=True)
class AlphaModel:
    """α fitted in-sample on a history, with that history's success rate (the uncertainty)."""

    alpha: float = 1.0
    success_rate: float | None = None
    runs: int = 0
    method: str = "l1"

    @classmethod
    def fit(cls, p: Times, actual: Times, method: str = "l1",
            tolerance: float = TOLERANCE) -> AlphaModel:
        """Fit α on ``(p_i, T_i)`` and measure its in-sample success rate."""
        alpha = fit_alpha(p, actual, method)
        n = len(p)
        rate = success_rate(p, actual, alpha, tolerance) if n else None
        return cls(alpha, rate, n, method)

    def predict(self, t: float, t_c_r: float, r: float) -> Prediction:
        """The prediction made at time ``t`` from ``t_c(r)``."""
        p = predict(t_c_r, r)
        return Prediction(t, r, p, self.alpha, self.alpha * p, self.success_rate)
