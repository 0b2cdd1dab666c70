"""Simulated enactment of the lease scheduler: a clock that jumps between slot-table change points
and request arrivals (spec 001 §5), and the paper's metrics (§9).

``simulate_leases(leases, n_nodes)`` runs until every best-effort lease has completed (the
original's ``stop-when: best-effort-done``) and returns a :class:`LeaseRun` with the per-lease
records, all-best-effort (the last best-effort completion), and the average wait and bounded
slowdown with the first 5 % discarded.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler, LeaseState

__all__ = ["LeaseRun", "ar_leases", "be_leases", "simulate_leases"]

#: The Blue Horizon cluster of the paper: 144 single-CPU nodes.
BLUE_HORIZON_NODES = 144
#: Measurements recorded before the submission of the lease at 5 % of the BE leases are dropped.
CLIP_FRACTION = 0.05


@dataclass
class LeaseRun:
    """What one simulation produced."""

    leases: list[Lease] = field(repr=False)
    all_best_effort: int
    clip_time: int
    events: int
    wall_s: float

    def table(self) -> pd.DataFrame:
        """One row per lease: id, kind, submit, first start, end, wait, bounded slowdown, state."""
        return pd.DataFrame([{"id": le.id, "kind": le.kind.value, "submit": le.submit, "nodes": le.nodes,
                              "requested_s": le.duration, "start": le.first_start, "end": le.end,
                              "wait_s": le.wait, "bounded_slowdown": le.bounded_slowdown(),
                              "state": le.state.value} for le in self.leases])

    def summary(self) -> dict[str, Any]:
        be = [le for le in self.leases if le.kind is LeaseKind.BEST_EFFORT]
        waits = [le.wait for le in be if le.first_start is not None and le.first_start >= self.clip_time]
        slow = [le.bounded_slowdown() for le in be if le.end is not None and le.end >= self.clip_time]
        return {"all_best_effort_s": self.all_best_effort,
                "mean_wait_s": float(np.mean(waits)) if waits else math.nan,
                "mean_bounded_slowdown": float(np.mean(slow)) if slow else math.nan,
                "best_effort_leases": len(be),
                "ar_accepted": sum(1 for le in self.leases if le.kind is LeaseKind.ADVANCE_RESERVATION
                                   and le.state is not LeaseState.REJECTED),
                "ar_rejected": sum(1 for le in self.leases if le.kind is LeaseKind.ADVANCE_RESERVATION
                                   and le.state is LeaseState.REJECTED),
                "events": self.events, "wall_s": self.wall_s}


def be_leases(requests: pd.DataFrame) -> list[Lease]:
    """Best-effort leases from :func:`skylease.traces.swf.best_effort_requests` rows (ids in trace order)."""
    return [Lease(i, LeaseKind.BEST_EFFORT, int(r.submit), int(r.nodes), int(r.requested), int(r.run),
                  int(r.run)) for i, r in enumerate(requests.itertuples(index=False))]


def ar_leases(rows: pd.DataFrame, first_id: int = 0) -> list[Lease]:
    """Advance-reservation leases from :func:`skylease.traces.lwf.read_plain_lwf` rows (ids from
    ``first_id``, after the best-effort ones, spec 001 §4)."""
    return [Lease(first_id + i, LeaseKind.ADVANCE_RESERVATION, int(r.submit), int(r.nodes), int(r.duration),
                  int(r.real_duration), int(r.real_duration), start=int(r.start), memory=int(r.memory),
                  preemptible=False)
            for i, r in enumerate(rows.itertuples(index=False))]


def clip_time(leases: Sequence[Lease], fraction: float = CLIP_FRACTION) -> int:
    """The submission time of the BE lease at position ``int(fraction·N) - 1`` (spec 001 §9.4)."""
    be = sorted((le for le in leases if le.kind is LeaseKind.BEST_EFFORT), key=lambda le: (le.submit, le.id))
    if not be:
        return 0
    return be[max(0, int(fraction * len(be)) - 1)].submit


def simulate_leases(leases: Sequence[Lease], n_nodes: int = BLUE_HORIZON_NODES, *,
                    max_reservations: int = 1) -> LeaseRun:
    """Run the lease scheduler on ``leases`` (each submitted at its ``submit`` time) until the BE leases
    are done."""
    t0 = time.perf_counter()
    order = sorted(leases, key=lambda le: (le.submit, le.id))  # stable: trace order on ties
    sched = LeaseScheduler(n_nodes, max_reservations=max_reservations)
    i, now, events = 0, 0, 0
    while True:
        while i < len(order) and order[i].submit <= now:
            sched.submit(order[i])
            i += 1
        sched.step(now)
        events += 1
        if not sched.busy and i == len(order):
            break
        nxt = min(sched.next_event(now), order[i].submit if i < len(order) else math.inf)
        if nxt == math.inf:
            raise RuntimeError(f"{len(sched.queue)} leases can never be scheduled")
        now = int(nxt)
    done_be = [le.end for le in sched.completed if le.kind is LeaseKind.BEST_EFFORT and le.end is not None]
    return LeaseRun(list(leases), max(done_be, default=0), clip_time(leases), events,
                    time.perf_counter() - t0)
