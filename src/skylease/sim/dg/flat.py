"""A trace flattened for the DG simulators: every node's intervals in one node-major array.

``starts[j], ends[j]`` for ``j`` in ``lo[i]:hi[i]`` are node ``i``'s availability intervals
(clipped to the trace window). :meth:`FlatTrace.first_after` finds, for many nodes at once, the
first interval ending after ``t`` by a binary search run on all of them together, within each
node's own ``lo:hi``. Flattening costs O(intervals) once per trace (cached by :func:`flatten`),
not per run, and shares the trace's arrays when they already lie in its window: the flat trace
holds nothing else of the trace's size (no per-interval key or identity array: on the 30,300-node
``seti`` trace each would be 31 MB).

ON offsets ([RC], decision S11): a worker comes ON ``offset`` seconds after its interval starts,
``offset`` uniform in ``0 .. min(300, end - start - 1)``. The offsets are a counter-based hash
(splitmix64) of the run's key and the interval's identity (node, rank in the node): any subset
can be computed on demand, in any order, and the value never depends on which events ran before
(the fairness rule).
"""

from __future__ import annotations

import bisect
import math
import weakref

import numpy as np

from skylease.model.availability import AvailabilityTrace

__all__ = ["FlatTrace", "flatten", "mix64", "mix64_scalar"]

_M64 = (1 << 64) - 1
_GOLD = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB
_TWO53 = float(1 << 53)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 of a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(_GOLD)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_C1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_C2)
        return z ^ (z >> np.uint64(31))


def mix64_scalar(x: int) -> int:
    z = (x + _GOLD) & _M64
    z = ((z ^ (z >> 30)) * _C1) & _M64
    z = ((z ^ (z >> 27)) * _C2) & _M64
    return z ^ (z >> 31)


class FlatTrace:
    """Node-major flat intervals of an :class:`AvailabilityTrace` (see the module docstring)."""

    def __init__(self, trace: AvailabilityTrace) -> None:
        n = trace.n_nodes
        s, e, bounds = trace.flat_intervals()
        t0, t1 = float(trace.start), float(trace.end)
        # Clip and drop emptied intervals only when needed: a generated or cached trace already
        # lies in its window, and its arrays are then shared, not copied (peak memory).
        # Every interval has start < end (Availability's rule), so the window holds them all when
        # the least start and the greatest end lie in it; only clipping can empty an interval.
        if len(s) and (s.min() < t0 or e.max() > t1):
            s = np.clip(s, t0, t1)
            e = np.clip(e, t0, t1)
            keep = e > s
            if not keep.all():
                node = np.repeat(np.arange(n, dtype=np.int64), np.diff(bounds))[keep]
                s, e = s[keep], e[keep]
                bounds = np.searchsorted(node, np.arange(n + 1))
        self.name = trace.name
        self.n_nodes = n
        self.t_start = float(trace.start)
        self.t_end = float(trace.end)
        self.starts = s
        self.ends = e
        self.lo = bounds[:-1].astype(np.int64)
        self.hi = bounds[1:].astype(np.int64)
        self._lo_l = self.lo.tolist()
        self._hi_l = self.hi.tolist()

    def ident(self, j: np.ndarray) -> np.ndarray:
        """Identity of intervals ``j`` for the ON-offset hash: ``node << 32 | rank within the node``,
        so a node's offsets do not change when other nodes or its own later intervals change."""
        node = np.searchsorted(self.hi, j, side="right")  # the node whose lo <= j < hi
        return (node.astype(np.uint64) << np.uint64(32)) | (j - self.lo[node]).astype(np.uint64)

    def ident_scalar(self, j: int) -> int:
        node = bisect.bisect_right(self._hi_l, j)
        return (node << 32) | (j - self._lo_l[node])

    def __len__(self) -> int:
        return len(self.starts)

    def first_after(self, nodes: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """Per node, the index of its first interval with ``end > t`` (``hi[node]`` if none)."""
        lo, hi = self.lo[nodes], self.hi[nodes]
        ends = self.ends
        if not len(ends):
            return hi
        last = len(ends) - 1
        t = np.asarray(t, float)
        # bisection of every node's lo:hi at once: the first j with ends[j] > t
        while True:
            open_ = lo < hi
            if not open_.any():
                return lo
            mid = (lo + hi) >> 1
            right = open_ & (ends[np.minimum(mid, last)] <= t)
            lo = np.where(right, mid + 1, lo)
            hi = np.where(open_ & ~right, mid, hi)

    def first_after_scalar(self, node: int, t: float) -> int:
        lo, hi = int(self.lo[node]), int(self.hi[node])
        return lo + int(np.searchsorted(self.ends[lo:hi], t, side="right"))


_CACHE: dict[int, tuple[weakref.ref, FlatTrace]] = {}


def flatten(trace: AvailabilityTrace | FlatTrace) -> FlatTrace:
    """The :class:`FlatTrace` of ``trace``, cached while the trace object lives."""
    if isinstance(trace, FlatTrace):
        return trace
    hit = _CACHE.get(id(trace))
    if hit is not None and hit[0]() is trace:
        return hit[1]
    flat = FlatTrace(trace)
    key = id(trace)
    _CACHE[key] = (weakref.ref(trace, lambda _r, k=key: _CACHE.pop(k, None)), flat)
    return flat


def on_offsets(flat: FlatTrace, j: np.ndarray, t_sub: float, key: int, max_offset: float) -> np.ndarray:
    """ON time of intervals ``j`` for a run submitted at ``t_sub`` with hash ``key``."""
    s = np.maximum(flat.starts[j], t_sub)
    width = np.clip(np.floor(flat.ends[j] - s - 1.0), 0.0, max_offset)
    u = mix64(flat.ident(j) ^ np.uint64(key)) >> np.uint64(11)
    return s + np.floor(u.astype(float) / _TWO53 * (width + 1.0))


def on_offset_scalar(flat: FlatTrace, j: int, t_sub: float, key: int, max_offset: float) -> float:
    s = float(flat.starts[j])
    if s < t_sub:
        s = t_sub
    width = math.floor(float(flat.ends[j]) - s - 1.0)
    width = 0.0 if width < 0 else (max_offset if width > max_offset else width)
    u = mix64_scalar(flat.ident_scalar(j) ^ key) >> 11
    return s + math.floor(u / _TWO53 * (width + 1.0))
