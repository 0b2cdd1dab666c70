"""The Information module and the Oracle of the SpeQuloS service (issue 20; decision S29 in
docs/decisions/spequlos.md).

Information: a run registers its bag of tasks (owner, infrastructure, number of tasks, strategy),
reports its progress (``t`` seconds since registration, tasks completed, assigned, queued, and
the cloud workers it has running and booting) and says when it finished; finished BoTs stay as the
history of their infrastructure. Oracle: the predicted completion time ``t_p = α · t_c(r)/r`` of a
BoT and its ±20 % band, with α fitted on the finished BoTs of the same infrastructure. The formula,
the fit and the success rate are those of :mod:`skylease.control.qos.prediction`; none is repeated
here.

Tables (SQLAlchemy Core on the service's database, SQLite or PostgreSQL; on :data:`METADATA`):

* ``qos_bots``: one row per BoT: owner, infrastructure, size, strategy, state (``running``,
  ``done``, ``abandoned``), the naive prediction at half completion ``p_half = t_c(0.5)/0.5``,
  the completion time once done, and a copy of the latest report (written in the report's
  transaction, so listings need not read the series).
* ``qos_progress``: one row per report: bot, t, completed, assigned, queued, and the bag's cloud
  workers then (``cloud_workers`` running, ``cloud_booting`` started but not up yet; NULL in rows
  stored before skylease kept them). Seven numbers, some 50 bytes: a report a minute stores about
  3 KB an hour (the paper: "less than a few hundred bytes per minute").

Schema changes: a column added after a table's first release is added where missing when a
registry opens the database (:data:`ADDED`, an idempotent ``ALTER TABLE ... ADD COLUMN``, nullable:
the old rows keep NULL), so a database made by an older skylease is upgraded in place.

Bounds, checked before anything is written: ``n_tasks`` ≤ :data:`MAX_TASKS`; infrastructure
names match :data:`NAME` (at most 64 printable characters, no spaces); ``t`` ≤ :data:`MAX_T`; at
most :data:`MAX_REPORTS` rows per BoT: past that, each report replaces the BoT's last row (the
latest counts are always kept; only the resolution of the end of the series is lost).

``t_c(0.5)`` is the ``t`` of the first report with ``completed ≥ rank(0.5, n_tasks)``: its
resolution is the report period (it is late by at most one period), unless the reporter gives
``t_half``, the exact time of that completion (the simulator does).

Concurrency: a report (or finish) first updates the BoT's row under a condition holding its
checks (running, ``t`` not going back, ``completed`` not decreasing). That first statement takes
the row lock (PostgreSQL) or the database's write lock (SQLite), so of two concurrent reports
only those consistent with each other pass, and the progress row is written under that lock.
"""

from __future__ import annotations

import math
import numbers
import re
import threading
import time
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict

from skylease.control.qos.prediction import TOLERANCE, AlphaModel
from skylease.control.qos.prediction import predict as naive_prediction
from skylease.control.qos.strategy import parse_strategy
from skylease.control.qos.tail import rank
from skylease.model.errors import UserError
from skylease.model.limits import check_number
from skylease.runtime.tables import ID, owned_table

__all__ = [
    "ADDED",
    "MAX_CLOUD_WORKERS",
    "MAX_REPORTS",
    "MAX_T",
    "MAX_TASKS",
    "METADATA",
    "PREDICT_AT",
    "BotNotFound",
    "BotRegistry",
    "BotView",
    "HistoryView",
    "PredictionView",
    "ProgressPoint",
    "upgrade",
]

#: The largest bag of tasks one BoT may declare.
MAX_TASKS = 10_000_000
#: Progress rows kept per BoT (a week at one report a minute, four weeks at one per 240 s).
MAX_REPORTS = 10_000
#: The most cloud workers one report may count (the scheduler's bound on a bag's CWs).
MAX_CLOUD_WORKERS = 100_000
#: The latest ``t`` a report may carry: ten years after registration.
MAX_T = 10 * 365 * 86400.0
#: The finished BoTs α is fitted on: the latest this many of the infrastructure.
HISTORY_RUNS = 10_000
#: An infrastructure name: short, printable, no spaces (it is shown in tables and URLs).
NAME = r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,63}"
#: Seconds a fitted α is reused (it is refitted at once when a BoT of its infrastructure finishes
#: through the same registry; one finished by another process on the database is seen this late).
ALPHA_TTL = 60.0
#: The completion ratio of the stored naive prediction ``p_half`` (Table 7's 50 %).
PREDICT_AT = 0.5
STATES = ("running", "done", "abandoned")

