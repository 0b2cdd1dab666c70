"""The lease scheduler (decisions H6-H13 in docs/decisions/haizea.md): advance reservations,
immediate leases and a best-effort queue with backfilling and (optionally) suspension/resumption,
on a :class:`SlotTable`.

The paper's six configurations are :class:`SchedulerConfig` presets: NOVM-NOSR (the baseline),
NOVM-SR (suspend/resume, memory-only migration), VM-PREDEPLOY (VM overheads: every duration becomes
``ceil(1.05 d) + 20`` s when submitted; memory+image migration), VM-MULT (plus image transfers) and
VM-REUSE (plus per-node image pools; uniform or skewed is the workload's image draw). The rules
are the 2008 code's, as docs/decisions/haizea.md resolves them:

* **Event step** (decision H6): end the RRs that end now, start those that start now, admit the advance
  reservations (AR) and immediate (IM) leases that arrived, schedule the best-effort (BE) queue,
  then start what was scheduled to start now.
* **BE queue** (decision H9): FIFO; suspended or preempted leases go back in submission (id) order. Each
  queued lease tries its earliest start (now; now + migration for a suspended lease) on nodes
  free long enough (Step A-C). A lease that cannot may instead take a **future reservation** at
  the first slot-table change point where it fits, while fewer than ``max_reservations`` are held
  (aggressive backfilling: 1; conservative: unlimited). The counter is released when the reserved
  lease's VM reservation *ends* (completion, premature end or suspension), not when it starts
  (decision H9 [C][V]: releasing at start gives 2,669,567 s instead of 2,674,265 s).
* **Suspension** (decisions H9-H11): with ``suspension``, a lease may start where it cannot run
  its whole remaining time if it can run longer than the suspend threshold; it is then suspended
  (a SUSPEND RR) before the blocking reservation and requeued when that ends. A suspended lease
  resumes (a RESUME RR, then its VM) no earlier than now + migration time, on its old nodes first.
* VMs go to the usable nodes of lowest id; a lease that must be suspended takes the nodes free
  longest (the 2008 ``findPhysNodesForVMs``, see :meth:`AvailabilityWindow.find_nodes`).
* **Slideback** (decision H12): when a lease ends before its requested time, the next scheduled BE
  lease on its nodes moves to the earliest point its nodes are free (without it the baseline is
  2,662,424 s). ARs never move.
* **AR admission** (decision H7, "accept all"): on nodes free for the whole interval first (lowest id),
  then on nodes whose preemptible (BE VM) reservations overlapping the AR are preempted, fewest
  victims first, most recently submitted victim first. A victim not started by the AR's start is
  unscheduled and requeued; a running one is suspended at the AR's start if suspension is on and
  it has run at least the resume threshold by then, else cancelled and requeued, losing the work
  of its current run (NOVM-NOSR). [ours] It is also cancelled when the suspension would have to
  begin before now (an AR with less notice than the suspend time). RESUME and SUSPEND RRs are not
  preemptible (decision H7), so a suspended lease's future plan blocks an AR; the option
  ``preempt_future_resumptions`` lets the AR unschedule such a plan whole. Rejected, with the
  reason, when even preemption is not enough, when the start is past, or the lease is larger than
  the cluster.
* **IM leases**: start now on free nodes, or are rejected; they preempt nothing.
* **Images** (decisions H8, H9, H13): a new BE lease's nodes are usable from the end
  of a new multicast on the FIFO channel (ASAP after the channel's last transfer), or from the end
  of a scheduled, not started transfer of the same image it joins (piggybacking), or now where the
  node's pool holds the image. An AR's image goes on the EDF channel, due by the AR's start and
  pushed as late as possible; an AR whose image cannot arrive in time is rejected. A lease that is
  unscheduled leaves its transfers (one with no users left is deleted). Arrived images enter the
  destination pools (reference counted, LRU eviction). Slideback never moves a lease before its
  image is there. Transfers are change points of the slot table but reserve no node capacity.

**Haizea 1.0** (the released code, :mod:`skylease.control.leases.config`): shutdown reservations
after a normal end (:attr:`Reservation.shutdown`), suspend/resume times with enactment overhead and
exclusion, migration reservations after the suspension (:attr:`Reservation.migrate`), one transfer
link with latest-slot AR transfers, the future reservation freed at the reserved VM's start, and
after a premature end every future reservation scheduled again from scratch
(:meth:`LeaseScheduler._reschedule_future`), each behind its key (2008 by default). Admission,
preemption (which leases an AR may preempt, in which order) and host selection are 1.0's pluggable
policies (:mod:`skylease.control.leases.policies`, the configuration's ``admission``,
``preemption`` and ``host_selection``); the defaults are the rules above.

Not yet: transfers are not passed to the :class:`Enactment` (the simulator needs only their
times); migration charged only when the nodes change (the paper-strict variant) is not an option.

The scheduler never reads a clock: the caller (the simulator now, a real enactment later) calls
:meth:`LeaseScheduler.step` at each event time and asks :meth:`next_event` for the next one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import skylease.control.leases.failures as failures
from skylease.control.leases.config import SchedulerConfig
from skylease.control.leases.enact import Enactment, NullEnactment
from skylease.control.leases.fairness import OwnerHistory, admission
from skylease.control.leases.images import Transfer
from skylease.control.leases.lease import (
    BLUE_HORIZON_NODE,
    NO_RESOURCES,
    Lease,
    LeaseKind,
    LeaseState,
    Reservation,
    ResourceTuple,
    RRKind,
)
from skylease.control.leases.policies import HostRequest
from skylease.control.leases.preparation import ImagePreparation
from skylease.control.leases.slottable import SlotTable

Hook = Callable[[str, Lease, int], None]


class LeaseScheduler:
    """Leases on ``n_nodes`` nodes of capacity ``capacity`` (the paper: 144 single-VM nodes).

    ``prune_dominated``: skip the fit of a lease dominated by one that failed in the same queue
    pass (see :meth:`_fit_be`); ``skip_stale``: skip the fit of a queued lease that would fail as it
    did at its last try (see :meth:`_fails_again`). Neither changes a decision, only the work done;
    the tests that check so turn them off."""

    def __init__(self, n_nodes: int, *, capacity: ResourceTuple = BLUE_HORIZON_NODE,
                 config: SchedulerConfig | None = None, max_reservations: float | None = None,
                 enactment: Enactment | None = None, on_event: Hook | None = None,
                 prune_dominated: bool = True, skip_stale: bool = True,
                 movable: Callable[[Lease], bool] | None = None) -> None:
        if config is None:
            config = SchedulerConfig()
        if max_reservations is not None:
            config = config.with_(max_reservations=max_reservations)
        self.config = config
        self.prune_dominated = prune_dominated
        self.skip_stale = skip_stale
        # (which suspended leases may resume on other nodes even when the configuration's
        # ``migration`` is off: a site's VM leases, whose state moves as a file, when its process
        # leases cannot move; docs/decisions/vm-payloads.md)
        self.movable = movable
        self.table = SlotTable(n_nodes, capacity)
        self.max_reservations = config.max_reservations
        self.queue: list[Lease] = []
        self.rr: dict[int, Reservation] = {}  # lease id -> its current VM reservation (plan)
        self.reserved = 0  # future (backfill) reservations held
        self.completed: list[Lease] = []
        self.rejected: list[tuple[Lease, str]] = []
        self._arrived: list[Lease] = []  # AR and IM leases submitted, handled at the next step
        self._leases: dict[int, Lease] = {}  # every lease submitted, by id
        self._owned: dict[str | None, list[Lease]] = {}  # owner -> their leases admitted, in order
        self._be_placed = 0  # BE leases holding a plan (VM, resume or suspend reservations)
        self.enactment: Enactment = NullEnactment() if enactment is None else enactment
        self.on_event = on_event
        self.images = ImagePreparation(config, self.table)  # transfers and pools
        self._consts: dict[int, tuple] = {}  # lease id -> per-node request and overheads (_fit_be)
        self._suspended_at: dict[int, int] = {}  # lease id -> when its last suspension ended
        # lease id -> (time, start point, table.freed, slack) of its last failed fit (_fails_again)
        self._stale: dict[int, tuple[int, int, int, int]] = {}

    # -- requests -----------------------------------------------------------------------------------
    def submit(self, lease: Lease) -> None:
        """A new request: BE leases join the queue, AR and IM leases are admitted at the next
        :meth:`step`; a request the cluster can never satisfy is rejected with its reason."""
        if lease.id in self._leases:
            self._reject(lease, f"lease id {lease.id} is already in use")
            return
        self._leases[lease.id] = lease
        too_big = self.too_big(lease)
        if too_big is not None:
            self._reject(lease, too_big)
            return
        if lease.kind is LeaseKind.ADVANCE_RESERVATION and (lease.start is None
                                                                or lease.start < lease.submit):
            self._reject(lease, "its start time is before its submission (in the past)")
            return
        refused = admission(self.config.admission, lease, lease.submit, lambda: OwnerHistory(
            lease.owner, self._owned.get(lease.owner, ()), self.rr, lease.submit))
        if refused is not None:
            self._reject(lease, str(refused))
            return
        self._owned.setdefault(lease.owner, []).append(lease)  # (the fairness rules' history)
        # plan with the VM overheads of the configuration (none without VMs, decision H5)
        lease.remaining = self.config.planned(lease.duration)
        lease.real_remaining = self.config.planned(lease.real_duration)
        if lease.kind is LeaseKind.BEST_EFFORT:
            self.queue.append(lease)
        else:
            self._arrived.append(lease)

    def too_big(self, lease: Lease) -> str | None:
        """Why the cluster can never hold ``lease`` (more nodes than it has, or more per node than
        its largest node), or None."""
        if lease.nodes > self.table.n_nodes:
            return f"asks for {lease.nodes} nodes; the cluster has {self.table.n_nodes}"
        if not any(lease.per_node.fits_in(c) for c in self.table.capacity):
            best = max(self.table.capacity, key=lambda c: c.memory)
            too_big = [name for name, v in lease.per_node._asdict().items() if v > getattr(best, name)]
            return (f"asks for {lease.per_node.describe()} per node; the largest node has "
                    f"{best.describe()} (too little {', '.join(too_big)})")
        return None

    def cancel(self, lease_id: int, now: int) -> Lease:
        """Its owner withdraws a lease (the lease service): out of the queue, or its plan out of the
        slot table, stopping what runs of it. Freed nodes are offered to the leases planned after it
        as after a premature end (slideback); the queue is scheduled at the next :meth:`step`.
        A lease already over (done, rejected, cancelled) raises ``ValueError``."""
        lease = self._find(lease_id)
        if lease.state in (LeaseState.DONE, LeaseState.REJECTED, LeaseState.CANCELLED):
            raise ValueError(f"lease {lease_id} is already {lease.state.value}")
        nodes: tuple[int, ...] = ()
        if lease in self._arrived:
            self._arrived.remove(lease)
        elif lease.kind is LeaseKind.BEST_EFFORT and lease in self.queue:
            self.queue.remove(lease)
        if lease.id in self.rr:
            vm = self.rr[lease.id]
            was_running = any(p.state is LeaseState.ACTIVE for p in vm.parts())
            nodes = vm.nodes if was_running else ()
            self._unplace(vm, now)
        self._drop_memos(lease)
        lease.state = LeaseState.CANCELLED
        lease.end = now
        lease.reason = "cancelled by its owner"
        self._emit("cancel", lease, now)
        if nodes and self.config.backfilling:
            self._after_early_end(now, nodes)
        return lease

    def premature_end(self, lease_id: int, now: int, reclaimed: str | None = None) -> bool:
        """The lease's work ended at ``now``, before its VM reservation's planned end (a real
        payload exited early; or the site ``reclaimed`` it, idle, and says why): its real end
        becomes ``now`` and the next :meth:`step` at ``now`` ends it as the simulator ends a lease
        whose real duration is shorter. False when the lease has no running VM reservation that
        ends later."""
        vm = self.rr.get(lease_id)
        if vm is None or vm.state is not LeaseState.ACTIVE or not vm.start <= now < vm.real_end:
            return False
        self.table.reschedule(vm, vm.start, vm.end, now)
        vm.lease.real_remaining = now - vm.start
        if reclaimed is not None:
            vm.lease.reclaimed = reclaimed
        return True

    def late_start(self, lease_id: int, now: int, seconds: int) -> bool:
        """The lease's work began ``seconds`` after its running VM reservation did (a real
        resumption took longer than the window reserved for it: docs/decisions/vm-overruns.md).
        As a premature end gives back what a lease did not use, this gives it back what it lost:
        a lease to be suspended at the reservation's end has that much more left to run at its
        next resumption; one that runs to its end has the reservation (and its shutdown) extended
        by that much where its nodes are free for it. An advance reservation's window is its
        requester's and never moves. False when nothing was given back."""
        vm = self.rr.get(lease_id)
        if (vm is None or vm.state is not LeaseState.ACTIVE or seconds <= 0 or not vm.start <= now < vm.end
                or vm.real_end < vm.end or vm.lease.kind is LeaseKind.ADVANCE_RESERVATION):
            return False
        lease = vm.lease
        if vm.suspend is not None:  # (its next resumption's reservation is planned from remaining)
            lease.remaining += seconds
            lease.real_remaining += seconds
            return True
        moved: list[Reservation] = []
        try:
            for part in (vm.shutdown, vm):  # (the shutdown first: out of the extended VM's way)
                if part is not None:
                    start = part.start if part is vm else part.start + seconds
                    self.table.reschedule(part, start, part.end + seconds, part.real_end + seconds)
                    moved.append(part)
        except ValueError:  # (something is planned on its nodes after it)
            for part in moved:
                start = part.start if part is vm else part.start - seconds
                self.table.reschedule(part, start, part.end - seconds, part.real_end - seconds)
            return False
        return True

    # -- host failures (docs/decisions/host-failures.md; the rules are in failures.py) --------------
    @property
    def down(self) -> frozenset[int]:
        """The nodes down now (they host nothing new)."""
        return frozenset(self.table.down)

    def nodes_down(self, nodes: Iterable[int], now: int, reason: str) -> None:
        """``nodes`` stopped answering at ``now`` (``reason``: why, in words; an AR or IM lease that
        keeps a node of them is marked degraded with it). Nothing new is placed on them until
        :meth:`nodes_up`; the best-effort leases whose work was there are queued again from
        scratch (``requeue``), those that only had a future plan there are queued again as they
        are (``unschedule``); an AR not started moves to free nodes where it can, else it and a
        running one stay, degraded (``degraded``). Nodes already down are ignored. Deterministic
        (the same calls in the same order give the same schedule and events). Call :meth:`step`
        at ``now`` right after it: the leases it queued again are scheduled only by a step."""
        failures.nodes_down(self, nodes, now, reason)

    def nodes_up(self, nodes: Iterable[int], now: int) -> None:
        """``nodes`` answer again at ``now``: they host leases again (nothing else changes: a
        degraded lease stays degraded). Nodes already up are ignored. Call :meth:`step` at ``now``
        right after it so that the queue can use them at once (else only at the next event)."""
        failures.nodes_up(self, nodes, now)

    def lease(self, lease_id: int) -> Lease:
        """A lease this scheduler was given (KeyError if none)."""
        return self._find(lease_id)

    def _find(self, lease_id: int) -> Lease:
        lease = self._leases.get(lease_id)
        if lease is None:
            raise KeyError(lease_id)
        return lease

    def _reject(self, lease: Lease, why: str) -> None:
        lease.state = LeaseState.REJECTED
        lease.reason = why
        self.rejected.append((lease, why))
        self._emit("reject", lease, lease.submit)

    @property
    def busy(self) -> bool:
        """Best-effort work is queued or scheduled (ARs do not keep a run going, decision H5)."""
        return bool(self.queue) or self._be_placed > 0

    # -- the event step -----------------------------------------------------------------------------
    def step(self, now: int) -> None:
        """Everything due at ``now``: ends, starts, AR/IM admission, then the BE queue (decision H6)."""
        self._process(now)
        arrived, self._arrived = self._arrived, []
        for lease in arrived:  # ARs before the best-effort queue
            if lease.kind is LeaseKind.ADVANCE_RESERVATION:
                self._schedule_ar(lease, now)
            else:
                self._schedule_im(lease, now)
        self._schedule_queue(now)
        self._process(now)

    def next_event(self, now: int) -> float:
        """The next time something is due (a reservation start, end or real end)."""
        return self.table.next_changepoint(now)

    def _process(self, now: int) -> None:
        if self.images.fifo or self.images.edf:
            self.images.process(now, self._vm_end)
        ending = sorted((rr for rr in self.table.ending_at(now) if rr.state is LeaseState.ACTIVE),
                        key=lambda rr: (rr.lease.id, rr.start))
        for rr in ending:
            if rr.kind is RRKind.VM:
                self._end_vm(rr, now)
            elif rr.kind is RRKind.SUSPEND:
                self._end_suspend(rr, now)
            elif rr.kind is RRKind.SHUTDOWN:
                self._end_part(rr, now)
                self._finish(rr.lease, now)
            else:  # the migration or resumption is over
                self._end_part(rr, now)
        starting = sorted((rr for rr in self.table.starting_at(now) if rr.state is LeaseState.SCHEDULED),
                          key=lambda rr: (rr.lease.id, rr.start))
        for rr in starting:
            rr.state = LeaseState.ACTIVE
            lease = rr.lease
            self.enactment.start(rr, now)
            if rr.kind is RRKind.VM:
                lease.state = LeaseState.ACTIVE
                if lease.first_start is None:
                    lease.first_start = now
                if self.config.backfill_release == "start":  # Haizea 1.0: the future is now
                    self._release_reservation(rr)
                self._emit("start", lease, now)
            elif rr.kind is RRKind.RESUME:
                lease.state = LeaseState.ACTIVE
                self._emit("resume", lease, now)
            else:  # "suspend", "shutdown", "migrate"
                self._emit(rr.kind.value, lease, now)

    def _end_vm(self, rr: Reservation, now: int) -> None:
        lease = rr.lease
        premature = rr.real_end < rr.end
        self.table.remove(rr)
        rr.state = LeaseState.DONE
        self.enactment.stop(rr, now)
        self._release_reservation(rr)
        self.images.drop(lease.id)
        if rr.suspend is not None and not premature and lease.real_remaining > now - rr.start:
            # planned suspension: the SUSPEND RR starts now
            lease.remaining -= now - rr.start
            lease.real_remaining -= now - rr.start
            lease.last_nodes = rr.nodes
            return
        for post in (rr.suspend, rr.shutdown):
            if post is not None and (premature or post is rr.suspend):
                # it finished by its planned suspension, or ended early: no shutdown (Haizea 1.0)
                self.table.remove(post)
                post.state = LeaseState.DONE
        if rr.shutdown is not None and not premature:
            lease.remaining = lease.real_remaining = 0  # done when its shutdown is
            return
        self._finish(lease, now)
        if premature and self.config.backfilling:  # (an AR may end early too: XML workloads)
            self._after_early_end(now, rr.nodes)

    def _end_part(self, rr: Reservation, now: int) -> None:
        self.table.remove(rr)
        rr.state = LeaseState.DONE
        self.enactment.stop(rr, now)

    def _finish(self, lease: Lease, now: int) -> None:
        self._forget(lease)
        self._drop_memos(lease)
        lease.state = LeaseState.DONE
        lease.end = now
        lease.remaining = lease.real_remaining = 0
        self.completed.append(lease)
        self._emit("end", lease, now)

    def _end_suspend(self, rr: Reservation, now: int) -> None:
        self._end_part(rr, now)
        lease = rr.lease
        self._forget(lease)
        lease.state = LeaseState.SUSPENDED
        self._suspended_at[lease.id] = now
        self._requeue(lease)

    def _after_early_end(self, now: int, nodes: tuple[int, ...]) -> None:
        """Nodes freed before their plan's end: slide the next plans earlier (2008), or cancel every
        future reservation and schedule those leases again from scratch (Haizea 1.0)."""
        if self.config.premature_end == "slide":
            self._slideback(now, nodes)
        else:
            self._reschedule_future(now)

    def _reschedule_future(self, now: int) -> None:
        """Haizea 1.0's ``reevaluate_schedule``: each BE lease holding a future reservation that has
        not started is unscheduled (its transfers too) and scheduled again now, as a new lease
        would be (a suspended one again waits now + its migration estimate)."""
        future = sorted((vm for vm in self.rr.values()
                         if vm.backfill and vm.lease.kind is LeaseKind.BEST_EFFORT
                         and vm.parts()[0].state is LeaseState.SCHEDULED), key=lambda vm: vm.lease.id)
        for vm in future:
            lease = vm.lease
            self._unplace(vm, now)
            lease.state = LeaseState.SUSPENDED if vm.resume is not None else LeaseState.PENDING
            self._emit("unschedule", lease, now)
            if not self._fit_be(lease, now, queued=False):
                self._requeue(lease)

    def _vm_end(self, lid: int) -> int | None:
        vm = self.rr.get(lid)
        return None if vm is None else vm.end

    def _release_reservation(self, rr: Reservation) -> None:
        if rr.backfill:
            rr.backfill = False
            self.reserved -= 1

    def _forget(self, lease: Lease) -> None:
        del self.rr[lease.id]
        if lease.kind is LeaseKind.BEST_EFFORT:
            self._be_placed -= 1

    def _drop_memos(self, lease: Lease) -> None:
        """A lease is over: what was kept to schedule it goes, so that what the scheduler holds
        stays the size of its queue and plan, not of its past (a long run, or the lease service)."""
        self._consts.pop(lease.id, None)
        self._suspended_at.pop(lease.id, None)
        self._stale.pop(lease.id, None)

    def _requeue(self, lease: Lease) -> None:
        """Back into the queue in submission (id) order (decision H9)."""
        q = self.queue
        lo, hi = 0, len(q)
        while lo < hi:
            mid = (lo + hi) // 2
            if q[mid].id < lease.id:
                lo = mid + 1
            else:
                hi = mid
        q.insert(lo, lease)

    def _place(self, lease: Lease, start: int, end: int, real_end: int, nodes: tuple[int, ...], *,
               backfill: bool = False, resume_s: int = 0, suspend_s: int = 0,
               shutdown_s: int = 0) -> Reservation:
        """Book a lease's plan: [RESUME on [start - resume_s, start)], VM on [start, end),
        [SUSPEND on [end, end + suspend_s)] or [SHUTDOWN on [end, end + shutdown_s)]."""
        usage = lease.per_node
        rr = Reservation(lease, start, end, real_end, nodes, backfill=backfill, usage=usage)
        side = ResourceTuple(0.0, usage.memory, usage.disk, 0.0)  # memory state on disk: no CPU
        if resume_s:
            rr.resume = Reservation(lease, start - resume_s, start, start, nodes, kind=RRKind.RESUME,
                                    usage=side)
            self.table.add(rr.resume)
        self.table.add(rr)
        if suspend_s:
            rr.suspend = Reservation(lease, end, end + suspend_s, end + suspend_s, nodes, kind=RRKind.SUSPEND,
                                     usage=side)
            self.table.add(rr.suspend)
        elif shutdown_s:  # the VMs, still running, are shut down (Haizea 1.0)
            rr.shutdown = Reservation(lease, end, end + shutdown_s, end + shutdown_s, nodes,
                                      kind=RRKind.SHUTDOWN, usage=usage)
            self.table.add(rr.shutdown)
        self.rr[lease.id] = rr
        self._stale.pop(lease.id, None)
        if backfill:
            self.reserved += 1
        if lease.kind is LeaseKind.BEST_EFFORT:
            self._be_placed += 1
        lease.state = LeaseState.SCHEDULED
        return rr

    def _unplace(self, rr: Reservation, now: int) -> None:
        """Take a lease's whole plan out of the table (stopping what runs of it)."""
        for part in rr.parts():
            if part.state is LeaseState.DONE:
                continue
            self.table.remove(part)
            if part.state is LeaseState.ACTIVE:
                self.enactment.stop(part, now)
            part.state = LeaseState.DONE
        self._release_reservation(rr)
        self.images.drop(rr.lease.id)
        self._forget(rr.lease)

    # -- best-effort leases -------------------------------------------------------------------------
    def _schedule_queue(self, now: int) -> None:
        waiting: list[Lease] = []
        queue = self.queue
        failed: dict[tuple, list[tuple[int, int]]] | None = {} if self.prune_dominated else None
        table = self.table
        stale = self._stale if self.skip_stale else {}
        last_end = table.last_end(now)  # (the pass adds no end before now)
        cpu_version, cpu_free = -1, True
        for i, lease in enumerate(queue):
            if self.reserved >= self.max_reservations:
                memo = stale.get(lease.id)
                if memo is not None and self._fails_again(memo, now, last_end):
                    fits = False
                else:
                    # asked only before a real fit: a skipped one changes nothing, so the leases
                    # tried are the same; and once per table version (it changes when one is placed)
                    if cpu_version != table.version:
                        cpu_version, cpu_free = table.version, table.has_free_cpu(now)
                    if not cpu_free:
                        waiting.extend(queue[i:])  # nothing can start now and nothing can reserve
                        break
                    fits = self._fit_be(lease, now, failed)
            else:
                fits = self._fit_be(lease, now, failed)
            if not fits:
                waiting.append(lease)
                if not self.config.backfilling:
                    waiting.extend(queue[i + 1:])
                    break
        self.queue = waiting

    def _fit_be(self, lease: Lease, now: int, failed: dict[tuple, list[tuple[int, int]]] | None = None,
                *, queued: bool = True) -> bool:
        """Schedule ``lease`` at its earliest start, or give it a future reservation (decision H9,
        steps A-D). Without suspension a lease is accepted at a point only if it runs its whole
        remaining time there; with it, also if it runs longer than the suspend threshold.
        ``queued``: the lease comes from the queue (not from a rescheduling after a premature end;
        Haizea 1.0's threshold counts the resumption only for a lease waiting in the queue).

        ``failed`` (one queue pass) records the (nodes, time needed) of the leases that did not
        fit, by everything else the fit depends on (start points, request, threshold, whether a
        reservation is possible). Within a pass the table only gains reservations and transfers,
        so a lease that asks for at least as many nodes for at least as long under the same key
        cannot fit either: it is skipped without a search (same decisions; the 30 % VM-MULT run
        tries 1.7 million fits on 17,777 events otherwise). A failure of a queued lease at its
        one earliest start is also remembered across passes (:meth:`_fails_again`)."""
        cfg = self.config
        resuming = lease.state is LeaseState.SUSPENDED
        consts = self._consts.get(lease.id)
        if consts is None:  # the lease's overheads never change: worked out once (a hot path)
            consts = self._consts[lease.id] = (
                lease.per_node, self._resume_need(lease), cfg.resume_threshold(lease),
                cfg.initial_threshold(lease), cfg.shutdown_time(lease))
        req, resume_need, threshold, initial, shutdown = consts
        if not resuming:
            resume_need, threshold = 0, initial
        elif not queued and cfg.threshold == "1.0":
            threshold = initial
        # Step A/B: every node's earliest time: a suspended lease migrates first; a new one waits
        # for its image (FIFO channel, or a scheduled transfer it can join), unless pooled
        need = lease.remaining + resume_need + shutdown
        piggy: Transfer | None = None
        pool_nodes: set[int] = set()
        points: list[tuple[int, set[int] | None]]  # (start, the nodes usable then; None: all)
        if cfg.transfers and not resuming:
            points, piggy, pool_nodes = self.images.earliest(lease, now)
        else:
            points = [(now + (cfg.migrate_s(lease, lease.last_nodes) if resuming else 0), None)]
        first_points = len(points)
        # one earliest start that moves with the clock (an image's arrival does not): followed
        followed = queued and first_points == 1 and points[0][1] is None and (resuming or not cfg.transfers)
        can_reserve = self.reserved < self.max_reservations
        key = None
        if failed is not None:
            key = (tuple((t, None if u is None else frozenset(u)) for t, u in points), req, threshold,
                   can_reserve, resume_need)
            for n, d in failed.get(key, ()):
                if n <= lease.nodes and d <= need:
                    if followed:
                        self._remember_failure(lease, now, points[0][0], need)
                    return False
        if can_reserve:
            points += [(p, None) for p in self.table.changepoints_after(points[-1][0])]
        for i, (t, usable) in enumerate(points):
            w = self.table.window(t, req)
            if usable is not None:
                w = w.restricted(usable)
            if resuming and not (cfg.migration or (self.movable is not None and self.movable(lease))):
                # (it resumes where it was suspended, or waits)
                w = w.restricted(set(lease.last_nodes))
            if len(w.until) < lease.nodes:
                continue
            maxend = t + need
            # the nodes only where they are used: a stay cut short is of no use without suspension
            end = w.latest_end(lease.nodes, maxend)
            if end < maxend and not (cfg.suspension and _long_enough(cfg, end - t, threshold)):
                continue
            end, nodes = w.find_nodes(lease.nodes, maxend)
            chosen = self._choose_nodes(lease, nodes, resuming, t)
            plan = self._plan_be(lease, t, int(end), chosen, resuming, shutdown)
            if plan is None:
                continue
            vm_start, vm_end, resume_s, suspend_s, shutdown_s = plan
            real_end = min(vm_start + lease.real_remaining, vm_end)
            backfill = i >= first_points
            vm = self._place(lease, vm_start, vm_end, real_end, chosen, backfill=backfill, resume_s=resume_s,
                             suspend_s=suspend_s, shutdown_s=shutdown_s)
            if resuming and cfg.migration_reservations and chosen != lease.last_nodes:
                self._place_migration(vm, now)
            if cfg.transfers and not resuming:
                self.images.stage_be(lease, chosen, now, pool_nodes, piggy, vm_end)
            self._emit("reserve" if backfill else "schedule", lease, t)
            return True
        if key is not None:
            failed.setdefault(key, []).append((lease.nodes, need))
        if followed:
            self._remember_failure(lease, now, points[0][0], need)
        return False

    def _remember_failure(self, lease: Lease, now: int, p: int, need: int) -> None:
        """Record that the queued ``lease`` cannot start at ``p``, its only earliest start, for
        :meth:`_fails_again`, with how many nodes it lacks there, less one: of those free for its
        whole ``need``, or with suspension of those free at all (0 if it lacked none)."""
        w = self.table.window(p, lease.per_node)
        free = len(w.until) if self.config.suspension else w.count_free_until(p + need)
        self._stale[lease.id] = (now, p, self.table.freed, max(0, lease.nodes - 1 - free))

    def _fails_again(self, memo: tuple[int, int, int, int], now: int, last_end: float) -> bool:
        """Whether a queued lease, whose fit failed at time ``t`` (:meth:`_remember_failure`),
        must fail now too, while no future reservation can be taken: then it is not tried. Same
        decisions (a hypothesis test compares every history); without it the Blue Horizon runs try
        most of the queue again at every event, so the cost per lease grew with the queue.

        While it waits, its request, overheads and earliest start do not change (it leaves the
        queue only when placed, which drops the record): it would be tried at the one point
        ``p + (now - t)``. Take a node it could use there that no removed (or moved) reservation
        was on: the node's reservations at ``t`` are all still in the table, unchanged; each of
        them over some instant of ``[p, p + (now - t))`` either covers the new point too or ends
        in between, and none ends in between (checked: ``last_end`` is the latest end by
        ``now``, which answers for ``p == t``). So the node was usable from ``p`` and at least
        as long. Hence the usable nodes now are at most those of then plus the nodes freed since
        (``table.freed - freed``): the lease lacked ``slack + 1`` nodes at ``p`` (0 when it
        lacked time, or its plan did not fit, and then nothing may have been freed: no node is
        usable longer than at ``p``, so neither is the plan, whose suspension and resumption
        times depend only on the lease at one VM per node)."""
        t, p, freed, slack = memo
        table = self.table
        if now < t or table.freed - freed > slack:
            return False
        if p == t:
            return last_end <= t
        return not table.ends_within(p, p + (now - t))

    def _resume_need(self, lease: Lease) -> int:
        """The time a resumption is planned with: Haizea 1.0 plans with its whole-lease estimate,
        the 2008 code with the resumption's length; never less than the resumption can take
        wherever the VMs go (all on one node), or a lease could be planned nowhere (Haizea 1.0
        stops with an error there; its own estimate is never less in its test configuration)."""
        cfg = self.config
        worst = cfg.resume_s(lease, (0,) * lease.nodes)
        return max(cfg.resume_estimate(lease) if cfg.threshold == "1.0" else cfg.resume_s(lease), worst)

    def _choose_nodes(self, lease: Lease, nodes: list[int], resuming: bool, at: int) -> tuple[int, ...]:
        """Host selection of a BE lease starting at ``at`` on the usable ``nodes`` (ascending)."""
        return self._select(HostRequest(lease, at, tuple(nodes), self.table,
                                        previous=lease.last_nodes if resuming else ()))

    def _select(self, request: HostRequest) -> tuple[int, ...]:
        """The host-selection policy's nodes, checked: a policy that picks a node it was not offered
        would overbook one; that is its author's bug, said plainly."""
        chosen = tuple(sorted(self.config.host_selection.select(request)))
        lease = request.lease
        if len(chosen) != lease.nodes or len(set(chosen)) != len(chosen) or not set(chosen) <= set(
                request.candidates):
            raise ValueError(f"host selection {type(self.config.host_selection).__name__} gave lease "
                             f"{lease.id} the nodes {list(chosen)}: it needs {lease.nodes} distinct nodes of "
                             f"{list(request.candidates)}")
        return chosen

    def _plan_be(self, lease: Lease, t: int, end: int, nodes: tuple[int, ...], resuming: bool,
                 shutdown: int) -> tuple[int, int, int, int, int] | None:
        """The plan of a BE lease given ``nodes`` free on ``[t, end)``: ``(VM start, VM end, resume,
        suspend, shutdown lengths)``, or None if no VM time is left. As Haizea 1.0's
        ``__schedule_asap`` (the 2008 code's when there are no shutdowns and the resumption takes
        what it was planned with): the resumption runs from ``t``; if the VM cannot run its
        remaining time before ``end`` it is suspended to be off the nodes by ``end``; else it runs
        its remaining time (less, if a shutdown would not fit) and is shut down."""
        cfg = self.config
        resume_s = cfg.resume_s(lease, nodes) if resuming else 0
        vm_start = t + resume_s
        if end - vm_start < lease.remaining:
            if not cfg.suspension:
                return None
            suspend_s = cfg.suspend_s(lease, nodes)
            vm_end, shutdown = end - suspend_s, 0
        else:
            suspend_s = 0
            vm_end = min(vm_start + lease.remaining, end - shutdown)
        if vm_end <= vm_start:
            return None
        return vm_start, vm_end, resume_s, suspend_s, shutdown

    def _place_migration(self, vm: Reservation, now: int) -> None:
        """Haizea 1.0 reserves the migration (the image first when images move, then the memory)
        right after the suspension (or now), to the resumption's nodes; it reserves no node
        capacity (its network use is not checked, as for image transfers)."""
        lease = vm.lease
        start = max(now, self._suspended_at.get(lease.id, now))
        span = migration_s(self.config, lease, lease.last_nodes, vm.nodes)
        if span <= 0:
            return
        vm.migrate = Reservation(lease, start, start + span, start + span, vm.nodes, kind=RRKind.MIGRATE,
                                 usage=NO_RESOURCES)
        self.table.add(vm.migrate)

    def _slideback(self, t: int, nodes: tuple[int, ...]) -> None:
        """Move the next scheduled BE lease on ``nodes`` earlier after a premature end (decision H12)."""
        keep: dict[int, Reservation] = {}
        for k in set(nodes):
            plans: dict[int, Reservation] = {}
            for part in self.table.on_node(k):
                vm = self.rr.get(part.lease.id)
                if part.start <= t or vm is None or vm.state is not LeaseState.SCHEDULED:
                    continue
                first = vm.resume or vm
                if first.state is LeaseState.SCHEDULED and first.start > t:
                    plans[part.lease.id] = vm
            if not plans:
                continue
            first_end = min(vm.final_end for vm in plans.values())
            for lid, vm in plans.items():
                if (vm.resume or vm).start < first_end:
                    keep[lid] = vm
        for _, vm in sorted(keep.items()):
            if vm.lease.kind is LeaseKind.BEST_EFFORT:  # an AR starts exactly on time
                self._slide(vm, t)

    def _slide(self, vm: Reservation, t: int) -> None:
        lease = vm.lease
        first = vm.resume or vm
        orig = first.start
        t = max(t, self.images.ready.get(lease.id, t))  # not before its image is there
        points = [t, *(p for p in self.table.changepoints_after(t, vm.nodes) if p < orig)]
        # the earliest point from which the nodes are free until orig (the plan itself, from orig
        # on, cannot overlap [p, orig)). Free on [p, orig) implies free on any later [p', orig):
        # the test is monotone in p, so a binary search finds that point. Trying the points in
        # order cost a fit per point and node, and a busy log has many points before orig.
        table, usage = self.table, vm.usage
        lo, hi = 0, len(points)
        while lo < hi:
            mid = (lo + hi) // 2
            if all(table.fits(k, points[mid], orig, usage) for k in vm.nodes):
                hi = mid
            else:
                lo = mid + 1
        if lo == len(points):
            return
        p = points[lo]
        diff = orig - p
        start = vm.start - diff
        shutdown = self.config.shutdown_time(lease)
        new_shutdown = False
        if vm.suspend is None:
            end, real_end = vm.end - diff, vm.real_end - diff
        elif (vm.end - start < lease.remaining
              or start + lease.remaining + shutdown > vm.final_end):  # keep the suspension
            end, real_end = vm.end, min(start + lease.real_remaining, vm.end)
        else:  # it can now finish: no suspension (a shutdown instead, where there are shutdowns)
            self.table.remove(vm.suspend)
            vm.suspend = None
            end, real_end = start + lease.remaining, start + lease.real_remaining
            new_shutdown = shutdown > 0
        if vm.resume is not None:
            self.table.reschedule(vm.resume, p, p + (vm.resume.end - vm.resume.start), start)
        self.table.reschedule(vm, start, end, real_end)
        if new_shutdown:  # after the VM moved: it may take some of the VM's old time
            vm.shutdown = Reservation(lease, end, end + shutdown, end + shutdown, vm.nodes,
                                      kind=RRKind.SHUTDOWN, usage=vm.usage)
            self.table.add(vm.shutdown)
        elif vm.shutdown is not None and vm.shutdown.start != end:
            length = vm.shutdown.end - vm.shutdown.start
            self.table.reschedule(vm.shutdown, end, end + length, end + length)
        self._emit("slideback", lease, p)

    # -- advance reservations and immediate leases (decision H7, no images yet) ---------------------
    def _schedule_ar(self, lease: Lease, now: int) -> None:
        assert lease.start is not None
        start, end = lease.start, lease.start + lease.remaining
        if start < now:
            self._reject(lease, "its start time has passed")
            return
        free, victims = self.ar_room(lease, start, end)
        if len(free) + len(victims) < lease.nodes:
            self._reject(lease, f"only {len(free) + len(victims)} of {lease.nodes} nodes can be free "
                                f"on [{start}, {end})")
            return
        pooled = self.images.pooled_at(lease, start)
        chosen = self._select(HostRequest(lease, start, tuple(sorted([*free, *victims])), self.table,
                                          victims={k: len(v) for k, v in victims.items()},
                                          pooled=frozenset(pooled)))
        staged = self.images.stage_ar(lease, chosen, pooled, now) if self.config.transfers else None
        if staged is not None:
            self._reject(lease, staged)
            return
        preempt = {id(rr): rr for k in chosen if k in victims for rr in victims[k]}
        for rr in self._preemption_order(lease, list(preempt.values()), start):
            self._preempt(rr, start, now)
        shutdown = self.config.shutdown_time(lease)  # inside the AR's window (Haizea 1.0)
        if shutdown >= end - start:
            shutdown = 0
        vm_end = end - shutdown
        self._place(lease, start, vm_end, min(start + lease.real_remaining, vm_end), chosen,
                    shutdown_s=shutdown)
        self.images.pin(lease, chosen, pooled, end)
        self._emit("reserve", lease, start)

    def ar_room(self, lease: Lease, start: int, end: int) -> tuple[list[int], dict[int, list[Reservation]]]:
        """Where an AR ``lease`` on ``[start, end)`` could go, changing nothing: the nodes free for it
        the whole interval (ascending), and the nodes it could have by preempting, each with its
        victims' VM reservations (decision H7; the preemption policy's say). :meth:`_schedule_ar`
        places ARs with it, and the counter-offers (:mod:`skylease.control.leases.offers`) ask it."""
        req = lease.per_node
        free = self.table.free_on(start, end, req)
        free_set = set(free)
        victims: dict[int, list[Reservation]] = {}
        can_go = self._ar_may_take(lease, start, end)
        for k in self.table.free_on(start, end, req, skip=can_go):
            if k not in free_set:
                on_k = {id(vm): vm for vm in (self.rr[rr.lease.id] for rr in self.table.on_node(k)
                                              if can_go(rr) and rr.overlaps(start, end))}
                victims[k] = list(on_k.values())
        return free, victims

    def _ar_may_take(self, lease: Lease, start: int, end: int) -> Callable[[Reservation], bool]:
        """Which reservations an AR ``lease`` on ``[start, end)`` may take the place of (decision H7;
        the preemption policy's say): :meth:`ar_room`'s and :meth:`ar_fits`' one rule."""
        policy = self.config.preemption
        movable = _preemptible_or_future_resume if self.config.preempt_future_resumptions else _preemptible

        def can_go(rr: Reservation) -> bool:
            if rr.kind is RRKind.SHUTDOWN:  # (Haizea 1.0) it goes with its VM: preempting the VM
                vm = self.rr.get(rr.lease.id)  # replaces it; a shutdown alone is not preempted
                return (vm is not None and vm.shutdown is rr and vm.overlaps(start, end) and movable(vm)
                        and policy.may_preempt(lease, rr.lease, start))
            return movable(rr) and policy.may_preempt(lease, rr.lease, start)

        return can_go

    def ar_fits(self, lease: Lease, start: int, end: int) -> bool:
        """Whether :meth:`ar_room` would give ``lease`` its nodes on ``[start, end)`` (free, or
        freed by preemption), stopping as soon as the answer is known: a counter-offer asks at every
        reservation end it tries, and a request for most of the nodes is answered no at the first few
        busy ones rather than after a fit of every node (a node freed by preemption is free once the
        reservations the AR may take are skipped, so one pass counts both)."""
        can_go = self._ar_may_take(lease, start, end)
        need, left = lease.nodes, self.table.n_nodes
        for k in range(self.table.n_nodes):
            left -= 1
            if self.table.free_until(k, start, lease.per_node, skip=can_go) >= end:
                need -= 1
                if need == 0:
                    return True
            if left < need:
                return False
        return need <= 0

    def _schedule_im(self, lease: Lease, now: int) -> None:
        """An immediate lease starts now on free nodes or is rejected (it preempts nothing)."""
        w = self.table.window(now, lease.per_node)
        shutdown = self.config.shutdown_time(lease)
        until = now + lease.remaining + shutdown
        end, nodes = w.find_nodes(lease.nodes, until)
        if end < until:
            self._reject(lease, f"{len(w.nodes_free_until(until))} of {lease.nodes} nodes are free for "
                                f"[{now}, {until})")
            return
        vm_end = now + lease.remaining
        chosen = self._select(HostRequest(lease, now, tuple(nodes), self.table))
        self._place(lease, now, vm_end, now + lease.real_remaining, chosen, shutdown_s=shutdown)
        self._emit("schedule", lease, now)

    def _preemption_order(self, lease: Lease, victims: list[Reservation], at: int) -> list[Reservation]:
        """The preemption policy's order of the victims, checked to be the same victims."""
        order = list(self.config.preemption.order(lease, victims, at))
        if len(order) != len(victims) or {id(rr) for rr in order} != {id(rr) for rr in victims}:
            raise ValueError(f"preemption {type(self.config.preemption).__name__} ordered the victims of "
                             f"lease {lease.id} into other reservations than it was given")
        return order

    def _preempt(self, vm: Reservation, t: int, now: int) -> None:
        """Free ``vm``'s nodes from ``t`` on for an AR (decision H11)."""
        lease = vm.lease
        cfg = self.config
        if vm.state is LeaseState.SCHEDULED and vm.start >= t:  # not started by then: unschedule
            self._unplace(vm, now)
            self._emit("preempt", lease, now)
        elif (cfg.suspension and t - vm.start >= self._preempt_threshold(lease)
              and t - cfg.suspend_s(lease, vm.nodes) >= max(now, vm.start + 1)):
            # suspend so as to be off the nodes at t
            suspend_s = cfg.suspend_s(lease, vm.nodes)
            for post in (vm.suspend, vm.shutdown):
                if post is not None:
                    self.table.remove(post)
            vm.shutdown = None
            self.table.reschedule(vm, vm.start, t - suspend_s, min(vm.real_end, t - suspend_s))
            vm.suspend = Reservation(lease, t - suspend_s, t, t, vm.nodes, kind=RRKind.SUSPEND,
                                     usage=ResourceTuple(0.0, vm.usage.memory, vm.usage.disk, 0.0))
            self.table.add(vm.suspend)
            self._emit("preempt", lease, now)
            return
        else:  # cancel: the work of the current run is lost (NOVM-NOSR; or too late to suspend)
            self._unplace(vm, now)
            self._emit("preempt", lease, now)
        # a lease with a resumption in its plan was suspended before: it still has to resume
        lease.state = LeaseState.SUSPENDED if vm.resume is not None else LeaseState.PENDING
        self._requeue(lease)

    def _preempt_threshold(self, lease: Lease) -> float:
        """How long a running lease must have run to be suspended for an AR rather than cancelled:
        the 2008 resume threshold; Haizea 1.0's threshold of a running lease (no resumption)."""
        cfg = self.config
        return cfg.initial_threshold(lease) if cfg.threshold == "1.0" else cfg.resume_threshold(lease)

    def _emit(self, what: str, lease: Lease, t: int) -> None:
        lease.history.append((what, t))
        if self.on_event is not None:
            self.on_event(what, lease, t)


