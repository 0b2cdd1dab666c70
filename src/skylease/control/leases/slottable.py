"""The slot table: reservations in time per node (spec 001 §2.4, §4), one VM per node.

Per node, the reservations are kept sorted by start; at most a few hundred are live at once
(one running per node plus the future ones), so queries scan them. The table answers: which
nodes are continuously free on ``[a, b)``, and the change points after ``t``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

from skylease.control.leases.lease import Reservation


class SlotTable:
    """Reservations of ``n_nodes`` single-VM nodes (the paper's P = 1, one VM per node)."""

    def __init__(self, n_nodes: int) -> None:
        if n_nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {n_nodes}")
        self.n_nodes = n_nodes
        self._by_node: list[list[tuple[int, int, Reservation]]] = [[] for _ in range(n_nodes)]
        self.reservations: dict[int, Reservation] = {}  # id(rr) -> rr

    def add(self, rr: Reservation) -> None:
        for k in rr.nodes:
            row = self._by_node[k]
            for _, _, other in row:
                if other.overlaps(rr.start, rr.end):
                    raise ValueError(f"node {k} is already reserved by lease {other.lease.id} on "
                                     f"[{other.start}, {other.end}), lease {rr.lease.id} wants "
                                     f"[{rr.start}, {rr.end})")
            bisect.insort(row, (rr.start, id(rr), rr))
        self.reservations[id(rr)] = rr

    def remove(self, rr: Reservation) -> None:
        for k in rr.nodes:
            row = self._by_node[k]
            row.remove((rr.start, id(rr), rr))
        del self.reservations[id(rr)]

    def reschedule(self, rr: Reservation, start: int, end: int, real_end: int) -> None:
        """Move ``rr`` (same nodes) to ``[start, end)``."""
        self.remove(rr)
        rr.start, rr.end, rr.real_end = start, end, real_end
        self.add(rr)

    def free_on(self, a: int, b: int, nodes: Iterable[int] | None = None,
                ignore: Reservation | None = None) -> list[int]:
        """Nodes (ascending) with no reservation overlapping ``[a, b)``."""
        out = []
        key = (b,)
        for k in range(self.n_nodes) if nodes is None else nodes:
            row = self._by_node[k]
            if ignore is not None:
                if all(rr is ignore or not rr.overlaps(a, b) for _, _, rr in row):
                    out.append(k)
                continue
            # a node's reservations never overlap, so sorted by start they are sorted by end too:
            # only the last one starting before b can reach into [a, b)
            i = bisect.bisect_left(row, key) - 1
            if i < 0 or row[i][2].end <= a:
                out.append(k)
        return out

    def on_node(self, k: int) -> list[Reservation]:
        """Node ``k``'s reservations, by start."""
        return [rr for _, _, rr in self._by_node[k]]

    def free_count_at(self, t: int) -> int:
        return len(self.free_on(t, t + 1))

    def changepoints_after(self, t: int, nodes: Iterable[int] | None = None,
                           ignore: Reservation | None = None) -> list[int]:
        """Sorted distinct reservation starts and ends (planned, not real) after ``t``."""
        rrs = (self.reservations.values() if nodes is None
               else {id(rr): rr for k in nodes for _, _, rr in self._by_node[k]}.values())
        pts = {p for rr in rrs if rr is not ignore for p in (rr.start, rr.end) if p > t}
        return sorted(pts)

    def next_changepoint(self, t: int) -> float:
        """The next start, end or real end after ``t`` (what drives the simulation clock)."""
        best = math.inf
        for rr in self.reservations.values():
            for p in (rr.start, rr.end, rr.real_end):
                if t < p < best:
                    best = p
        return best
