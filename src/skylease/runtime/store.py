"""The crash-safe result store of a real run: one SQLite file in the run's output folder.

Written as things happen (WAL journal, one commit per result), so a driver killed with ``kill -9``
loses at most the task that was finishing at that instant, and ``--resume`` re-runs only the tasks
without a recorded result. Exactly one result per task: ``results.task`` is the primary key and
results are inserted with ``INSERT OR IGNORE``, so when two copies of a task race (a duplicate on a
reliable worker, a requeued task whose first worker comes back) the first to be recorded wins.

A run may be made of several *segments* (the first start and each resume); every host and event
carries its segment, and each segment has its own clock starting at 0 (``segments.started_unix``
maps it to wall time).

Only a store skylease made is ever written to. It is marked at birth, before it gets its name:
``PRAGMA application_id`` holds :data:`APPLICATION_ID` (bytes 68-71 of the file header, read
without SQLite, so a foreign file is never opened by it for writing) and the ``meta`` table holds
the format version under :data:`FORMAT_KEY`. Anything else named ``results.sqlite`` (an empty
file, a text file, another program's database) is a :class:`~skylease.model.errors.UserError`
and is left byte for byte.

Decision of ours (the issue is silent): stores of the previous version carry no mark. One whose
tables are exactly those of :data:`_SCHEMA` (checked on an ``immutable`` read-only connection,
which writes nothing, not even a journal) is a *legacy* store: read-only commands read it as it
is, and a ``--resume`` marks it (:meth:`ResultStore.adopt`) once its checks have passed, then
finishes it. The tables did not change between the two formats, only the mark.

Format 3 adds the machine each ended attempt ran on (``attempts.machine``: failed tasks are retried
on other machines, docs/decisions/failure-classes.md). A store of format 2 (or a legacy one) is read
as it is; a ``--resume`` adds the column (``ALTER TABLE``, empty for the earlier attempts) and marks
it format 3.
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
#: ``PRAGMA application_id`` of a skylease result store: "SkyL" in ASCII.
APPLICATION_ID = 0x536B794C
#: The ``meta`` key holding the store's format version, and the version this code writes.
FORMAT_KEY = "skylease_store_format"
STORE_FORMAT = 3
_SQLITE_MAGIC = b"SQLite format 3\x00"

_SCHEMA_2 = """
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
#: The tables of format 2 (and of the unmarked format 1: see the module docstring).
_SCHEMA = _SCHEMA_2.replace("t_s REAL NOT NULL, stderr_tail TEXT);",
                            "t_s REAL NOT NULL, stderr_tail TEXT, machine TEXT);")
#: The files a task's final result brought back (``skylease run --return``): made by the first
#: run that records one, so that a store of a run without files is the same as before (and a
#: store of the previous format still reads as one). ``kind`` is ``returned`` (written under
#: ``OUT/files/<task>/<name>``, ``size`` bytes), ``missing`` (asked for, not brought back: the
#: task's stderr says why) or ``workdir`` (the working folder kept without ``--cleanup``,
#: ``HOST:PATH``).
_FILES_TABLE = ("CREATE TABLE IF NOT EXISTS files (task INTEGER NOT NULL, kind TEXT NOT NULL, "
                "name TEXT NOT NULL, size INTEGER)")


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
        # one transaction: one journal and one round of syncs, not one per table (0.02 s against
        # 0.13-0.15 s of a run's start when the disk is busy)
        db.executescript(f"BEGIN;\n{_SCHEMA}\nPRAGMA application_id = {APPLICATION_ID};\n"
                         f"INSERT INTO meta VALUES ('{FORMAT_KEY}', '{json.dumps(STORE_FORMAT)}');\nCOMMIT;")
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


def _not_ours(path: Path, why: str) -> UserError:
    return UserError(f"not a skylease result store ({why}); skylease leaves it as it is", file=path)


def store_kind(path: str | Path) -> str:
    """``"current"`` for a store this code made, ``"legacy"`` for one of the unmarked previous
    format; anything else is a :class:`UserError`. Reads the file, writes nothing."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except FileNotFoundError:
        raise UserError("no run here (no results.sqlite)", file=path.parent) from None
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror or e}", file=path) from None
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise _not_ours(path, "an empty file" if not header else "not an SQLite database")
    app_id = int.from_bytes(header[68:72], "big", signed=True)
    if app_id == APPLICATION_ID:
        return "current"
    if app_id != 0:
        raise _not_ours(path, f"an SQLite database of another program, application id {app_id}")
    if _tables(f"{path.absolute().as_uri()}?immutable=1") != _tables(":memory:", _SCHEMA_2):
        raise _not_ours(path, "an SQLite database with other tables")
    return "legacy"


def _tables(uri: str, script: str | None = None) -> dict[str, list[tuple]] | None:
    """Each table's columns (name, type, not null, primary key); None if SQLite cannot read it."""
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return None
    try:
        if script:
            db.executescript(script)
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {n: [(c[1], c[2], c[3], c[5]) for c in db.execute(f"PRAGMA table_info('{n}')")]
                for n in names}
    except sqlite3.Error:
        return None
    finally:
        db.close()


