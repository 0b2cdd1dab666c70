"""VM leases in the lease manager (docs/decisions/vm-payloads.md, "VM leases on this machine's
nodes"): a ``vm`` lease's VMs started or resumed as QEMU guests, and saved at its suspension."""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

from skylease.control.leases import RRKind
from skylease.runtime.leases.journal import InputKind, OverheadRow
from skylease.runtime.leases.live import Live
from skylease.runtime.leases.qemu_spec import GuestError

if TYPE_CHECKING:
    from skylease.control.leases import Lease, Reservation

__all__ = ["VmLeases"]

log = logging.getLogger("skylease.leases")


class VmLeases:
    """The VM part of :class:`~skylease.runtime.leases.manager.LocalLeaseManager` (a mixin: it uses
    the manager's journal, enactment and payloads; called with its lock held)."""

    journal: Any
    nodes: Any
    sched: Any
    clock: Any
    _request: dict[int, dict[str, Any]]
    _carries: dict[tuple[int, int], Any]
    _enact: Any
    _overheads: dict[int, list[OverheadRow]]
    _live: dict[tuple[int, int], Live]
    _rows: dict[tuple[int, int, int], int]
    _ends: dict[int, int]
    _late: dict[int, tuple[int, int]]
    _late_starts: dict[int, list[dict[str, Any]]]
    _batch: Any
    _now: int
    _stepped: int
    _recording: bool
    if TYPE_CHECKING:  # the manager's
        def _ended_payload(self, lid: int, vnode: int, node: int, pid: int, state: str,
                           exit_code: int | None, reason: str | None) -> None: ...
        def _account(self, lid: int, live: Live, t: float) -> None: ...
        def _lease_clock(self, unix: float) -> float: ...
        def _advance(self, now: int) -> None: ...
        def _step(self, t: int) -> None: ...

    def _vm_movable(self, lease: Lease) -> bool:
        """The scheduler's ``movable``: a VM lease may resume on other nodes (its state file is
        carried there: :meth:`_carry_vm_states`), a process lease may not."""
        return bool(self._request.get(lease.id, {}).get("vm"))

    def _carry_vm_states(self, lease: Lease) -> None:
        """A saved VM lease scheduled to resume on other nodes: each VM's state file carried from the
        machine it was saved on to its new node's, paced to end when its resumption begins (the
        migration's window). Nothing while its nodes are its own."""
        vm = self.sched.rr.get(lease.id)
        if (vm is None or not lease.last_nodes or getattr(self.nodes, "carry_state", None) is None
                or tuple(vm.nodes) == tuple(lease.last_nodes)):
            return
        first = getattr(vm, "resume", None) or vm
        seconds = max(0.0, self.clock.real_at(first.start) - time.time())
        for vnode, k in enumerate(vm.nodes):
            src = lease.last_nodes[vnode] if vnode < len(lease.last_nodes) else k
            key = (lease.id, vnode)
            old = self._carries.get(key)
            if src == k or (old is not None and old.to_node == k):
                continue
            if old is not None:  # (rescheduled elsewhere meanwhile)
                old.cancel()
            try:
                carry = self.nodes.carry_state(lease.id, vnode, src, k, seconds)
            except GuestError as exc:
                log.warning("lease %d VM %d: its state cannot move: %s", lease.id, vnode, exc)
                continue
            if carry is not None:
                carry.to_node = k
                self._carries[key] = carry
                log.info("lease %d VM %d: its state file goes from node %d to node %d in %.1f s", lease.id,
                         vnode, src, k, seconds)

    def _state_carried(self, lease: Lease, vnode: int, node: int) -> str | None:
        """Before a VM resumes on ``node``: its state file is there (carried now if no carry was
        started, as after a restart), or why not."""
        src = lease.last_nodes[vnode] if vnode < len(lease.last_nodes) else node
        carry = self._carries.pop((lease.id, vnode), None)
        if carry is not None and getattr(carry, "to_node", node) != node:
            carry.cancel()
            carry = None
        if carry is None:
            if src == node:
                return None
            if getattr(self.nodes, "carry_state", None) is None:  # (an enactment of one machine)
                return None
            try:
                carry = self.nodes.carry_state(lease.id, vnode, src, node, 0.0)
            except GuestError as exc:
                return str(exc)
            if carry is None:
                return None
        if not carry.wait(carry.timeout_s) or not carry.done:
            return f"its state file was not carried to its new node: {carry.error or 'it took too long'}"
        log.info("lease %d VM %d: state file carried (%d bytes in %.2f s)", lease.id, vnode, carry.size,
                 carry.took_s)
        self._record_carry(lease, vnode, carry)
        return None

    def _record_carry(self, lease: Lease, vnode: int, carry: Any) -> None:
        """A state file's carry recorded beside the migration's window: the schedule's migration
        reservation, or else (a schedule without them) from when the carry began to the
        resumption's start, the time it was paced to fill."""
        vm = self.sched.rr.get(lease.id)
        first = getattr(vm, "resume", None) or vm
        started = getattr(carry, "started_at", None)
        if first is None or started is None:
            return
        migrate = getattr(vm, "migrate", None)
        start, end = ((migrate.start, migrate.end) if migrate is not None
                      else (min(math.floor(self._lease_clock(started)), first.start), first.start))
        ended = started + carry.took_s
        self._record_window(lease.id, vnode, RRKind.MIGRATE.value, start, end, started, ended)

    def _spawn_vm(self, lease: Lease, vnode: int, node: int, vm: Reservation, env: dict[str, str],
                  now: int) -> None:
        """A VM of a ``vm`` lease: its guest booted, or resumed from its saved state (a new payload
        row: one row per process). A VM that cannot start ends its lease (a premature end) with the
        reason among its ended payloads; the server goes on."""
        t0 = time.time()
        try:
            if (why := self._state_carried(lease, vnode, node)) is not None:
                raise GuestError(why)
            t0 = time.time()  # (a carry before is the migration's time, not the resumption's)
            p = self.nodes.spawn_vm(lease.id, vnode, node, image=str(lease.image), memory_mb=lease.memory,
                                    cpus=max(1, math.ceil(lease.cpu)), env=env)
            ended = time.time()  # (the guest's; the journal's writes below are the server's, not its)
        except GuestError as exc:
            spawned = getattr(exc, "payload", None)
            pid, ticks = (spawned.pid, spawned.start_ticks) if spawned is not None else (0, 0)
            row = self.journal.add_payload(lease.id, vnode, node, vm.start, pid, ticks, "failed")
            self.journal.update_payload(row, state="failed", reason=str(exc))
            self._rows[(lease.id, vnode, vm.start)] = row
            self._ended_payload(lease.id, vnode, node, pid, "failed", None, str(exc))
            log.warning("lease %d VM %d: %s: the lease ends", lease.id, vnode, exc)
            self._ends[lease.id] = min(self._ends.get(lease.id, now), now)
            return
        row = self.journal.add_payload(lease.id, vnode, node, vm.start, p.pid, p.start_ticks)
        self._live[(lease.id, vnode)] = Live(p, row, vm.start, checked=vm.start)
        self._rows[(lease.id, vnode, vm.start)] = row
        self._record_overhead(lease.id, vnode, RRKind.RESUME, t0, ended)  # (a resumption's)
        late = math.ceil(self._lease_clock(ended) - vm.start)
        if getattr(vm, "resume", None) is not None and late > 0:  # (its VM reservation began without it)
            self._late[lease.id] = max(self._late.get(lease.id, (0, 0)), (vm.start + late, late))

    def _save_vm(self, lid: int, key: tuple[int, int], live: Live) -> None:
        """The scheduler's suspension of a VM: its guest saved to its state file, its QEMU ended (that
        exit is the save we asked for, not an end: the row says ``saved``); its resumption is a new
        payload (:meth:`_spawn_vm`). A guest that cannot be saved is killed (its work is lost: it
        boots afresh at the resumption) and its row says why."""
        t0 = time.time()
        try:
            self.nodes.suspend_vm(live.payload)
            state, reason = "saved", None
            self._record_overhead(lid, key[1], RRKind.SUSPEND, t0, time.time())
        except GuestError as exc:
            log.warning("lease %d VM %d: not saved (%s): killed", lid, key[1], exc)
            self.nodes.shutdown(live.payload, grace_s=0.0)
            state, reason = "failed", f"not saved: {exc}"
            self._ended_payload(lid, key[1], live.payload.node, live.payload.pid, state, None, reason)
        self._account(lid, live, self._lease_clock(time.time()))
        self.journal.update_payload(live.row, state=state, reason=reason)
        del self._live[key]

    def _record_overhead(self, lid: int, vnode: int, kind: RRKind, started: float, ended: float) -> None:
        """Record a suspension or resumption (``kind``) that ran from ``started`` to ``ended`` (Unix
        time) beside the window the schedule reserved for it: the reservation of that kind under way
        for the lease (none: a first start, not recorded). One that took longer than its window is
        said in the log (the schedule goes on: docs/decisions/vm-payloads.md)."""
        windows = [rr for _, rr in self._enact.open.values() if rr.lease.id == lid and rr.kind is kind]
        if windows:
            self._record_window(lid, vnode, kind.value, windows[0].start, windows[0].end, started, ended)

    def _record_window(self, lid: int, vnode: int, kind: str, start: int, end: int, started: float,
                       ended: float) -> None:
        """Journal an operation (``vnode`` -1: the lease's, an image transfer) that ran from
        ``started`` to ``ended`` (Unix time) beside its window ``[start, end)`` (lease time); one that
        took longer than its window is said in the log."""
        row = OverheadRow(lid, vnode, kind, start, end, started, ended)
        self.journal.add_overhead(row)
        self._overheads.setdefault(lid, []).append(row)
        took = (ended - started) * self.clock.scale
        if took > end - start:
            log.warning("lease %d%s: its %s took %.1f lease seconds, %d were reserved", lid,
                        f" VM {vnode}" if vnode >= 0 else "", kind, took, end - start)

    def _late_vms(self, now: int) -> None:
        """The scheduler told of each VM lease whose resumption ended after its VM reservation began
        (at the lease time it ended), as it is told of a premature end: it gives the lease back the
        time it lost where it can (:meth:`LeaseScheduler.late_start
        <skylease.control.leases.scheduler.LeaseScheduler.late_start>`), journaled (a restart
        replays it) and shown in the lease's view."""
        for lid, (t, seconds) in sorted(self._late.items(), key=lambda item: (item[1][0], item[0])):
            if t > now:
                continue
            del self._late[lid]
            self._advance(t)
            t = max(t, self._stepped)
            self._now = t
            self._batch.inputs.append((t, InputKind.LATE, lid, {"seconds": seconds}))
            self._late_start(lid, t, seconds)
            self._enact.touched.add(lid)
            self._step(t)

    def _late_start(self, lid: int, t: int, seconds: int) -> None:
        """The scheduler's :meth:`late_start` at ``t``, and what it did, kept for the lease's view."""
        given = self.sched.late_start(lid, t, seconds)
        self._late_starts.setdefault(lid, []).append({"at": t, "seconds": seconds, "given_back": given})
        if self._recording:
            log.warning("lease %d: its VMs began working %d lease seconds late: %s", lid, seconds,
                        "given back" if given else "not given back (its nodes are taken after it, or "
                        "its window is fixed)")
