"""Warnings before a lease's end, given (issue 40, item 4; docs/decisions/before-end-warnings.md).

:class:`BeforeEnd` is the lease manager's part that gives them: at each turn of its loop (under its
lock) :meth:`BeforeEnd.due` says which leases' warnings fell due (from the scheduler's plan:
:func:`skylease.control.leases.warnings.due`), and :meth:`BeforeEnd.give` records one in the
database (table ``lease_warnings``: lease, planned end, when it was given, its webhook's state and
attempts) *before* anything is told, then tells the payloads (a ``BEFORE_END`` file in the lease's
folder and SIGUSR1 to the processes that trap it: the enactment's ``notice``) and queues its webhook
(:mod:`skylease.runtime.leases.webhooks`, sent by a thread of its own). A restarted server reads
the table: a warning given is not given again, one that fell due while it was down is given at its
first turn, and a webhook not delivered yet is sent again (receivers dedupe on its delivery id).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from skylease.control.leases import RRKind
from skylease.control.leases.warnings import Due, due_at
from skylease.runtime.leases.journal import metadata
from skylease.runtime.leases.webhooks import Deliveries, Delivery, body_of, check_url

__all__ = ["NOTICE_FILE", "BeforeEnd", "Warned", "WarningConfig", "notice_text"]

log = logging.getLogger("skylease.leases")

#: The file a warned payload finds in its lease's folder.
NOTICE_FILE = "BEFORE_END"

_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")
warnings_table = sa.Table(
    "lease_warnings", metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("lease", sa.BigInteger, nullable=False, index=True),
    sa.Column("planned_end", sa.BigInteger, nullable=False),
    sa.Column("given_at", sa.BigInteger, nullable=False),  # lease time
    sa.Column("unix", sa.Float, nullable=False),
    sa.Column("webhook", sa.Text),  # its URL, or null
    sa.Column("state", sa.String(16)),  # the webhook's: pending, delivered, failed (null: none)
    sa.Column("attempts", sa.Text, nullable=False),  # JSON list of the webhook's attempts
    sa.Column("body", sa.Text),  # the webhook's body (sent again as it was after a restart)
    sa.UniqueConstraint("lease", "planned_end", name="lease_warnings_once"),
)


@dataclass(frozen=True)
class WarningConfig:
    """A site's warnings: ``before_end`` lease seconds before a lease's planned end when its request
    names none (None or 0: no warning), the webhook URL ``prefixes`` it allows and its ``secret``."""

    before_end: int | None = None
    prefixes: tuple[str, ...] = ()
    secret: bytes | None = None
    #: The webhook sender's seam (tests pass a quicker backoff; None: the default sender).
    deliveries: Callable[..., Deliveries] | None = field(default=None, compare=False)


def notice_text(end: int, unix_end: float, seconds_left: int) -> str:
    """What ``BEFORE_END`` holds: the planned end in lease seconds, as a Unix time, and the lease
    seconds left when the warning was given, on one line."""
    return f"{end} {unix_end:.3f} {seconds_left}\n"


class BeforeEnd:
    """The warnings of a lease manager on ``engine`` (see the module's docstring); ``config``: the
    site's; ``bump``: tells the manager's change counter (event streams wake)."""

    def __init__(self, engine: sa.Engine, config: WarningConfig | None, bump: Callable[[], None]) -> None:
        self.engine, self.config = engine, config or WarningConfig()
        self.bump = bump
        metadata.create_all(engine, tables=[warnings_table])
        self._lock = threading.Lock()  # (the sender's thread records attempts)
        self._given: set[tuple[int, int]] = set()
        self._shown: dict[int, list[dict[str, Any]]] = {}  # lease -> its warnings, as views show them
        self._rows: dict[int, dict[str, Any]] = {}  # row id -> its shown dict
        self._seen_version: int | None = None
        self._next_at = float("inf")
        self.sender: Deliveries | None = None
        if self.config.secret is not None and self.config.prefixes:
            make = self.config.deliveries or Deliveries
            self.sender = make(self.config.secret, self._record)
        self._load()

    # -- what was given ------------------------------------------------------------------------------
    def _load(self) -> None:
        with self.engine.connect() as c:
            rows = list(c.execute(sa.select(warnings_table).order_by(warnings_table.c.id)))
        for r in rows:
            shown = self._add(r.id, r.lease, r.planned_end, r.given_at, r.webhook, r.state,
                              json.loads(r.attempts))
            if r.state == "pending" and self.sender is not None and r.body is not None:
                n = len(shown["webhook"]["attempts"])
                self.sender.put(Delivery(time.time(), r.id, r.webhook, r.body.encode(),
                                         f"{r.lease}-{r.planned_end}", attempts=n))

    def _add(self, row: int, lease: int, end: int, at: int, url: str | None, state: str | None,
             attempts: list[dict[str, Any]]) -> dict[str, Any]:
        shown: dict[str, Any] = {"time": at, "event": "before-end", "end": end, "seconds_left": end - at}
        if url is not None:
            shown["webhook"] = {"url": url, "state": state, "attempts": attempts}
        with self._lock:
            self._given.add((lease, end))
            self._shown.setdefault(lease, []).append(shown)
            self._rows[row] = shown
        return shown

    def shown(self, lease: int) -> tuple[dict[str, Any], ...]:
        """The lease's warnings given, as its view shows them (copies: the sender may change them)."""
        with self._lock:
            return tuple(json.loads(json.dumps(s)) for s in self._shown.get(lease, ()))

    # -- what is due ---------------------------------------------------------------------------------
    def check(self, request: Mapping[str, Any]) -> None:
        """Refuse a request whose webhook the site does not allow (WebhookNotAllowed)."""
        if request.get("webhook") is not None:
            check_url(str(request["webhook"]), self.config.prefixes if self.config.secret else ())

    def due(self, reservations: Iterable[Any], requests: Mapping[int, Mapping[str, Any]], now: int,
            version: int) -> list[Due]:
        """The warnings due by lease time ``now`` not given yet, over VM ``reservations`` (the
        manager passes those under way only: a warning is never due before its reservation starts,
        and those under way are at most one per node, however many leases wait). The plan changes
        only with ``version`` (the manager's change counter): between two changes only the earliest
        warning still to come is looked at."""
        if version == self._seen_version and now < self._next_at:
            return []
        self._seen_version, self._next_at = version, float("inf")
        out, site, given, nxt = [], self.config.before_end, self._given, float("inf")
        for vm in reservations:
            lid = vm.lease.id
            req = requests.get(lid)  # (its own before_end, 0 turning the site's off; else the site's)
            at = due_at(vm, site if req is None else req.get("before_end", site))
            if at is None:
                continue
            if at > now:
                nxt = min(nxt, at)
            elif (lid, vm.end) not in given:
                out.append(Due(lid, vm.end, at))
        self._next_at = nxt
        return sorted(out, key=lambda d: (d.at, d.lease))

    def give(self, d: Due, now: int, owner: str, request: Mapping[str, Any], unix_end: float,
             tell: Callable[[str], None]) -> None:
        """Give warning ``d`` at lease time ``now``: recorded first (once, even across a restart),
        then the payloads told (``tell(text)``: the enactment's notice to each of them; a failure is
        logged) and the webhook queued."""
        url = request.get("webhook")
        left = d.end - now
        body = None
        if url is not None:
            body = body_of({"event": "before-end", "lease": d.lease, "owner": owner, "planned_end": d.end,
                            "planned_end_unix": round(unix_end, 3), "seconds_left": left, "given_at": now,
                            "delivery": f"{d.lease}-{d.end}"}).decode()
        state = None if url is None else ("pending" if self.sender is not None else "failed")
        try:
            with self.engine.begin() as c:
                row = c.execute(sa.insert(warnings_table).values(
                    lease=d.lease, planned_end=d.end, given_at=now, unix=time.time(), webhook=url,
                    state=state, attempts="[]", body=body)).inserted_primary_key[0]
        except sa.exc.IntegrityError:  # given already (by a run whose record this one did not read)
            with self._lock:
                self._given.add((d.lease, d.end))
            return
        self._add(int(row), d.lease, d.end, now, url, state, [])
        try:
            tell(notice_text(d.end, unix_end, left))
        except Exception:  # (a payload's host that stopped answering: the event and webhook still go)
            log.exception("lease %d: its payloads could not all be told of its end", d.lease)
        if url is not None and body is not None and self.sender is not None:
            self.sender.put(Delivery(time.time(), int(row), str(url), body.encode(), f"{d.lease}-{d.end}"))
        self.bump()

    def _record(self, row: int, attempt: dict[str, Any], state: str) -> None:
        """An attempt of a webhook (the sender's thread): kept in the database and in the view."""
        with self._lock:
            shown = self._rows.get(row)
            if shown is not None:
                shown["webhook"]["attempts"].append(attempt)
                shown["webhook"]["state"] = state
                attempts = list(shown["webhook"]["attempts"])
        if shown is None:
            return
        with self.engine.begin() as c:
            c.execute(sa.update(warnings_table).where(warnings_table.c.id == row).values(
                state=state, attempts=json.dumps(attempts)))
        self.bump()

    def close(self) -> None:
        if self.sender is not None:
            self.sender.close()


class Warned:
    """The lease manager's side (a mixin of :class:`~skylease.runtime.leases.manager.LocalLeaseManager`,
    with its lock held): give each warning due by ``now``."""

    before_end: BeforeEnd

    def _warn(self, now: int) -> None:
        m: Any = self
        under_way = [rr for _start, rr in m._enact.open.values() if rr.kind is RRKind.VM]
        for d in self.before_end.due(under_way, m._request, now, m.changes.version):
            req = m._request[d.lease]
            # (a QEMU guest's process is QEMU: a SIGUSR1 would end it; its lease's folder is not the
            # guest's: a VM lease gets the event and the webhook only)
            lives = [] if req.get("vm") else [live.payload for (lid, _), live in sorted(m._live.items())
                                               if lid == d.lease]
            self.before_end.give(d, now, m._owner[d.lease], req, m.clock.real_at(d.end),
                                 _teller(m.nodes, lives, d.lease))


def _teller(nodes: Any, payloads: list[Any], lease: int) -> Callable[[str], None]:
    def tell(text: str) -> None:
        for p in payloads:
            try:
                nodes.notice(p, NOTICE_FILE, text)
            except Exception as exc:  # (a host that stopped answering: the others are still told)
                log.warning("lease %d VM %d: no notice of its end: %s", lease, p.vnode, exc)
    return tell
