"""The service's registry of runs (issue 21): runs of ``skylease run`` that report their task table.

A run registers itself (a name, a one-line command summary, its number of tasks, optionally the id
of its bag of tasks on the QoS service), then sends batches of task rows as its tasks change, and
says when it ended. The service keeps one row per task (the last one sent wins) and the run's
counts, recomputed from its rows at each batch.

Tables (SQLAlchemy Core on the service's database, SQLite or PostgreSQL; on :data:`METADATA`,
created by :class:`RunRegistry` where missing):

* ``runs``: one row per run: owner, name, command, ``n_tasks``, state, started/updated/ended (Unix
  seconds), the counts ``done``, ``failed``, ``running`` (``queued`` is the rest), the bag's id.
* ``run_tasks``: one row per reported task, keyed by (run, task); ``rank`` orders a run's table
  failed first, then running, then done, then queued (an index serves each page of it).

Decisions of ours (the issue is silent):

* States of a run: ``running``; ``done`` (every task ok), ``failed`` (some failed or never ran),
  ``stopped`` (interrupted, to be resumed): said by the run when it ends; ``abandoned``: a running
  run that has not reported for a long time (:meth:`RunRegistry.sweep`). A run that reports again
  (a ``--resume``, a run the sweep gave up on too early) is ``running`` again.
* A task's ``status`` is ``queued``, ``running``, ``done`` or ``failed``; a task never reported
  counts as queued.
* Bounds, checked before anything is written (a :class:`UserError`, or a 422 from the row model):
  at most :data:`MAX_RUN_TASKS` tasks a run, :data:`MAX_BATCH` rows a batch, :data:`MAX_RUNS`
  runs kept per user, and every string bounded (a stderr tail to :data:`MAX_STDERR` characters).
* Owners: a user reaches only their own runs, an administrator (``caller=None``) every run; a run
  one may not reach is :class:`RunNotFound`, as a missing one. Only the owner writes to a run.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field

from skylease.model.errors import UserError
from skylease.model.wire import line, text, whole
from skylease.runtime.changes import ChangeLog
from skylease.runtime.tables import owned_table

__all__ = ["MAX_BATCH", "MAX_RUNS", "MAX_RUN_TASKS", "MAX_STDERR", "METADATA", "RUN_STATES", "TASK_STATUSES",
           "RunNotFound", "RunRegistry", "RunView", "TaskRow", "task_rank"]

#: The most tasks one run may declare.
MAX_RUN_TASKS = 1_000_000
#: The most task rows one batch may carry.
MAX_BATCH = 1000
#: The most runs kept per user (registering one more is refused: remove old ones first).
MAX_RUNS = 10_000
#: The longest stderr tail kept per task (characters: the end of it is kept by the reporter).
MAX_STDERR = 2048
RUN_STATES = ("running", "done", "failed", "stopped", "abandoned")
#: What a run may say when it ends.
END_STATES = ("done", "failed", "stopped")
TASK_STATUSES = ("failed", "running", "done", "queued")  # in the order of a run's table
RANK = {s: i for i, s in enumerate(TASK_STATUSES)}

METADATA = sa.MetaData()

runs = owned_table(
    "runs", METADATA,
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("command", sa.String(1000), nullable=False),
    sa.Column("n_tasks", sa.BigInteger, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("updated", sa.Float, nullable=False),
    sa.Column("ended", sa.Float),
    sa.Column("done", sa.BigInteger, nullable=False),
    sa.Column("failed", sa.BigInteger, nullable=False),
    sa.Column("running", sa.BigInteger, nullable=False),
    sa.Column("bot", sa.BigInteger),
)
run_tasks = sa.Table(
    "run_tasks", METADATA,
    sa.Column("run", sa.BigInteger, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("task", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("rank", sa.SmallInteger, nullable=False),
    sa.Column("label", sa.String(500), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("exit_code", sa.BigInteger),
    sa.Column("host", sa.String(255)),
    sa.Column("pool", sa.String(64)),
    sa.Column("runtime_s", sa.Float),
    sa.Column("ended", sa.Float),
    sa.Column("stderr_tail", sa.Text),
    sa.Index("run_tasks_order", "run", "rank", "task"),
)


class RunNotFound(LookupError):
    """A run the caller may not reach: missing, or another user's (answered as not found)."""


_Time = Annotated[float, Field(ge=0, le=1e11, allow_inf_nan=False)]


