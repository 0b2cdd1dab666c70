"""The SpeQuloS Information module and Oracle on the service database (issue 20), on SQLite and
PostgreSQL: BoTs registered, their progress (and their cloud workers) stored and checked, α learned
per infrastructure; a database made before the cloud workers were kept is upgraded in place."""

from __future__ import annotations

import itertools
import math
import threading
import time

import pytest
import sqlalchemy as sa

from skylease.control.qos.prediction import fit_alpha, success_rate
from skylease.model.errors import UserError
from skylease.runtime.qos import bots as botsmod
from skylease.runtime.qos.bots import MAX_TASKS, BotNotFound, BotRegistry, qos_progress
from skylease.service.db import create_schema, engine_for


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    url = None if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    e = engine_for(url, tmp_path / "serve")
    create_schema(e, botsmod.METADATA)
    yield e
    e.dispose()


def _finished(reg: BotRegistry, infra: str, p_half: float, total: float, owner: str = "alice") -> int:
    """A finished BoT of 10 tasks whose naive prediction at half is ``p_half``."""
    b = reg.register(owner, infra, 10)
    reg.report(b.id, p_half / 2, 5, 6, 4)
    reg.finish(b.id, total)
    return b.id


def test_register_report_finish_series_and_history_round_trip(engine):
    reg = BotRegistry(engine)
    b = reg.register("alice", "xwhep/nd", 100, "9c-c-r")
    assert (b.owner, b.infrastructure, b.n_tasks, b.strategy, b.state) == ("alice", "xwhep/nd", 100, "9C-C-R",
                                                                           "running")
    assert b.p_half is None and b.completion_time is None and b.reports == 0
    points = [(0.0, 0, 10, 90), (60.0, 20, 40, 60), (120.0, 49, 70, 30), (180.0, 50, 80, 20),
              (240.0, 90, 100, 0)]
    for t, c, a, q in points:
        v = reg.report(b.id, t, c, a, q)
    assert (v.t, v.completed, v.assigned, v.queued, v.reports) == (240.0, 90, 100, 0, 5)
    assert v.p_half == 360.0  # t_c(0.5) = 180 s, the first report with 50 of 100 completed
    assert [(p.t, p.completed, p.assigned, p.queued) for p in reg.series(b.id)] == points
    # a report at the same t replaces that row
    reg.report(b.id, 240.0, 95, 100, 0)
    assert [p.completed for p in reg.series(b.id)][-2:] == [50, 95] and reg.bot(b.id).reports == 5
    done = reg.finish(b.id, 300.0)
    assert (done.state, done.completion_time, done.completed, done.p_half) == ("done", 300.0, 100, 360.0)
    assert done.finished_at is not None and done.finished_at >= done.registered_at
    h = reg.history("xwhep/nd")
    assert [x.id for x in h.bots] == [b.id] and h.runs == 1
    assert h.alpha == fit_alpha([360.0], [300.0]) and h.success_rate == 1.0
    assert reg.history("boinc/seti").runs == 0 and reg.history("boinc/seti").bots == []
    # a report is a handful of numbers: bot, t, three counts and the cloud workers (plus its key)
    assert [c.name for c in qos_progress.columns] == ["id", "bot", "t", "completed", "assigned", "queued",
                                                      "cloud_workers", "cloud_booting"]


