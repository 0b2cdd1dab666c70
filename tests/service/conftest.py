"""Fixtures of the service tests: a fresh database of each kind, and the users most tests need."""

from __future__ import annotations

import pytest

from skylease.service.auth import add_user
from skylease.service.db import create_schema, engine_for


@pytest.fixture(params=["sqlite", "postgresql"])
def both_databases(request, tmp_path):
    """A fresh service database with its tables: SQLite in ``tmp_path``, then PostgreSQL (the
    ``postgres_url`` fixture: skipped, or failed under .ci/run, without a server)."""
    url = None if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    e = engine_for(url, tmp_path)
    create_schema(e)
    yield e
    e.dispose()


def three_users(engine) -> dict[str, str]:
    """alice, bob and root (an administrator): their tokens."""
    return {"alice": add_user(engine, "alice"), "bob": add_user(engine, "bob"),
            "root": add_user(engine, "root", admin=True)}