def _preemptible(rr: Reservation) -> bool:
    return rr.preemptible


def _preemptible_or_future_resume(rr: Reservation) -> bool:
    """Also the resumption of a BE lease's plan that has not started: unscheduling the plan frees it."""
    return rr.preemptible or (rr.kind is RRKind.RESUME and rr.state is LeaseState.SCHEDULED
                              and rr.lease.preemptible)


def _long_enough(cfg: SchedulerConfig, run: float, threshold: float) -> bool:
    """Whether a run of ``run`` seconds before a planned suspension passes the threshold (the 2008
    code wants more than it, Haizea 1.0 at least it)."""
    return run >= threshold if cfg.threshold == "1.0" else run > threshold


def migration_s(cfg: SchedulerConfig, lease: Lease, origin: tuple[int, ...], dest: tuple[int, ...]) -> int:
    """Haizea 1.0's migration of a lease from ``origin`` to ``dest`` (one node per VM, in VM order):
    every VM moves, in rounds where no node sends or receives twice; each round moves the image
    (when images move: one per VM of the round) and then the memory of one VM, each rounded up."""
    pairs = list(zip(origin, dest, strict=False))
    rounds = []
    while pairs:
        used: set[int] = set()
        now, later = [], []
        for o, d in pairs:
            if o in used or d in used:
                later.append((o, d))
            else:
                now.append((o, d))
                used.update((o, d))
        rounds.append(len(now))
        pairs = later
    mem = sum(math.ceil(lease.memory / cfg.bandwidth) for _ in rounds)
    if cfg.migrate != "mem+vm":
        return mem
    return mem + sum(math.ceil(n * cfg.image_mb(lease) / cfg.bandwidth) for n in rounds)
