"""Availability of one node as sorted, non-overlapping [start, end) intervals in seconds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Availability:
    """When a node is available. ``starts[i] < ends[i] <= starts[i+1]`` (touching is merged)."""

    starts: np.ndarray
    ends: np.ndarray

    def __post_init__(self) -> None:
        s = np.ascontiguousarray(self.starts, dtype=float)
        e = np.ascontiguousarray(self.ends, dtype=float)
        if s.shape != e.shape or s.ndim != 1:
            raise ValueError("starts and ends must be 1-D arrays of the same length")
        if not (np.isfinite(s).all() and np.isfinite(e[:-1]).all()):
            raise ValueError("interval bounds must be finite (only the last end may be inf)")
        if (e <= s).any():
            i = int(np.argmax(e <= s))
            raise ValueError(f"interval {i} is empty or reversed: [{s[i]}, {e[i]})")
        if (s[1:] < e[:-1]).any():
            i = int(np.argmax(s[1:] < e[:-1])) + 1
            raise ValueError(f"interval {i} starts before interval {i - 1} ends (unsorted or overlapping)")
        object.__setattr__(self, "starts", s)
        object.__setattr__(self, "ends", e)

    @classmethod
    def from_intervals(cls, intervals: Iterable[tuple[float, float]]) -> Availability:
        """Sort and merge arbitrary intervals (overlapping or touching ones are joined)."""
        iv = sorted((float(a), float(b)) for a, b in intervals if b > a)
        merged: list[list[float]] = []
        for a, b in iv:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        arr = np.array(merged, float).reshape(-1, 2)
        return cls(arr[:, 0], arr[:, 1])

    @classmethod
    def always(cls) -> Availability:
        return cls(np.array([0.0]), np.array([np.inf]))

    def __len__(self) -> int:
        return len(self.starts)

    def is_available(self, t: float) -> bool:
        i = int(np.searchsorted(self.starts, t, side="right")) - 1
        return i >= 0 and t < self.ends[i]

    def next_change(self, t: float) -> float:
        """The first moment after ``t`` at which availability flips (inf if never)."""
        i = int(np.searchsorted(self.starts, t, side="right")) - 1
        if i >= 0 and t < self.ends[i]:
            return float(self.ends[i])
        return float(self.starts[i + 1]) if i + 1 < len(self.starts) else float("inf")

    def available_time(self, t0: float, t1: float) -> float:
        """Seconds available within [t0, t1)."""
        lo = np.clip(self.starts, t0, t1)
        hi = np.clip(self.ends, t0, t1)
        return float((hi - lo).sum())
