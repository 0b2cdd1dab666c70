"""The service's registry of runs (issue 21), on SQLite and PostgreSQL: one row per task whatever
the order and batches rows come in (a hypothesis property), counts equal to the rows, the table
failed first, limits refused before anything is written, and owners: another user's run is not
found, as a missing one; an administrator sees every run."""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from skylease.model.errors import UserError
from skylease.runtime.runs.registry import (
    MAX_BATCH,
    MAX_RUN_TASKS,
    MAX_STDERR,
    RunNotFound,
    RunRegistry,
    RunRequest,
    TaskRow,
    run_tasks,
)


@pytest.fixture
def registry(both_databases):
    return RunRegistry(both_databases)


def new(registry: RunRegistry, owner: str = "alice", n: int = 10, **kw) -> int:
    return registry.register(owner, RunRequest(name="jobs.txt", command="skylease run jobs.txt", n_tasks=n,
                                               **kw), now=100.0).id


def row(task: int, status: str, **kw) -> TaskRow:
    return TaskRow(task=task, label=f"task {task}", status=status, **kw)


def test_a_run_counts_its_rows_and_lists_failed_first(registry):
    rid = new(registry, n=8)
    rows = [row(0, "done"), row(3, "failed", exit_code=3, stderr_tail="no\n"),
            row(1, "running", host="h1", pool="local"), row(5, "failed")]
    v = registry.report("alice", rid, rows, now=101.0)
    assert (v.state, v.done, v.failed, v.running, v.queued, v.updated) == ("running", 1, 2, 1, 4, 101.0)
    v = registry.report("alice", rid, [row(1, "done", runtime_s=0.5, ended=102.0), row(6, "queued")])
    assert (v.done, v.failed, v.running, v.queued) == (2, 2, 0, 4)
    assert [(t.task, t.status) for t in registry.tasks("alice", rid)] == \
        [(3, "failed"), (5, "failed"), (0, "done"), (1, "done"), (6, "queued")]
    assert registry.tasks("alice", rid)[0].stderr_tail == "no\n"
    assert [t.task for t in registry.tasks("alice", rid, offset=1, limit=2)] == [5, 0]
    assert registry.reported("alice", rid) == 5
    v = registry.finish("alice", rid, "failed", now=110.0)
    assert (v.state, v.ended) == ("failed", 110.0)
    assert registry.run("alice", rid) == v
    v = registry.report("alice", rid, [])  # it reports again (a --resume): running again
    assert (v.state, v.ended) == ("running", None)


def test_owners(registry):
    mine, theirs = new(registry, "alice"), new(registry, "bob", bot=7)
    assert [r.id for r in registry.runs("alice")] == [mine]
    assert [r.id for r in registry.runs(None)] == [theirs, mine]  # an administrator: all, newest first
    assert registry.run(None, theirs).bot == 7
    for call in (lambda: registry.run("alice", theirs), lambda: registry.tasks("alice", theirs),
                 lambda: registry.report("alice", theirs, [row(0, "done")]),
                 lambda: registry.finish("alice", theirs, "done"), lambda: registry.run("alice", 999),
                 lambda: registry.report("alice", 2**60, [])):
        with pytest.raises(RunNotFound, match="no run"):
            call()
    assert registry.run("bob", theirs).done == 0  # nothing of alice's tries was written


def test_limits_are_refused_before_anything_is_written(registry):
    rid = new(registry, n=3)
    with pytest.raises(UserError, match="task 3 is not in this run of 3 tasks"):
        registry.report("alice", rid, [row(0, "done"), row(3, "done")])
    with pytest.raises(UserError, match=f"at most {MAX_BATCH:,} rows"):
        registry.report("alice", rid, [row(0, "done")] * (MAX_BATCH + 1))
    with pytest.raises(UserError, match="must be one of done, failed, stopped"):
        registry.finish("alice", rid, "running")
    assert registry.tasks("alice", rid) == [] and registry.run("alice", rid).done == 0
    for bad in ({"stderr_tail": "x" * (MAX_STDERR + 1)}, {"label": "x" * 501}, {"label": "a\x00b"},
                {"host": "\udcff"}, {"task": MAX_RUN_TASKS}, {"task": -1}, {"runtime_s": float("nan")},
                {"status": "lost"}, {"extra": 1}):
        with pytest.raises(ValidationError):
            TaskRow(**{"task": 0, "status": "done", **bad})
    with pytest.raises(ValidationError):
        RunRequest(name="x", n_tasks=MAX_RUN_TASKS + 1)
    with pytest.raises(ValidationError):
        RunRequest(name="", n_tasks=1)


