"""The crash-safe result store of a real run: one SQLite file in the run's output folder.

Written as things happen (WAL journal, one commit per result), so a driver killed with ``kill -9``
loses at most the task that was finishing at that instant, and ``--resume`` re-runs only the tasks
without a recorded result. Exactly one result per task: ``results.task`` is the primary key and
results are inserted with ``INSERT OR IGNORE``, so when two copies of a task race (a duplicate on a
reliable worker, a requeued task whose first worker comes back) the first to be recorded wins.

A run may be made of several *segments* (the first start and each resume); every host and event
carries its segment, and each segment has its own clock starting at 0 (``segments.started_unix``
maps it to wall time).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError

STORE_NAME = "results.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY, spec TEXT NOT NULL, label TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    task INTEGER PRIMARY KEY, status TEXT NOT NULL, exit_code INTEGER, attempt INTEGER NOT NULL,
    segment INTEGER NOT NULL, host INTEGER, pool TEXT, worker TEXT, machine TEXT,
    runtime_s REAL, started_s REAL, ended_s REAL,
    stdout_tail TEXT, stderr_tail TEXT, result TEXT);
CREATE TABLE IF NOT EXISTS attempts (
    task INTEGER NOT NULL, attempt INTEGER NOT NULL, segment INTEGER NOT NULL, outcome TEXT NOT NULL,
    exit_code INTEGER, host INTEGER, t_s REAL NOT NULL, stderr_tail TEXT);
CREATE TABLE IF NOT EXISTS segments (
    segment INTEGER PRIMARY KEY, started_unix REAL NOT NULL, ended_unix REAL, pid INTEGER NOT NULL,
    heartbeat_unix REAL, spent REAL NOT NULL DEFAULT 0, outcome TEXT);
CREATE TABLE IF NOT EXISTS hosts (
    segment INTEGER NOT NULL, host INTEGER NOT NULL, pool TEXT NOT NULL, requested_s REAL NOT NULL,
    up_s REAL, released_s REAL, cost REAL, PRIMARY KEY (segment, host));
CREATE TABLE IF NOT EXISTS events (
    segment INTEGER NOT NULL, t_s REAL NOT NULL, kind TEXT NOT NULL, host INTEGER, task INTEGER,
    value REAL);
"""


def _create(path: Path) -> None:
    """Make the store file appear with its tables already in it.

    ``skylease status`` (or a test) polling a starting run must never open a file without tables:
    build it under a private name, then link it into place (link, unlike rename, never replaces a
    store another process created in the meantime).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    try:
        db.executescript(_SCHEMA)
    finally:
        db.close()
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links
        if not path.exists():
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class ResultStore:
    """The SQLite store of one run folder (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            _create(self.path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:  # someone else's file under our name
            self.db.close()
            raise UserError(f"not a skylease result store ({e})", file=self.path) from None
        self.segment = 0
        self._in_batch = False

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Record several things in one transaction (a batch of tiny tasks)."""
        if self._in_batch:
            yield
            return
        self.db.execute("BEGIN")
        self._in_batch = True
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        else:
            self.db.execute("COMMIT")
        finally:
            self._in_batch = False

    def _tx(self) -> Any:
        return contextlib.nullcontext() if self._in_batch else self.db

    # -- set-up -----------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta")}

    def set_meta(self, values: Mapping[str, Any]) -> None:
        with self.batch():  # one transaction: the connection commits every statement otherwise
            self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                [(k, json.dumps(v)) for k, v in values.items()])

    def add_tasks(self, tasks: Iterable[tuple[int, dict[str, Any], str]]) -> None:
        """Register the job's tasks (id, JSON spec, label) once, before anything runs."""
        with self.batch():
            self.db.executemany("INSERT OR IGNORE INTO tasks VALUES (?, ?, ?)",
                                [(i, json.dumps(s), label) for i, s, label in tasks])

    def start_segment(self, pid: int) -> int:
        """Open a new segment (first run or a resume) and return its number."""
        row = self.db.execute("SELECT COALESCE(MAX(segment), -1) + 1 FROM segments").fetchone()
        self.segment = int(row[0])
        now = time.time()
        with self.db:
            self.db.execute("INSERT INTO segments (segment, started_unix, pid, heartbeat_unix) "
                            "VALUES (?, ?, ?, ?)", (self.segment, now, pid, now))
        return self.segment

    def end_segment(self, spent: float, outcome: str) -> None:
        with self.db:
            self.db.execute("UPDATE segments SET ended_unix = ?, spent = ?, outcome = ? WHERE segment = ?",
                            (time.time(), spent, outcome, self.segment))

    def heartbeat(self, spent: float) -> None:
        """Mark the driver alive and store the money charged so far in this segment."""
        with self.db:
            self.db.execute("UPDATE segments SET heartbeat_unix = ?, spent = ? WHERE segment = ?",
                            (time.time(), spent, self.segment))

    # -- what happens -------------------------------------------------------------------------
    def record_result(self, task: int, status: str, outcome: Mapping[str, Any], *, attempt: int,
                      host: int | None, pool: str | None, worker: str | None, started_s: float,
                      ended_s: float) -> bool:
        """Record the task's one result; False when it already had one (a losing duplicate)."""
        with self._tx():
            cur = self.db.execute(
                "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (task, status, outcome.get("exit_code"), attempt, self.segment, host, pool, worker,
                 outcome.get("host"), outcome.get("runtime_s"), started_s, ended_s,
                 outcome.get("stdout_tail"), outcome.get("stderr_tail"), outcome.get("result")),
            )
        return cur.rowcount == 1

    def record_attempt(self, task: int, attempt: int, outcome: str, t_s: float, *,
                       exit_code: int | None = None, host: int | None = None,
                       stderr_tail: str | None = None) -> None:
        """A try that did not produce the result: ``failed`` (retried), ``lost`` or ``cancelled``."""
        with self._tx():
            self.db.execute("INSERT INTO attempts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (task, attempt, self.segment, outcome, exit_code, host, t_s, stderr_tail))

    def record_host(self, host: int, pool: str, requested_s: float, up_s: float | None = None,
                    released_s: float | None = None, cost: float | None = None) -> None:
        with self._tx():
            self.db.execute("INSERT OR REPLACE INTO hosts VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (self.segment, host, pool, requested_s, up_s, released_s, cost))

    def record_event(self, t_s: float, kind: str, host: int | None = None, task: int | None = None,
                     value: float | None = None) -> None:
        with self._tx():
            self.db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
                            (self.segment, t_s, kind, host, task, value))

    # -- reading ------------------------------------------------------------------------------
    def done_tasks(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT task FROM results")}

    def task_ids(self) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT id FROM tasks ORDER BY id")]

    def spent_before(self, segment: int | None = None) -> float:
        """Money charged by the segments before ``segment`` (by all of them if None)."""
        row = self.db.execute("SELECT COALESCE(SUM(spent), 0) FROM segments WHERE ? IS NULL OR segment < ?",
                              (segment, segment)).fetchone()
        return float(row[0])

    def counts(self) -> dict[str, int]:
        total = self.db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
        by = dict(self.db.execute("SELECT status, COUNT(*) FROM results GROUP BY status").fetchall())
        return {"tasks": int(total), "ok": int(by.get("ok", 0)), "failed": int(by.get("failed", 0)),
                "left": int(total) - sum(int(v) for v in by.values())}

    def query(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        self.db.row_factory = sqlite3.Row
        try:
            return self.db.execute(sql, params).fetchall()
        finally:
            self.db.row_factory = None

    def close(self) -> None:
        self.db.close()
