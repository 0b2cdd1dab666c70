"""Advance-reservation injection (decision H16 in docs/decisions/haizea.md): the generator behind Haizea's
72 ``.lwf`` files.

A workload ``[ρ/δH/ν]`` adds ARs whose node-seconds are a share ρ of the cluster over the trace:
durations uniform on ``[δ·3600 − 1800, δ·3600 + 1800]`` s, node counts uniform on the size range
ν, each requested 24 h ahead; requests are spaced by a discrete-uniform interval around
``i = int(T / numreqs)`` (±3600 s, so it may be negative), and the whole draw is repeated until the
realised share is within 1 % of ρ ("guaranteeAvg"). Requests of the first day are submitted at
0 with less notice. The original files are not reproducible draw for draw (their generator's
random stream is lost); counts and shares match within sampling noise (Appendix B).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from skylease.traces.lwf import LWF_FIELDS

__all__ = ["SIZES", "generate_ars", "injection_name", "nominal_interval", "write_plain_lwf"]

#: Node-count ranges of the size classes (small, medium, large).
SIZES: dict[str, tuple[int, int]] = {"small": (1, 24), "medium": (25, 48), "large": (49, 72)}
_SIZE_TAG = {"small": "1small", "medium": "2medium", "large": "3large"}

T_30DAYS = 2_592_000
NOTICE_S = 86_400
CLUSTER_NODES = 144


def injection_name(rho: int, delta_h: int, size: str) -> str:
    """The original file name of ``[rho %/delta_h H/size]``, e.g. ``work_20-dur_3h-size_2medium.lwf``."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}: small, medium or large")
    return f"work_{rho:02d}-dur_{delta_h}h-size_{_SIZE_TAG[size]}.lwf"


def _mean_nodes(size: str) -> float:
    lo, hi = SIZES[size]
    return (lo + hi) / 2


def nominal_interval(rho: float, delta_h: int, size: str, *, nodes: int = CLUSTER_NODES) -> int:
    """``i = int(T / numreqs) = int(avg_n·avg_d / (W·ρ))`` with ``numreqs = T·W·ρ / (avg_n·avg_d)`` (ρ
    as a fraction). This gives Appendix B's interval for 70 of the 72 files; the other two
    ([15 %/3H/large], [30 %/3H/large]) are 1 s lower there, a floating-point rounding of the
    original we could not pin down."""
    return int(_mean_nodes(size) * delta_h * 3600 / (nodes * rho))


def generate_ars(rho: float, delta_h: int, size: str, seed: int | np.random.Generator, *,
                 horizon: int = T_30DAYS, nodes: int = CLUSTER_NODES, notice: int = NOTICE_S,
                 tolerance: float = 0.01, max_tries: int = 10_000) -> pd.DataFrame:
    """ARs of ``[ρ/δH/ν]`` as :func:`~skylease.traces.lwf.read_plain_lwf` rows (ρ as a fraction,
    e.g. 0.2), sorted by submission; 1 CPU and 1024 MB per node, ``real_duration == duration``."""
    if not 0 < rho < 1:
        raise ValueError(f"rho must be a fraction in (0, 1), got {rho}")
    if delta_h < 1:
        raise ValueError(f"delta_h must be >= 1 hour, got {delta_h}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    lo_n, hi_n = SIZES[size]
    avg_n, avg_d = _mean_nodes(size), delta_h * 3600
    numreqs = horizon * nodes * rho / (avg_n * avg_d)
    i = nominal_interval(rho, delta_h, size, nodes=nodes)
    for _ in range(max_tries):
        sub = _submissions(rng, i, horizon, notice, avg_d)
        n = len(sub)
        dur = rng.integers(avg_d - 1800, avg_d + 1801, size=n)
        nn = rng.integers(lo_n, hi_n + 1, size=n)
        if abs(float(np.sum(dur * nn)) / (numreqs * avg_d * avg_n) - 1) < tolerance:
            break
    else:
        raise RuntimeError(f"no draw within {tolerance:.0%} of rho after {max_tries} tries")
    df = pd.DataFrame({"submit": np.maximum(sub, 0), "start": sub + notice, "duration": dur,
                       "real_duration": dur, "nodes": nn, "cpu": 1, "memory": 1024, "disk": 0,
                       "image": "NONE.img", "image_size": 600}, columns=list(LWF_FIELDS))
    return df.sort_values(["submit", "start"], kind="stable").reset_index(drop=True)


def _submissions(rng: np.random.Generator, i: int, horizon: int, notice: int, avg_d: int) -> np.ndarray:
    """``t = −H; while t + H + avg_d < T: emit t; t += U{i−3600..i+3600}`` (the walk may step back)."""
    if i + 3600 <= 0:
        raise ValueError(f"the request interval {i} s never advances: rho is too high for these leases")
    batch = int(2 * (horizon + notice) / max(i, 1)) + 100
    steps = np.empty(0, dtype=np.int64)
    while True:
        steps = np.concatenate([steps, rng.integers(i - 3600, i + 3601, size=batch)])
        t = -notice + np.concatenate([[0], np.cumsum(steps)])
        over = np.flatnonzero(t + notice + avg_d >= horizon)
        if len(over):
            return t[: over[0]]


def write_plain_lwf(rows: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write rows in the plain LWF format (the image name quoted, as in the original files)."""
    lines = [f"{r.submit} {r.start} {r.duration} {r.real_duration} {r.nodes} {r.cpu} {r.memory} {r.disk} "
             f"'{r.image}' {r.image_size}\n" for r in rows.itertuples(index=False)]
    tmp = Path(path).with_suffix(Path(path).suffix + ".tmp")
    tmp.write_text("".join(lines))
    tmp.replace(path)
