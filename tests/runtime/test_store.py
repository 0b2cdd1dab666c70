"""The result store appears in the run folder only with its tables in it."""

import os
import sqlite3

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
