"""Warnings given once (skylease.runtime.leases.notices; docs/decisions/before-end-warnings.md), on
the real scheduler's plan and a real SQLite database: the site's ``before_end`` for a lease that
names none (its own 0 turns it off), a warning given once and not again by a restarted store (the
same database, SQLite and PostgreSQL), one due while it was down given at its first look, and a
moved end warned again."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler
from skylease.runtime.leases.notices import BeforeEnd, WarningConfig


def _store(engine: sa.Engine, before_end: int | None = 60) -> tuple[BeforeEnd, list[int]]:
    bumps: list[int] = []
    return BeforeEnd(engine, WarningConfig(before_end=before_end), lambda: bumps.append(1)), bumps


def _plan() -> LeaseScheduler:
    sched = LeaseScheduler(3)
    for lid, duration in ((1, 1000), (2, 500), (3, 1000)):
        sched.submit(Lease(lid, LeaseKind.BEST_EFFORT, 0, 1, duration, duration, duration))
    sched.step(0)
    return sched


REQUESTS = {1: {}, 2: {"before_end": 100}, 3: {"before_end": 0}}  # site's, its own, none


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_each_planned_end_is_warned_once_even_across_a_restart(db, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}" if db == "sqlite" else request.getfixturevalue("postgres_url")
    engine = sa.create_engine(url)
    sched = _plan()
    store, bumps = _store(engine)
    assert store.due(sched.rr.values(), REQUESTS, 0, version=1) == []
    due = store.due(sched.rr.values(), REQUESTS, 950, version=2)  # 2 fell due at 400, 1 at 940
    assert [(d.lease, d.end, d.at) for d in due] == [(2, 500, 400), (1, 1000, 940)]
    told: list[str] = []
    store.give(due[0], 950, "alice", REQUESTS[2], 1234.5, told.append)
    assert told == ["500 1234.500 -450\n"] and bumps == [1]
    assert store.shown(2) == ({"time": 950, "event": "before-end", "end": 500, "seconds_left": -450},)
    assert [d.lease for d in store.due(sched.rr.values(), REQUESTS, 951, version=3)] == [1]  # (2 is given)
    # a restart on the same database: lease 2's is not given again, lease 1's (due meanwhile) is
    again, _ = _store(engine)
    assert again.shown(2) == store.shown(2)
    assert [(d.lease, d.at) for d in again.due(sched.rr.values(), REQUESTS, 960, version=1)] == [(1, 940)]
    # a moved end (the same lease planned to end later) is warned again
    sched.rr[2].end = 700
    assert [(d.lease, d.end, d.at) for d in again.due(sched.rr.values(), REQUESTS, 960, version=2)] == [
        (2, 700, 600), (1, 1000, 940)]
    engine.dispose()


def test_between_two_changes_only_the_next_warning_is_looked_at(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    sched = _plan()
    store, _ = _store(engine, before_end=None)  # (no site default: lease 2 asks, 1 and 3 do not)
    assert store.due(sched.rr.values(), REQUESTS, 0, version=1) == []
    sched.rr[2].end = 50  # a change the version does not tell: not looked at before the next due time
    assert store.due(sched.rr.values(), REQUESTS, 399, version=1) == []
    assert [(d.lease, d.end) for d in store.due(sched.rr.values(), REQUESTS, 400, version=1)] == [(2, 50)]