class ResultStore:
    """The SQLite store of one run folder (see the module docstring).

    ``ResultStore(path)`` opens it for writing, creating it when there is none; with
    ``readonly=True`` it must exist and is opened read-only (``mode=ro``). Either way the file is
    checked first (:func:`store_kind`), and only a store skylease made is opened.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if not readonly and not self.path.exists():
            _create(self.path)
        self.legacy = store_kind(self.path) == "legacy"
        uri = self.path.absolute().as_uri() + ("?mode=ro" if readonly else "?mode=rw")
        try:
            self.db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise UserError(f"cannot open: {e}", file=self.path) from None
        try:
            fmt = self.db.execute("SELECT value FROM meta WHERE key = ?", (FORMAT_KEY,)).fetchone()
        except sqlite3.DatabaseError as e:  # a damaged file with our mark
            self.db.close()
            raise UserError(f"cannot read the result store ({e})", file=self.path) from None
        version = 1 if self.legacy else (json.loads(fmt[0]) if fmt else None)
        if version not in (1, 2, STORE_FORMAT):
            self.db.close()
            what = "no format version" if version is None else f"format {version}"
            raise UserError(f"a result store of another skylease version ({what}; this one reads "
                            f"formats 1 to {STORE_FORMAT})", file=self.path)
        self.segment = 0
        self._files_table = False
        self._in_batch = False
        self._running = False  # a segment of ours is open: the store is in WAL mode
        if version == 2 and not readonly:
            self._upgrade()

    def _upgrade(self) -> None:
        """A store of format 1 or 2 to format 3: the attempts' machines (empty for those before)."""
        columns = [r[1] for r in self.db.execute("PRAGMA table_info('attempts')")]
        with self.batch():
            if "machine" not in columns:
                self.db.execute("ALTER TABLE attempts ADD COLUMN machine TEXT")
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                            (FORMAT_KEY, json.dumps(STORE_FORMAT)))

    def adopt(self) -> None:
        """Mark a legacy store as ours (the tables are the same): done by ``--resume`` only."""
        if not self.legacy:
            return
        with self.batch():
            self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        self._upgrade()
        self.legacy = False

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
        """What the run recorded about itself (the store's format version aside)."""
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta WHERE key != ?",
                                                              (FORMAT_KEY,))}

    def set_meta(self, values: Mapping[str, Any]) -> None:
        with self.batch():  # one transaction: the connection commits every statement otherwise
            self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                [(k, json.dumps(v)) for k, v in values.items()])

    def add_tasks(self, tasks: Iterable[tuple[int, dict[str, Any], str]]) -> None:
        """Register the job's tasks (id, JSON spec, label) once, before anything runs."""
        with self.batch():
            self.db.executemany("INSERT OR IGNORE INTO tasks VALUES (?, ?, ?)",
                                [(i, json.dumps(s), label) for i, s, label in tasks])

    def forget_failed(self) -> int:
        """Turn every failed result into a failed attempt, so that its task runs again
        (``--retry-failed``); returns how many. Results ``ok`` are kept."""
        with self.batch():
            self.db.execute("INSERT INTO attempts (task, attempt, segment, outcome, exit_code, host, t_s, "
                            "stderr_tail, machine) SELECT task, attempt, segment, 'failed', exit_code, host, "
                            "COALESCE(ended_s, 0), stderr_tail, machine FROM results WHERE status = 'failed'")
            return self.db.execute("DELETE FROM results WHERE status = 'failed'").rowcount

    def start_segment(self, pid: int) -> int:
        """Open a new segment (first run or a resume) and return its number.

        From here on results are written one by one while ``status`` may read: WAL journal, so
        readers never wait and a killed driver loses at most the write in flight.
        """
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self._running = True
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

    def record_files(self, task: int, rows: Iterable[tuple[str, str, int | None]]) -> None:
        """The files of a task's result, (kind, name, size) each (see :data:`_FILES_TABLE`); they
        replace those of an earlier result of the task (``--retry-failed``)."""
        with self._tx():
            if not self._files_table:
                self.db.execute(_FILES_TABLE)
                self._files_table = True
            self.db.execute("DELETE FROM files WHERE task = ?", (task,))
            self.db.executemany("INSERT INTO files VALUES (?, ?, ?, ?)",
                                [(task, kind, name, size) for kind, name, size in rows])

    def task_files(self, task: int | None = None) -> dict[int, list[dict[str, Any]]]:
        """The files recorded with the results (of ``task``, else of every task), by task."""
        has = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'files'"
        if not self.db.execute(has).fetchone():
            return {}
        rows = self.db.execute("SELECT task, kind, name, size FROM files WHERE ? IS NULL OR task = ? "
                               "ORDER BY task, rowid", (task, task)).fetchall()
        out: dict[int, list[dict[str, Any]]] = {}
        for t, kind, name, size in rows:
            out.setdefault(int(t), []).append({"kind": kind, "name": name, "size": size})
        return out

    def record_attempt(self, task: int, attempt: int, outcome: str, t_s: float, *,
                       exit_code: int | None = None, host: int | None = None,
                       stderr_tail: str | None = None, machine: str | None = None) -> None:
        """A try that did not produce the result: ``failed`` (retried), ``lost`` or ``cancelled``;
        ``machine``: where it ran, when known."""
        with self._tx():
            self.db.execute("INSERT INTO attempts (task, attempt, segment, outcome, exit_code, host, t_s, "
                            "stderr_tail, machine) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (task, attempt, self.segment, outcome, exit_code, host, t_s, stderr_tail,
                             machine))

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
        if self._running:
            # a store at rest is one file, so read-only readers (status, export) find no WAL to
            # set up and leave nothing beside it; a reader holding it open keeps it in WAL mode
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("PRAGMA journal_mode=DELETE")
        self.db.close()
