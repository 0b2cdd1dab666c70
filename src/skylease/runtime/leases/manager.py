"""The lease manager on a real clock: the simulator's :class:`LeaseScheduler`, driven by wall time,
journaled in the database, enacted on this machine's nodes (issue 19; the paper's Section 3).

One policy, two clocks: the scheduler is the one :mod:`skylease.sim.leases` drives, unchanged. The
simulator calls ``step(t)`` at every arrival and every slot-table change point; so does this
manager, at the same lease times: a request is submitted and stepped at the lease time it reached
the manager, and a thread steps at each ``next_event`` when the clock reaches it (events are
recorded at their exact times even when the thread wakes a few milliseconds late, or the lock is
busy when a request comes, so the schedule is the simulator's). Two inputs exist only
here: a lease cancelled by its owner, and a premature end, when a lease's payloads exit before its
reservation's planned end (the scheduler then reacts as to a shorter real duration).

Crash safety (issue 19: "no lease is lost, started twice or left in a state that does not match its
processes"): every input goes to the :class:`~skylease.runtime.leases.journal.Journal` with the
events it produced, in one transaction, before the API answers and before anything is enacted. A
restarted manager replays the journal into a fresh scheduler (nothing enacted), adopts the payload
processes still alive, steps through what fell due while it was down, and reconciles the rest. The
crash tests provoke the worst moments for real through the enactment (``nodes_factory``: a
:class:`~skylease.runtime.leases.local.LocalNodes` whose spawn kills the server).

Liveness (docs/decisions/serve-liveness.md): if the manager's thread dies (a bug, a lost database),
or the enactment's watcher does, :meth:`LocalLeaseManager.failure` says why, and every call that
reads or changes leases raises :class:`~skylease.runtime.health.Unavailable` (a stopped scheduler's
views would lie; a request is refused before it is journaled, so no lease is accepted that nothing
would run). The death is recorded under the manager's lock, which the thread holds whenever it
works: a request answered before the death was journaled before it, and a restart runs it.

Enactment is a reconciliation: the scheduler's start/stop calls mark the leases they touch, and after
each command (for a request: in the manager thread, once it is answered, so that starting processes
delays no answer) the manager makes each touched lease's processes match what the scheduler says
(:func:`desired`): running on the nodes of its active VM reservation, stopped while suspended with
work saved, or gone. The machine-level primitives (spawn, SIGSTOP, SIGCONT, re-pin, shutdown,
image copies) are :class:`~skylease.runtime.leases.local.LocalNodes`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from bisect import insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from skylease.control.leases import (
    Lease,
    LeaseKind,
    LeaseScheduler,
    LeaseState,
    Reservation,
    RRKind,
    SchedulerConfig,
    Transfer,
)
from skylease.control.leases.config import HAIZEA10_KEYS, POLICY_KEYS
from skylease.control.leases.fairness import rule_of
from skylease.control.leases.policies import describe
from skylease.control.leases.records import Event, Run, TransferRun
from skylease.model.errors import UserError
from skylease.model.lease_types import preemptible_refusal
from skylease.runtime.changes import Changes
from skylease.runtime.health import Unavailable, Vital
from skylease.runtime.leases.api import (
    LeaseRefused,
    LeaseRequest,
    LeaseView,
)
from skylease.runtime.leases.clock import RealClock
from skylease.runtime.leases.extending import Extending, ExtensionRules
from skylease.runtime.leases.group_commit import GroupCommit
from skylease.runtime.leases.host_failures import HostFailures
from skylease.runtime.leases.idling import Idling
from skylease.runtime.leases.journal import Batch, InputKind, Journal, OverheadRow
from skylease.runtime.leases.listing import SCAN_CHUNK, SNAPSHOT_CHUNK, Listing
from skylease.runtime.leases.live import Live
from skylease.runtime.leases.local_vms import MIN_VM_MEMORY_MB, vm_image_problem
from skylease.runtime.leases.notices import BeforeEnd, Warned, WarningConfig
from skylease.runtime.leases.offering import Offering, earliest_for
from skylease.runtime.leases.recovery import Recovery
from skylease.runtime.leases.ssh import SshError
from skylease.runtime.leases.views import build_view
from skylease.runtime.leases.vm_leases import VmLeases

if TYPE_CHECKING:
    from skylease.runtime.leases.sandbox import Sandbox

log = logging.getLogger("skylease.leases")

_KINDS = {"best-effort": LeaseKind.BEST_EFFORT, "advance-reservation": LeaseKind.ADVANCE_RESERVATION,
          "immediate": LeaseKind.IMMEDIATE}
_TERMINAL = (LeaseState.DONE, LeaseState.REJECTED, LeaseState.CANCELLED)
#: A payload that exits less than this many lease seconds before its reservation's planned end ended
#: on time (the default payload lasts its duration: it must not turn into a premature end).
ON_TIME_S = 1
#: Real seconds the payload of the default command outlives its reservation's planned end, so that
#: the scheduler's shutdown, not the payload, ends it.
PAYLOAD_MARGIN_S = 1.0


@dataclass
class _Trace:
    """What happened, for the lease records: events, reservations carried out, transfers."""

    events: dict[int, list[Event]] = field(default_factory=dict)
    runs: dict[int, list[Run]] = field(default_factory=dict)
    transfers: dict[int, list[TransferRun]] = field(default_factory=dict)

    def event(self, e: Event) -> None:
        self.events.setdefault(e.lease, []).append(e)


class _Enactment:
    """The scheduler's :class:`~skylease.control.leases.Enactment`: records each reservation carried
    out (as :class:`~skylease.sim.leases.SimulatedEnactment` does) and the leases touched, which the
    manager then reconciles with their processes."""

    def __init__(self, trace: _Trace) -> None:
        self.trace = trace
        self.touched: set[int] = set()
        self.open: dict[int, tuple[int, Reservation]] = {}
        self.acts = 0  # reservations started or stopped so far (something for the processes to do)

    def start(self, rr: Reservation, now: int) -> None:
        self.open[id(rr)] = (now, rr)
        self.touched.add(rr.lease.id)
        self.acts += 1

    def stop(self, rr: Reservation, now: int) -> None:
        self.acts += 1
        start, _ = self.open.pop(id(rr))
        run = Run(rr.lease.id, rr.kind.value, start, now, rr.nodes)
        self.trace.runs.setdefault(rr.lease.id, []).append(run)
        self.touched.add(rr.lease.id)


def desired(sched: LeaseScheduler, lease: Lease, full: int, *, vm_lease: bool = False
            ) -> tuple[str, tuple[int, ...]]:
    """What the lease's processes should be now: ``("run", nodes)`` while its VM reservation is
    active, and for a ``vm_lease`` (QEMU guests) from the start of the resumption before it (a guest
    resumes in the time reserved for its resumption, from its saved state); ``("stopped", ())``
    while it is suspended with work saved (a suspension or resumption running, or waiting to resume:
    what is left is less than its ``full`` planned duration); ``("none", ())`` otherwise (not
    started, done, cancelled, or preempted and requeued without suspension, which loses the work of
    its run)."""
    if lease.state in _TERMINAL:
        return "none", ()
    vm = sched.rr.get(lease.id)
    if vm is not None and vm.state is LeaseState.ACTIVE:
        return "run", vm.nodes
    if vm_lease and _resuming(vm):
        assert vm is not None
        return "run", vm.nodes
    if vm is not None and vm.shutdown is not None and vm.state is LeaseState.DONE:
        return "none", ()  # its VMs shut down (a shutdown reservation, Haizea 1.0)
    if lease.remaining < full:
        return "stopped", ()
    return "none", ()


def _resuming(vm: Reservation | None) -> bool:
    """Whether ``vm``'s resumption is under way (its VM reservation not begun yet)."""
    return vm is not None and vm.state is LeaseState.SCHEDULED and vm.resume is not None \
        and vm.resume.state is LeaseState.ACTIVE