METADATA = sa.MetaData()

qos_bots = owned_table(
    "qos_bots", METADATA,
    sa.Column("infrastructure", sa.String(64), nullable=False, index=True),
    sa.Column("n_tasks", sa.BigInteger, nullable=False),
    sa.Column("strategy", sa.String(32)),
    sa.Column("tick", sa.Float),  # how the service serves it: its Scheduler's period (s)...
    sa.Column("pool", sa.String(64)),  # ... and the run's pool its cloud workers come from
    sa.Column("registered_at", sa.Float, nullable=False),  # Unix time
    sa.Column("finished_at", sa.Float),  # Unix time
    sa.Column("completion_time", sa.Float),  # s since registration
    sa.Column("p_half", sa.Float),  # s
    sa.Column("state", sa.String(16), nullable=False),
    # the latest report (zeros before the first) and how many rows the series holds
    sa.Column("t", sa.Float, nullable=False),
    sa.Column("completed", sa.BigInteger, nullable=False),
    sa.Column("assigned", sa.BigInteger, nullable=False),
    sa.Column("queued", sa.BigInteger, nullable=False),
    sa.Column("reports", sa.Integer, nullable=False),
)
qos_progress = sa.Table(
    "qos_progress", METADATA,
    sa.Column("id", ID, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.BigInteger, sa.ForeignKey("qos_bots.id"), nullable=False),
    sa.Column("t", sa.Float, nullable=False),
    sa.Column("completed", sa.BigInteger, nullable=False),
    sa.Column("assigned", sa.BigInteger, nullable=False),
    sa.Column("queued", sa.BigInteger, nullable=False),
    sa.Column("cloud_workers", sa.Integer),  # (added in issue 21: NULL in older rows)
    sa.Column("cloud_booting", sa.Integer),
    sa.Index("qos_progress_bot_id", "bot", "id"),
)
#: Columns added to a table after its first release (nullable, no default): added where missing.
ADDED: dict[sa.Table, tuple[str, ...]] = {qos_progress: ("cloud_workers", "cloud_booting")}


class BotNotFound(UserError):
    """No BoT with that id is visible to the caller (missing, or another user's)."""


class BotView(BaseModel):
    """A BoT as the API shows it; ``t``, ``completed``, ``assigned``, ``queued``: its latest report."""

    model_config = ConfigDict(frozen=True)

    id: int
    owner: str
    infrastructure: str
    n_tasks: int
    strategy: str | None
    tick: float | None
    pool: str | None
    state: str
    registered_at: float
    finished_at: float | None
    completion_time: float | None
    p_half: float | None
    t: float
    completed: int
    assigned: int
    queued: int
    reports: int


class ProgressPoint(BaseModel):
    """One report of a BoT's series; ``cloud_workers`` (running) and ``cloud_booting``: the bag's
    cloud workers at that report (None: not reported, or stored before skylease kept them)."""

    model_config = ConfigDict(frozen=True)

    t: float
    completed: int
    assigned: int
    queued: int
    cloud_workers: int | None = None
    cloud_booting: int | None = None


class HistoryView(BaseModel):
    """An infrastructure's history: α fitted on its finished BoTs (``runs`` of them, with a known
    ``p_half``), its in-sample success rate (None with no runs), and the latest finished BoTs."""

    model_config = ConfigDict(frozen=True)

    infrastructure: str
    runs: int
    alpha: float
    success_rate: float | None
    method: str
    bots: list[BotView]


class PredictionView(BaseModel):
    """The Oracle's answer for one BoT at its latest report (time ``t``).

    ``r`` is 0.5 once half the tasks completed, else the latest completion ratio reached
    (``completed / n_tasks``); ``t_c_r`` is when it was reached; ``p = t_c_r / r`` the naive
    prediction; ``t_p = α·p`` and its band ``[low, high]`` (±``tolerance``). All five are None
    before the first completion. α, ``success_rate`` and ``runs`` come from the finished BoTs of
    the same infrastructure (the BoT itself left out). ``completion_time``: the actual one, once done.
    """

    model_config = ConfigDict(frozen=True)

    bot: int
    infrastructure: str
    state: str
    n_tasks: int
    completed: int
    t: float
    r: float | None
    t_c_r: float | None
    p: float | None
    t_p: float | None
    low: float | None
    high: float | None
    tolerance: float
    alpha: float
    success_rate: float | None
    runs: int
    method: str
    completion_time: float | None


