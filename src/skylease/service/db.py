"""The service's one database (issue 19): users, and the lease manager's journal, on SQLAlchemy Core.

* No URL: SQLite in the server's data folder (``<data_dir>/skylease.sqlite``), in WAL mode (readers
  do not wait for the writer), with a busy timeout (a second process, such as ``skylease serve user
  add`` beside a running server, waits for the lock instead of failing) and foreign keys on.
* ``postgresql://...`` (or ``postgres://``, ``postgresql+psycopg://``): PostgreSQL through psycopg 3.
* ``sqlite:///FILE``: SQLite at that file, as above.

Every mistake (a URL that does not parse, another kind of database, a server that does not answer,
a file that is not a database) is one :class:`UserError` naming ``--db``, within seconds: the
connection is tried once here, with a connect timeout, before anything else starts.

:data:`metadata` holds the service's own tables; :func:`create_schema` creates them and those of
other layers (the lease journal has its own ``MetaData`` in :mod:`skylease.runtime.leases.journal`,
which cannot import this module: imports point down).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from skylease.model.errors import UserError

__all__ = ["CONNECT_TIMEOUT_S", "DB_FILE", "check_data_dir", "create_schema", "engine_for", "metadata",
           "private_data_dir", "shown_url", "users", "web_sessions"]

#: The database file in the data folder when no URL is given.
DB_FILE = "skylease.sqlite"
#: How long a connection to a database server may take before ``--db`` is called unreachable.
CONNECT_TIMEOUT_S = 5
#: How long SQLite waits for another connection's lock before giving up (milliseconds).
SQLITE_BUSY_MS = 30_000

metadata = sa.MetaData()

#: The service's users: a token is stored only as the SHA-256 hex digest of it (see auth.py).
users = sa.Table(
    "users", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("admin", sa.Boolean, nullable=False, default=False),
    sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
    sa.Column("created", sa.DateTime(timezone=True), nullable=False),
)

#: The dashboard's login sessions (issue 21): the session id (the ``skylease_session`` cookie) is
#: stored only as its SHA-256 hex digest, like a token; ``expires`` is Unix seconds. A removed
#: user's sessions go with it.
web_sessions = sa.Table(
    "web_sessions", metadata,
    sa.Column("id_sha256", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False,
              index=True),
    sa.Column("expires", sa.BigInteger, nullable=False),
)


def shown_url(url: str | URL) -> str:
    """The URL as messages show it: the password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        return str(url)


def check_data_dir(data_dir: Path) -> None:
    """A data folder that exists as something else is one line naming ``--data-dir``."""
    if data_dir.exists() and not data_dir.is_dir():
        raise UserError("is not a folder (the server keeps its database and files there)", file=data_dir,
                        field="--data-dir")