class LocalLeaseManager(Listing, Recovery, HostFailures, VmLeases, Offering, Extending, Warned, Idling):
    """The lease manager of ``skylease serve`` (the :class:`~skylease.runtime.leases.api.LeaseManager`
    protocol). ``nodes`` is the enactment; by default ``nodes_factory(site, data_dir, serve_id,
    sandbox=..., on_exit=...)`` makes it (default factory:
    :class:`~skylease.runtime.leases.local.LocalNodes`; a subclass of it is the seam where tests
    provoke crashes and failures), its payloads confined by ``sandbox`` (default, this machine's:
    :func:`~skylease.runtime.leases.sandbox.probe`); ``time_scale`` lease seconds per real second
    (stored at the first start: a restart must use the same); at most ``max_leases_per_user``
    leases not over per user; ``payload_user`` is who payloads run as on the site's hosts (as
    ``payload_user`` of ``skylease serve``; None: the hosts' default); ``extension_rules``: the
    site's rules for extensions (default: none; docs/decisions/lease-extensions.md); ``warnings``: the site's
    warnings before a lease's end (runtime/leases/notices.py; None: only those leases ask for, with
    no webhook)."""

    def __init__(self, engine: sa.Engine, site: Any, *, config: SchedulerConfig | None = None,
                 time_scale: float = 1.0, data_dir: Path | str = ".", nodes: Any = None,
                 grace_s: float = 5.0, max_leases_per_user: int = 10_000, poll_s: float = 0.05,
                 sandbox: Sandbox | None = None, nodes_factory: Callable[..., Any] | None = None,
                 payload_user: str | None = None, extension_rules: ExtensionRules | None = None,
                 warnings: WarningConfig | None = None) -> None:
        self.site = site
        self.extension_rules = extension_rules if extension_rules is not None else ExtensionRules()
        self.config = config if config is not None else SchedulerConfig()
        # A payload process does not move between machines: migration goes off on a site with hosts;
        # a VM lease's state moves as a file, so VM leases still may (docs/decisions/vm-payloads.md)
        vms_move = bool(site.hosts) and self.config.migration
        if vms_move:
            self.config = self.config.with_(migration=False)
        if site.bandwidth is not None and site.bandwidth != self.config.bandwidth:  # the site's network
            self.config = self.config.with_(bandwidth=float(site.bandwidth))
        self.data_dir = Path(data_dir)
        self.grace_s = grace_s
        self.max_leases_per_user = max_leases_per_user
        self.poll_s = poll_s
        self.journal = Journal(engine)
        settings = self.journal.init_settings({"epoch": time.time(), "time_scale": float(time_scale),
                                               "serve_id": uuid.uuid4().hex, "n_nodes": site.n_nodes,
                                               "config": _config_key(self.config)})
        if settings["time_scale"] != float(time_scale):
            scale = settings["time_scale"]
            raise UserError(f"this database's lease clock runs at {scale:g} lease seconds per second; start "
                            f"the server with --time-scale {scale:g}", field="--time-scale")
        if settings["n_nodes"] != site.n_nodes or settings["config"] != _config_key(self.config):
            raise UserError("this database's leases were scheduled on another site or configuration "
                            f"({settings['n_nodes']} nodes, {settings['config']}); use that one, or "
                            "another database", field="--db")
        self.serve_id: str = settings["serve_id"]
        self.clock = RealClock(settings["epoch"], settings["time_scale"])
        self._lock = threading.RLock()  # (before the enactment: its callbacks take it)
        self._wake = threading.Condition(self._lock)
        if nodes is None:
            if nodes_factory is None:
                from skylease.runtime.leases.site_nodes import SiteNodes

                def nodes_factory(*args: Any, **kwargs: Any) -> Any:
                    extra = {} if payload_user is None else {"payload_user": payload_user}
                    return SiteNodes(*args, on_state=self._poke, **extra, **kwargs)
            if sandbox is None and any(n.host is None for n in site.nodes):
                from skylease.runtime.leases.sandbox import probe

                sandbox = probe(self.data_dir)
            nodes = nodes_factory(site, self.data_dir, self.serve_id, sandbox=sandbox, on_exit=self._poke)
        self.nodes = nodes
        self.trace = _Trace()
        self._enact = _Enactment(self.trace)
        self.sched = LeaseScheduler(site.n_nodes, capacity=list(site.capacity), config=self.config,
                                    enactment=self._enact, on_event=self._on_event,
                                    movable=self._vm_movable if vms_move else None)
        self.sched.images.on_done = self._transferred
        self._owner: dict[int, str] = {}
        # every lease's id, and each owner's, in id order: a page of a list is a bisection and a
        # slice (docs/decisions/serve-fair-sharing.md), not a pass over every lease
        self._ids: list[int] = []
        self._by_owner: dict[str, list[int]] = {}
        # owner -> leases that may not be over (pruned of those over when it reaches the limit: it
        # stays below the limit, and a request does not pass over it)
        self._unfinished: dict[str, set[int]] = {}
        self._request: dict[int, dict[str, Any]] = {}
        self._full: dict[int, int] = {}  # lease id -> its full planned duration
        self._live: dict[tuple[int, int], Live] = {}  # (lease, vnode) -> its payload
        self._ended: dict[int, list[dict[str, Any]]] = {}  # lease -> its payloads that ended, in order
        self._rows: dict[tuple[int, int, int], int] = {}  # (lease, vnode, run) -> payload row ever spawned
        self._copies: dict[int, Any] = {}  # id(transfer) -> its copy
        self._copying: list[tuple[Transfer, Any, float]] = []  # copies under way: (transfer, copy, start)
        self._batch = Batch.new()
        # batches written in the order taken, a request's after the lock is released (group_commit.py)
        self._order: GroupCommit[Batch] = GroupCommit(self.journal.commit, lambda exc: self._vital.died(exc))
        self._unenacted: set[int] = set()  # leases journaled since the last enactment
        self._now = 0  # the lease time of the step being taken (events are stamped with it)
        self._stepped = -1  # the last time stepped
        self._next_id = 1
        self._closing = False
        self.changes = Changes()  # bumped by each commit that journals something
        self.before_end = BeforeEnd(engine, warnings, self.changes.bump)
        self._thread: threading.Thread | None = None
        self._vital = Vital("the lease manager")
        self.replayed_events_match: bool | None = None
        self._recording = True  # False while the journal is replayed: its events are stored already
        self._replayed: list[Event] = []
        self._ends: dict[int, int] = {}  # lease -> the lease time its work ended (premature ends due)
        self._carries: dict[tuple[int, int], Any] = {}  # (lease, vnode) -> its state file's carry
        self._down_hosts: dict[str, str] = {}  # host -> why it is down (as journaled)
        self._overheads: dict[int, list[OverheadRow]] = {}  # lease -> its VMs' suspensions, resumptions
        self._late: dict[int, tuple[int, int]] = {}  # lease -> (lease time, seconds) its VMs began late
        self._late_starts: dict[int, list[dict[str, Any]]] = {}  # lease -> what late_start gave it back
        self._extensions: dict[int, list[dict[str, Any]]] = {}  # lease -> its extensions (extending.py)
        self._lengthen_later: set[int] = set()  # leases the replay extended (extending.py)
        self._idle_init()  # (the idle_reclaim rule, when the admission policy has it: idling.py)

    # -- life --------------------------------------------------------------------------------------
    def start(self) -> LocalLeaseManager:
        """Recover the journal's state, reconcile the processes, and start stepping."""
        with self._lock:
            self._recover()
            self._lengthen_replayed(self.clock.now())
        self._thread = threading.Thread(target=self._loop, name="skylease-leases", daemon=True)
        self._thread.start()
        return self

    def failure(self) -> str | None:
        """Why the manager cannot serve (its thread, or the enactment's watcher, died), or None."""
        return self._vital.failure() or self.nodes.failure()

    def _alive(self) -> None:
        """Raise :class:`Unavailable` if the manager cannot serve (called with the lock held: the
        thread's death is recorded under it, so nothing is journaled after it)."""
        reason = self.failure()
        if reason is not None:
            raise Unavailable(reason)

    def close(self, *, stop_payloads: bool = False) -> None:
        """Stop stepping. Payloads go on (a restarted server adopts them) unless ``stop_payloads``."""
        with self._lock:
            self._closing = True
            self._wake.notify_all()
        self.changes.close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.nodes.close(kill=stop_payloads)
        self.before_end.close()

    def now(self) -> int:
        return self.clock.now()

    def version(self) -> int:
        """A number that grows whenever the leases change (a request, a cancel, a step)."""
        return self.changes.version

    def wait_change(self, since: int, timeout: float) -> int:
        """The version once it differs from ``since``, or after ``timeout`` seconds, or at close."""
        return self.changes.wait(since, timeout)

    async def wait_change_async(self, since: int, timeout: float) -> int:
        """As :meth:`wait_change`, awaited on an event loop (no thread held while it waits)."""
        return await self.changes.wait_async(since, timeout)

    def _poke(self) -> None:
        """A payload ended (called from the enactment's watcher thread): wake the loop now if it
        waits; if the lock is busy its holder looks at the exits anyway."""
        if self._lock.acquire(blocking=False):
            try:
                self._wake.notify_all()
            finally:
                self._lock.release()

    def _name(self, k: int) -> str:
        return self.site.names[k]

    # -- the API -----------------------------------------------------------------------------------
    def request(self, owner: str, req: LeaseRequest) -> LeaseView:
        """Submit a request at the lease time it reached the manager (not when the lock was free:
        the manager thread may hold it while it starts processes), step, journal, and answer once
        it is journaled (with the requests that came meanwhile: group_commit.py); the manager
        thread enacts what changed (starting a lease's payloads takes time the answer, and so the
        next request of a client, must not wait for)."""
        arrived = self.clock.now()
        self.before_end.check(req.model_dump())  # (a webhook the site does not allow: 422)
        with self._lock:
            self._alive()  # (before anything is journaled)
            acts = self._enact.acts
            now = max(arrived, self._stepped)  # (lease time never goes back for the scheduler)
            self._payload_exits(now)  # (the loop may not have got to them: this thread holds the lock)
            self._advance(now)  # (journaled with this request's batch: the steps first)
            if self._enact.acts != acts:  # the manager thread enacts what this call journals, once
                self._wake.notify_all()  # it returns (else its next poll looks: nothing to start)
            mine = self._unfinished.setdefault(owner, set())
            if len(mine) >= self.max_leases_per_user:  # (pruned when it counts: not a pass a request)
                mine.difference_update([lid for lid in mine if self.sched.lease(lid).state in _TERMINAL])
            live = len(mine)
            if live >= self.max_leases_per_user:
                raise LeaseRefused(f"{owner} has {live:,} leases not over; at most "
                                   f"{self.max_leases_per_user:,}")
            body = self._lease_body(self._next_id, req, now)
            body["owner"] = owner  # (journaled: the fairness rules count per owner, and so does a replay)
            self._batch.inputs.append((now, InputKind.SUBMIT, body["id"], body))
            self._batch.new_leases.append((body["id"], owner, req.model_dump(exclude_none=True), now,
                                           LeaseState.PENDING.value))
            self._now = now  # (an input's events are stamped with its time, as the replay stamps them)
            lease = self._submit(body, owner, req.model_dump(exclude_none=True))
            self._step(now)
            if self._enact.acts != acts or lease.state not in (LeaseState.PENDING, LeaseState.REJECTED):
                self._wake.notify_all()  # (a lease queued or refused has no process to start now)
            batch = self._order.next  # (journaled after the lock is released: _journaled)
            parts, rejected = self._snapshots([lease])[0], lease.state is LeaseState.REJECTED
            # (an AR or IM lease refused says when it would fit: docs/decisions/lease-offers.md)
            # (a fairness rule's refusal has no earliest start: room is not what it lacks)
            by_room = rejected and rule_of(lease.reason) is None
            earliest = earliest_for(self.sched, body, now) if by_room else None
        self._journaled(batch)
        if rejected:
            raise LeaseRefused(f"lease {lease.id} refused: {parts.record['reason']}", earliest_start=earliest)
        return build_view(parts)

    def cancel(self, owner: str | None, lease_id: int) -> LeaseView:
        arrived = self.clock.now()  # (as a request: the lease time it reached the manager)
        with self._lock:
            self._alive()
            lease = self._visible(owner, lease_id)
            now = max(arrived, self._stepped)
            self._payload_exits(now)  # (the loop may not have got to them: this thread holds the lock)
            self._advance(now)
            self._commit_and_enact(now)
            if lease.state in _TERMINAL:  # (it may have ended in the meantime)
                raise LeaseRefused(f"lease {lease_id} is already {lease.state.value}")
            self._batch.inputs.append((now, InputKind.CANCEL, lease_id, None))
            self._now = now
            self.sched.cancel(lease_id, now)
            self._enact.touched.add(lease_id)
            self._step(now)
            self._commit_and_enact(now)
            self._wake.notify_all()
            parts = self._snapshots([lease])[0]
        return build_view(parts)

    # -- the loop ----------------------------------------------------------------------------------
    def _loop(self) -> None:
        deferred: tuple[float, int] | None = None
        with self._lock:
            try:
                while not self._closing:
                    if self._order.busy:  # a request's batch is being written: a commit here, under the
                        # lock, would wait for it while the requests that come meanwhile cannot join the
                        # next one; so let that write end first (the lock released), at most a poll
                        # (group_commit.py)
                        if deferred is None:
                            deferred = (time.monotonic(), self._order.next - 1)
                        since, batch = deferred
                        if not self._order.written(batch) and time.monotonic() - since < self.poll_s:
                            self._wake.wait(0.0005)
                            continue
                    deferred = None
                    now = self.clock.now()
                    self._payload_exits(now)
                    self._late_vms(now)
                    back = self._host_changes(now)
                    self._advance(now)
                    self._reclaim_idle(now)
                    self._commit_and_enact(now, back)
                    self._warn(now)
                    nxt = self.sched.next_event(self._stepped)
                    wait = self.poll_s if nxt == float("inf") else self.clock.seconds_until(nxt)
                    self._wake.wait(max(min(wait, self.poll_s), 0.001))
            except BaseException as exc:  # a bug or a lost database: stop stepping, loudly (a restart
                # recovers); recorded with the lock still held, so that no request is journaled after it
                self._vital.died(exc)
                self.changes.bump()  # (the dashboard's live pages look again, and are told)

    def _advance(self, now: int) -> None:
        """Step at every event time due by ``now``, each at its own time (as the simulator does)."""
        while True:
            nxt = self.sched.next_event(self._stepped)
            if nxt > now:
                return
            self._step(int(nxt))

    def _step(self, t: int) -> None:
        """The scheduler's step at ``t``, journaled (every step is an input of the replay)."""
        if self._recording:
            self._batch.inputs.append((t, InputKind.STEP, None, None))
        self._now = t
        self.sched.step(t)
        self._stepped = max(self._stepped, t)

    def _payload_exits(self, now: int) -> None:
        """Payloads that ended by themselves: a lease whose payloads all exited before its VM
        reservation's planned end ended early (a premature end, decision H12), at the lease time of
        its last exit (not when this loop got to it: what fell due before that is stepped first)."""
        for p in self.nodes.exited():
            live = self._live.get((p.lease, p.vnode))
            if live is None or live.payload.pid != p.pid:  # (one shut down already)
                continue
            del self._live[(p.lease, p.vnode)]
            self.journal.update_payload(live.row, state="exited", exit_code=p.exit_code,
                                        reason="exited by itself")
            self._ended_payload(p.lease, p.vnode, p.node, p.pid, "exited", p.exit_code, "exited by itself")
            t = float(now) if p.ended_at is None else min(self._lease_clock(p.ended_at), now + 1.0)
            if not any(k[0] == p.lease for k in self._live):  # (else another VM of the lease still works)
                # when its work would have ended on its schedule: later if it ran unscheduled (the
                # nearest whole second: a few milliseconds of exit are not a second of work)
                self._account(p.lease, live, t)
                self._ends[p.lease] = max(0, round(t + live.debt))
        for lid, t in sorted(self._ends.items(), key=lambda item: (item[1], item[0])):
            if t > now or _resuming(self.sched.rr.get(lid)):  # (a VM that failed in its resumption's
                continue  # window ends its lease once its VM reservation begins)
            del self._ends[lid]
            self._advance(t)
            t = max(t, self._stepped)
            vm = self.sched.rr.get(lid)
            if vm is None or vm.state is not LeaseState.ACTIVE or t >= vm.end - ON_TIME_S:
                continue
            self._now = t
            if self.sched.premature_end(lid, t):
                self._batch.inputs.append((t, InputKind.END, lid, None))
                self._enact.touched.add(lid)
                self._step(t)

    def _lease_clock(self, unix: float) -> float:
        """The lease time of a Unix time (not rounded)."""
        return self.clock.lease_at(unix)

    def _account(self, lid: int, live: Live, t: float) -> None:
        """Bring ``live.debt`` up to lease time ``t``: what it ran since ``live.checked``, less
        what its schedule had it run (its VM reservations, carried out or under way)."""
        a = live.checked
        if t <= a:
            return
        scheduled = sum(max(0.0, min(r.stop, t) - max(r.start, a))
                        for r in self.trace.runs.get(lid, ()) if r.kind == "vm")
        scheduled += sum(max(0.0, t - max(start, a)) for start, rr in self._enact.open.values()
                         if rr.lease.id == lid and rr.kind is RRKind.VM)
        live.debt += (t - a if live.running else 0.0) - scheduled
        live.checked = t

    def _stop_or_continue(self, lid: int, live: Live, run: bool) -> None:
        """SIGSTOP or SIGCONT a payload, its running time accounted (see
        :class:`~skylease.runtime.leases.live.Live`) up to the signal (a stop may wait for a payload
        still starting up: LocalNodes.suspend)."""
        if run:
            self._account(lid, live, self._lease_clock(time.time()))
            self.nodes.resume(live.payload)
        else:
            self.nodes.suspend(live.payload)
            self._account(lid, live, self._lease_clock(time.time()))
        live.running = run
        self.journal.update_payload(live.row, state="running" if run else "stopped")

    # -- journal and enactment ---------------------------------------------------------------------
    def _commit(self) -> None:
        """Journal what the scheduler did, now (after the batches taken before: group_commit.py);
        the leases it touched are enacted by the next :meth:`_commit_and_enact` (never before they
        are journaled: the journal leads)."""
        if self._batch.empty and not self._enact.touched:
            self._order.wait_for(self._order.next - 1)  # (a request's batch being written: the lock
            return  # is held, so no other is taken; what it touched is enacted after this)
        n, batch, changed = self._take()
        self._order.write(n, batch)
        if changed:
            self.changes.bump()

    def _take(self) -> tuple[int, Batch, bool]:
        """The batch gathered so far, its number, and whether it changes anything (the lock held).
        Its leases are enacted after any later :meth:`_commit`, which writes it first."""
        for lid in self._enact.touched:
            self._batch.states[lid] = self.sched.lease(lid).state.value
        changed = bool(self._batch.inputs or self._batch.events or self._enact.touched)
        batch, self._batch = self._batch, Batch.new()
        self._unenacted |= self._enact.touched
        self._enact.touched = set()
        return self._order.taken(), batch, changed

    def _journaled(self, n: int) -> None:
        """Until batch ``n`` (a request's, gathered under the lock) is written: taken and written by
        this thread (the lock released while it writes) unless another does, with whatever came
        meanwhile (group_commit.py)."""
        while self._order.should_take(n):
            with self._lock:
                if self._order.next > n:  # (taken meanwhile: by the loop, or another request)
                    continue
                m, batch, changed = self._take()
            self._order.write(m, batch)
            if changed:
                self.changes.bump()

    def _commit_and_enact(self, now: int, hosts_back: list[str] | None = None) -> None:
        self._commit()
        self._lose_payloads_on_down_hosts()
        if hosts_back:
            self._end_strays(hosts_back)
        touched, self._unenacted = self._unenacted, set()
        self._reconcile(sorted(touched), now)
        self._transfers(now)

    def _reconcile(self, lease_ids: Iterable[int], now: int) -> None:
        for lid in lease_ids:
            try:
                self._reconcile_lease(lid, now)
            except SshError as exc:  # its host stopped answering since its last heartbeat: the
                # watch notices within seconds, and the scheduler then requeues or degrades the lease
                log.warning("lease %d: %s: %s", lid, exc.field, exc.message)

    def _reconcile_lease(self, lid: int, now: int) -> None:
        lease = self.sched.lease(lid)
        is_vm = bool(self._request[lid].get("vm"))
        what, nodes = desired(self.sched, lease, self._full[lid], vm_lease=is_vm)
        mine = sorted((k, v) for k, v in self._live.items() if k[0] == lid)
        if what == "none":
            for key, live in mine:
                state, reason = "killed", f"lease {lease.state.value}"
                try:
                    if is_vm:  # ACPI power-down, SIGKILL after the grace
                        self.nodes.shutdown_vm(live.payload, grace_s=self.grace_s)
                    else:
                        self.nodes.shutdown(live.payload, grace_s=self.grace_s)
                except SshError as exc:  # (ended when its host answers again: HostFailures)
                    state, reason = "lost", f"{exc.field}: {exc.message}"
                self.journal.update_payload(live.row, state=state, reason=reason)
                self._ended_payload(lid, key[1], live.payload.node, live.payload.pid, state, None,
                                    reason)
                del self._live[key]
            return
        if what == "stopped":
            for key, live in mine:
                if is_vm:
                    self._save_vm(lid, key, live)
                elif live.payload.state != "stopped":
                    self._stop_or_continue(lid, live, run=False)
            if is_vm:
                self._carry_vm_states(lease)
            return
        vm = self.sched.rr[lid]
        for vnode, k in enumerate(nodes):
            live = self._live.get((lid, vnode))
            if live is not None:
                if live.payload.node != k:
                    self.nodes.migrate(live.payload, k)
                    self.journal.update_payload(live.row, state=live.payload.state, node=k)
                if live.payload.state == "stopped":
                    self._stop_or_continue(lid, live, run=True)
            elif (lid, vnode, vm.start) not in self._rows and k not in self.sched.down:
                self._spawn(lease, vnode, k, vm, nodes, now)  # never started in this run (a node
                # that is down holds a degraded reservation's VM that does not run)

    def _spawn(self, lease: Lease, vnode: int, node: int, vm: Reservation, nodes: tuple[int, ...],
               now: int) -> None:
        req = self._request[lease.id]
        env = {"SKYLEASE_NODES": ",".join(self._name(k) for k in nodes)}
        if req.get("vm"):
            self._spawn_vm(lease, vnode, node, vm, env, now)
            return
        # The default payload's work is counted from the lease time its run began (not from its own
        # start-up, nor from a late spawn after a restart), so that it ends when the simulator's would.
        if req.get("real_duration") is not None:  # its work ends early: the scheduler learns it then
            done = self._full[lease.id] - lease.remaining  # by earlier runs (suspended, then lost)
            work = self.config.planned(int(req["real_duration"])) - done
            duration_s = self.clock.real_seconds(max(0, work))
        else:  # works until the scheduler shuts it down: its whole remaining time, not this
            # reservation's end (a planned suspension ends the reservation before the work is done)
            duration_s = self.clock.real_seconds(lease.remaining) + PAYLOAD_MARGIN_S
        p = self.nodes.spawn(lease.id, vnode, node, command=req.get("command"), duration_s=duration_s,
                             env=env, since=self.clock.real_at(vm.start), image=lease.image)
        row = self.journal.add_payload(lease.id, vnode, node, vm.start, p.pid, p.start_ticks)
        self._live[(lease.id, vnode)] = Live(p, row, vm.start, checked=vm.start)  # (as its work counts)
        self._rows[(lease.id, vnode, vm.start)] = row

    def _ended_payload(self, lid: int, vnode: int, node: int, pid: int, state: str, exit_code: int | None,
                       reason: str | None) -> None:
        """Remember an ended payload for the lease's view (its owner sees how it ended)."""
        shown = self._name(node) if node >= 0 else None
        self._ended.setdefault(lid, []).append({"vnode": vnode, "node": shown, "pid": pid, "state": state,
                                                "exit_code": exit_code, "reason": reason})

    def _transfers(self, now: int) -> None:
        """Image transfers running now are copies into their nodes' caches, paced to end with them
        (at the real time their lease time ends: ``now`` is a whole lease second, up to one less
        than the clock's)."""
        for tr in (*self.sched.images.fifo, *self.sched.images.edf):
            if tr.start <= now < tr.end and id(tr) not in self._copies:
                seconds = max(0.0, self.clock.real_at(tr.end) - time.time())
                copy = self.nodes.copy_image(tr.image, tr.size_mb, sorted(tr.nodes), seconds)
                self._copies[id(tr)] = copy
                self._copying.append((tr, copy, time.time()))
        self._copies_ended()

    def _copies_ended(self) -> None:
        """Each image transfer that completed, recorded beside the window reserved for it, for every
        lease that waited for it (issue 38: the model against reality)."""
        for item in [c for c in self._copying if getattr(c[1], "ended_at", None) is not None]:
            self._copying.remove(item)
            tr, copy, started = item
            if not copy.done:  # (failed or cancelled: it did not happen)
                continue
            for lid in sorted(tr.users):
                self._record_window(lid, -1, "transfer", tr.start, tr.end, started, copy.ended_at)

    def _transferred(self, tr: Transfer) -> None:
        self._copies.pop(id(tr), None)
        users = tuple((lid, tuple(sorted(ns))) for lid, ns in sorted(tr.users.items()))
        rec = TransferRun(tr.image, tr.start, tr.end, "be" if tr.deadline is None else "ar", users)
        for lid, _ in users:
            self.trace.transfers.setdefault(lid, []).append(rec)

    def _on_event(self, what: str, lease: Lease, t: int) -> None:
        e = Event(lease.id, what, t, self._now)
        self.trace.event(e)
        (self._batch.events if self._recording else self._replayed).append(e)

    # -- requests ----------------------------------------------------------------------------------
    def _lease_body(self, lid: int, req: LeaseRequest, now: int) -> dict[str, Any]:
        kind = _KINDS[req.type]
        if (refused := preemptible_refusal(req.type, req.preemptible)) is not None:
            raise LeaseRefused(refused)
        if req.vm:
            if (problem := vm_image_problem(self.site.repository, str(req.image))) is not None:
                raise LeaseRefused(problem)
            if req.memory < MIN_VM_MEMORY_MB:
                raise LeaseRefused(f"a VM needs {MIN_VM_MEMORY_MB} MB of memory at least, not {req.memory}")
        start = None
        if kind is LeaseKind.ADVANCE_RESERVATION:
            start = req.start if req.start is not None else now + (req.start_in or 0)
        return {"id": lid, "kind": kind.value, "submit": now, "nodes": req.nodes, "duration": req.duration,
                "start": start, "cpu": req.cpu, "memory": req.memory, "disk": req.disk, "image": req.image,
                "image_size": req.image_size,
                "preemptible": kind is LeaseKind.BEST_EFFORT and req.preemptible is not False}

    def _submit(self, body: dict[str, Any], owner: str, request: dict[str, Any]) -> Lease:
        b = dict(body)
        b.setdefault("owner", owner)  # (a body journaled before leases had owners)
        lid = b.pop("id")
        lease = Lease(lid, LeaseKind(b.pop("kind")), b.pop("submit"), b.pop("nodes"), b["duration"],
                      b["duration"], b.pop("duration"), **b)
        self._owner[lid] = owner
        for ids in (self._ids, self._by_owner.setdefault(owner, [])):
            if not ids or ids[-1] < lid:  # (ids are given in order: an append)
                ids.append(lid)
            else:
                insort(ids, lid)
        self._unfinished.setdefault(owner, set()).add(lid)
        self._request[lid] = request
        self._next_id = max(self._next_id, lid + 1)
        self.sched.submit(lease)
        self._full[lid] = lease.remaining if lease.state is not LeaseState.REJECTED else 0
        self._enact.touched.add(lid)
        return lease


def _config_key(config: SchedulerConfig) -> str:
    """A configuration's identity (a journal replays only under the configuration it was made with).
    Haizea 1.0's keys and the policies count only away from their defaults, so a database made
    before they existed keeps its identity; a policy counts by its class and parameters."""
    import hashlib

    def shown(name: str, value: object) -> str:
        return describe(value) if name in POLICY_KEYS else repr(value)

    optional = (*HAIZEA10_KEYS, *POLICY_KEYS)
    kept = [f.name for f in dataclasses.fields(config)
            if f.name not in optional or getattr(config, f.name) != f.default]
    fields = ", ".join(f"{name}={shown(name, getattr(config, name))}" for name in kept)
    return hashlib.sha256(f"{type(config).__name__}({fields})".encode()).hexdigest()[:16]


__all__ = ["SCAN_CHUNK", "SNAPSHOT_CHUNK", "LocalLeaseManager", "desired"]
