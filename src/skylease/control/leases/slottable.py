"""The slot table: resource reservations in time per node, with capacity checks (decisions H3, H4 in
docs/decisions/haizea.md).

Every node has a capacity :class:`ResourceTuple`; a reservation (RR) reserves ``rr.usage`` on each
of its nodes over ``[start, end)``. :meth:`SlotTable.add` refuses an RR that would exceed a node's
capacity at any instant. Indexes, all kept sorted with ``bisect`` so that no query scans every
reservation:

* per node, the RRs by start (a node holds its running RR plus a few future ones);
* the planned change points (starts and ends, as a multiset) and the real ends (``real_end``);
* the RRs starting and ending (really) at each time, for the event step.

Queries answer the scheduler's questions: how long a request fits continuously on a node from
``t`` (:meth:`SlotTable.free_until`), the availability window at ``t``
(:class:`AvailabilityWindow`: "continuously free from ``t`` until ``x``", decision H4), the change
points after ``t`` (all, or on some nodes), and the next event time.

A node can be **down** (:meth:`SlotTable.set_down`, docs/decisions/host-failures.md): it then hosts
nothing new (every fit query answers "not free" there, and :meth:`SlotTable.add` refuses it) while
its configured capacity stays what it is; the reservations already on it stay until the scheduler
takes them out.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from skylease.control.leases.lease import BLUE_HORIZON_NODE, Reservation, ResourceTuple

Skip = Callable[[Reservation], bool]

_INF = math.inf


def _start_key(rr: Reservation) -> int:
    return rr.start


class _Multiset:
    """Sorted distinct integers with multiplicities (the change points)."""

    __slots__ = ("count", "keys")

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.count: dict[int, int] = {}

    def add(self, p: int) -> None:
        c = self.count.get(p, 0)
        if c == 0:
            bisect.insort(self.keys, p)
        self.count[p] = c + 1

    def remove(self, p: int) -> None:
        c = self.count[p] - 1
        if c == 0:
            del self.count[p]
            del self.keys[bisect.bisect_left(self.keys, p)]
        else:
            self.count[p] = c

    def after(self, t: float) -> list[int]:
        return self.keys[bisect.bisect_right(self.keys, t):]

    def next_after(self, t: float) -> float:
        i = bisect.bisect_right(self.keys, t)
        return self.keys[i] if i < len(self.keys) else _INF

    def last_by(self, t: float) -> float:
        i = bisect.bisect_right(self.keys, t)
        return self.keys[i - 1] if i else -_INF


@dataclass(frozen=True)
class AvailabilityWindow:
    """Which nodes can host one more VM of ``request`` at ``t``, and until when, continuously.

    A node that becomes too full later is lost for the rest of the window even if it frees up
    again (decision H4, "continuously free from ``t`` until ``x``").
    """

    t: int
    request: ResourceTuple
    until: dict[int, float]  # node -> the first time after t it can no longer host the VM

    def nodes_free_until(self, x: float) -> list[int]:
        """Nodes (ascending id) free on ``[t, x)``."""
        return sorted(k for k, u in self.until.items() if u >= x)

    def restricted(self, nodes: set[int]) -> AvailabilityWindow:
        """The window on ``nodes`` only."""
        return AvailabilityWindow(self.t, self.request, {k: u for k, u in self.until.items() if k in nodes})

    @cached_property
    def _ascending(self) -> list[float]:
        # the window is cached per table version and asked by many queued leases: sorted once
        return sorted(self.until.values())

    def count_free_until(self, x: float) -> int:
        """How many nodes are free on ``[t, x)``."""
        asc = self._ascending
        return len(asc) - bisect.bisect_left(asc, x)

    def latest_end(self, n: int, maxend: float) -> float:
        """The ``end`` of :meth:`find_nodes`, without choosing the nodes (a scheduler that cannot
        use a shorter stay asks this first: most of its tries end there)."""
        if len(self.until) < n:
            return self.t
        return min(maxend, self._ascending[-n])

    def find_nodes(self, n: int, maxend: float) -> tuple[float, list[int]]:
        """``(end, nodes)``: the latest ``end <= maxend`` such that ``n`` nodes stay free on
        ``[t, end)``, and those nodes (ascending id); ``end == t`` when fewer than ``n`` are free at
        ``t`` (decision H9, the 2008 code's ``find_nodes``).

        When ``end == maxend`` the nodes are all those free until ``maxend``. When ``end < maxend``
        (the lease would have to be suspended at ``end``) they are exactly the ``n`` nodes free
        longest, as the 2008 ``AvailabilityWindow.findPhysNodesForVMs`` leaves them: its scan in
        time order (ties in ascending node id) drops nodes until the ``n``-th would go, so among
        the nodes that stop being free at ``end`` it keeps the highest ids (decision H9: "the
        nodes that stay free longest"). The others stay free for the leases after it."""
        if len(self.until) < n:
            return self.t, []
        end = self.latest_end(n, maxend)
        if end >= maxend:
            return end, self.nodes_free_until(end)
        return end, sorted(sorted(self.until, key=lambda k: (-self.until[k], -k))[:n])


class SlotTable:
    """Reservations of ``n_nodes`` nodes, each of capacity ``capacity`` (one tuple, or one per node)."""

    def __init__(self, n_nodes: int, capacity: ResourceTuple | Sequence[ResourceTuple] = BLUE_HORIZON_NODE
                 ) -> None:
        if n_nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {n_nodes}")
        if isinstance(capacity, ResourceTuple):
            caps = [capacity] * n_nodes
        else:
            caps = [ResourceTuple(*c) for c in capacity]
            if len(caps) != n_nodes:
                raise ValueError(f"{len(caps)} node capacities for {n_nodes} nodes")
        self.n_nodes = n_nodes
        self.capacity: list[ResourceTuple] = caps
        self._rows: list[list[Reservation]] = [[] for _ in range(n_nodes)]
        self._points = _Multiset()  # planned starts and ends
        self._real_ends = _Multiset()
        self._ends = _Multiset()  # planned ends only (no transfer markers)
        self.freed = 0  # nodes of every RR removed so far (the scheduler's stale-fit test)
        self._starting: dict[int, list[Reservation]] = {}
        self._ending: dict[int, list[Reservation]] = {}
        self.reservations: dict[int, Reservation] = {}  # id(rr) -> rr
        self.version = 0  # bumped by every change (caches key on it)
        self._uniform = all(c == caps[0] for c in caps)
        self._usages: dict[ResourceTuple, int] = {}  # distinct per-VM usages in the table
        self._exclusive_cache: dict[ResourceTuple, bool] = {}
        self._window_cache: dict[tuple[int, ResourceTuple], AvailabilityWindow] = {}
        self._cpu_last: tuple[int, int, int | None] | None = None  # has_free_cpu's last answer
        self.down: set[int] = set()  # nodes that host nothing new (a host that stopped answering)

    # -- changes ------------------------------------------------------------------------------------
    def add(self, rr: Reservation) -> None:
        """Insert ``rr``; raises ``ValueError`` if a node would be over capacity during it (a
        node that is down has no room for anything)."""
        self._insert(rr, check=True)

    def _insert(self, rr: Reservation, check: bool) -> None:
        if rr.end <= rr.start or not rr.start <= rr.real_end <= rr.end:
            raise ValueError(f"bad reservation times [{rr.start}, {rr.end}) real end {rr.real_end}")
        for k in set(rr.nodes) if check else ():
            if k in self.down:
                raise ValueError(f"node {k} cannot host lease {rr.lease.id} on [{rr.start}, {rr.end}): "
                                 "it is down")
            need = rr.usage
            for _ in range(rr.nodes.count(k) - 1):
                need = need.plus(rr.usage)
            if self.free_until(k, rr.start, need) < rr.end:
                raise ValueError(f"node {k} cannot host lease {rr.lease.id} on [{rr.start}, {rr.end}): "
                                 f"over capacity {tuple(self.capacity[k])}")
        for k in set(rr.nodes):
            bisect.insort(self._rows[k], rr, key=_start_key)
        self._index(rr)

    def remove(self, rr: Reservation) -> None:
        nodes = set(rr.nodes)
        self.freed += len(nodes)
        for k in nodes:
            row = self._rows[k]
            i = bisect.bisect_left(row, rr.start, key=_start_key)
            while row[i] is not rr:
                i += 1
            del row[i]
        self._unindex(rr)

    def reschedule(self, rr: Reservation, start: int, end: int, real_end: int) -> None:
        """Move ``rr`` (same nodes) to ``[start, end)``; restores it if that does not fit. A
        reservation cut to a part of its interval needs no capacity check (it takes nothing it
        did not hold): so the reservation of a lease kept on a node that went down can still end
        early."""
        old = (rr.start, rr.end, rr.real_end)
        inside = old[0] <= start and end <= old[1]
        self.remove(rr)
        rr.start, rr.end, rr.real_end = start, end, real_end
        try:
            self._insert(rr, check=not inside)
        except ValueError:
            rr.start, rr.end, rr.real_end = old
            self._insert(rr, check=False)
            raise

    def set_down(self, nodes: Iterable[int], down: bool) -> None:
        """Mark ``nodes`` down (they host nothing new from now on) or up again (their configured
        capacity is offered again). The caches that assume every node is usable are dropped: the
        windows (by version), has_free_cpu's last answer, and the stale-fit test's ``freed``
        counts a node coming up as freed (a queued lease may fit now where it could not)."""
        ks = sorted(set(nodes))
        for k in ks:
            if not 0 <= k < self.n_nodes:
                raise ValueError(f"node {k} is not one of the table's {self.n_nodes} nodes")
        if down:
            self.down.update(ks)
        else:
            self.down.difference_update(ks)
            self.freed += len(ks)
        self._cpu_last = None
        self._changed()

    def add_marker(self, start: int, end: int) -> None:
        """Change points of something outside the nodes' capacity (an image transfer on the
        repository's link: its network reservations are not checked, decision H3)."""
        self._points.add(start)
        self._points.add(end)

    def remove_marker(self, start: int, end: int) -> None:
        self._points.remove(start)
        self._points.remove(end)

    def _index(self, rr: Reservation) -> None:
        self._points.add(rr.start)
        self._points.add(rr.end)
        self._ends.add(rr.end)
        self._real_ends.add(rr.real_end)
        self._starting.setdefault(rr.start, []).append(rr)
        self._ending.setdefault(rr.real_end, []).append(rr)
        self.reservations[id(rr)] = rr
        c = self._usages.get(rr.usage, 0)
        if c == 0:
            self._exclusive_cache.clear()
        self._usages[rr.usage] = c + 1
        self._changed()

    def _unindex(self, rr: Reservation) -> None:
        self._points.remove(rr.start)
        self._points.remove(rr.end)
        self._ends.remove(rr.end)
        self._real_ends.remove(rr.real_end)
        for index, p in ((self._starting, rr.start), (self._ending, rr.real_end)):
            lst = index[p]
            lst.remove(rr)
            if not lst:
                del index[p]
        del self.reservations[id(rr)]
        c = self._usages[rr.usage] - 1
        if c == 0:
            del self._usages[rr.usage]
            self._exclusive_cache.clear()
        else:
            self._usages[rr.usage] = c
        self._changed()

    def _changed(self) -> None:
        self.version += 1
        if self._window_cache:
            self._window_cache.clear()

    # -- per-node queries ---------------------------------------------------------------------------
    def _exclusive(self, request: ResourceTuple) -> bool:
        """Whether ``request`` fits an empty node but shares one with no RR of the table (nodes of
        one capacity): then a node is free for it exactly while no RR covers the node, and the
        queries need no usage sweep (the paper's case: one VM per node)."""
        hit = self._exclusive_cache.get(request)
        if hit is None:
            cap = self.capacity[0]
            hit = (self._uniform and request.fits_in(cap)
                   and not any(request.plus(u).fits_in(cap) for u in self._usages))
            self._exclusive_cache[request] = hit
        return hit

    def on_node(self, k: int) -> list[Reservation]:
        """Node ``k``'s reservations, by start."""
        return list(self._rows[k])

    def free_until(self, k: int, t: int, request: ResourceTuple, skip: Skip | None = None) -> float:
        """The first time ``>= t`` at which ``request`` no longer fits on node ``k`` beside its
        reservations (``t`` if it does not fit at ``t``; ``inf`` if it always fits). RRs for which
        ``skip(rr)`` is true are ignored. A node that is down is never free."""
        if self.down and k in self.down:
            return t
        if skip is None and self._exclusive(request):
            # rows are by start: the first one still running after t starts earliest
            for rr in self._rows[k]:
                if rr.end > t:
                    return rr.start if rr.start > t else t
            return _INF
        cap = self.capacity[k]
        if not request.fits_in(cap):
            return t
        # sweep the usage profile from t, ends (-) before starts (+) at equal times, and stop at the
        # first time it does not fit. The row is by start, so its RRs are taken in that order and
        # the ends of those taken wait in a heap (by end, then row order: the additions are made in
        # the same order as a sort of all the row's events would make them). Sorting the whole row
        # at every call made a node holding many future reservations (conservative backfilling)
        # cost its row's size, and a lease's fit the table's.
        row = self._rows[k]
        n, i = len(row), 0
        while i < n and (row[i].end <= t or (skip is not None and skip(row[i]))):
            i += 1
        if i == n:
            return _INF
        cpu, mem, disk, net = request
        ends: list[tuple[int, int, ResourceTuple]] = []
        while True:
            start = max(row[i].start, t) if i < n else _INF
            p = min(start, ends[0][0]) if ends else start
            if p == _INF:
                return _INF
            starting: list[tuple[int, Reservation]] = []
            while i < n and max(row[i].start, t) == p:
                starting.append((i, row[i]))
                i += 1
                while i < n and (row[i].end <= t or (skip is not None and skip(row[i]))):
                    i += 1
            gone: list[ResourceTuple] = []
            while ends and ends[0][0] == p:
                gone.append(heapq.heappop(ends)[2])
            gone += [rr.usage for _, rr in starting if rr.end == p]  # (an empty RR ends as it starts)
            for u in gone:
                cpu -= u.cpu
                mem -= u.memory
                disk -= u.disk
                net -= u.net
            for j, rr in starting:
                u = rr.usage
                cpu += u.cpu
                mem += u.memory
                disk += u.disk
                net += u.net
                if rr.end != p:
                    heapq.heappush(ends, (rr.end, j, u))
            if not ResourceTuple(cpu, mem, disk, net).fits_in(cap):
                return max(p, t)

    def fits(self, k: int, a: int, b: int, request: ResourceTuple, skip: Skip | None = None) -> bool:
        """Whether ``request`` fits on node ``k`` during all of ``[a, b)``."""
        return self.free_until(k, a, request, skip) >= b

    def free_on(self, a: int, b: int, request: ResourceTuple, nodes: Iterable[int] | None = None,
                skip: Skip | None = None) -> list[int]:
        """Nodes (ascending, or in ``nodes`` order) where ``request`` fits during all of ``[a, b)``."""
        ks = range(self.n_nodes) if nodes is None else nodes
        return [k for k in ks if self.free_until(k, a, request, skip) >= b]

    def window(self, t: int, request: ResourceTuple, skip: Skip | None = None) -> AvailabilityWindow:
        """The availability window at ``t`` for one VM of ``request`` on every node (cached until
        the table changes, unless ``skip`` is given)."""
        key = (t, request)
        if skip is None:
            hit = self._window_cache.get(key)
            if hit is not None:
                return hit
        until: dict[int, float] = {}
        if skip is None and self._exclusive(request):
            down = self.down
            for k, row in enumerate(self._rows):
                if k in down:
                    continue
                u = _INF
                for rr in row:
                    if rr.end > t:
                        u = rr.start
                        break
                if u > t:
                    until[k] = u
        else:
            for k in range(self.n_nodes):
                u = self.free_until(k, t, request, skip)
                if u > t:
                    until[k] = u
        w = AvailabilityWindow(t, request, until)
        if skip is None:
            self._window_cache[key] = w
        return w

    def has_free_cpu(self, t: int) -> bool:
        """Whether some node has CPU left at ``t`` (the queue's shortcut, decision H6). A scan of every
        node costs as much as a fit and the queue asks at every event a lease arrives, so the last
        answer is kept with a node that had CPU left, looked at first; or, if none had, at ``t0``:
        then none has at ``t >= t0`` while no reservation was removed (or moved) and none ended
        in ``(t0, t]`` (each one covering ``t0`` still covers ``t``)."""
        last = self._cpu_last
        if last is not None:
            t0, freed, witness = last
            if witness is None:
                if t0 <= t and freed == self.freed and not self.ends_within(t0, t):
                    return False
            elif self._with_cpu_left(t, (witness,)) is not None:
                return True
        # from the highest id down: leases take the lowest free ids, so the witness tends to stay
        witness = self._with_cpu_left(t, range(self.n_nodes - 1, -1, -1))
        self._cpu_last = (t, self.freed, witness)
        return witness is not None

    def _with_cpu_left(self, t: int, nodes: Iterable[int]) -> int | None:
        """The first of ``nodes`` with CPU left at ``t``, or None."""
        rows, caps, down = self._rows, self.capacity, self.down
        for k in nodes:
            if k in down:
                continue
            used = 0.0
            for rr in rows[k]:
                if rr.start > t:
                    break
                if rr.end > t:
                    used += rr.usage.cpu
            if used < caps[k].cpu:
                return k
        return None

    def reservations_at(self, t: int) -> list[Reservation]:
        """RRs with ``start <= t < end`` (planned end), in node order, each once."""
        seen: dict[int, Reservation] = {}
        for row in self._rows:
            for rr in row:
                if rr.start > t:
                    break
                if rr.end > t:
                    seen.setdefault(id(rr), rr)
        return list(seen.values())

    # -- change points ------------------------------------------------------------------------------
    def changepoints_after(self, t: float, nodes: Iterable[int] | None = None,
                           skip: Reservation | None = None) -> list[int]:
        """Sorted distinct reservation starts and ends (planned, not real) after ``t``; on ``nodes``
        only if given (then ignoring ``skip``)."""
        if nodes is None:
            return self._points.after(t)
        pts = {p for k in nodes for rr in self._rows[k] if rr is not skip
               for p in (rr.start, rr.end) if p > t}
        return sorted(pts)

    def ends_after(self, t: float) -> list[int]:
        """Sorted distinct planned ends of the table's RRs after ``t`` (no transfer markers)."""
        return self._ends.after(t)

    def ends_within(self, a: float, b: float) -> bool:
        """Whether some RR of the table has its planned end in ``(a, b]``."""
        return self._ends.next_after(a) <= b

    def last_end(self, t: float) -> float:
        """The latest planned end ``<= t`` of an RR of the table (``-inf`` if none)."""
        return self._ends.last_by(t)

    def next_changepoint(self, t: float) -> float:
        """The next start, end or real end after ``t`` (what drives the simulation clock)."""
        return min(self._points.next_after(t), self._real_ends.next_after(t))

    def starting_at(self, t: int) -> list[Reservation]:
        return list(self._starting.get(t, ()))

    def ending_at(self, t: int) -> list[Reservation]:
        """RRs whose real end is ``t``."""
        return list(self._ending.get(t, ()))
