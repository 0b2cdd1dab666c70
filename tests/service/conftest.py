"""Fixtures of the service tests: a fresh database of each kind, and the users most tests need."""

from __future__ import annotations

import pytest

from skylease.service.auth import add_user
from skylease.service.db import create_schema, engine_for

from .api_fake import FakeManager


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


@pytest.fixture
def engine(tmp_path):
    """A fresh SQLite service database with its tables (test modules with their own keep theirs)."""
    e = engine_for(None, tmp_path / "serve")
    create_schema(e)
    yield e
    e.dispose()


@pytest.fixture
def tokens(engine) -> dict[str, str]:
    """alice's, bob's and root's tokens in ``engine``."""
    return three_users(engine)


@pytest.fixture
def manager() -> FakeManager:
    """The in-memory lease manager, four nodes."""
    return FakeManager(nodes=4)
