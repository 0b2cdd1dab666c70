"""What happened to leases, as records both clocks produce (the simulator and the lease service).

:class:`Run` is a reservation carried out (a Gantt chart's bar), :class:`Event` a scheduler event
with the time it was decided at, :class:`TransferRun` an image transfer carried out;
:class:`RunLog` and :class:`EventLog` keep many of them as columns of integers (a simulation's).
:func:`lease_events` merges them into each lease's event list and :func:`lease_record` into the
record that ``skylease leases simulate --json`` prints per lease and the service answers with.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar, overload

from skylease.control.leases.lease import Lease, LeaseKind


class Run(NamedTuple):
    """One reservation carried out: a VM run, a suspension or a resumption (a Gantt chart's bar)."""

    lease: int
    kind: str  # "vm", "suspend", "resume", "shutdown", "migrate"
    start: int
    stop: int
    nodes: tuple[int, ...]


class Event(NamedTuple):
    """A scheduler event (:attr:`Lease.history`) with the time ``now`` it was decided at; ``at`` is
    the event's own time (for "schedule", "reserve" and "slideback": the planned start)."""

    lease: int
    what: str
    at: int
    now: int


class TransferRun(NamedTuple):
    """An image transfer carried out: ``image`` multicast on ``[start, end)`` on the best-effort
    ("be", FIFO) or advance-reservation ("ar", EDF) channel; ``users``: (lease id, its nodes) of the
    leases waiting for it when it ended."""

    image: str
    start: int
    end: int
    channel: str
    users: tuple[tuple[int, tuple[int, ...]], ...]


R = TypeVar("R", Event, Run)


class _Columns(Sequence[R]):
    """Records of one kind kept as columns of machine integers (names as small codes), each
    record made again when read. A long run keeps no object per record: the garbage collector
    walks every item of a list of tuples at each full collection, a cold object per item, which
    made each lease of a long simulation dearer than one of a short one."""

    __slots__ = ("_code", "_names")

    def __init__(self) -> None:
        self._names: list[str] = []
        self._code: dict[str, int] = {}

    def _name(self, name: str) -> int:
        c = self._code.get(name)
        if c is None:
            c = self._code[name] = len(self._names)
            self._names.append(name)
        return c

    def _row(self, i: int) -> R:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> R: ...
    @overload
    def __getitem__(self, i: slice) -> list[R]: ...
    def __getitem__(self, i: int | slice) -> R | list[R]:
        if isinstance(i, slice):
            return [self._row(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"record {i} of {n}")
        return self._row(i % n)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, _Columns)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class EventLog(_Columns[Event]):
    """:class:`Event` records (a simulation's scheduler log), as columns."""

    __slots__ = ("_at", "_lease", "_now", "_what")

    def __init__(self, events: Iterable[Event] = ()) -> None:
        super().__init__()
        self._lease, self._what, self._at, self._now = array("q"), array("H"), array("q"), array("q")
        for e in events:
            self.add(*e)

    def add(self, lease: int, what: str, at: int, now: int) -> None:
        self._lease.append(lease)
        self._what.append(self._name(what))
        self._at.append(at)
        self._now.append(now)

    def __len__(self) -> int:
        return len(self._lease)

    def _row(self, i: int) -> Event:
        return Event(self._lease[i], self._names[self._what[i]], self._at[i], self._now[i])

    def __iter__(self) -> Iterator[Event]:
        names = self._names
        for lease, what, at, now in zip(self._lease, self._what, self._at, self._now, strict=True):
            yield Event(lease, names[what], at, now)


class RunLog(_Columns[Run]):
    """:class:`Run` records (the reservations a simulation carried out), as columns; the nodes of
    all runs one after the other, with where each run's end."""

    __slots__ = ("_ends", "_kind", "_lease", "_nodes", "_start", "_stop")

    def __init__(self, runs: Iterable[Run] = ()) -> None:
        super().__init__()
        self._lease, self._kind, self._start, self._stop = array("q"), array("H"), array("q"), array("q")
        self._nodes, self._ends = array("q"), array("q")
        for r in runs:
            self.add(*r)

    def add(self, lease: int, kind: str, start: int, stop: int, nodes: Iterable[int]) -> None:
        self._lease.append(lease)
        self._kind.append(self._name(kind))
        self._start.append(start)
        self._stop.append(stop)
        self._nodes.extend(nodes)
        self._ends.append(len(self._nodes))

    def __len__(self) -> int:
        return len(self._lease)

    def _row(self, i: int) -> Run:
        a = self._ends[i - 1] if i else 0
        return Run(self._lease[i], self._names[self._kind[i]], self._start[i], self._stop[i],
                   tuple(self._nodes[a:self._ends[i]]))

    def __iter__(self) -> Iterator[Run]:
        return (self._row(i) for i in range(len(self)))


KIND_NAMES = {LeaseKind.BEST_EFFORT: "best-effort", LeaseKind.ADVANCE_RESERVATION: "advance-reservation",
              LeaseKind.IMMEDIATE: "immediate"}
_RUN_KIND = {"start": "vm", "resume": "resume", "suspend": "suspend", "shutdown": "shutdown",
             "migrate": "migrate"}


def lease_events(log: Iterable[Event], runs: Iterable[Run],
                 transfers: Iterable[TransferRun] = ()) -> dict[int, list[dict[str, Any]]]:
    """Each lease's events, in time order: the scheduler's (``time`` is when it happened;
    ``planned_start`` for schedule/reserve/slideback), with the nodes and end (``until``) of each run,
    suspension, resumption and shutdown; ``migrate`` where a lease resumes on other nodes than it
    was suspended on (at the start of its migration reservation where it has one, else at the
    resumption); ``transfer`` for each image transfer it waited for."""
    by_start = {(r.lease, r.kind, r.start): r for r in runs}
    out: dict[int, list[dict[str, Any]]] = {}
    suspended_on: dict[int, tuple[int, ...]] = {}
    migrated: set[int] = set()  # leases whose migration was reserved (and so has its own event)
    for e in log:
        rec: dict[str, Any] = {"time": e.now, "event": e.what}
        evs = out.setdefault(e.lease, [])
        if e.what in ("schedule", "reserve", "slideback"):
            rec["planned_start"] = e.at
        elif e.what in _RUN_KIND:
            rec["time"] = e.at
            r = by_start.get((e.lease, _RUN_KIND[e.what], e.at))
            if r is not None:
                rec["nodes"], rec["until"] = list(r.nodes), r.stop
                if e.what == "suspend":
                    suspended_on[e.lease] = r.nodes
                elif e.what == "migrate":
                    rec["from"], rec["to"] = list(suspended_on.get(e.lease, ())), list(r.nodes)
                    migrated.add(e.lease)
                elif e.what == "resume" and e.lease in migrated:
                    migrated.discard(e.lease)
                elif e.what == "resume" and suspended_on.get(e.lease, r.nodes) != r.nodes:
                    evs.append({"time": e.at, "event": "migrate", "from": list(suspended_on[e.lease]),
                                "to": list(r.nodes)})
        evs.append(rec)
    for tr in transfers:
        for lid, nodes in tr.users:
            out.setdefault(lid, []).append({"time": tr.start, "event": "transfer", "until": tr.end,
                                            "image": tr.image, "nodes": list(nodes), "channel": tr.channel})
    for evs in out.values():
        evs.sort(key=lambda ev: ev["time"])  # stable: the scheduler's order at equal times
    return out


def lease_record(lease: Lease, events: list[dict[str, Any]]) -> dict[str, Any]:
    """A lease's request, what happened to it and its events (one item of ``--json``'s ``leases``);
    ``degraded`` (why it lost a node, docs/decisions/host-failures.md) only when it did, and
    ``reclaimed`` (why the site ended it early) only when it did, so a record of a lease that lost
    none and ran its course is as it always was."""
    rec = {"id": lease.id, "type": KIND_NAMES[lease.kind], "submit": lease.submit,
           "requested_start": lease.start, "requested_duration": lease.duration, "nodes": lease.nodes,
           "image": lease.image, "start": lease.first_start, "end": lease.end, "state": lease.state.value,
           "reason": lease.reason}
    if lease.degraded is not None:
        rec["degraded"] = lease.degraded
    if lease.reclaimed is not None:  # (the site ended it early: the idle_reclaim rule)
        rec["reclaimed"] = lease.reclaimed
    rec["events"] = events
    return rec
