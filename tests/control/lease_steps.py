"""Leases and a driver for the scheduler's unit tests: a best-effort lease, an advance
reservation, and stepping a scheduler through its event times with calls made between them."""

from __future__ import annotations

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler


def be(i: int, submit: int, nodes: int, dur: int) -> Lease:
    return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, dur, dur)


def ar(i: int, submit: int, start: int, nodes: int, dur: int) -> Lease:
    return Lease(i, LeaseKind.ADVANCE_RESERVATION, submit, nodes, dur, dur, dur, start=start,
                 preemptible=False)


def drive(sched: LeaseScheduler, until: int, t: int = 0, at: dict | None = None) -> None:
    """Step at every event time from ``t`` to ``until``; ``at``: {time: call} made before that step."""
    at = dict(at or {})
    sched.step(t)
    while True:
        nxt = min(sched.next_event(t), min(at, default=float("inf")))
        if nxt > until:
            return
        t = int(nxt)
        if t in at:
            at.pop(t)(t)
        sched.step(t)
