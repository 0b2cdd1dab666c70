"""The result store appears in the run folder only with its tables and its mark in it; a
results.sqlite skylease did not make is never written to."""

import json
import os
import sqlite3
import time

import pytest

from skylease.runtime import store as store_mod
from skylease.runtime.store import ResultStore


def _tables(path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_the_store_file_never_exists_without_its_tables(tmp_path, monkeypatch):
    path = tmp_path / "results.sqlite"
    seen = []
    real_link = os.link

    def link(src, dst):  # the moment the store gets its final name
        seen.append((dst.exists(), _tables(src)))
        real_link(src, dst)

    monkeypatch.setattr(store_mod.os, "link", link)
    store = ResultStore(path)
    store.close()
    assert seen == [(False, seen[0][1])] and {"results", "tasks", "segments"} <= seen[0][1]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("results.sqlite")) == []


def test_a_store_created_meanwhile_by_another_process_is_kept(tmp_path, monkeypatch):
    path = tmp_path / "results.sqlite"
    first = ResultStore(path)
    first.set_meta({"job": "first"})
    real_exists = type(path).exists
    # another process found no store, as if it had looked just before the first one was linked
    monkeypatch.setattr(type(path), "exists", lambda p: False if p == path else real_exists(p))
    second = ResultStore(path)
    assert second.meta() == {"job": "first"}
    first.close()
    second.close()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_file_that_is_not_a_store_is_one_line_and_exit_2(tmp_path, capsys):
    from skylease.cli import main

    (tmp_path / "results.sqlite").write_text("not sqlite\n")
    (tmp_path / "jobs.txt").write_text("true\n")
    for argv in (["status", str(tmp_path)], ["simulate", "replay", str(tmp_path)],
                 ["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path), "--resume"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "results.sqlite" in err and "not a skylease result store" in err
    assert (tmp_path / "results.sqlite").read_text() == "not sqlite\n"  # left as it was


def test_status_of_a_store_without_a_run_says_stopped_not_finished(tmp_path, capsys):
    import json

    from skylease.cli import main

    ResultStore(tmp_path / "results.sqlite").close()  # a run killed before it registered its tasks
    assert main(["status", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "stopped"


# -- only a store skylease made is ever opened ------------------------------------------------------
def _foreign(kind: str, path) -> None:
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("id,name\n1,a\n")
    else:  # another program's SQLite database, in WAL mode as many are
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
            db.execute("INSERT INTO notes VALUES (1, 'mine')")
        db.close()


def _snapshot(folder):
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("kind", ["empty", "text", "sqlite"])
def test_a_results_sqlite_skylease_did_not_make_is_left_byte_for_byte(tmp_path, capsys, kind):
    from skylease.cli import main

    run = tmp_path / "run"
    run.mkdir()
    _foreign(kind, run / "results.sqlite")
    (tmp_path / "jobs.txt").write_text("true\n")
    before = _snapshot(run)
    time.sleep(0.01)  # an mtime written now would differ
    for argv in (["status", str(run)], ["status", str(run), "--json"], ["simulate", "replay", str(run)],
                 ["export", str(run)], ["export", str(run), "--format", "json", "--output", "-"],
                 ["run", str(tmp_path / "jobs.txt"), "--out", str(run), "--resume"],
                 ["run", str(tmp_path / "jobs.txt"), "--out", str(run)]):
        assert main(argv) == 2, argv
        cap = capsys.readouterr()
        assert cap.err.count("\n") == 1 and "Traceback" not in cap.err, cap.err
        assert f"{run / 'results.sqlite'}: not a skylease result store" in cap.err, cap.err
        assert cap.out == ""
        assert _snapshot(run) == before, argv  # same bytes, same mtime, no journal or WAL beside it


def test_a_store_is_marked_as_skylease_s_when_it_is_born(tmp_path):
    ResultStore(tmp_path / "results.sqlite").close()
    with open(tmp_path / "results.sqlite", "rb") as f:
        assert int.from_bytes(f.read(100)[68:72], "big") == store_mod.APPLICATION_ID
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        assert db.execute("SELECT value FROM meta WHERE key = ?", (store_mod.FORMAT_KEY,)).fetchone() == (
            str(store_mod.STORE_FORMAT),)


def test_a_store_of_a_newer_format_is_refused(tmp_path, capsys):
    from skylease.cli import main

    ResultStore(tmp_path / "results.sqlite").close()
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = ?", (store_mod.FORMAT_KEY,))
    db.close()
    assert main(["status", str(tmp_path)]) == 2
    assert "format 99" in capsys.readouterr().err


def _legacy_store(folder, job) -> None:
    """A stopped run as the previous version left it: the same tables, no mark, WAL mode."""
    from skylease.runtime.jobs import load_job

    j = load_job(str(job))
    with sqlite3.connect(folder / "results.sqlite") as db:
        db.executescript(store_mod._SCHEMA_2)
        db.execute("PRAGMA journal_mode=WAL")
        meta = {"job": j.source, "fingerprint": j.fingerprint(), "tasks": len(j.tasks),
                "options": {"out": str(folder), "policy": "fixed:1"}}
        db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
        db.executemany("INSERT INTO tasks VALUES (?, ?, ?)",
                       [(t.id, json.dumps(t.to_json()), t.label) for t in j.tasks])
        db.execute("INSERT INTO segments VALUES (0, 1.0, 2.0, 1, 2.0, 0, 'interrupted')")
        db.execute("INSERT INTO results (task, status, exit_code, attempt, segment, runtime_s, started_s, "
                   "ended_s) VALUES (0, 'ok', 0, 1, 0, 0.1, 0.0, 0.1)")
    db.close()


def test_a_store_of_the_previous_version_is_read_as_it_is_and_marked_on_resume(tmp_path, capsys):
    from skylease.cli import main

    (tmp_path / "jobs.txt").write_text("true\ntrue\n")
    run = tmp_path / "run"
    run.mkdir()
    _legacy_store(run, tmp_path / "jobs.txt")
    assert store_mod.store_kind(run / "results.sqlite") == "legacy"
    before = (run / "results.sqlite").read_bytes()
    assert main(["status", str(run), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["state"] == "stopped" and st["ok"] == 1 and st["left"] == 1
    assert (run / "results.sqlite").read_bytes() == before  # read, not written
    argv = ["run", str(tmp_path / "jobs.txt"), "--out", str(run), "--policy", "fixed:1", "--resume"]
    assert main(argv) == 0
    capsys.readouterr()
    assert store_mod.store_kind(run / "results.sqlite") == "current"
    with sqlite3.connect(run / "results.sqlite") as db:
        assert db.execute("SELECT task, segment FROM results ORDER BY task").fetchall() == [(0, 0), (1, 1)]
    db.close()


def test_a_store_of_format_2_is_read_as_it_is_and_given_the_machines_column_on_resume(tmp_path, capsys):
    """Format 3 adds attempts.machine: a format-2 store (no such column) is read by every command and
    upgraded in place by --resume; the tries after it say their machine."""
    import socket

    from skylease.cli import main

    (tmp_path / "jobs.txt").write_text("exit 3\ntrue\n")
    run = tmp_path / "run"
    assert main(["run", str(tmp_path / "jobs.txt"), "--out", str(run), "--policy", "fixed:1"]) == 1
    with sqlite3.connect(run / "results.sqlite") as db:  # as format 2 left it
        db.execute("ALTER TABLE attempts DROP COLUMN machine")
        db.execute("UPDATE meta SET value = '2' WHERE key = ?", (store_mod.FORMAT_KEY,))
    db.close()
    capsys.readouterr()
    for argv in (["status", str(run)], ["export", str(run), "--attempts", "--output", "-"],
                 ["show", str(run), "0"]):
        assert main(argv) == 0, argv

    def columns() -> list[str]:
        with sqlite3.connect(run / "results.sqlite") as db:
            names = [r[1] for r in db.execute("PRAGMA table_info('attempts')")]
        db.close()
        return names

    assert "machine" not in columns()  # (read, not changed)
    argv = ["run", str(tmp_path / "jobs.txt"), "--out", str(run), "--policy", "fixed:1", "--resume",
            "--retry-failed", "--retries", "1"]
    assert main(argv) == 1
    assert "machine" in columns()
    with sqlite3.connect(run / "results.sqlite") as db:
        fmt = db.execute("SELECT value FROM meta WHERE key = ?", (store_mod.FORMAT_KEY,)).fetchone()
        machines = db.execute("SELECT machine FROM attempts WHERE outcome = 'failed'").fetchall()
    db.close()
    assert fmt == ("3",) and machines == [(socket.gethostname(),)] * 2, machines