def _count(value: object, field: str, *, minimum: int = 0, maximum: int) -> int:
    """A whole number in ``[minimum, maximum]``, or a one-line UserError on ``field``."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok or not minimum <= int(value) <= maximum:  # type: ignore[call-overload]
        raise UserError(f"must be a whole number from {minimum:,} to {maximum:,}, got {value!r}", field=field)
    return int(value)  # type: ignore[call-overload]


def _owner(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 64 or not value.isprintable() \
            or value != value.strip():
        raise UserError(f"must be a user name (1 to 64 printable characters), got {value!r}", field="owner")
    return value


def _infrastructure(value: object) -> str:
    if not isinstance(value, str) or not re.fullmatch(NAME, value):
        raise UserError(f"must be 1 to 64 letters, digits or ._:/@+- (starting with a letter or digit), "
                        f"got {value!r}", field="infrastructure")
    return value


def _strategy(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 32:
        raise UserError(f"must be a strategy name such as 9C-C-R or none, got {value!r}", field="strategy")
    parsed = parse_strategy(value)
    return parsed.name if parsed is not None else "none"


def upgrade(engine: sa.Engine) -> None:
    """Add the columns of :data:`ADDED` missing from an existing table (a database made by an
    older skylease); idempotent, and safe against another process doing the same at once."""
    for table, names in ADDED.items():
        for name in names:
            if name in {c["name"] for c in sa.inspect(engine).get_columns(table.name)}:
                continue
            kind = table.c[name].type.compile(dialect=engine.dialect)
            try:
                with engine.begin() as c:
                    c.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {name} {kind}"))
            except sa.exc.DBAPIError:  # (added meanwhile by another process: fine; else say so)
                if name not in {c["name"] for c in sa.inspect(engine).get_columns(table.name)}:
                    raise


def _view(row: Any) -> BotView:
    """The view of a ``qos_bots`` row mapping (mappings, because ``Row.t`` is the row's tuple)."""
    return BotView(**dict(row))


class BotRegistry:
    """The BoTs of the service on ``engine`` (its tables are created if missing).

    Every method taking ``owner`` refuses, as :class:`BotNotFound`, a BoT of another owner (None:
    any BoT, for the server's own use). ``method``: α's fitting objective (see
    :func:`~skylease.control.qos.prediction.fit_alpha`).

    α is fitted once per infrastructure and kept (every prediction needs it, and the fit reads up
    to :data:`HISTORY_RUNS` finished BoTs: 25 ms at 10,000 of them on SQLite); a BoT finishing
    through this registry refits it, one finished by another process is seen after
    ``alpha_ttl`` seconds at most (default :data:`ALPHA_TTL`).
    """

    def __init__(self, engine: sa.Engine, *, method: str = "l1", alpha_ttl: float | None = None) -> None:
        self.engine = engine
        self.method = method
        self.alpha_ttl = ALPHA_TTL if alpha_ttl is None else float(alpha_ttl)
        self._alphas: dict[str, tuple[float, AlphaModel]] = {}  # infrastructure -> (fitted at, α)
        self._finished = 0  # BoTs finished through this registry: a fit begun before one is not kept
        self._alpha_lock = threading.Lock()
        AlphaModel.fit([], [], method)  # an unknown method fails here, not at the first prediction
        METADATA.create_all(engine, checkfirst=True)
        upgrade(engine)

    # -- Information: writing ----------------------------------------------------------------------
    def register(self, owner: str, infrastructure: str, n_tasks: int, strategy: str | None = None, *,
                 tick: float | None = None, pool: str | None = None) -> BotView:
        """A new running BoT; its id is in the view. ``strategy``, ``tick`` and ``pool``: how the
        service serves it (kept so that a restarted service serves it the same way)."""
        values = {"owner": _owner(owner), "infrastructure": _infrastructure(infrastructure),
                  "n_tasks": _count(n_tasks, "n_tasks", minimum=1, maximum=MAX_TASKS),
                  "strategy": _strategy(strategy),
                  "tick": None if tick is None else check_number(tick, "tick", above=0,
                                                                 maximum=86_400),
                  "pool": None if pool is None else _infrastructure(pool),
                  "registered_at": time.time(), "state": "running",
                  "t": 0.0, "completed": 0, "assigned": 0, "queued": 0, "reports": 0}
        with self.engine.begin() as c:
            bot = int(c.execute(sa.insert(qos_bots).values(**values)).inserted_primary_key[0])
            return _view(c.execute(sa.select(qos_bots).where(qos_bots.c.id == bot)).mappings().one())

    def report(self, bot: int, t: float, completed: int, assigned: int = 0, queued: int = 0, *,
               t_half: float | None = None, owner: str | None = None, cloud_workers: int | None = None,
               cloud_booting: int | None = None) -> BotView:
        """Store one progress report of a running BoT at ``t`` s since its registration.

        ``completed``: tasks done; ``assigned``: tasks ever given to a worker; ``queued``: tasks
        waiting for one (the counts of :class:`~skylease.control.env.BotProgress` and ``queued()``
        of a TailEnvironment, so a proxy environment can be rebuilt from the latest report).
        Refused (one line naming the field): ``completed``, ``assigned`` or ``queued`` beyond
        ``n_tasks``; ``t`` before the last report's; fewer completions than the last report; a BoT
        that is not running. ``t_half``: the exact time of the ``rank(0.5, n_tasks)``-th completion,
        given once that many tasks completed (else the report's ``t`` stands for it).
        ``cloud_workers``, ``cloud_booting``: the bag's cloud workers running and booting at ``t``
        (None: unknown), at most :data:`MAX_CLOUD_WORKERS` each.
        """
        row = self._row(bot, owner)
        n = row["n_tasks"]
        t = check_number(t, "t", minimum=0, maximum=MAX_T)
        completed = _count(completed, "completed", maximum=n)
        assigned = _count(assigned, "assigned", maximum=n)
        queued = _count(queued, "queued", maximum=n)
        cws = {k: None if v is None else _count(v, k, maximum=MAX_CLOUD_WORKERS)
               for k, v in (("cloud_workers", cloud_workers), ("cloud_booting", cloud_booting))}
        values: dict[str, Any] = {"t": t, "completed": completed, "assigned": assigned, "queued": queued}
        p_half = self._p_half(n, completed, t, t_half)
        if p_half is not None:
            values["p_half"] = sa.func.coalesce(qos_bots.c.p_half, p_half)  # the first report past half
        point = {"t": t, "completed": completed, "assigned": assigned, "queued": queued, **cws}
        with self.engine.begin() as c:
            self._update_running(c, row["id"], t, values, completed)
            last = c.execute(sa.select(qos_progress.c.id, qos_progress.c.t)
                             .where(qos_progress.c.bot == row["id"])
                             .order_by(qos_progress.c.id.desc()).limit(1)).mappings().first()
            kept = c.execute(sa.select(qos_bots.c.reports).where(qos_bots.c.id == row["id"])).scalar_one()
            if last is not None and (last["t"] == t or kept >= MAX_REPORTS):
                c.execute(sa.update(qos_progress).where(qos_progress.c.id == last["id"]).values(**point))
            else:
                c.execute(sa.insert(qos_progress).values(bot=row["id"], **point))
                c.execute(sa.update(qos_bots).where(qos_bots.c.id == row["id"])
                          .values(reports=qos_bots.c.reports + 1))
            return _view(c.execute(sa.select(qos_bots).where(qos_bots.c.id == row["id"])).mappings().one())

    def finish(self, bot: int, t: float, *, t_half: float | None = None, owner: str | None = None,
               end: float | None = None) -> BotView:
        """The BoT completed all its tasks at ``t`` (s since registration): it joins the history.
        ``end``: the exact time of its last completion, when the report at ``t`` carries it.

        ``t_half`` as in :meth:`report`; a BoT that never reported half its tasks and gives no
        ``t_half`` keeps no ``p_half`` and is left out of α's fit.
        """
        row = self._row(bot, owner)
        t = check_number(t, "t", minimum=0, maximum=MAX_T)
        done_at = t if end is None else check_number(end, "end", minimum=0, maximum=t)
        values: dict[str, Any] = {"state": "done", "finished_at": time.time(), "completion_time": done_at,
                                  "t": t, "completed": row["n_tasks"], "queued": 0}
        p_half = self._p_half(row["n_tasks"], row["n_tasks"], t, t_half) if t_half is not None else None
        if p_half is not None:
            values["p_half"] = sa.func.coalesce(qos_bots.c.p_half, p_half)
        with self.engine.begin() as c:
            self._update_running(c, row["id"], t, values)
            view = _view(c.execute(sa.select(qos_bots).where(qos_bots.c.id == row["id"])).mappings().one())
        with self._alpha_lock:  # (after the commit: a refit now sees this BoT)
            self._finished += 1
            self._alphas.pop(view.infrastructure, None)
        return view

    def abandon(self, bot: int, *, owner: str | None = None) -> BotView:
        """The BoT will not finish (its run gave up): it stays listed, out of the history."""
        row = self._row(bot, owner)
        with self.engine.begin() as c:
            self._update_running(c, row["id"], None, {"state": "abandoned", "finished_at": time.time()})
            return _view(c.execute(sa.select(qos_bots).where(qos_bots.c.id == row["id"])).mappings().one())

    @staticmethod
    def _p_half(n: int, completed: int, t: float, t_half: float | None) -> float | None:
        """``t_c(0.5)/0.5`` once ``rank(0.5, n)`` tasks completed (None before)."""
        half = rank(PREDICT_AT, n)
        if t_half is not None:
            if completed < half:
                raise UserError(f"given before half the tasks completed ({completed:,} of {n:,})",
                                field="t_half")
            t_half = check_number(t_half, "t_half", minimum=0, maximum=t,
                                  hint="the time of the half-way completion, at most the report's t")
        if completed < half:
            return None
        return naive_prediction(t if t_half is None else t_half, PREDICT_AT)

    def _update_running(self, c: sa.Connection, bot: int, t: float | None, values: dict[str, Any],
                        completed: int | None = None) -> None:
        """Update a running BoT's row if ``t`` and ``completed`` do not go back; else say why."""
        cond = [qos_bots.c.id == bot, qos_bots.c.state == "running"]
        if t is not None:
            cond.append(qos_bots.c.t <= t)
        if completed is not None:
            cond.append(qos_bots.c.completed <= completed)
        if c.execute(sa.update(qos_bots).where(*cond).values(**values)).rowcount == 1:
            return
        row = c.execute(sa.select(qos_bots).where(qos_bots.c.id == bot)).mappings().first()
        if row is None:
            raise BotNotFound(f"no BoT {bot}", field="bot")
        if row["state"] != "running":
            raise UserError(f"BoT {bot} is {row['state']}: it takes no more reports", field="bot")
        if t is not None and t < row["t"]:
            raise UserError(f"goes back in time: {t:g} s is before the last report's {row['t']:g} s",
                            field="t")
        raise UserError(f"goes back: {completed:,} completed is fewer than the last report's "
                        f"{row['completed']:,}", field="completed")

    # -- Information: reading ----------------------------------------------------------------------
    def _row(self, bot: int, owner: str | None) -> Any:
        bot = _count(bot, "bot", minimum=1, maximum=2**63 - 1)
        with self.engine.connect() as c:
            row = c.execute(sa.select(qos_bots).where(qos_bots.c.id == bot)).mappings().first()
        if row is None or (owner is not None and row["owner"] != owner):
            raise BotNotFound(f"no BoT {bot}", field="bot")
        return row

    def bot(self, bot: int, *, owner: str | None = None) -> BotView:
        """One BoT."""
        return _view(self._row(bot, owner))

    def bots(self, owner: str | None = None, *, state: str | None = None, after: int | None = None,
             limit: int | None = None, newest_first: bool = False) -> list[BotView]:
        """The BoTs of ``owner`` (None: everyone's), oldest first (or newest); only those in
        ``state`` if given; only those after the id ``after`` in that order, at most ``limit`` (a
        page of the list)."""
        q = sa.select(qos_bots).order_by(qos_bots.c.id.desc() if newest_first else qos_bots.c.id)
        if owner is not None:
            q = q.where(qos_bots.c.owner == owner)
        if after is not None:
            q = q.where(qos_bots.c.id < after if newest_first else qos_bots.c.id > after)
        if limit is not None:
            q = q.limit(limit)
        if state is not None:
            if state not in STATES:
                raise UserError(f"must be one of {', '.join(STATES)}, got {state!r}", field="state")
            q = q.where(qos_bots.c.state == state)
        with self.engine.connect() as c:
            return [_view(r) for r in c.execute(q).mappings()]

    def running(self, owner: str) -> int:
        """How many of ``owner``'s BoTs are running."""
        q = sa.select(sa.func.count()).select_from(qos_bots).where(qos_bots.c.owner == owner,
                                                                   qos_bots.c.state == "running")
        with self.engine.connect() as c:
            return int(c.execute(q).scalar_one())

    def series(self, bot: int, *, owner: str | None = None) -> list[ProgressPoint]:
        """The BoT's progress reports, in order."""
        row = self._row(bot, owner)
        p = qos_progress.c
        q = (sa.select(p.t, p.completed, p.assigned, p.queued, p.cloud_workers, p.cloud_booting)
             .where(p.bot == row["id"]).order_by(p.id))
        with self.engine.connect() as c:
            return [ProgressPoint(**dict(r)) for r in c.execute(q).mappings()]

    def history(self, infrastructure: str, *, limit: int = 100) -> HistoryView:
        """α of ``infrastructure`` and its latest ``limit`` finished BoTs, newest first."""
        infra = _infrastructure(infrastructure)
        limit = _count(limit, "limit", maximum=HISTORY_RUNS)
        model = self.alpha(infra)
        q = (sa.select(qos_bots).where(qos_bots.c.infrastructure == infra, qos_bots.c.state == "done")
             .order_by(qos_bots.c.id.desc()).limit(limit))
        with self.engine.connect() as c:
            done = [_view(r) for r in c.execute(q).mappings()]
        return HistoryView(infrastructure=infra, runs=model.runs, alpha=model.alpha,
                           success_rate=model.success_rate, method=model.method, bots=done)

    # -- Oracle ------------------------------------------------------------------------------------
    def alpha(self, infrastructure: str, *, exclude: int | None = None) -> AlphaModel:
        """α fitted on the finished BoTs of ``infrastructure`` that know ``p_half`` (the latest
        :data:`HISTORY_RUNS`), leaving out the BoT ``exclude``."""
        infrastructure = _infrastructure(infrastructure)
        if exclude is None:
            with self._alpha_lock:
                fitted_at, model = self._alphas.get(infrastructure, (-math.inf, None))
                finished = self._finished
            if model is not None and time.monotonic() - fitted_at < self.alpha_ttl:
                return model
        q = (sa.select(qos_bots.c.p_half, qos_bots.c.completion_time)
             .where(qos_bots.c.infrastructure == infrastructure, qos_bots.c.state == "done",
                    qos_bots.c.p_half > 0, qos_bots.c.completion_time.is_not(None))
             .order_by(qos_bots.c.id.desc()).limit(HISTORY_RUNS))
        if exclude is not None:
            q = q.where(qos_bots.c.id != exclude)
        fitted_at = time.monotonic()
        with self.engine.connect() as c:
            rows = c.execute(q).all()
        model = AlphaModel.fit([r.p_half for r in rows], [r.completion_time for r in rows], self.method)
        if exclude is None:
            with self._alpha_lock:
                if self._finished == finished:  # (else a BoT finished meanwhile: this fit may miss it)
                    self._alphas[infrastructure] = (fitted_at, model)
        return model

    def predict(self, bot: int, *, owner: str | None = None) -> PredictionView:
        """The Oracle's prediction of the BoT's completion time at its latest report."""
        row = self._row(bot, owner)
        # only a finished BoT is in its infrastructure's history: it is left out of its own α
        model = self.alpha(row["infrastructure"], exclude=row["id"] if row["state"] == "done" else None)
        r = t_c_r = None
        if row["p_half"] is not None:
            r, t_c_r = PREDICT_AT, row["p_half"] * PREDICT_AT
        else:
            with self.engine.connect() as c:
                last = c.execute(sa.select(qos_progress.c.completed).where(qos_progress.c.bot == row["id"])
                                 .order_by(qos_progress.c.id.desc()).limit(1)).scalar()
                if last:  # t_c(last/n) is the time of the last-th completion: the first report of it
                    r = last / row["n_tasks"]
                    t_c_r = c.execute(sa.select(sa.func.min(qos_progress.c.t)).where(
                        qos_progress.c.bot == row["id"], qos_progress.c.completed >= last)).scalar_one()
        p = t_p = low = high = None
        if r is not None and t_c_r is not None:
            pred = model.predict(row["t"], t_c_r, r)
            p, t_p = pred.p, pred.t_pred
            low, high = (1.0 - TOLERANCE) * t_p, (1.0 + TOLERANCE) * t_p
        return PredictionView(
            bot=row["id"], infrastructure=row["infrastructure"], state=row["state"], n_tasks=row["n_tasks"],
            completed=row["completed"], t=row["t"], r=r, t_c_r=t_c_r, p=p, t_p=t_p, low=low, high=high,
            tolerance=TOLERANCE, alpha=model.alpha, success_rate=model.success_rate, runs=model.runs,
            method=model.method, completion_time=row["completion_time"])
