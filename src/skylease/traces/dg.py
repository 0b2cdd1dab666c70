"""Parametric desktop-grid availability, fitted to the SpeQuloS paper's Tables 2 and 3
(decision S19 in docs/decisions/spequlos.md).

The FTA's SETI@home and Notre Dame Condor traces are not available here, so (decision S19) each node is
an independent **alternating renewal process**: available for a duration drawn from ``F_up``,
then unavailable for a duration drawn from ``F_down``, and so on.

Distribution [R]: a **split log-normal** fitted to the three quartiles of Table 3. With
``q25, q50, q75`` the quartiles and ``z = 0.6745`` the upper quartile of N(0, 1),
``log X = log q50 + Z * s``, ``Z ~ N(0, 1)``, where ``s = log(q50/q25)/z`` for ``Z < 0`` and
``s = log(q75/q50)/z`` for ``Z > 0``. It is a log-normal whose two halves have their own spread,
so it reproduces all three quartiles exactly (a plain log-normal cannot: the paper's quartiles
are skewed in log space, e.g. nd's unavailability 640/960/1920 s). Durations are capped at
``max_duration`` (default 60 days) so the extreme upper tail (log-spread up to 3.4) cannot produce
absurd values; the cap is far above every q75 and leaves the quartiles unchanged.

Start: every node starts its process ``burn_in`` (default 30 days) before time 0, in the up state,
and the window ``[0, duration_s)`` is cut from it, so the state at time 0 is close to stationary.

Generators and the statistics they match (checked by ``tests/traces/test_dg.py`` over a large
sample, with :func:`~skylease.traces.avail.trace_stats`):

* :func:`nd_like` -- Notre Dame Condor: the six quartiles of Table 3 (availability 952/3840/26562 s,
  unavailability 640/960/1920 s) within 15 %, and Table 2's mean number of available nodes (180)
  within 10 % when ``n_nodes`` is left at its default :data:`ND_DEFAULT_NODES` (183: the fitted
  processes are available 98.5 % of the time). Not matched: Table 2's std/min/max (the paper's std
  4.129 is inconsistent with min 77 / max 501, S19; node arrivals and departures are not modelled,
  so our count varies much less).
* :func:`seti_like` -- SETI@home: the six quartiles of Table 3 (61/531/5407 s and 174/501/3078 s)
  within 15 %, and the mean of Table 2 (24391) within 10 % with the default
  :data:`SETI_DEFAULT_NODES` (30300 nodes, available 80 % of the time), plus a **24-hour cycle**
  (Table 5: cycles = yes): durations drawn at time ``t`` have their log shifted by
  ``-+kappa * cos(2 pi (t - t_peak) / 1 day)`` (ups shorter and downs longer around the daily
  trough at ``t_peak = 0``; ``kappa = 0.5``), and the spreads of the split log-normals are reduced
  to ``sqrt(s**2 - kappa**2 / 2)`` so the mixture over the day keeps the quartiles. The cycle is
  real (the correlation of ``N(t)`` with ``cos(2 pi t / day)`` is about -0.4) but **weak**: Table
  2's std/mean is 0.28 (min 15868, max 31092), ours about 0.01. A larger ``kappa`` (or a nightly
  off window) moves the quartiles beyond 15 % long before it gives the paper's swing, because the
  fitted durations give each node only about one down period per day, so any night-off rule would
  dominate the unavailability durations. Nodes share one time zone. Not matched: Table 2's
  std/min/max.

Every random choice comes from ``seed`` (an int, None for fresh entropy, or a numpy Generator).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from skylease.model.availability import AvailabilityTrace
from skylease.traces.tables import DAY, PAPER_TABLES

__all__ = [
    "ND_DEFAULT_NODES",
    "SETI_DEFAULT_NODES",
    "SplitLogNormal",
    "mean_cycle_s",
    "nd_like",
    "renewal_trace",
    "seti_like",
]

_Z75 = 0.6744897501960817
_MAX_ITER = 1_000_000


class SplitLogNormal:
    """``log X = log q50 + s * Z`` with ``s = s_lo`` for ``Z < 0`` and ``s_hi`` for ``Z > 0``."""

    def __init__(self, q25: float, q50: float, q75: float, *, extra_var: float = 0.0) -> None:
        if not 0 < q25 <= q50 <= q75:
            raise ValueError(f"quartiles must satisfy 0 < q25 <= q50 <= q75, got {q25}, {q50}, {q75}")
        self.q = (float(q25), float(q50), float(q75))
        lo = math.log(q50 / q25) / _Z75
        hi = math.log(q75 / q50) / _Z75
        self.s_lo = math.sqrt(max(lo * lo - extra_var, 0.0))
        self.s_hi = math.sqrt(max(hi * hi - extra_var, 0.0))
        self.log_median = math.log(q50)

    def sample_log(self, rng: np.random.Generator, size: int) -> np.ndarray:
        z = rng.standard_normal(size)
        return self.log_median + z * np.where(z < 0, self.s_lo, self.s_hi)


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def renewal_trace(
    n_nodes: int,
    duration_s: float,
    up: SplitLogNormal,
    down: SplitLogNormal,
    seed: int | np.random.Generator | None = None,
    *,
    kappa: float = 0.0,
    t_peak: float = 0.0,
    period: float = DAY,
    burn_in: float = 30 * DAY,
    max_duration: float = 60 * DAY,
    name: str = "renewal",
) -> AvailabilityTrace:
    """``n_nodes`` independent alternating renewal processes over ``[0, duration_s)``.

    With ``kappa > 0`` a duration drawn at time ``t`` has its log shifted by
    ``-kappa*c`` (up) or ``+kappa*c`` (down), ``c = cos(2 pi (t - t_peak) / period)``: nodes
    are least available around ``t_peak`` (mod ``period``).
    """
    if n_nodes < 0 or not duration_s > 0:
        raise ValueError("n_nodes must be >= 0 and duration_s > 0")
    rng = _rng(seed)
    log_cap = math.log(max_duration)
    t = np.full(n_nodes, -float(burn_in))
    active = np.arange(n_nodes)
    out_node: list[np.ndarray] = []
    out_s: list[np.ndarray] = []
    out_e: list[np.ndarray] = []
    two_pi = 2 * math.pi / period
    for _ in range(_MAX_ITER):
        if not len(active):
            break
        ta = t[active]
        shift = kappa * np.cos(two_pi * (ta - t_peak)) if kappa else 0.0
        d_up = np.exp(np.minimum(up.sample_log(rng, len(active)) - shift, log_cap))
        t_mid = ta + d_up
        shift2 = kappa * np.cos(two_pi * (t_mid - t_peak)) if kappa else 0.0
        d_down = np.exp(np.minimum(down.sample_log(rng, len(active)) + shift2, log_cap))
        s = np.maximum(ta, 0.0)
        e = np.minimum(t_mid, duration_s)
        keep = e > s
        out_node.append(active[keep])
        out_s.append(s[keep])
        out_e.append(e[keep])
        t[active] = t_mid + d_down
        active = active[t[active] < duration_s]
    node = np.concatenate(out_node) if out_node else np.empty(0, np.int64)
    s_all = np.concatenate(out_s) if out_s else np.empty(0)
    e_all = np.concatenate(out_e) if out_e else np.empty(0)
    order = np.lexsort((s_all, node))
    node, s_all, e_all = node[order], s_all[order], e_all[order]
    bounds = np.searchsorted(node, np.arange(n_nodes + 1))
    meta = {
        "format": "split-lognormal-renewal",
        "up_quartiles": up.q,
        "down_quartiles": down.q,
        "kappa": kappa,
        "burn_in": burn_in,
        "max_duration": max_duration,
    }
    # nodes checked all at once, as views of the flat arrays (30,300 one by one cost 0.4 s)
    return AvailabilityTrace.from_flat(name, s_all, e_all, bounds, 0.0, float(duration_s), None, meta)


def _table3(trace: str, kappa: float) -> tuple[SplitLogNormal, SplitLogNormal]:
    row = PAPER_TABLES[trace]
    extra = kappa * kappa / 2
    up = SplitLogNormal(row["av_q25"], row["av_q50"], row["av_q75"], extra_var=extra)
    down = SplitLogNormal(row["unav_q25"], row["unav_q50"], row["unav_q75"], extra_var=extra)
    return up, down


#: Node count giving Table 2's mean of 180 available nodes (measured availability ratio 0.985).
ND_DEFAULT_NODES = 183
#: Node count giving Table 2's mean of 24391 available nodes (measured availability ratio 0.80).
SETI_DEFAULT_NODES = 30300
SETI_KAPPA = 0.5


@functools.cache
def mean_cycle_s(trace: str) -> float:
    """Mean seconds of one availability period plus one unavailability period of :func:`nd_like`
    (``trace="nd"``) or :func:`seti_like` (``"seti"``), durations capped as :func:`renewal_trace`
    caps them: the exact mean of the capped split log-normals (the mean, not one trace's; 100,000
    draws gave it within 1 %, for 5 ms of every call that sizes a trace)."""
    up, down = _table3(trace, SETI_KAPPA if trace == "seti" else 0.0)
    cap = math.log(60 * DAY)
    return _capped_mean(up, cap) + _capped_mean(down, cap)


def _capped_mean(d: SplitLogNormal, cap: float) -> float:
    """E[exp(min(X, cap))] for ``X = log_median + s * Z``, ``s = s_lo`` below the median, ``s_hi`` above."""

    def phi(x: float) -> float:  # standard normal CDF
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    total = 0.0
    for s, lo, hi in ((d.s_lo, -math.inf, 0.0), (d.s_hi, 0.0, math.inf)):
        if s == 0.0:
            total += math.exp(min(d.log_median, cap)) * (phi(hi) - phi(lo))
            continue
        z = (cap - d.log_median) / s  # above z, X is capped
        top = min(hi, z)
        if top > lo:  # E[e^(m + sZ); lo < Z < top] = e^(m + s^2/2) (Phi(top - s) - Phi(lo - s))
            total += math.exp(d.log_median + s * s / 2) * (phi(top - s) - phi(lo - s))
        total += math.exp(cap) * max(phi(hi) - phi(max(lo, z)), 0.0)
    return total


def nd_like(
    n_nodes: int | None = None,
    duration_s: float = PAPER_TABLES["nd"]["length_days"] * DAY,
    seed: int | np.random.Generator | None = None,
) -> AvailabilityTrace:
    """Notre-Dame-Condor-like availability (module docstring: what it matches)."""
    up, down = _table3("nd", 0.0)
    n = ND_DEFAULT_NODES if n_nodes is None else n_nodes
    return renewal_trace(n, duration_s, up, down, seed, name="nd")


def seti_like(
    n_nodes: int | None = None,
    duration_s: float = PAPER_TABLES["seti"]["length_days"] * DAY,
    seed: int | np.random.Generator | None = None,
    *,
    kappa: float = SETI_KAPPA,
) -> AvailabilityTrace:
    """SETI@home-like availability with a 24 h cycle (module docstring: what it matches)."""
    up, down = _table3("seti", kappa)
    n = SETI_DEFAULT_NODES if n_nodes is None else n_nodes
    return renewal_trace(n, duration_s, up, down, seed, kappa=kappa, t_peak=0.0, name="seti")
