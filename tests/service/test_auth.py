"""Users and tokens (issue 19): tokens are random, shown once, and stored only as SHA-256 digests
(the test reads every table of the database, and the SQLite files byte by byte)."""

from __future__ import annotations

import hashlib

import pytest
import sqlalchemy as sa

from skylease.model.errors import UserError
from skylease.service.auth import add_user, user_for_token
from skylease.service.db import DB_FILE


@pytest.fixture
def engine(both_databases):
    return both_databases


def every_value(engine: sa.Engine) -> str:
    """The text of every cell of every table."""
    md = sa.MetaData()
    md.reflect(engine)
    with engine.connect() as conn:
        return "\n".join(str(v) for t in md.sorted_tables for row in conn.execute(sa.select(t)) for v in row)


def test_tokens_are_stored_only_as_digests(engine, tmp_path):
    tokens = [add_user(engine, f"user{i}", admin=i == 0) for i in range(3)]
    assert len(set(tokens)) == 3 and all(len(t) >= 43 for t in tokens)  # 32 random bytes, base64url
    text = every_value(engine)
    for t in tokens:
        assert t not in text
        assert hashlib.sha256(t.encode()).hexdigest() in text  # what is stored instead
        assert user_for_token(engine, t) is not None
    if engine.dialect.name == "sqlite":  # the files too, WAL included, before any checkpoint
        raw = b"".join(p.read_bytes() for p in tmp_path.glob(DB_FILE + "*"))
        assert raw and not any(t.encode() in raw for t in tokens)


@pytest.mark.parametrize("token", ["", " ", "x" * 10_000, "\udcff", "Bearer abc", "' OR 1=1 --"])
def test_anything_else_is_no_user(engine, token):
    add_user(engine, "alice")
    assert user_for_token(engine, token) is None


@pytest.mark.parametrize("name", ["", "two words", "-dash", "x" * 65, "émile", "a/b", "a\nb"])
def test_a_bad_user_name_is_one_line(engine, name):
    with pytest.raises(UserError, match="is not a user name") as exc:
        add_user(engine, name)
    assert exc.value.field == "NAME"