@pytest.mark.parametrize(("call", "field", "says"), [
    (lambda r, b: r.report(b, 10, 101), "completed", "from 0 to 100"),
    (lambda r, b: r.report(b, 10, 5, 101), "assigned", "from 0 to 100"),
    (lambda r, b: r.report(b, 10, 5, 5, -1), "queued", "from 0 to 100"),
    (lambda r, b: r.report(b, 10, 5.0), "completed", "whole number"),
    (lambda r, b: r.report(b, 10, True), "completed", "whole number"),
    (lambda r, b: r.report(b, 59, 30), "t", "goes back in time: 59 s is before the last report's 60 s"),
    (lambda r, b: r.report(b, 70, 19), "completed",
     "goes back: 19 completed is fewer than the last report's 20"),
    (lambda r, b: r.report(b, -1, 30), "t", ">= 0"),
    (lambda r, b: r.report(b, math.nan, 30), "t", "finite number"),
    (lambda r, b: r.report(b, 1e12, 30), "t", "<= "),
    (lambda r, b: r.report(b, 70, 30, t_half=65), "t_half", "before half the tasks completed (30 of 100)"),
    (lambda r, b: r.report(b, 70, 60, t_half=80), "t_half", "<= 70"),
    (lambda r, b: r.report(b + 1, 70, 30), "bot", "no BoT"),
    (lambda r, b: r.report(0, 70, 30), "bot", "whole number"),
    (lambda r, b: r.report(b, 70, 30, owner="bob"), "bot", "no BoT"),
    (lambda r, b: r.finish(b, 59), "t", "goes back in time"),
    (lambda r, b: r.register("alice", "x y", 10), "infrastructure", "letters, digits"),
    (lambda r, b: r.register("alice", "a" * 65, 10), "infrastructure", "letters, digits"),
    (lambda r, b: r.register("alice", "nd\x00", 10), "infrastructure", "letters, digits"),
    (lambda r, b: r.register("", "nd", 10), "owner", "user name"),
    (lambda r, b: r.register("alice", "nd", 0), "n_tasks", "from 1 to 10,000,000"),
    (lambda r, b: r.register("alice", "nd", MAX_TASKS + 1), "n_tasks", "from 1 to 10,000,000"),
    (lambda r, b: r.register("alice", "nd", 10, "9X-C-R"), "strategy", "unknown QoS strategy"),
    (lambda r, b: r.bots(state="lost"), "state", "running, done, abandoned"),
])
def test_bad_input_is_one_line_naming_the_field_and_writes_nothing(engine, call, field, says):
    reg = BotRegistry(engine)
    b = reg.register("alice", "xwhep/nd", 100).id
    reg.report(b, 60, 20, 30, 50)
    before = (reg.series(b), reg.bots())
    with pytest.raises(UserError, match=None) as exc:
        call(reg, b)
    assert exc.value.field == field and says in exc.value.message and "\n" not in str(exc.value)
    assert (reg.series(b), reg.bots()) == before


def test_an_unknown_or_foreign_bot_is_not_found_and_a_finished_one_takes_no_reports(engine):
    reg = BotRegistry(engine)
    b = reg.register("alice", "xwhep/nd", 10).id
    for call in (lambda: reg.bot(b + 1), lambda: reg.predict(b + 1), lambda: reg.series(b + 1),
                 lambda: reg.bot(b, owner="bob"), lambda: reg.predict(b, owner="bob"),
                 lambda: reg.series(b, owner="bob"), lambda: reg.finish(b, 10, owner="bob"),
                 lambda: reg.abandon(b, owner="bob")):
        with pytest.raises(BotNotFound, match=r"^bot: no BoT \d+$"):
            call()
    reg.finish(b, 100)
    with pytest.raises(UserError, match=r"BoT \d+ is done: it takes no more reports"):
        reg.report(b, 200, 10)
    with pytest.raises(UserError, match="is done"):
        reg.finish(b, 200)
    a = reg.register("alice", "xwhep/nd", 10).id
    assert reg.abandon(a).state == "abandoned"
    with pytest.raises(UserError, match="is abandoned"):
        reg.report(a, 1, 1)
    h = reg.history("xwhep/nd")  # an abandoned BoT is no history; one with no p_half is not learned from
    assert [x.id for x in h.bots] == [b] and h.runs == 0


def test_bots_of_an_owner_are_only_theirs(engine):
    reg = BotRegistry(engine)
    a1 = reg.register("alice", "xwhep/nd", 10).id
    b1 = reg.register("bob", "xwhep/nd", 10).id
    a2 = reg.register("alice", "boinc/seti", 20).id
    assert [b.id for b in reg.bots("alice")] == [a1, a2]
    assert [b.id for b in reg.bots("bob")] == [b1]
    assert reg.bots("carol") == []
    assert [b.id for b in reg.bots()] == [a1, b1, a2]
    reg.finish(a1, 5)
    assert [b.id for b in reg.bots("alice", state="running")] == [a2]


def test_predict_on_a_running_bot_past_half_gives_t_p_its_band_alpha_and_r(engine):
    reg = BotRegistry(engine)
    history = [(1000.0, 900.0), (2000.0, 1700.0), (1500.0, 1400.0), (800.0, 1000.0)]
    for p, total in history:
        _finished(reg, "xwhep/nd", p, total)
    _finished(reg, "boinc/seti", 1000.0, 5000.0)  # another infrastructure: not learned from
    b = reg.register("bob", "xwhep/nd", 1000).id
    for t, c in [(240, 100), (480, 300), (720, 499), (960, 500), (1200, 700)]:
        reg.report(b, t, c, c + 50, 1000 - c - 50)
    pred = reg.predict(b, owner="bob")
    ps, ts = [p for p, _ in history], [t for _, t in history]
    alpha = fit_alpha(ps, ts)
    assert alpha != 1.0 and (pred.alpha, pred.runs, pred.method) == (alpha, 4, "l1")
    assert pred.success_rate == success_rate(ps, ts, alpha)
    assert (pred.r, pred.t_c_r, pred.p, pred.t, pred.completed) == (0.5, 960.0, 1920.0, 1200.0, 700)
    assert pred.t_p == pytest.approx(alpha * 1920.0)
    assert (pred.low, pred.high) == pytest.approx((0.8 * pred.t_p, 1.2 * pred.t_p))
    assert pred.tolerance == 0.2 and pred.state == "running" and pred.completion_time is None
    # the exact time of the half-way completion, when the reporter knows it, replaces the report's t
    e = reg.register("bob", "xwhep/nd", 1000).id
    reg.report(e, 240, 600, 700, 300, t_half=201.5)
    assert reg.predict(e).t_c_r == 201.5 and reg.bot(e).p_half == 403.0


