"""Extensions on the real clock (issue 40, item 2; docs/decisions/lease-extensions.md): the lease
manager's :meth:`Extending.extend` asks its scheduler for a later end (the rules:
:mod:`skylease.control.leases.changes`), under the site's :class:`ExtensionRules`, at the lease
time it is asked, and journals an accepted change as an input (``InputKind.EXTEND``) with the
events it made, in one commit before it answers: a restart replays it (:meth:`_extend_input`).

Enactment: a payload ends when its reservation does (the scheduler's end is what shuts it down), so
a command's process simply runs on to the new end. The default payload (no command) times its own
work from its duration when it was spawned, so it would exit at the old end, which the manager
would take for a premature end: its process is replaced by one timed to the new end (running) or
dropped (stopped: its next run spawns one from what is left). A restart does the same for the
leases its replay extended (their adopted default payloads were timed before the change, or after
it: replaced either way, which costs a process and loses nothing).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from skylease.control.leases import LeaseState
from skylease.control.leases.changes import ExtensionRules, check_rules, current_end, extend
from skylease.runtime.leases.api import LeaseChange, LeaseRefused, LeaseView
from skylease.runtime.leases.journal import InputKind
from skylease.runtime.leases.views import build_view

if TYPE_CHECKING:
    from skylease.runtime.leases.live import Live

__all__ = ["Extending", "ExtensionRules"]

log = logging.getLogger("skylease.leases")


class Extending:
    """:meth:`extend` of :class:`~skylease.runtime.leases.manager.LocalLeaseManager` (a mixin: it
    uses the manager's scheduler, journal, payloads and lock)."""

    sched: Any
    clock: Any
    nodes: Any
    journal: Any
    grace_s: float
    extension_rules: ExtensionRules
    _lock: Any
    _wake: Any
    _batch: Any
    _enact: Any
    _stepped: int
    _now: int
    _recording: bool
    _request: dict[int, dict[str, Any]]
    _full: dict[int, int]
    _live: dict[tuple[int, int], Live]
    _rows: dict[tuple[int, int, int], int]
    _extensions: dict[int, list[dict[str, Any]]]  # lease -> its extensions, for its view
    _lengthen_later: set[int]  # leases the replay extended (their default payloads re-timed after it)
    if TYPE_CHECKING:  # the manager's
        def _alive(self) -> None: ...
        def _visible(self, owner: str | None, lease_id: int) -> Any: ...
        def _payload_exits(self, now: int) -> None: ...
        def _advance(self, now: int) -> None: ...
        def _step(self, t: int) -> None: ...
        def _commit_and_enact(self, now: int, hosts_back: list[str] | None = None) -> None: ...
        def _reconcile(self, lease_ids: Any, now: int) -> None: ...
        def _snapshots(self, leases: list[Any]) -> list[Any]: ...
        def _ended_payload(self, lid: int, vnode: int, node: int, pid: int, state: str,
                           exit_code: int | None, reason: str | None) -> None: ...

    def extend(self, owner: str | None, lease_id: int, change: LeaseChange) -> LeaseView:
        """A later end for the lease (``change.by`` seconds, or at lease time ``change.end``), asked
        at the lease time it reached the manager; LeaseRefused with the reason, the latest end and
        (an advance reservation not started) the earliest start that fit, when it does not fit or
        a site rule forbids it. Nothing is journaled for a refusal (nothing changed)."""
        arrived = self.clock.now()
        with self._lock:
            self._alive()
            lease = self._visible(owner, lease_id)
            now = max(arrived, self._stepped)
            self._payload_exits(now)  # (as a request: the table a request made now would meet)
            self._advance(now)
            self._commit_and_enact(now)
            end = current_end(self.sched, lease)
            if change.by is not None:
                seconds = change.by
            elif end is None:
                raise LeaseRefused(f"lease {lease_id} has no end planned now (queued, or to be suspended "
                                   "and resumed): extend it by a number of seconds instead")
            else:
                assert change.end is not None
                seconds = change.end - end
                if seconds <= 0:
                    raise LeaseRefused(f"lease {lease_id} ends at lease time {end}: the new end {change.end} "
                                       "is not later")
            refused = check_rules(self.sched, lease, seconds, now, self.extension_rules)
            if refused is None:
                self._now = now
                refused = self._extend_input(lease_id, now, seconds)
            if refused is not None:
                raise LeaseRefused(f"lease {lease_id} not extended: {refused.reason}",
                                   latest_end=refused.latest_end, earliest_start=refused.earliest_start)
            self._step(now)
            self._commit_and_enact(now)
            self._lengthen_payloads(lease_id, now)
            self._wake.notify_all()
            parts = self._snapshots([lease])[0]
        return build_view(parts)

    def _extend_input(self, lid: int, t: int, seconds: int) -> Any:
        """The scheduler's extension of ``lid`` by ``seconds`` at ``t``; when accepted, journaled (a
        live call) and kept for the lease's view. Returns the refusal (a Change) or None. A replay
        gives it only what was accepted, so it is accepted again (the scheduler is deterministic)."""
        change = extend(self.sched, lid, seconds, t)
        if not change.accepted:
            if not self._recording:
                log.error("lease %d: its journaled extension by %d s was refused on replay: %s", lid, seconds,
                          change.reason)
            return change
        if self._recording:
            self._batch.inputs.append((t, InputKind.EXTEND, lid, {"seconds": seconds}))
        else:
            self._lengthen_later.add(lid)
        self._enact.touched.add(lid)
        self._full[lid] = self._full.get(lid, 0) + seconds
        self._extensions.setdefault(lid, []).append({"at": t, "seconds": seconds, "old_end": change.old_end,
                                                      "new_end": change.new_end})
        return None

    def _lengthen_replayed(self, now: int) -> None:
        """After a restart (with the lock held): the default payloads of the leases the replay
        extended, re-timed."""
        for lid in sorted(self._lengthen_later):
            self._lengthen_payloads(lid, now)
        self._lengthen_later.clear()

    def _lengthen_payloads(self, lid: int, now: int) -> None:
        """The default payloads of an extended lease (no command: they time their own work) replaced
        by ones timed to its new end (see the module's doc); a command's process runs on."""
        req = self._request.get(lid, {})
        if req.get("command") is not None or req.get("real_duration") is not None or req.get("vm"):
            return
        mine = sorted((k, v) for k, v in self._live.items() if k[0] == lid)
        if not mine:
            return
        for key, live in mine:
            p = live.payload
            self.nodes.shutdown(p, grace_s=self.grace_s)
            reason = "replaced: its lease was extended"
            self.journal.update_payload(live.row, state="killed", reason=reason)
            self._ended_payload(lid, key[1], p.node, p.pid, "killed", None, reason)
            del self._live[key]
            self._rows.pop((lid, key[1], live.run), None)
        vm = self.sched.rr.get(lid)
        if vm is not None and vm.state is LeaseState.ACTIVE:
            self._reconcile([lid], now)  # spawns them again, timed from the run's start to its new end
