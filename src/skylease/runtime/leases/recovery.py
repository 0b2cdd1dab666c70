"""A restart of the lease manager (issue 19's crash safety): the journal replayed into a fresh
scheduler (nothing enacted), the payloads still alive adopted, what fell due while the server was
down stepped through, and the rest reconciled."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from skylease.control.leases import LeaseState
from skylease.runtime.leases.journal import InputKind, PayloadRow
from skylease.runtime.leases.live import Live

__all__ = ["Recovery"]

log = logging.getLogger("skylease.leases")


class Recovery:
    """The recovery part of :class:`~skylease.runtime.leases.manager.LocalLeaseManager` (a mixin:
    it uses the manager's journal, scheduler, enactment and payloads; called with its lock held)."""

    journal: Any
    sched: Any
    nodes: Any
    clock: Any
    grace_s: float
    replayed_events_match: bool | None
    _enact: Any
    _batch: Any
    _live: dict[tuple[int, int], Live]
    _rows: dict[tuple[int, int, int], int]
    _request: dict[int, dict[str, Any]]
    _owner: dict[int, str]
    _overheads: dict[int, list]
    _recording: bool
    _replayed: list
    _now: int
    _stepped: int
    if TYPE_CHECKING:  # the manager's
        def _submit(self, body: dict[str, Any], owner: str, request: dict[str, Any]) -> Any: ...
        def _host_input(self, kind: InputKind, body: dict[str, Any], t: int) -> None: ...
        def _late_start(self, lid: int, t: int, seconds: int) -> None: ...
        def _extend_input(self, lid: int, t: int, seconds: int) -> Any: ...
        def _host_of(self, node: int) -> str | None: ...
        def _name(self, k: int) -> str: ...
        def _advance(self, now: int) -> None: ...
        def _step(self, t: int) -> None: ...
        def _commit_and_enact(self, now: int, hosts_back: list[str] | None = None) -> None: ...
        def _ended_payload(self, lid: int, vnode: int, node: int, pid: int, state: str,
                           exit_code: int | None, reason: str | None) -> None: ...

    def _recover(self) -> None:
        """Replay the journal (nothing enacted), adopt the payloads still alive, then catch up."""
        owners = self.journal.owners()
        for row in self.journal.overheads():
            self._overheads.setdefault(row.lease, []).append(row)
        self._recording = False
        t_last = -1
        for inp in self.journal.inputs():
            self._now = inp.t
            if inp.kind is InputKind.SUBMIT:
                assert inp.body is not None and inp.lease is not None
                owner, request = owners[inp.lease]
                self._submit(inp.body, owner, request)
            elif inp.kind is InputKind.CANCEL:
                self.sched.cancel(int(inp.lease or 0), inp.t)
            elif inp.kind is InputKind.END:  # (a payload's exit, or an idle lease reclaimed: idling.py)
                reclaimed = (inp.body or {}).get("reclaimed")
                self.sched.premature_end(int(inp.lease or 0), inp.t, reclaimed=reclaimed)
            elif inp.kind is InputKind.LATE:
                assert inp.body is not None
                self._late_start(int(inp.lease or 0), inp.t, int(inp.body["seconds"]))
            elif inp.kind is InputKind.EXTEND:
                assert inp.body is not None
                self._extend_input(int(inp.lease or 0), inp.t, int(inp.body["seconds"]))
            elif inp.kind in (InputKind.HOST_DOWN, InputKind.HOST_UP):
                assert inp.body is not None
                self._host_input(inp.kind, inp.body, inp.t)
            else:
                self._step(inp.t)
            t_last = max(t_last, inp.t)
        self._stepped = t_last
        self._recording = True
        stored = self.journal.events()
        self.replayed_events_match = stored == self._replayed
        if not self.replayed_events_match:  # a scheduler that is not deterministic, or a changed one
            log.error("the journal's replay differs from its stored events (%d stored, %d replayed)",
                      len(stored), len(self._replayed))
        self._replayed = []
        self._enact.touched.clear()
        self._adopt(t_last)
        now = self.clock.now()
        self._advance(now)  # what fell due while the server was down
        self._enact.touched.update(self._owner)
        self._lost_payloads(now)
        self._commit_and_enact(now)

    def _adopt(self, t_last: int) -> None:
        """Our payload processes still alive are matched to their rows by pid and start time: a
        payload of a row that says it runs (or is stopped) is adopted; one spawned but never
        recorded (the server died in between) is recorded and adopted; one that should be gone
        (its shutdown was under way) is shut down again. A row whose process is gone is lost.

        An adopted payload's running time is accounted from the last journaled time ``t_last``:
        until then the schedule was enacted; since, it has stayed as it is found (running or
        stopped), whatever its schedule said (:meth:`_account` counts the difference)."""
        rows = self.journal.payloads()
        for r in rows:
            self._rows[(r.lease, r.vnode, r.run)] = r.id
        # (a pid and start time are a process's on one machine: each host has its own)
        by_process = {(self._host_of(r.node), r.pid, r.start_ticks): r for r in rows}
        adopted: set[int] = set()
        for p in self.nodes.find_own():
            r = by_process.get((self._host_of(p.node), p.pid, p.start_ticks))
            request = self._request.get(p.lease)
            p.counts_work = request is not None and request.get("command") is None  # (the default payload)
            if not self.nodes.adopt(p):
                log.warning("lease %d VM %d: its payload (pid %d on %s) ended while it was being adopted",
                            p.lease, p.vnode, p.pid, self._name(p.node) if p.node >= 0 else "no node")
                continue
            if r is None:  # spawned, then the server died before it was journaled
                vm = self.sched.rr.get(p.lease)
                run = vm.start if vm is not None else self._now
                row = self.journal.add_payload(p.lease, p.vnode, p.node, run, p.pid, p.start_ticks, p.state)
                self._live[(p.lease, p.vnode)] = Live(p, row, run, t_last, p.state == "running")
                self._rows[(p.lease, p.vnode, run)] = row
            elif r.state in ("running", "stopped"):
                self._live[(r.lease, r.vnode)] = Live(p, r.id, r.run, t_last, p.state == "running")
                adopted.add(r.id)
            else:
                self.nodes.shutdown(p, grace_s=self.grace_s)
        for r in rows:
            if r.state in ("running", "stopped") and r.id not in adopted:
                log.warning("lease %d VM %d: its payload (pid %d on %s) is gone: recorded lost", r.lease,
                            r.vnode, r.pid, self._name(r.node) if r.node >= 0 else "no node")
                r = dataclasses.replace(r, state="lost", reason="gone while the server was down")
                self.journal.update_payload(r.id, state=r.state, reason=r.reason)
            if r.state in ("exited", "killed", "lost", "failed"):
                self._ended_payload(r.lease, r.vnode, r.node, r.pid, r.state, r.exit_code, r.reason)

    def _lost_payloads(self, now: int) -> None:
        """A lease whose VM reservation is active but whose payloads have all ended (died while the
        server was down, or exited before it could record their end) has no work left: a premature
        end now (its reservation is not left running with no process). A lease whose current
        payloads were never started is not one (:meth:`_reconcile` starts them)."""
        latest: dict[tuple[int, int], PayloadRow] = {}
        for r in self.journal.payloads():  # by id: a VM's last row is its current process
            latest[(r.lease, r.vnode)] = r
        for lid, vm in sorted(self.sched.rr.items()):
            if vm.state is not LeaseState.ACTIVE or any(k[0] == lid for k in self._live):
                continue
            rows = [latest.get((lid, v)) for v in range(len(vm.nodes))]
            self._now = now
            if all(r is not None and r.state in ("exited", "lost") for r in rows) and \
                    self.sched.premature_end(lid, now):
                self._batch.inputs.append((now, InputKind.END, lid, None))
                self._step(now)
