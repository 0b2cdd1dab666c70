"""The lease scheduler: a best-effort queue with aggressive backfilling (spec 001 §6.1, §6.3, §6.5, §6.6).

This first part covers best-effort leases without suspension (the NOVM-NOSR configuration, the
paper's baseline). The rules are the 2008 code's, as the spec resolves them:

* The queue is FIFO. At every event time each queued lease tries to start **now** on nodes
  continuously free for its requested duration. A lease that cannot start may instead take the
  one **future reservation** aggressive backfilling allows (``max_reservations = 1``): the first
  slot-table change point where it fits. The others wait.
* The reservation counter is released when the reserved lease's VM reservation *ends*, not when
  it starts (spec §6.3 [C][V]: releasing at start gives 2,669,567 s instead of 2,674,265 s).
* VMs go to the free nodes of lowest id.
* When a lease ends before its requested time, the next scheduled lease on its nodes slides back
  to the earliest point its nodes are free (spec §6.6; without it the baseline is 2,662,424 s).

Advance reservations are admitted before the queue at every step: on free nodes first (lowest
id), else on nodes whose best-effort reservations overlapping the AR are cancelled and requeued
in submission order (NOVM-NOSR's preemption); rejected, with the reason, when even that is not
enough, when the start is past or the lease is larger than the cluster. Status: with ARs, Table 1's
NOVM-NOSR rows are not reproduced yet ([ρ/3H/medium] ρ = 10/20/30 %: ours −0.12 / +7.68 / +13.77 %
against the paper's +3.91 / +8.66 / +23.93 %); some AR rule of the 2008 code is still missing.

The scheduler never reads a clock: the caller (the simulator now, a real enactment later) calls
:meth:`LeaseScheduler.step` at each event time and asks :meth:`next_event` for the next one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from skylease.control.leases.lease import Lease, LeaseKind, LeaseState, Reservation
from skylease.control.leases.slottable import SlotTable

Hook = Callable[[str, Lease, int], None]


class LeaseScheduler:
    """Best-effort leases on ``n_nodes`` single-VM nodes with aggressive backfilling."""

    def __init__(self, n_nodes: int, *, max_reservations: int = 1, on_event: Hook | None = None) -> None:
        if max_reservations < 0:
            raise ValueError(f"max_reservations must be >= 0, got {max_reservations}")
        self.table = SlotTable(n_nodes)
        self.max_reservations = max_reservations
        self.queue: list[Lease] = []
        self.rr: dict[int, Reservation] = {}  # lease id -> its current VM reservation
        self.reserved = 0  # future (backfill) reservations held
        self.completed: list[Lease] = []
        self.rejected: list[tuple[Lease, str]] = []
        self._ars: list[Lease] = []  # advance reservations submitted, handled at the next step
        self.on_event = on_event

    # -- requests ---------------------------------------------------------------------------------
    def submit(self, lease: Lease) -> None:
        """A new request: best-effort leases join the queue, advance reservations are admitted at the
        next :meth:`step`; a request the cluster can never satisfy is rejected with its reason."""
        if lease.nodes > self.table.n_nodes:
            self._reject(lease, f"asks for {lease.nodes} nodes; the cluster has {self.table.n_nodes}")
        elif lease.kind is LeaseKind.BEST_EFFORT:
            self.queue.append(lease)
        elif lease.kind is LeaseKind.ADVANCE_RESERVATION:
            if lease.start is None or lease.start < lease.submit:
                self._reject(lease, "its start time is before its submission (in the past)")
            else:
                self._ars.append(lease)
        else:
            raise NotImplementedError(f"{lease.kind.value} leases are not scheduled yet")

    def _reject(self, lease: Lease, why: str) -> None:
        lease.state = LeaseState.REJECTED
        self.rejected.append((lease, why))
        self._emit("reject", lease, lease.submit)

    @property
    def busy(self) -> bool:
        """Best-effort work is queued or scheduled (ARs do not keep a run going, spec §5)."""
        return bool(self.queue) or any(le.kind is LeaseKind.BEST_EFFORT for le in
                                       (rr.lease for rr in self.rr.values()))

    # -- the event step ---------------------------------------------------------------------------
    def step(self, now: int) -> None:
        """Everything due at ``now``: ends, starts, then the queue (spec §6.1)."""
        self._process(now)
        ars, self._ars = self._ars, []
        for ar in ars:  # ARs before the best-effort queue
            self._schedule_ar(ar, now)
        self._schedule_queue(now)
        self._process(now)

    def next_event(self, now: int) -> float:
        return self.table.next_changepoint(now)

    def _process(self, now: int) -> None:
        ending = sorted((rr for rr in self.rr.values()
                         if rr.state is LeaseState.ACTIVE and rr.real_end == now),
                        key=lambda rr: rr.lease.id)
        for rr in ending:
            self._end(rr, now)
        starting = sorted((rr for rr in self.rr.values()
                           if rr.state is LeaseState.SCHEDULED and rr.start == now),
                          key=lambda rr: rr.lease.id)
        for rr in starting:
            rr.state = LeaseState.ACTIVE
            lease = rr.lease
            lease.state = LeaseState.ACTIVE
            if lease.first_start is None:
                lease.first_start = now
            self._emit("start", lease, now)

    def _end(self, rr: Reservation, now: int) -> None:
        lease = rr.lease
        premature = rr.real_end < rr.end
        self.table.remove(rr)
        del self.rr[lease.id]
        rr.state = lease.state = LeaseState.DONE
        lease.end = now
        self.completed.append(lease)
        if rr.backfill:
            self.reserved -= 1
        self._emit("end", lease, now)
        if premature:
            self._slideback(now, rr.nodes)

    # -- best-effort scheduling -------------------------------------------------------------------
    def _schedule_queue(self, now: int) -> None:
        waiting: list[Lease] = []
        free_now = self.table.free_count_at(now)
        for i, lease in enumerate(self.queue):
            if self.reserved >= self.max_reservations and free_now == 0:
                waiting.extend(self.queue[i:])  # nothing can start now and nothing can reserve
                break
            if lease.nodes <= free_now and self._try_at(lease, now, backfill=False):
                free_now -= lease.nodes
            elif not (self.reserved < self.max_reservations and self._reserve(lease, now)):
                waiting.append(lease)
        self.queue = waiting

    def _reserve(self, lease: Lease, now: int) -> bool:
        """Give ``lease`` the future reservation: the first change point where it fits (spec §6.3)."""
        for t in self.table.changepoints_after(now):
            if self._try_at(lease, t, backfill=True):
                self.reserved += 1
                return True
        return False

    def _try_at(self, lease: Lease, t: int, *, backfill: bool) -> bool:
        """Fit ``lease`` at ``t`` on the lowest-id nodes free for its whole requested duration."""
        free = self.table.free_on(t, t + lease.duration)
        if len(free) < lease.nodes:
            return False
        rr = Reservation(lease, t, t + lease.duration, t + lease.real_duration, tuple(free[: lease.nodes]),
                         backfill=backfill)
        self.table.add(rr)
        self.rr[lease.id] = rr
        lease.state = LeaseState.SCHEDULED
        self._emit("reserve" if backfill else "schedule", lease, t)
        return True

    # -- advance reservations (spec §6.2, no images yet) ------------------------------------------------
    def _schedule_ar(self, lease: Lease, now: int) -> None:
        assert lease.start is not None
        start, end = lease.start, lease.start + lease.duration
        if start < now:
            self._reject(lease, "its start time has passed")
            return
        nodes = range(self.table.n_nodes)
        free = set(self.table.free_on(start, end))
        victims: dict[int, list[Reservation]] = {}
        for k in nodes:
            if k in free:
                continue
            on_k = [rr for rr in self.table.on_node(k) if rr.overlaps(start, end)]
            if all(rr.lease.preemptible for rr in on_k):
                victims[k] = on_k
        if len(free) + len(victims) < lease.nodes:
            self._reject(lease, f"only {len(free) + len(victims)} of {lease.nodes} nodes can be free "
                                f"on [{start}, {end})")
            return
        # nodes needing no preemption first (ascending id), then fewest preemptions (spec §6.2 step 2)
        order = sorted(free) + sorted(victims, key=lambda k: (len(victims[k]), k))
        chosen = order[: lease.nodes]
        preempt = {id(rr): rr for k in chosen if k in victims for rr in victims[k]}
        for rr in sorted(preempt.values(), key=lambda rr: -rr.lease.submit):  # most recent first
            self._preempt(rr, start, now)
        rr = Reservation(lease, start, end, start + lease.real_duration, tuple(sorted(chosen)))
        self.table.add(rr)
        self.rr[lease.id] = rr
        lease.state = LeaseState.SCHEDULED
        self._emit("reserve", lease, start)

    def _preempt(self, rr: Reservation, t: int, now: int) -> None:
        """Make room at ``t`` for an AR: without suspension the lease is cancelled and requeued in
        submission order, losing the work of its current run (NOVM-NOSR, spec §6.4)."""
        lease = rr.lease
        self.table.remove(rr)
        del self.rr[lease.id]
        if rr.backfill:
            self.reserved -= 1
        lease.state = LeaseState.PENDING
        self._emit("preempt", lease, now)
        ids = [q.id for q in self.queue]
        self.queue.insert(bisect.bisect_left(ids, lease.id), lease)

    def _slideback(self, t: int, nodes: tuple[int, ...]) -> None:
        """Move the next scheduled lease on ``nodes`` earlier after a premature end (spec §6.6)."""
        node_set = set(nodes)
        later = [rr for rr in self.rr.values()
                 if rr.state is LeaseState.SCHEDULED and rr.start > t and node_set.intersection(rr.nodes)]
        keep: dict[int, Reservation] = {}
        for k in nodes:
            on_k = [rr for rr in later if k in rr.nodes]
            if not on_k:
                continue
            first_end = min(rr.end for rr in on_k)
            for rr in on_k:
                if rr.start < first_end:
                    keep[rr.lease.id] = rr
        for _, rr in sorted(keep.items()):
            orig = rr.start
            points = [t, *(p for p in self.table.changepoints_after(t, rr.nodes, ignore=rr) if p < orig)]
            for p in points:
                if len(self.table.free_on(p, orig, rr.nodes, ignore=rr)) == len(rr.nodes):
                    diff = orig - p
                    self.table.reschedule(rr, p, rr.end - diff, rr.real_end - diff)
                    self._emit("slideback", rr.lease, p)
                    break

    def _emit(self, what: str, lease: Lease, t: int) -> None:
        lease.history.append((what, t))
        if self.on_event is not None:
            self.on_event(what, lease, t)