def test_predict_before_half_uses_the_latest_ratio_and_nothing_before_a_completion(engine):
    reg = BotRegistry(engine)
    b = reg.register("alice", "xwhep/nd", 200).id
    none = reg.predict(b)
    assert none.t_p is None and none.r is None and none.low is None and none.alpha == 1.0 and none.runs == 0
    reg.report(b, 60, 0, 10, 190)
    assert reg.predict(b).t_p is None
    for t, c in [(120, 20), (180, 40), (240, 40)]:
        reg.report(b, t, c, 60, 140)
    pred = reg.predict(b)
    # r = 40/200 reached first at 180 s: t_p = α · 180 / 0.2 with no history (α = 1)
    assert (pred.r, pred.t_c_r, pred.t_p, pred.t) == (0.2, 180.0, pytest.approx(900.0), 240.0)


def test_a_finished_bot_is_predicted_without_learning_from_itself(engine):
    reg = BotRegistry(engine)
    other = _finished(reg, "nd", 1000.0, 1200.0)
    mine = _finished(reg, "nd", 1000.0, 2000.0)
    pred = reg.predict(mine)
    assert pred.runs == 1 and pred.alpha == 1.2 and pred.completion_time == 2000.0
    assert reg.predict(other).alpha == 2.0 and reg.history("nd").runs == 2


def test_reports_past_the_cap_replace_the_last_row(engine, monkeypatch):
    monkeypatch.setattr(botsmod, "MAX_REPORTS", 3)
    reg = BotRegistry(engine)
    b = reg.register("alice", "nd", 100).id
    for t in range(1, 7):
        reg.report(b, t * 10, t * 10)
    assert [(p.t, p.completed) for p in reg.series(b)] == [(10, 10), (20, 20), (60, 60)]
    assert reg.bot(b).reports == 3 and reg.bot(b).completed == 60