class _Model(BaseModel):
    # strict, and text without control characters (skylease.model.wire): what both databases store
    # and the same answer on both (PostgreSQL refuses a NUL); a label, a command and a stderr tail
    # may hold tabs and line breaks, a name, a host or a pool none
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TaskRow(_Model):
    """One task of a run as reported: ``task`` is its 0-based number in the job; ``ended`` Unix time."""

    task: whole(0, MAX_RUN_TASKS - 1)
    label: text(500) = ""
    status: Literal["queued", "running", "done", "failed"]
    attempts: whole(0, 1_000_000) = 0
    exit_code: whole(-(2**31), 2**32) | None = None
    host: line(255) | None = None
    pool: line(64) | None = None
    runtime_s: Annotated[float, Field(ge=0, le=1e10, allow_inf_nan=False)] | None = None
    ended: _Time | None = None
    stderr_tail: text(MAX_STDERR) | None = None


class RunRequest(_Model):
    """A run registering itself."""

    name: line(200, 1)
    command: text(1000) = ""
    n_tasks: whole(1, MAX_RUN_TASKS)
    bot: whole(0, 2**53) | None = None


class RunView(BaseModel):
    """A run as the API shows it; ``queued`` is every task neither done, failed nor running."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # (made from database rows: not strict)

    id: int
    owner: str
    name: str
    command: str
    n_tasks: int
    state: str
    started: float
    updated: float
    ended: float | None
    done: int
    failed: int
    running: int
    queued: int
    bot: int | None


def _view(row: Any) -> RunView:
    d = dict(row)
    d["queued"] = max(0, int(d["n_tasks"]) - int(d["done"]) - int(d["failed"]) - int(d["running"]))
    return RunView(**d)


def _row(r: Any) -> TaskRow:
    d = dict(r)
    d.pop("run", None)
    d.pop("rank", None)
    return TaskRow.model_construct(**d)  # (read back from the database: valid when written)


def task_rank(row: TaskRow) -> tuple[int, int]:
    """A task row's place in its run's table: (rank of its status, task)."""
    return RANK[row.status], row.task


class RunRegistry:
    """The runs on ``engine`` (their tables are created where missing)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        METADATA.create_all(engine, checkfirst=True)
        #: Bumped after each change is committed (the dashboard's live pages wait on it): which run
        #: of which owner changed, so a page hears only of the runs its user reaches.
        self.changes = ChangeLog()

    def _insert(self) -> Any:
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert

    # -- writing -----------------------------------------------------------------------------------
    def register(self, owner: str, req: RunRequest, now: float | None = None) -> RunView:
        """A new running run of ``owner``; refused past :data:`MAX_RUNS` runs kept for that user."""
        now = time.time() if now is None else float(now)
        with self.engine.begin() as conn:
            kept = conn.execute(sa.select(sa.func.count()).select_from(runs)
                                .where(runs.c.owner == owner)).scalar()
            if int(kept or 0) >= MAX_RUNS:
                raise UserError(f"{owner} already has {MAX_RUNS:,} runs on this service, the most kept",
                                field="runs")
            rid = conn.execute(runs.insert().values(
                owner=owner, name=req.name, command=req.command, n_tasks=req.n_tasks, state="running",
                started=now, updated=now, ended=None, done=0, failed=0, running=0, bot=req.bot)
            ).inserted_primary_key[0]
            view = _view(conn.execute(sa.select(runs).where(runs.c.id == rid)).mappings().one())
        self.changes.touch(view.id, owner)
        return view

    def _touch(self, conn: Any, owner: str, run: int, values: dict[str, Any]) -> Any:
        """Update one's own run (the first statement: it takes the row's lock, or SQLite's write
        lock, so batches of one run are counted one after the other); its row, or RunNotFound."""
        if run > 2**53 or conn.execute(runs.update().where(runs.c.id == run, runs.c.owner == owner)
                                       .values(**values)).rowcount == 0:
            raise RunNotFound(f"no run {run}")
        return conn.execute(sa.select(runs).where(runs.c.id == run)).mappings().one()

    def report(self, owner: str, run: int, rows: list[TaskRow], now: float | None = None) -> RunView:
        """Upsert a batch of ``owner``'s task rows (the last row of a task wins); the run is running
        again if it was not, and its counts are recounted from its rows."""
        if len(rows) > MAX_BATCH:
            raise UserError(f"at most {MAX_BATCH:,} rows a batch, got {len(rows):,}", field="rows")
        last = {r.task: r for r in rows}  # one statement may not write a row twice (PostgreSQL)
        now = time.time() if now is None else float(now)
        with self.engine.begin() as conn:
            head = self._touch(conn, owner, run, {"updated": now, "state": "running", "ended": None})
            n = int(head["n_tasks"])
            bad = next((t for t in last if t >= n), None)
            if bad is not None:
                raise UserError(f"task {bad} is not in this run of {n:,} tasks (0 to {n - 1:,})",
                                field="task")
            if last:
                insert = self._insert()
                values = [{**r.model_dump(), "run": run, "rank": RANK[r.status]} for r in last.values()]
                stmt = insert(run_tasks).values(values)
                cols = [c for c in values[0] if c not in ("run", "task")]
                conn.execute(stmt.on_conflict_do_update(index_elements=["run", "task"],
                                                        set_={c: stmt.excluded[c] for c in cols}))
            by = dict(conn.execute(sa.select(run_tasks.c.status, sa.func.count())
                                   .where(run_tasks.c.run == run).group_by(run_tasks.c.status)).all())
            counts = {s: int(by.get(s, 0)) for s in ("done", "failed", "running")}
            conn.execute(runs.update().where(runs.c.id == run).values(**counts))
            view = _view({**head, **counts, "updated": now, "state": "running", "ended": None})
        self.changes.touch(run, owner)
        return view

    def finish(self, owner: str, run: int, state: str, now: float | None = None) -> RunView:
        """``owner``'s run ended as ``state`` (done, failed or stopped)."""
        if state not in END_STATES:
            raise UserError(f"must be one of {', '.join(END_STATES)}, got {state!r}", field="state")
        now = time.time() if now is None else float(now)
        with self.engine.begin() as conn:
            view = _view(self._touch(conn, owner, run, {"updated": now, "ended": now, "state": state}))
        self.changes.touch(run, owner)
        return view

    def sweep(self, now: float, idle_s: float) -> int:
        """Abandon the running runs that have not reported for ``idle_s`` seconds; how many."""
        silent = (runs.c.state == "running", runs.c.updated < now - idle_s)
        with self.engine.begin() as conn:
            gone = conn.execute(sa.select(runs.c.id, runs.c.owner).where(*silent)
                                .with_for_update()).all()
            if gone:
                conn.execute(runs.update().where(runs.c.id.in_([g.id for g in gone]), *silent)
                             .values(state="abandoned"))
        for g in gone:
            self.changes.touch(g.id, g.owner)
        return len(gone)

    # -- watchers ----------------------------------------------------------------------------------
    def version(self) -> int:
        """The change counter: it grows at each change of a run."""
        return self.changes.version

    def wait_change(self, seen: int, timeout: float) -> int:
        """The counter once it differs from ``seen``, or after ``timeout`` seconds."""
        return self.changes.wait(seen, timeout)

    async def wait_change_async(self, seen: int, timeout: float) -> int:
        """As :meth:`wait_change`, awaited on an event loop (no thread held while it waits)."""
        return await self.changes.wait_async(seen, timeout)

    # -- reading -----------------------------------------------------------------------------------
    def runs(self, caller: str | None, limit: int = 1000, before: int | None = None) -> list[RunView]:
        """The caller's runs (None: every run), newest first, at most ``limit``; only those whose
        id is below ``before`` if given (the next page of the list)."""
        q = sa.select(runs).order_by(runs.c.id.desc()).limit(limit)
        if caller is not None:
            q = q.where(runs.c.owner == caller)
        if before is not None:
            q = q.where(runs.c.id < before)
        with self.engine.connect() as conn:
            return [_view(r) for r in conn.execute(q).mappings()]

    def run(self, caller: str | None, run: int) -> RunView:
        q = sa.select(runs).where(runs.c.id == run)
        if caller is not None:
            q = q.where(runs.c.owner == caller)
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first() if run <= 2**53 else None
        if row is None:
            raise RunNotFound(f"no run {run}")
        return _view(row)

    def tasks(self, caller: str | None, run: int, offset: int = 0, limit: int = 200,
              after: tuple[int, int] | None = None) -> list[TaskRow]:
        """A page of the run's task table: failed first, then running, done, queued; by task within.
        ``after``: the (rank, task) of the last row of the page before (the rows after it, then
        ``offset`` rows skipped)."""
        self.run(caller, run)
        if not (0 <= offset <= MAX_RUN_TASKS and 0 <= limit <= MAX_RUN_TASKS):
            raise UserError(f"offset and limit must be from 0 to {MAX_RUN_TASKS:,}", field="offset")
        q = (sa.select(run_tasks).where(run_tasks.c.run == run)
             .order_by(run_tasks.c.rank, run_tasks.c.task).offset(offset).limit(limit))
        if after is not None:
            rank, task = after
            q = q.where(sa.or_(run_tasks.c.rank > rank,
                               sa.and_(run_tasks.c.rank == rank, run_tasks.c.task > task)))
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(q).mappings()]

    def reported(self, caller: str | None, run: int) -> int:
        """How many of the run's tasks have a row."""
        self.run(caller, run)
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(run_tasks)
                                    .where(run_tasks.c.run == run)).scalar() or 0)