def test_too_many_runs_of_one_user_are_refused(registry, monkeypatch):
    import skylease.runtime.runs.registry as reg

    monkeypatch.setattr(reg, "MAX_RUNS", 2)
    new(registry)
    new(registry)
    with pytest.raises(UserError, match="already has 2 runs"):
        new(registry)
    new(registry, "bob")  # another user's are counted apart


def test_the_sweep_abandons_silent_runs(registry):
    old, fresh = new(registry), new(registry)
    registry.report("alice", fresh, [], now=5000.0)
    assert registry.sweep(now=5000.0, idle_s=3600) == 1
    assert registry.run("alice", old).state == "abandoned" and registry.run("alice", fresh).state == "running"


STATUS = st.sampled_from(["queued", "running", "done", "failed"])
UPDATES = st.lists(st.tuples(st.integers(0, 29), STATUS, st.integers(0, 3)), max_size=80)


@given(updates=UPDATES, cuts=st.lists(st.integers(0, 80), max_size=6))
@settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_rows_in_any_order_and_batches_make_one_row_per_task_and_true_counts(both_databases, updates, cuts):
    registry = RunRegistry(both_databases)
    rid = new(registry, n=30)
    rows = [row(t, s, attempts=a) for t, s, a in updates]
    bounds = sorted({0, len(rows), *[c for c in cuts if c <= len(rows)]})
    for lo, hi in itertools.pairwise(bounds):
        registry.report("alice", rid, rows[lo:hi])
    last = {r.task: r for r in rows}  # the last row sent of each task wins
    with both_databases.connect() as conn:
        n_rows = conn.execute(sa.select(sa.func.count()).select_from(run_tasks)
                              .where(run_tasks.c.run == rid)).scalar()
    got = registry.tasks("alice", rid, limit=100)
    assert n_rows == len(got) == len(last)
    want = {t: (r.status, r.attempts) for t, r in last.items()}
    assert {t.task: (t.status, t.attempts) for t in got} == want
    v = registry.run("alice", rid)
    by = [r.status for r in last.values()]
    assert (v.done, v.failed, v.running) == (by.count("done"), by.count("failed"), by.count("running"))
    assert v.queued == 30 - v.done - v.failed - v.running
    ranks = {"failed": 0, "running": 1, "done": 2, "queued": 3}
    assert [(ranks[t.status], t.task) for t in got] == sorted((ranks[t.status], t.task) for t in got)


def test_each_committed_change_tells_the_watchers_of_that_run_only(registry):
    """The change log the live pages wait on: a registration, a report, an end and a sweep each
    bump it after their commit, and a user's watcher hears only of that user's runs."""
    v0 = registry.version()
    mine = new(registry, "alice")
    assert registry.wait_change(v0, 0.01) > v0 and registry.changes.changed("alice", v0, mine)
    v1 = registry.version()
    bobs = new(registry, "bob")
    registry.report("bob", bobs, [row(0, "failed", exit_code=1)])
    assert registry.version() == v1 + 2
    assert not registry.changes.changed("alice", v1) and registry.changes.changed("bob", v1, bobs)
    assert registry.changes.changed(None, v1, bobs) and not registry.changes.changed(None, v1, mine)
    v2 = registry.version()
    with pytest.raises(RunNotFound):  # a refused write changes nothing: no watcher is woken
        registry.report("alice", bobs, [row(0, "done")])
    assert registry.wait_change(v2, 0.01) == v2
    registry.finish("alice", mine, "done")
    assert registry.changes.changed("alice", v2, mine) and not registry.changes.changed("bob", v2)
    v3 = registry.version()
    assert registry.sweep(10**12, 1.0) == 1  # bob's run went silent: only bob hears of it
    assert registry.changes.changed("bob", v3, bobs) and not registry.changes.changed("alice", v3)
