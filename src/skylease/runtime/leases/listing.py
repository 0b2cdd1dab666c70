"""What the lease manager shows: a lease, a page of leases or of the queue, the nodes and hosts.
Lists are taken in chunks, the lock released between two (docs/decisions/serve-fair-sharing.md):
only the snapshots are taken under it, the views are built after it (runtime/leases/views.py)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from skylease.control.leases import Lease, LeaseState, RRKind
from skylease.control.leases.records import Run, lease_record
from skylease.model.errors import UserError
from skylease.runtime.leases.api import DEFAULT_LOG_BYTES, HostView, LeaseNotFound, LeaseView, PayloadLog
from skylease.runtime.leases.journal import OverheadRow
from skylease.runtime.leases.live import Live
from skylease.runtime.leases.views import ViewParts, build_view, build_views

__all__ = ["SCAN_CHUNK", "SNAPSHOT_CHUNK", "Listing"]

#: A list takes the snapshots of at most this many leases under one hold of the lock (about 1.5 ms),
#: and looks at most SCAN_CHUNK of the queue: a longer list is taken in chunks, the lock released
#: between two (docs/decisions/serve-fair-sharing.md).
SNAPSHOT_CHUNK = 200
SCAN_CHUNK = 2000


class Listing:
    """The views of :class:`~skylease.runtime.leases.manager.LocalLeaseManager` (a mixin: it reads
    the manager's scheduler, trace and payloads under its lock)."""

    site: Any
    sched: Any
    nodes: Any
    clock: Any
    trace: Any
    _lock: Any
    _enact: Any
    _ids: list[int]
    _by_owner: dict[str, list[int]]
    _owner: dict[int, str]
    _live: dict[tuple[int, int], Live]
    _ended: dict[int, list[dict[str, Any]]]
    _request: dict[int, dict[str, Any]]
    _down_hosts: dict[str, str]
    _overheads: dict[int, list[OverheadRow]]
    _late_starts: dict[int, list[dict[str, Any]]]
    _extensions: dict[int, list[dict[str, Any]]]
    before_end: Any  # its warnings before a lease's end (runtime/leases/notices.py)
    if TYPE_CHECKING:  # the manager's
        def _alive(self) -> None: ...
        def _name(self, k: int) -> str: ...
        def _host_of(self, node: int) -> str | None: ...

    def lease(self, owner: str | None, lease_id: int) -> LeaseView:
        with self._lock:
            self._alive()  # (a stopped scheduler's views would lie: nothing moves any more)
            parts = self._snapshots([self._visible(owner, lease_id)])[0]
        return build_view(parts)

    def lease_nowait(self, owner: str | None, lease_id: int) -> LeaseView | None:
        """As :meth:`lease`, or None at once if the lock is busy: an event loop calls this, and
        must not wait for the lock (docs/decisions/serve-throughput.md)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            self._alive()
            parts = self._snapshots([self._visible(owner, lease_id)])[0]
        finally:
            self._lock.release()
        return build_view(parts)

    def leases(self, owner: str | None, after: int | None = None, limit: int | None = None
               ) -> list[LeaseView]:
        """``owner``'s leases (None: every lease) with an id above ``after``, at most ``limit`` (None:
        all), by id: a chunk's ids are a slice of the owner's sorted ids, and only their snapshots
        are taken under the lock (the views are built after it: runtime/leases/views.py)."""
        end: list[int] = []  # the last id when the list was asked for (what arrives later: a later page)

        def chunk(last: int | None, room: int) -> tuple[list[Lease], int | None]:
            ids = self._ids if owner is None else self._by_owner.get(owner, [])
            if not end:
                end.append(ids[-1] if ids else -1)
            first = 0 if last is None else bisect_right(ids, last)
            chosen = [lid for lid in ids[first:first + room] if lid <= end[0]]
            done = len(chosen) < room or first + room >= len(ids)
            return [self.sched.lease(lid) for lid in chosen], None if done else chosen[-1]

        return self._in_chunks(chunk, after, limit)

    def queue(self, owner: str | None, after: int | None = None, limit: int | None = None
              ) -> list[LeaseView]:
        """The best-effort leases waiting, in queue order (submission, so id, order: the scheduler
        requeues a preempted lease at its id's place), from above ``after``, at most ``limit``."""
        end: list[int] = []

        def chunk(last: int | None, room: int) -> tuple[list[Lease], int | None]:
            q = self.sched.queue
            if not end:
                end.append(q[-1].id if q else -1)
            i = 0 if last is None else bisect_right(q, last, key=lambda le: le.id)
            stop, chosen = min(len(q), i + SCAN_CHUNK), []
            while i < stop and len(chosen) < room and q[i].id <= end[0]:
                if owner is None or self._owner[q[i].id] == owner:
                    chosen.append(q[i])
                i += 1
            done = i >= len(q) or q[i].id > end[0]
            return chosen, None if done else q[i - 1].id

        return self._in_chunks(chunk, after, limit)

    def _in_chunks(self, chunk: Callable[[int | None, int], tuple[list[Lease], int | None]],
                   after: int | None, limit: int | None) -> list[LeaseView]:
        """The views of the leases ``chunk(last, room)`` picks (under the lock: at most ``room``
        after the id ``last``, and the last id it looked at, None at the list's end), taken chunk
        by chunk: the lock is released between two, so however long the list, it is held for one
        chunk's snapshots at a time (docs/decisions/serve-fair-sharing.md)."""
        parts: list[ViewParts] = []
        last = after
        while limit is None or len(parts) < limit:
            room = SNAPSHOT_CHUNK if limit is None else min(SNAPSHOT_CHUNK, limit - len(parts))
            with self._lock:
                self._alive()  # (a stopped scheduler's views would lie: nothing moves any more)
                leases, last = chunk(last, room)
                parts += self._snapshots(leases)
            if last is None:
                break
        return build_views(parts)

    def hosts(self) -> list[HostView]:
        """Every node: its capacity, the leases on it, its host's state and its image cache. The
        caches are asked for once the lock is released (a host's is a command over SSH: a host that
        hangs holds up this call only, not the leases), and not of a host marked down."""
        with self._lock:
            self._alive()
            on: dict[int, set[int]] = {k: set() for k in range(self.site.n_nodes)}
            for vm in self.sched.rr.values():
                for part in (vm.resume, vm, vm.suspend):
                    if part is not None and part.state is LeaseState.ACTIVE:
                        for k in part.nodes:
                            on[k].add(vm.lease.id)
            states = self.nodes.host_states()
            out = []
            for k in range(self.site.n_nodes):
                cap = self.site.capacity[k]
                host = self._host_of(k)
                st = states.get(host) if host is not None else None
                out.append(HostView(name=self._name(k), index=k, cpu=cap.cpu, memory=cap.memory,
                                    disk=cap.disk, cpus=list(self.site.cpus(k)), leases=sorted(on[k]),
                                    cache=[], host=host,
                                    state="down" if host in self._down_hosts else "up",
                                    last_contact=None if st is None else st.last_contact,
                                    reason=self._down_hosts.get(host) if host is not None else None))
        accel = getattr(self.nodes, "vm_acceleration", None)
        for view in out:
            if view.state == "up":  # (one that stopped answering since: none known, SiteNodes.cached)
                view.cache = list(self.nodes.cached(view.index))
            view.vms = None if accel is None else accel(view.index)
        return out

    def log(self, owner: str | None, lease_id: int, vnode: int, limit: int = DEFAULT_LOG_BYTES
            ) -> PayloadLog:
        """VM ``vnode`` of a lease ``owner`` sees (None: any): its payload's state now, or how its
        last run ended (as the lease's ``ended_payloads``), and the last ``limit`` bytes of its log
        (docs/decisions/payload-logs.md). Only the state is taken under the lock; the log is read
        after it is released (a host's is a command over SSH: a host that hangs holds up this call
        only, as :meth:`hosts`). A host that does not answer, or a log that cannot be read, is
        said in ``log_error``, its ``text`` empty."""
        with self._lock:
            self._alive()
            lease = self._visible(owner, lease_id)
            if not 0 <= vnode < lease.nodes:
                raise LeaseNotFound(f"lease {lease_id} has no VM {vnode} (its VMs are 0..{lease.nodes - 1})")
            serial = bool(self._request.get(lease_id, {}).get("vm"))
            live = self._live.get((lease_id, vnode))
            node: int | None = None
            facts: dict[str, Any] = {"state": "not started"}
            if live is not None:
                node, facts = live.payload.node, {"state": live.payload.state}
            else:
                ended = [p for p in self._ended.get(lease_id, ()) if p["vnode"] == vnode]
                if ended:
                    last = ended[-1]
                    facts = {k: last[k] for k in ("state", "exit_code", "reason")}
                    names = self.site.names  # (None: it never had a node, a VM that failed to start)
                    node = names.index(last["node"]) if last["node"] in names else None
        text, error = "", None
        if node is not None:
            try:
                text = self.nodes.tail(lease_id, vnode, node, limit, serial=serial)
            except (UserError, OSError) as exc:  # (an SshError, an unreadable file: the state answers)
                host = self._host_of(node)
                error = f"host {host}: {exc}" if host is not None else str(exc)
        return PayloadLog(lease=lease_id, vnode=vnode, node=None if node is None else self._name(node),
                          log="serial" if serial else "payload", text=text, log_error=error, **facts)

    def _visible(self, owner: str | None, lease_id: int) -> Lease:
        if lease_id not in self._owner or (owner is not None and self._owner[lease_id] != owner):
            raise LeaseNotFound(f"no lease {lease_id}")
        return self.sched.lease(lease_id)

    def _snapshots(self, leases: list[Lease]) -> list[ViewParts]:
        """What the views of ``leases`` are made of, copied (under the lock: its caller holds it);
        the views are built from them once it is released (:func:`build_view`)."""
        wanted = {le.id for le in leases}
        open_runs: dict[int, list[Run]] = {}
        for start, rr in self._enact.open.values():  # reservations under way: until their planned end
            if rr.lease.id in wanted:
                open_runs.setdefault(rr.lease.id, []).append(Run(rr.lease.id, rr.kind.value, start, rr.end,
                                                                 rr.nodes))
        payloads: dict[int, list[dict[str, Any]]] = {}
        for (lid, v), live in sorted(self._live.items(), key=lambda item: item[0]):
            if lid in wanted:
                payloads.setdefault(lid, []).append({"vnode": v, "node": self._name(live.payload.node),
                                                     "pid": live.payload.pid, "state": live.payload.state})
        now = self.clock.now()
        lease_time = self.clock.lease_at
        out = []
        for lease in leases:
            record = lease_record(lease, [])
            del record["events"]
            vm = self.sched.rr.get(lease.id)
            active = vm is not None and vm.state is LeaseState.ACTIVE
            plan = () if vm is None else tuple(  # (a migration holds no node: not a bar)
                {"kind": r.kind.value, "nodes": list(r.nodes), "start": r.start, "end": r.end}
                for r in vm.parts() if r.kind is not RRKind.MIGRATE and r.start > now)
            out.append(ViewParts(
                record=record, owner=self._owner[lease.id],
                events=tuple(self.trace.events.get(lease.id, ())),
                runs=(*self.trace.runs.get(lease.id, ()), *open_runs.get(lease.id, ())),
                transfers=tuple(self.trace.transfers.get(lease.id, ())),
                running_on=tuple(self._name(k) for k in vm.nodes) if active and vm is not None else (),
                payloads=tuple(payloads.get(lease.id, ())),
                ended_payloads=tuple(self._ended.get(lease.id, ())), planned=plan,
                overheads=tuple(_overhead(r, lease_time) for r in self._overheads.get(lease.id, ())),
                late_starts=tuple(dict(x) for x in self._late_starts.get(lease.id, ())),
                extensions=tuple(dict(x) for x in self._extensions.get(lease.id, ())),
                warnings=self.before_end.shown(lease.id)))
        return out


def _overhead(row: OverheadRow, lease_time: Callable[[float], float]) -> dict[str, Any]:
    """A recorded suspension or resumption as a view shows it (lease time, and real seconds)."""
    started, ended = lease_time(row.started), lease_time(row.ended)
    reserved = row.reserved_end - row.reserved_start
    return {"vnode": row.vnode, "kind": row.kind, "reserved_start": row.reserved_start,
            "reserved_end": row.reserved_end, "reserved_s": reserved, "started": round(started, 2),
            "ended": round(ended, 2), "measured_s": round(ended - started, 2),
            "seconds": round(row.ended - row.started, 3), "overran": ended - started > reserved}
