"""Simulated enactment of the lease scheduler (decision H5 in docs/decisions/haizea.md) and the
paper's metrics (decision H18).

The clock is the event kernel (:class:`skylease.sim.kernel.Kernel`): one tick per event time
(a request arrival or a slot-table change point: a reservation start, end or real end). At a tick
the arrivals are submitted, then the scheduler does its step, then the next tick is set.
:class:`SimulatedEnactment` books the scheduler's start/stop commands on simulated nodes and
refuses to overcommit one (a second check, independent of the slot table).

``simulate_leases(leases, n_nodes)`` runs until every best-effort lease has completed (the
original's ``stop-when: best-effort-done``; ``until="all"`` also runs the accepted reservations
still planned then) and returns a :class:`LeaseRun`: per-lease records, all-best-effort (the last
best-effort completion), and the average wait and bounded slowdown with the first 5 % discarded;
``runs`` (every VM, suspend and resume reservation carried out), ``log`` (every scheduler event
with the time it was decided) and ``transfers`` (every image transfer carried out).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from skylease.control.leases import (
    BLUE_HORIZON_NODE,
    Lease,
    LeaseKind,
    LeaseScheduler,
    LeaseState,
    Reservation,
    ResourceTuple,
    SchedulerConfig,
    Transfer,
)
from skylease.control.leases.fairness import idle_rule
from skylease.control.leases.idle import IdleReclaim, IdleWatch
from skylease.control.leases.records import Event, EventLog, Run, RunLog, TransferRun
from skylease.sim.kernel import Kernel

if TYPE_CHECKING:  # pandas (0.2 s to import) only for the tables and the XML workloads
    from collections.abc import Mapping

    import pandas as pd

__all__ = ["BLUE_HORIZON_NODES", "Event", "LeaseRun", "Run", "SimulatedEnactment", "TransferRun", "ar_leases",
           "assign_images", "be_leases", "clip_time", "simulate_leases", "site_capacity", "xml_leases"]

#: The Blue Horizon cluster of the paper: 144 single-CPU nodes.
BLUE_HORIZON_NODES = 144
#: Measurements recorded before the submission of the lease at 5 % of the BE leases are dropped.
CLIP_FRACTION = 0.05


class SimulatedEnactment:
    """Simulated nodes: what runs where, checked against the nodes' capacities.

    ``runs`` lists every reservation carried out, in the order they stopped (as columns of
    integers: a long run keeps no object per reservation for the garbage collector to walk).
    """

    def __init__(self, capacity: Sequence[ResourceTuple]) -> None:
        self.capacity = list(capacity)
        self.used = [ResourceTuple(0.0, 0, 0, 0.0)] * len(self.capacity)
        self.runs = RunLog()
        self._open: dict[int, tuple[int, Reservation]] = {}  # id(rr) -> (start, rr)

    def start(self, rr: Reservation, now: int) -> None:
        for k in rr.nodes:
            u = self.used[k].plus(rr.usage)
            if not u.fits_in(self.capacity[k]):
                raise RuntimeError(f"node {k} overcommitted at {now} by lease {rr.lease.id}: {tuple(u)} > "
                                   f"{tuple(self.capacity[k])}")
            self.used[k] = u
        self._open[id(rr)] = (now, rr)

    def stop(self, rr: Reservation, now: int) -> None:
        start, _ = self._open.pop(id(rr))
        neg = ResourceTuple(-rr.usage.cpu, -rr.usage.memory, -rr.usage.disk, -rr.usage.net)
        for k in rr.nodes:
            self.used[k] = self.used[k].plus(neg)
        self.runs.add(rr.lease.id, rr.kind.value, start, now, rr.nodes)


@dataclass
class LeaseRun:
    """What one simulation produced."""

    leases: list[Lease] = field(repr=False)
    all_best_effort: int
    clip_time: int
    events: int
    wall_s: float
    runs: Sequence[Run] = field(default_factory=RunLog, repr=False)
    log: Sequence[Event] = field(default_factory=EventLog, repr=False)
    transfers: list[TransferRun] = field(default_factory=list, repr=False)

    def table(self) -> pd.DataFrame:
        """One row per lease: id, kind, submit, requested start, first start, end, wait, bounded
        slowdown, state, rejection reason, preemptions, suspensions, resumptions."""
        import pandas as pd

        return pd.DataFrame([{"id": le.id, "kind": le.kind.value, "submit": le.submit, "nodes": le.nodes,
                              "requested_s": le.duration, "requested_start": le.start,
                              "start": le.first_start, "end": le.end, "wait_s": le.wait,
                              "bounded_slowdown": le.bounded_slowdown(), "state": le.state.value,
                              "reason": le.reason,
                              "preemptions": sum(1 for w, _ in le.history if w == "preempt"),
                              "suspensions": sum(1 for w, _ in le.history if w == "suspend"),
                              "resumptions": sum(1 for w, _ in le.history if w == "resume")}
                             for le in self.leases])

    def summary(self) -> dict[str, Any]:
        be = [le for le in self.leases if le.kind is LeaseKind.BEST_EFFORT]
        waits = [le.wait for le in be if le.first_start is not None and le.first_start >= self.clip_time]
        slow = [le.bounded_slowdown() for le in be if le.end is not None and le.end >= self.clip_time]
        ar = [le for le in self.leases if le.kind is LeaseKind.ADVANCE_RESERVATION]
        return {"all_best_effort_s": self.all_best_effort,
                "mean_wait_s": float(np.mean(waits)) if waits else math.nan,
                "mean_bounded_slowdown": float(np.mean(slow)) if slow else math.nan,
                "best_effort_leases": len(be),
                "ar_accepted": sum(1 for le in ar if le.state is not LeaseState.REJECTED),
                "ar_rejected": sum(1 for le in ar if le.state is LeaseState.REJECTED),
                "events": self.events, "wall_s": self.wall_s}


def be_leases(requests: pd.DataFrame | Mapping[str, np.ndarray]) -> list[Lease]:
    """Best-effort leases from :func:`skylease.traces.swf.best_effort_requests` rows, or the
    columns of :func:`~skylease.traces.swf.best_effort_columns` (ids in trace order, 1 CPU and
    1024 MB per node, decision H15)."""
    return [Lease(i, LeaseKind.BEST_EFFORT, s, k, d, r, r)
            for i, (s, k, d, r) in enumerate(zip(requests["submit"].tolist(), requests["nodes"].tolist(),
                                                 requests["requested"].tolist(), requests["run"].tolist(),
                                                 strict=True))]


def ar_leases(rows: pd.DataFrame, first_id: int = 0) -> list[Lease]:
    """Advance-reservation leases from :func:`skylease.traces.lwf.read_plain_lwf` rows (ids from
    ``first_id``, after the best-effort ones, decision H1); non-preemptible."""
    return [Lease(first_id + i, LeaseKind.ADVANCE_RESERVATION, int(r.submit), int(r.nodes), int(r.duration),
                  int(r.real_duration), int(r.real_duration), start=int(r.start), cpu=float(r.cpu),
                  memory=int(r.memory), preemptible=False)
            for i, r in enumerate(rows.itertuples(index=False))]


def xml_leases(requests: pd.DataFrame) -> list[Lease]:
    """Leases from the rows of :func:`skylease.traces.lwf.read_xml_lwf` (``XmlWorkload.requests``)."""
    import pandas as pd

    kinds = {"BE": LeaseKind.BEST_EFFORT, "AR": LeaseKind.ADVANCE_RESERVATION, "IM": LeaseKind.IMMEDIATE}
    return [Lease(int(r.id), kinds[r.kind], int(r.submit), int(r.nodes), int(r.duration),
                  int(r.real_duration), int(r.real_duration),
                  start=None if pd.isna(r.start) else int(r.start), cpu=float(r.cpu),
                  memory=int(r.memory), disk=int(r.disk), net=float(r.net), image=r.image,
                  image_size=int(r.image_size), preemptible=bool(r.preemptible),
                  owner=None if pd.isna(getattr(r, "user", None)) else str(r.user),
                  idle_after=None if pd.isna(getattr(r, "idle_after", None)) else int(r.idle_after))
            for r in requests.itertuples(index=False)]


def site_capacity(node_resources: dict[str, float]) -> ResourceTuple:
    """A node's capacity from an XML workload's ``<site>`` resources (missing ones unbounded)."""
    big = 2**62
    return ResourceTuple(float(node_resources.get("CPU", big)), int(node_resources.get("Memory", big)),
                         int(node_resources.get("Disk", big)), float(node_resources.get("Net-in", big)))


def assign_images(leases: Sequence[Lease], distribution: str = "uniform", seed: int = 0, *,
                  n_images: int = 37, size_mb: int = 4096, draws: int = 10_000) -> None:
    """Give every lease a VM image (decision H17): ``draws`` images are drawn up front, then handed
    out in submission order (BE before AR on ties: ids). ``uniform``: each of ``n_images`` equally
    likely; ``skewed``: 7 images at 10 % and 30 at 1 % (``7,10 30,1``, 37 images); ``single``: one."""
    rng = np.random.default_rng(seed)
    if distribution == "uniform":
        seq = rng.integers(0, n_images, size=draws)
    elif distribution == "skewed":
        p = np.array([0.10] * 7 + [0.01] * 30)
        seq = rng.choice(37, size=draws, p=p / p.sum())
    elif distribution == "single":
        seq = np.zeros(draws, dtype=np.int64)
    else:
        raise ValueError(f"unknown image distribution {distribution!r}: uniform, skewed or single")
    order = sorted(leases, key=lambda le: (le.submit, le.id))
    for i, le in enumerate(order):
        le.image, le.image_size = f"image{int(seq[i % draws]):02d}.img", size_mb


def clip_time(leases: Sequence[Lease], fraction: float = CLIP_FRACTION) -> int:
    """The submission time of the BE lease at position ``int(fraction·N) - 1`` (decision H18)."""
    be = sorted((le for le in leases if le.kind is LeaseKind.BEST_EFFORT), key=lambda le: (le.submit, le.id))
    if not be:
        return 0
    return be[max(0, int(fraction * len(be)) - 1)].submit


def simulate_leases(leases: Sequence[Lease], n_nodes: int = BLUE_HORIZON_NODES, *,
                    capacity: ResourceTuple = BLUE_HORIZON_NODE, config: SchedulerConfig | None = None,
                    max_reservations: float | None = None, until: str = "best-effort",
                    scheduler: Callable[..., LeaseScheduler] = LeaseScheduler) -> LeaseRun:
    """Run the lease scheduler on ``leases`` (each submitted at its ``submit`` time) until the BE
    leases are done (``until="all"``: until every accepted lease is done too). ``config`` (or just
    ``max_reservations``) sets the backfilling. ``scheduler`` makes it (called as
    :class:`LeaseScheduler` is; e.g. ``functools.partial(LeaseScheduler, skip_stale=False)``)."""
    if until not in ("best-effort", "all"):
        raise ValueError(f"until must be 'best-effort' or 'all', got {until!r}")
    stop_at_all = config is not None and config.stop_when == "all"
    if stop_at_all:  # Haizea 1.0's stop-when all-leases-done: all-best-effort is the stop time
        until = "all"
    t0 = time.perf_counter()
    order = sorted(leases, key=lambda le: (le.submit, le.id))  # stable: trace order on ties
    enact = SimulatedEnactment([capacity] * n_nodes)
    kernel = Kernel()
    log = EventLog()

    def record(what: str, lease: Lease, t: int) -> None:
        log.add(lease.id, what, t, int(kernel.now))

    sched = scheduler(n_nodes, capacity=capacity, config=config, max_reservations=max_reservations,
                      enactment=enact, on_event=record)
    transfers: list[TransferRun] = []

    def transferred(tr: Transfer) -> None:
        transfers.append(TransferRun(tr.image, tr.start, tr.end, "be" if tr.deadline is None else "ar",
                                     tuple((lid, tuple(sorted(ns))) for lid, ns in sorted(tr.users.items()))))

    sched.images.on_done = transferred
    rule = idle_rule(sched.config.admission)
    idle = None if rule is None else SimulatedIdleness(sched, rule)
    i = 0
    ticks = 0

    def tick() -> None:
        nonlocal i, ticks
        now = int(kernel.now)
        while i < len(order) and order[i].submit <= now:
            sched.submit(order[i])
            i += 1
        if idle is not None:
            idle.reclaim(now)
        sched.step(now)
        ticks += 1
        if not sched.busy and i == len(order) and (until == "best-effort" or not sched.rr):
            kernel.stop()
        nxt = min(sched.next_event(now), order[i].submit if i < len(order) else math.inf,
                  math.inf if idle is None else idle.next_event(now))
        if nxt == math.inf:
            raise RuntimeError(f"{len(sched.queue)} leases can never be scheduled")
        kernel.schedule(nxt, tick)

    kernel.schedule(0, tick)
    kernel.run()
    done_be = [le.end for le in sched.completed if le.kind is LeaseKind.BEST_EFFORT and le.end is not None]
    all_best_effort = int(kernel.now) if stop_at_all and done_be else max(done_be, default=0)
    return LeaseRun(list(leases), all_best_effort, clip_time(leases), ticks,
                    time.perf_counter() - t0, enact.runs, log, transfers)


class SimulatedIdleness:
    """The ``idle_reclaim`` rule under the simulator's clock: a running lease with an ``idle_after``
    is idle once it has done that much work (its work before this run counted: a suspended lease
    resumes where it stopped), and :class:`~skylease.control.leases.idle.IdleWatch` says when it
    falls due; the reclaim is the scheduler's premature end, as the lease service's."""

    def __init__(self, sched: LeaseScheduler, rule: IdleReclaim) -> None:
        self.sched = sched
        self.watch = IdleWatch(rule)

    def _idle_from(self, vm: Reservation) -> int | None:
        """When the running ``vm``'s lease stops working (None: it works to its end)."""
        lease = vm.lease
        if lease.idle_after is None:
            return None
        done = self.sched.config.planned(lease.real_duration) - lease.real_remaining
        return vm.start + max(0, lease.idle_after - done)

    def reclaim(self, now: int) -> None:
        running = set()
        for lid, vm in self.sched.rr.items():
            if vm.state is not LeaseState.ACTIVE or (since := self._idle_from(vm)) is None:
                continue
            running.add(lid)
            if since <= now:
                self.watch.idle(lid, since)
            else:
                self.watch.busy(lid)
        for lid in [lid for lid in self.watch.since if lid not in running]:
            self.watch.forget(lid)
        for lid, since in self.watch.due(now):
            self.watch.forget(lid)
            self.sched.premature_end(lid, now, reclaimed=self.watch.rule.reason(since))

    def next_event(self, now: int) -> float:
        """The next time a running lease stops working, or an idle one falls due (one idle from
        before its VM started, at that start, is not watched yet: its due time is counted here)."""
        after = self.watch.rule.after
        times = (t if t > now else t + after for vm in self.sched.rr.values()
                 if vm.state is LeaseState.ACTIVE and (t := self._idle_from(vm)) is not None)
        return min((x for x in (self.watch.next_due(), *times) if x > now), default=math.inf)