def private_data_dir(data_dir: Path) -> list[str]:
    """Create the data folder private to the server's user (mode 0700), or make an existing one so:
    the folder and every folder in it 0700, every file 0600, except what is not the server's (the
    lease folders a payload user owns, and what payloads wrote in them) and the cached images that
    the server shares with payloads on purpose (group-readable, see runtime/leases/local.py). What
    was open to others is returned (``path mode``), for the server to say once."""
    check_data_dir(data_dir)
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the data folder: {exc.strerror or exc}", file=data_dir,
                        field="--data-dir") from None
    me, loosened = os.geteuid(), []

    def tighten(path: str, st: os.stat_result, mode: int) -> None:
        if st.st_uid == me and stat.S_IMODE(st.st_mode) & 0o077:
            loosened.append(f"{path} {stat.S_IMODE(st.st_mode):o}")
            with contextlib.suppress(OSError):
                os.chmod(path, mode)

    tighten(str(data_dir), data_dir.stat(), 0o700)
    for top, dirs, files in os.walk(data_dir):
        keep = []
        for name in dirs:
            path = os.path.join(top, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if st.st_uid == me and not stat.S_ISLNK(st.st_mode):
                    tighten(path, st, 0o700)
                    keep.append(name)
        dirs[:] = keep  # (a payload user's lease folder is its own business)
        if os.path.basename(top) == "cache":
            continue
        for name in files:
            path = os.path.join(top, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode):
                    tighten(path, st, 0o600)
    return loosened


def _url(url: str | None, data_dir: Path, create: bool = True) -> URL:
    if url is None:
        if not create:  # a command that only reads: a wrong --data-dir is one line, not a new server
            check_data_dir(data_dir)
            if not (data_dir / DB_FILE).is_file():
                raise UserError(f"no server database here ({DB_FILE}): give the --data-dir (or --db) "
                                "that `skylease serve` uses", file=data_dir, field="--data-dir")
            return URL.create("sqlite", database=str((data_dir / DB_FILE).resolve()))
        private_data_dir(data_dir)
        return URL.create("sqlite", database=str((data_dir / DB_FILE).resolve()))
    text = url.strip()
    if not text:
        raise UserError("empty database URL: give sqlite:///FILE or postgresql://USER@HOST/DB", field="--db")
    try:
        parsed = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise UserError(f"not a database URL ({' '.join(str(exc).split())}): give sqlite:///FILE or "
                        "postgresql://USER@HOST/DB", field="--db") from None
    backend, _, driver = parsed.drivername.partition("+")
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite" and driver in ("", "pysqlite"):
        if not parsed.database or parsed.database == ":memory:":
            # each connection of the pool would get its own empty database
            raise UserError("an SQLite URL needs a file: sqlite:///PATH", field="--db")
        return parsed.set(drivername="sqlite")
    raise UserError(f"unsupported database {parsed.drivername!r}: give sqlite:///FILE or "
                    "postgresql://USER@HOST/DB (psycopg 3)", field="--db")


def _private_file(path: Path) -> None:
    """``path`` created empty with mode 0600 where missing (SQLite then makes it a database), or
    made 0600; a file that cannot be is left to SQLite to report."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
            with contextlib.suppress(FileNotFoundError):
                if stat.S_IMODE(p.stat().st_mode) & 0o077:
                    os.chmod(p, 0o600)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_MS}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")  # durable in WAL mode at each checkpoint; safe on crash
        cur.execute("PRAGMA foreign_keys = ON")
    finally:
        cur.close()


def engine_for(url: str | None, data_dir: Path, password: str | None = None, *,
               create: bool = True) -> Engine:
    """An engine for ``url`` (None: SQLite in ``data_dir``), connected once to check it works;
    ``password``: the database's (db_password.py), never part of the URL given. ``create=False``:
    an SQLite database (and its folder) must be there already."""
    parsed = _url(url, Path(data_dir), create)
    if password is not None and parsed.get_backend_name() != "sqlite":
        parsed = parsed.set(password=password)
    if parsed.get_backend_name() == "sqlite":
        db_file = Path(parsed.database or "")
        if db_file.is_dir():
            raise UserError("is a folder, not an SQLite database file", file=db_file, field="--db")
        if not db_file.parent.is_dir():
            raise UserError("the folder of the database file does not exist", file=db_file, field="--db")
        if not create and not db_file.is_file():
            raise UserError("no such database file", file=db_file, field="--db")
        _private_file(db_file)  # (SQLite gives its WAL and shared-memory files the database's mode)
        engine = sa.create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_MS / 1000,
                                                        "check_same_thread": False})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = sa.create_engine(parsed, pool_pre_ping=True,
                                  connect_args={"connect_timeout": CONNECT_TIMEOUT_S})
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except (DBAPIError, SQLAlchemyError, OSError) as exc:
        engine.dispose()
        raise UserError(f"cannot use the database {shown_url(parsed)}: {_reason(exc)}",
                        field="--db") from None
    return engine


def _reason(exc: BaseException) -> str:
    """The driver's own words, on one line (SQLAlchemy adds the statement and a link)."""
    orig = getattr(exc, "orig", None) or exc
    text = " ".join(str(orig).split())
    return text[:300] or type(orig).__name__


def create_schema(engine: Engine, *extra: sa.MetaData) -> None:
    """Create the service's tables and those of ``extra`` where missing (idempotent)."""
    try:
        for md in (metadata, *extra):
            md.create_all(engine, checkfirst=True)
    except (DBAPIError, SQLAlchemyError) as exc:
        raise UserError(f"cannot create the tables in {shown_url(engine.url)}: {_reason(exc)}",
                        field="--db") from None
