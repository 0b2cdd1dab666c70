"""A trace flattened for the DG simulators: every node's intervals in one node-major array.

``starts[j], ends[j]`` for ``j`` in ``lo[i]:hi[i]`` are node ``i``'s availability intervals
(clipped to the trace window). :meth:`FlatTrace.first_after` finds, for many nodes at once, the
first interval ending after ``t`` with one ``searchsorted`` on the key ``node * span + end``.
Flattening costs O(intervals) once per trace (cached by :func:`flatten`), not per run.

ON offsets ([RC], spec §1.2): a worker comes ON ``offset`` seconds after its interval starts,
``offset`` uniform in ``0 .. min(300, end - start - 1)``. The offsets are a counter-based hash
(splitmix64) of the run's key and the interval's identity (node, rank in the node): any subset
can be computed on demand, in any order, and the value never depends on which events ran before
(the fairness rule).
"""

from __future__ import annotations

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
        counts = np.fromiter((len(a) for a in trace.nodes), np.int64, n)
        if n and counts.sum():
            s = np.concatenate([a.starts for a in trace.nodes])
            e = np.concatenate([a.ends for a in trace.nodes])
        else:
            s = np.empty(0)
            e = np.empty(0)
        node = np.repeat(np.arange(n, dtype=np.int64), counts)
        s = np.clip(s, trace.start, trace.end)
        e = np.clip(e, trace.start, trace.end)
        keep = e > s
        s, e, node = s[keep], e[keep], node[keep]
        self.name = trace.name
        self.n_nodes = n
        self.t_start = float(trace.start)
        self.t_end = float(trace.end)
        self.starts = s
        self.ends = e
        bounds = np.searchsorted(node, np.arange(n + 1))
        self.lo = bounds[:-1].astype(np.int64)
        self.hi = bounds[1:].astype(np.int64)
        # interval identity for the ON-offset hash: (node, rank within the node), so a node's
        # offsets do not change when other nodes or its own later intervals change
        self.ident = (node.astype(np.uint64) << np.uint64(32)) | (
            np.arange(len(s), dtype=np.int64) - self.lo[node]
        ).astype(np.uint64)
        self.span = (self.t_end - self.t_start) + 1.0
        self.key = node * self.span + (e - self.t_start)

    def __len__(self) -> int:
        return len(self.starts)

    def first_after(self, nodes: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """Per node, the index of its first interval with ``end > t`` (``hi[node]`` if none)."""
        q = nodes * self.span + (np.asarray(t, float) - self.t_start)
        j = np.searchsorted(self.key, q, side="right").astype(np.int64)
        lo, hi = self.lo[nodes], self.hi[nodes]
        j = np.clip(j, lo, hi)
        ends = self.ends
        n_end = len(ends)
        # The float key can be off by one interval when two times differ by < ~1e-4 s: fix it.
        for _ in range(2):
            jc = np.minimum(j, n_end - 1) if n_end else j
            fwd = (j < hi) & (ends[jc] <= t) if n_end else np.zeros(len(j), bool)
            if not fwd.any():
                break
            j = j + fwd
        if n_end:
            jp = np.maximum(j - 1, 0)
            back = (j > lo) & (ends[jp] > t)
            j = j - back
        return j

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
    u = mix64(flat.ident[j] ^ np.uint64(key)) >> np.uint64(11)
    return s + np.floor(u.astype(float) / _TWO53 * (width + 1.0))


def on_offset_scalar(flat: FlatTrace, j: int, t_sub: float, key: int, max_offset: float) -> float:
    s = float(flat.starts[j])
    if s < t_sub:
        s = t_sub
    width = math.floor(float(flat.ends[j]) - s - 1.0)
    width = 0.0 if width < 0 else (max_offset if width > max_offset else width)
    u = mix64_scalar(int(flat.ident[j]) ^ key) >> 11
    return s + math.floor(u / _TWO53 * (width + 1.0))
