"""Shared fixtures. Real data sets (and the oracles beside them) are reached only through
``shared_data``."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The project's real traces in ``../shared/data`` (skips when that folder is absent)."""
    path = ROOT.parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"real data not available: {path} is missing (see docs/howto/data.md)")
    return path


@pytest.fixture(scope="session")
def shared_oracles(shared_data: Path) -> Path:
    """Reference results of other programs in ``../shared/oracles``, beside the real data (skips
    when that folder is absent)."""
    path = shared_data.parent / "oracles"
    if not path.is_dir():
        pytest.skip(f"oracles not available: {path} is missing")
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request, tmp_path):
    """An empty service database (no table yet) of each kind: SQLite in ``tmp_path/db``, then
    PostgreSQL (the ``postgres_url`` fixture); disposed afterwards."""
    from skylease.service.db import engine_for

    url = None if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    e = engine_for(url, tmp_path / "db")
    yield e
    e.dispose()


@pytest.fixture
def postgres_url():
    """A fresh, empty PostgreSQL database (``skylease_test_<random>``) on the server of
    ``$SKYLEASE_TEST_POSTGRES`` (which .ci/run starts), dropped afterwards; its URL. Skips when no
    server is configured or reachable, fails instead when ``SKYLEASE_REQUIRE_POSTGRES=1`` (CI)."""
    import os
    import secrets

    required = os.environ.get("SKYLEASE_REQUIRE_POSTGRES") == "1"
    base = os.environ.get("SKYLEASE_TEST_POSTGRES", "").strip()
    if not base:
        why = ("no PostgreSQL server configured: set SKYLEASE_TEST_POSTGRES, e.g. "
               "postgresql+psycopg:///postgres?host=/var/run/postgresql (.ci/run does)")
        pytest.fail(why) if required else pytest.skip(why)
    import sqlalchemy as sa

    url = sa.engine.make_url(base)
    name = f"skylease_test_{secrets.token_hex(6)}"
    server = sa.create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    try:
        with server.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as exc:
        server.dispose()
        why = f"PostgreSQL at {url.render_as_string(hide_password=True)} is not usable: {exc.orig}"
        pytest.fail(why) if required else pytest.skip(why)
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with server.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        server.dispose()


#: The browser of the dashboard tests: Debian's chromium (.ci/run installs it).
CHROMIUM = "/usr/bin/chromium"
#: Chromium's flags here (as root, in a container, offline): no sandbox, no GPU, and none of its
#: background traffic (updates, sync, field trials), which would be requests to other hosts.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium (Debian's binary, driven by Playwright; nothing downloads a browser).
    Skips when the binary or Playwright is missing, fails instead when ``SKYLEASE_REQUIRE_BROWSER=1``
    (CI)."""
    import os

    required = os.environ.get("SKYLEASE_REQUIRE_BROWSER") == "1"
    why = None
    if not os.access(CHROMIUM, os.X_OK):
        why = f"no browser: {CHROMIUM} is missing (apt-get install chromium chromium-driver; .ci/run does)"
    else:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            why = "Playwright for Python is not installed (pip install -e '.[test]')"
    if why is not None:
        pytest.fail(why) if required else pytest.skip(why)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
