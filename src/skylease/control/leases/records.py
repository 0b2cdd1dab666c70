"""What happened to leases, as records both clocks produce (the simulator and the lease service).

:class:`Run` is a reservation carried out (a Gantt chart's bar), :class:`Event` a scheduler event
with the time it was decided at, :class:`TransferRun` an image transfer carried out.
:func:`lease_events` merges them into each lease's event list and :func:`lease_record` into the
record that ``skylease leases simulate --json`` prints per lease and the service answers with.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

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
    """A lease's request, what happened to it and its events (one item of ``--json``'s ``leases``)."""
    return {"id": lease.id, "type": KIND_NAMES[lease.kind], "submit": lease.submit,
            "requested_start": lease.start, "requested_duration": lease.duration, "nodes": lease.nodes,
            "image": lease.image, "start": lease.first_start, "end": lease.end, "state": lease.state.value,
            "reason": lease.reason, "events": events}
