"""The lease service's journal: every input the scheduler was given, in order, and what came of it.

The scheduler is deterministic: fed the same inputs at the same times, it makes the same decisions.
So its state at any moment is the replay of its inputs (:class:`InputKind`: a lease submitted, a
lease cancelled, a lease's premature end, an accepted extension, a step at time t), and the journal
is the service's state: a restarted server (after ``kill -9``) replays it and is where it was.
Every command's inputs, the events they produced and the leases' new states are committed in one
transaction before the API answers.

Tables (SQLAlchemy Core, on the service's one database: SQLite or PostgreSQL):

* ``lease_server``: key/value settings fixed at the first start (the clock's epoch and scale, the
  server's id that payloads carry, the site and scheduler configuration they were made for);
* ``lease_inputs``: the inputs, by sequence number;
* ``leases``: one row per lease: owner, the request as given, and its state as of the last commit
  (for listings and other readers; the replay is the truth);
* ``lease_events``: every scheduler event (lease, what, at, now), checked against the replay;
* ``lease_payloads``: every payload process started: lease, VM, node, run, pid, start ticks, state,
  exit code, reason.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from skylease.control.leases.records import Event

metadata = sa.MetaData()
#: A 64-bit key that SQLite also makes its row id (autoincrement needs INTEGER there).
_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")

server = sa.Table(
    "lease_server", metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
inputs = sa.Table(
    "lease_inputs", metadata,
    sa.Column("seq", _ID, primary_key=True, autoincrement=True),
    sa.Column("t", sa.BigInteger, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("lease", sa.BigInteger),
    sa.Column("body", sa.Text),
    sa.Column("unix", sa.Float, nullable=False),
)
leases = sa.Table(
    "leases", metadata,
    sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("owner", sa.String(128), nullable=False, index=True),
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("submit", sa.BigInteger, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("updated", sa.Float, nullable=False),
)
events = sa.Table(
    "lease_events", metadata,
    sa.Column("seq", _ID, primary_key=True, autoincrement=True),
    sa.Column("lease", sa.BigInteger, nullable=False, index=True),
    sa.Column("what", sa.String(16), nullable=False),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("now", sa.BigInteger, nullable=False),
)
payloads = sa.Table(
    "lease_payloads", metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("lease", sa.BigInteger, nullable=False, index=True),
    sa.Column("vnode", sa.Integer, nullable=False),
    sa.Column("node", sa.Integer, nullable=False),
    sa.Column("run", sa.BigInteger, nullable=False),  # the lease time its VM reservation started
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("start_ticks", sa.BigInteger, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("exit_code", sa.Integer),
    sa.Column("reason", sa.Text),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("ended", sa.Float),
)
#: Each suspension and resumption of a VM (issue 38): the window the schedule reserved for it (lease
#: time) beside when it really ran (Unix time): the overhead model against reality.
overheads = sa.Table(
    "lease_overheads", metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("lease", sa.BigInteger, nullable=False, index=True),
    sa.Column("vnode", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("reserved_start", sa.BigInteger, nullable=False),
    sa.Column("reserved_end", sa.BigInteger, nullable=False),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("ended", sa.Float, nullable=False),
)


# A command's statements, made once: building a statement (and an UPDATE's WHERE) per row was most of
# a lease request's journaling under load (docs/decisions/serve-throughput.md)
_INSERT_INPUTS = sa.insert(inputs)
_INSERT_LEASES = sa.insert(leases)
_INSERT_EVENTS = sa.insert(events)
_SET_STATE = (sa.update(leases).where(leases.c.id == sa.bindparam("lid"))
              .values(state=sa.bindparam("new_state"), updated=sa.bindparam("at")))


class InputKind(StrEnum):
    SUBMIT = "submit"  # body: the lease's fields (see Journal.lease_body)
    CANCEL = "cancel"
    END = "end"  # a premature end: the lease's payloads exited at t
    STEP = "step"
    HOST_DOWN = "host-down"  # body: {"host": name, "nodes": [...], "reason": why}
    HOST_UP = "host-up"  # body: {"host": name, "nodes": [...]}
    LATE = "late"  # body: {"seconds": s}: the lease's VMs began working s after its VM reservation
    EXTEND = "extend"  # body: {"seconds": s}: its owner's accepted extension (control/leases/changes.py)


@dataclass(frozen=True)
class Input:
    seq: int
    t: int
    kind: InputKind
    lease: int | None
    body: dict[str, Any] | None


@dataclass
class PayloadRow:
    id: int
    lease: int
    vnode: int
    node: int
    run: int
    pid: int
    start_ticks: int
    state: str
    exit_code: int | None
    reason: str | None


@dataclass(frozen=True)
class OverheadRow:
    """A VM's suspension or resumption (``kind``): reserved ``[reserved_start, reserved_end)`` in
    lease time, run from ``started`` to ``ended`` (Unix time)."""

    lease: int
    vnode: int
    kind: str
    reserved_start: int
    reserved_end: int
    started: float
    ended: float


class Journal:
    """The journal on ``engine`` (its tables are created if missing)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        metadata.create_all(engine)

    # -- settings ----------------------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        with self.engine.connect() as c:
            return {r.key: json.loads(r.value) for r in c.execute(sa.select(server))}

    def init_settings(self, values: dict[str, Any]) -> dict[str, Any]:
        """Store the settings not stored yet (the first start wins); returns all of them."""
        with self.engine.begin() as c:
            have = {r.key for r in c.execute(sa.select(server.c.key))}
            new = [{"key": k, "value": json.dumps(v)} for k, v in values.items() if k not in have]
            if new:
                c.execute(sa.insert(server), new)
        return self.settings()

    # -- reading -----------------------------------------------------------------------------------
    def inputs(self) -> Iterator[Input]:
        with self.engine.connect() as c:
            for r in c.execute(sa.select(inputs).order_by(inputs.c.seq)).mappings():  # (Row.t is its tuple)
                yield Input(r["seq"], r["t"], InputKind(r["kind"]), r["lease"],
                            json.loads(r["body"]) if r["body"] else None)

    def events(self) -> list[Event]:
        with self.engine.connect() as c:
            return [Event(r.lease, r.what, r.at, r.now)
                    for r in c.execute(sa.select(events).order_by(events.c.seq))]

    def payloads(self, live_only: bool = False) -> list[PayloadRow]:
        q = sa.select(payloads).order_by(payloads.c.id)
        if live_only:
            q = q.where(payloads.c.state.in_(("running", "stopped")))
        with self.engine.connect() as c:
            return [PayloadRow(r.id, r.lease, r.vnode, r.node, r.run, r.pid, r.start_ticks, r.state,
                               r.exit_code, r.reason) for r in c.execute(q)]

    def owners(self) -> dict[int, tuple[str, dict[str, Any]]]:
        """Lease id -> (owner, the request as given)."""
        with self.engine.connect() as c:
            return {r.id: (r.owner, json.loads(r.request))
                    for r in c.execute(sa.select(leases.c.id, leases.c.owner, leases.c.request))}

    def last_lease_id(self) -> int:
        with self.engine.connect() as c:
            return int(c.execute(sa.select(sa.func.max(leases.c.id))).scalar() or 0)

    def counts(self) -> dict[str, int]:
        """Rows per table (for status and tests)."""
        with self.engine.connect() as c:
            return {t.name: int(c.execute(sa.select(sa.func.count()).select_from(t)).scalar() or 0)
                    for t in (inputs, leases, events, payloads)}

    # -- writing -----------------------------------------------------------------------------------
    def commit(self, batch: Batch) -> None:
        """Write one command's inputs, events, lease states and payload changes in one transaction."""
        if batch.empty:
            return
        now = time.time()
        with self.engine.begin() as c:
            if batch.inputs:
                c.execute(_INSERT_INPUTS, [
                    {"t": t, "kind": k.value, "lease": lid, "body": None if b is None else json.dumps(b),
                     "unix": now} for t, k, lid, b in batch.inputs])
            if batch.new_leases:
                c.execute(_INSERT_LEASES, [
                    {"id": lid, "owner": owner, "request": json.dumps(req), "submit": submit, "state": state,
                     "updated": now} for lid, owner, req, submit, state in batch.new_leases])
            if batch.states:
                c.execute(_SET_STATE, [{"lid": lid, "new_state": state, "at": now}
                                       for lid, state in batch.states.items()])
            if batch.events:
                c.execute(_INSERT_EVENTS, [{"lease": e.lease, "what": e.what, "at": e.at, "now": e.now}
                                              for e in batch.events])

    def add_payload(self, lease: int, vnode: int, node: int, run: int, pid: int, start_ticks: int,
                    state: str = "running") -> int:
        with self.engine.begin() as c:
            res = c.execute(sa.insert(payloads).values(
                lease=lease, vnode=vnode, node=node, run=run, pid=pid, start_ticks=start_ticks, state=state,
                started=time.time()))
            return int(res.inserted_primary_key[0])

    def add_overhead(self, row: OverheadRow) -> None:
        with self.engine.begin() as c:
            c.execute(sa.insert(overheads).values(**dataclasses.asdict(row)))

    def overheads(self) -> list[OverheadRow]:
        """Every recorded suspension and resumption, in the order they were recorded."""
        with self.engine.connect() as c:
            return [OverheadRow(r.lease, r.vnode, r.kind, r.reserved_start, r.reserved_end, r.started,
                                r.ended) for r in c.execute(sa.select(overheads).order_by(overheads.c.id))]

    def update_payload(self, pid_row: int, *, state: str, exit_code: int | None = None,
                       reason: str | None = None, node: int | None = None) -> None:
        values: dict[str, Any] = {"state": state}
        if state in ("exited", "killed", "lost", "failed"):
            values["ended"] = time.time()
            values["exit_code"] = exit_code
            values["reason"] = reason
        if node is not None:
            values["node"] = node
        with self.engine.begin() as c:
            c.execute(sa.update(payloads).where(payloads.c.id == pid_row).values(**values))


@dataclass
class Batch:
    """What one command adds to the journal (see :meth:`Journal.commit`)."""

    inputs: list[tuple[int, InputKind, int | None, dict[str, Any] | None]]
    new_leases: list[tuple[int, str, dict[str, Any], int, str]]
    states: dict[int, str]
    events: list[Event]

    @classmethod
    def new(cls) -> Batch:
        return cls([], [], {}, [])

    @property
    def empty(self) -> bool:
        return not (self.inputs or self.new_leases or self.states or self.events)


def events_equal(a: Iterable[Event], b: Iterable[Event]) -> bool:
    return list(a) == list(b)