def test_concurrent_reports_never_store_a_series_going_back(engine):
    reg = BotRegistry(engine)
    b = reg.register("alice", "nd", 10_000).id
    refused = []

    def reporter(k: int) -> None:
        for i in range(25):
            v = (i * 7 + k * 13) % 200 + i * 10  # interleaved, sometimes behind the others
            try:
                reg.report(b, float(v), v)
            except UserError as exc:
                refused.append(exc.field)

    threads = [threading.Thread(target=reporter, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    series = reg.series(b)
    assert refused and set(refused) <= {"t", "completed"}
    assert all(x.t <= y.t and x.completed <= y.completed for x, y in itertools.pairwise(series))
    last = reg.bot(b)
    assert (last.t, last.completed) == (series[-1].t, series[-1].completed)
    with engine.connect() as c:
        rows = c.execute(sa.select(sa.func.count()).select_from(qos_progress)).scalar_one()
    assert rows == len(series) == last.reports


def test_alpha_is_fitted_once_per_infrastructure_and_refitted_when_a_bot_of_it_finishes(engine, monkeypatch):
    """Every prediction needs α, and its fit reads the infrastructure's whole history (up to 10,000
    finished BoTs: 25 ms on SQLite): it is kept, refitted when a BoT of that infrastructure
    finishes through the registry, and one finished by another process is seen after
    ``alpha_ttl`` seconds (ALPHA_TTL by default)."""
    monkeypatch.setattr(botsmod, "ALPHA_TTL", 0.5, raising=False)
    fits: list[str] = []

    def count(conn, cursor, statement, *args):
        if "qos_bots.completion_time" in statement and "qos_bots.completion_time IS NOT NULL" in statement:
            fits.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        reg = BotRegistry(engine)
        ps, ts = [1000.0, 2000.0], [1200.0, 2600.0]
        for p, t in zip(ps, ts, strict=True):
            _finished(reg, "nd", p, t)
        b = reg.register("alice", "nd", 10).id
        reg.report(b, 100, 5, 6, 4)
        fits.clear()
        first = reg.predict(b)
        assert first.alpha == fit_alpha(ps, ts) and first.runs == 2 and len(fits) == 1
        for _ in range(5):
            assert reg.predict(b).alpha == first.alpha
        assert reg.history("nd").alpha == first.alpha and len(fits) == 1  # fitted once, not per call
        assert reg.predict(b, owner="alice").runs == 2 and len(fits) == 1
        _finished(reg, "nd", 1000.0, 3000.0)  # through this registry: refitted at once
        ps, ts = [*ps, 1000.0], [*ts, 3000.0]
        assert reg.predict(b).alpha == fit_alpha(ps, ts) and reg.predict(b).runs == 3 and len(fits) == 2
        BotRegistry(engine).finish(_started(reg, "nd", 4000.0), 9000.0)  # another process's
        ps, ts = [*ps, 4000.0], [*ts, 9000.0]
        assert reg.predict(b).runs == 3  # not seen yet...
        time.sleep(0.6)
        assert reg.predict(b).alpha == fit_alpha(ps, ts) and reg.predict(b).runs == 4  # ... after alpha_ttl
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)


def _started(reg: BotRegistry, infra: str, p_half: float) -> int:
    """A running BoT of 10 tasks past half, whose naive prediction at half is ``p_half``."""
    b = reg.register("alice", infra, 10)
    reg.report(b.id, p_half / 2, 5, 6, 4)
    return b.id


def test_a_report_stores_the_bags_cloud_workers_with_its_point(engine):
    reg = BotRegistry(engine)
    b = reg.register("alice", "nd", 10).id
    reg.report(b, 1.0, 0, 2)  # (unknown: None)
    reg.report(b, 2.0, 1, 4, cloud_workers=0, cloud_booting=2)
    reg.report(b, 3.0, 2, 6, cloud_workers=2, cloud_booting=0)
    reg.report(b, 3.0, 3, 6, cloud_workers=1, cloud_booting=1)  # (the same t: replaces the row)
    assert [(p.t, p.cloud_workers, p.cloud_booting) for p in reg.series(b)] == \
        [(1.0, None, None), (2.0, 0, 2), (3.0, 1, 1)]
    for bad in (-1, 1.5, True, botsmod.MAX_CLOUD_WORKERS + 1):
        with pytest.raises(UserError) as err:
            reg.report(b, 4.0, 3, 6, cloud_workers=bad)
        assert err.value.field == "cloud_workers"
    with pytest.raises(UserError) as err:
        reg.report(b, 4.0, 3, 6, cloud_booting=-1)
    assert err.value.field == "cloud_booting" and len(reg.series(b)) == 3  # nothing half-written


def test_a_database_made_before_the_cloud_workers_were_kept_is_upgraded_in_place(empty_database):
    db = empty_database
    old = sa.MetaData()  # qos_progress as skylease created it before issue 21
    botsmod.qos_bots.to_metadata(old)
    sa.Table("qos_progress", old,
             sa.Column("id", botsmod.ID, primary_key=True, autoincrement=True),
             sa.Column("bot", sa.BigInteger, sa.ForeignKey("qos_bots.id"), nullable=False),
             sa.Column("t", sa.Float, nullable=False),
             sa.Column("completed", sa.BigInteger, nullable=False),
             sa.Column("assigned", sa.BigInteger, nullable=False),
             sa.Column("queued", sa.BigInteger, nullable=False),
             sa.Index("qos_progress_bot_id", "bot", "id"))
    old.create_all(db)
    with db.begin() as c:
        b = c.execute(sa.insert(old.tables["qos_bots"]).values(
            owner="alice", infrastructure="nd", n_tasks=10, registered_at=time.time(), state="running",
            t=5.0, completed=1, assigned=3, queued=7, reports=1)).inserted_primary_key[0]
        c.execute(sa.insert(old.tables["qos_progress"]).values(bot=b, t=5.0, completed=1, assigned=3,
                                                                queued=7))
    with pytest.raises(sa.exc.DBAPIError), db.connect() as c:  # (today's code cannot read it...)
        c.execute(sa.select(qos_progress.c.cloud_workers)).all()
    create_schema(db, botsmod.METADATA)  # (the server's open: creates missing tables, not columns)
    reg = BotRegistry(db)  # ... until a registry opens it
    assert [(p.t, p.completed, p.cloud_workers, p.cloud_booting) for p in reg.series(b)] == \
        [(5.0, 1, None, None)]
    reg.report(b, 6.0, 2, 4, 1, cloud_workers=1, cloud_booting=1)
    again = BotRegistry(db)  # idempotent: a second open changes nothing
    assert [(p.t, p.cloud_workers, p.cloud_booting) for p in again.series(b)] == \
        [(5.0, None, None), (6.0, 1, 1)]
    cols = {c["name"]: c for c in sa.inspect(db).get_columns("qos_progress")}
    assert cols["cloud_workers"]["nullable"] and cols["cloud_booting"]["nullable"]
