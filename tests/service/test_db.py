"""The service's one database (issue 19): the same tests on SQLite and on PostgreSQL; a wrong
``--db`` is one line within seconds."""

from __future__ import annotations

import socket
import sqlite3
import threading
import time

import pytest
import sqlalchemy as sa

from skylease.model.errors import UserError
from skylease.service import db as dbmod
from skylease.service.auth import add_user, list_users, remove_user, user_for_token
from skylease.service.db import DB_FILE, create_schema, engine_for


@pytest.fixture
def engine(empty_database):
    return empty_database


def test_the_schema_is_created_with_other_layers_tables_and_again(engine):
    other = sa.MetaData()
    sa.Table("journal_probe", other, sa.Column("id", sa.Integer, primary_key=True))
    create_schema(engine, other)
    create_schema(engine, other)  # idempotent: a restart
    assert {"users", "journal_probe"} <= set(sa.inspect(engine).get_table_names())


def test_users_and_tokens_work_the_same_on_both(engine):
    create_schema(engine)
    alice, root = add_user(engine, "alice"), add_user(engine, "root", admin=True)
    assert user_for_token(engine, alice).name == "alice" and not user_for_token(engine, alice).admin
    assert user_for_token(engine, root).admin
    assert user_for_token(engine, alice + "x") is None
    with pytest.raises(UserError, match="user 'alice' already exists") as exc:
        add_user(engine, "alice")
    assert exc.value.field == "NAME" and "\n" not in str(exc.value)
    assert [u.name for u in list_users(engine)] == ["alice", "root"]
    remove_user(engine, "alice")
    assert user_for_token(engine, alice) is None
    with pytest.raises(UserError, match="no user 'alice'"):
        remove_user(engine, "alice")


def test_sqlite_runs_in_wal_mode_with_foreign_keys_and_a_busy_timeout(tmp_path):
    engine = engine_for(None, tmp_path)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
    assert (tmp_path / DB_FILE).is_file()


def test_a_second_process_waits_for_the_lock_instead_of_failing(tmp_path):
    engine = engine_for(None, tmp_path)
    create_schema(engine)
    other = sqlite3.connect(tmp_path / DB_FILE, check_same_thread=False, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock for a moment
    t0 = time.monotonic()
    threading.Timer(0.5, lambda: other.execute("COMMIT")).start()
    add_user(engine, "late")
    assert time.monotonic() - t0 >= 0.4
    other.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(("url", "says"), [
    ("", "empty database URL"),
    ("zz", "not a database URL"),
    ("mysql://u@localhost/x", "unsupported database 'mysql'"),
    ("postgresql+psycopg2://u@localhost/x", "unsupported database"),
    ("sqlite://", "an SQLite URL needs a file"),
    ("sqlite:///:memory:", "an SQLite URL needs a file"),
    ("postgresql://nobody@127.0.0.1:{port}/x", "cannot use the database postgresql+psycopg://nobody@127.0.0.1"),
    ("postgresql://nobody:hunter2@127.0.0.1:{port}/x", "***"),
])
def test_a_wrong_db_is_one_line_naming_the_option(tmp_path, url, says):
    t0 = time.monotonic()
    with pytest.raises(UserError) as exc:
        engine_for(url.format(port=_closed_port()), tmp_path)
    assert time.monotonic() - t0 < 5
    assert exc.value.field == "--db" and says in str(exc.value) and "\n" not in str(exc.value)
    assert "hunter2" not in str(exc.value)


def test_a_server_that_does_not_answer_is_given_up_within_seconds(tmp_path, monkeypatch):
    """A port that accepts connections and never answers (a firewall that drops, a hung server)."""
    monkeypatch.setattr(dbmod, "CONNECT_TIMEOUT_S", 2)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        t0 = time.monotonic()
        with pytest.raises(UserError, match="cannot use the database") as exc:
            engine_for(f"postgresql://u@127.0.0.1:{silent.getsockname()[1]}/x", tmp_path)
        assert time.monotonic() - t0 < 10
    assert exc.value.field == "--db"


def test_a_file_that_is_not_a_database_is_one_line(tmp_path):
    (tmp_path / "notes.db").write_text("hello\n")
    with pytest.raises(UserError, match="file is not a database") as exc:
        engine_for(f"sqlite:///{tmp_path / 'notes.db'}", tmp_path)
    assert exc.value.field == "--db"


def test_a_data_dir_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="is not a folder") as exc:
        engine_for(None, tmp_path / "f")
    assert exc.value.field == "--data-dir"
