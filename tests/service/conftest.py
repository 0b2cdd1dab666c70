"""Fixtures of the service tests: a fresh database of each kind, the users most tests need, and the
one way to run a real server (:class:`ServeProcess`, made by the ``serve_process`` fixture: a
`skylease serve` process on a free loopback port, started, stopped, killed with -9 and restarted by its
PID); the in-process app on a real uvicorn server is ``served.serving``."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

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


# -- a real `skylease serve` process ---------------------------------------------------------------
#: The start line of `skylease serve` (its URL first).
START_RE = re.compile(r"^skylease serve: (https?://\S+) \(OpenAPI at /docs\), data in (.+), database (\S+)$")
#: ``skylease serve`` with a fault injected through the lease manager's enactment (seamed_serve.py).
SEAMED = Path(__file__).resolve().parent / "seamed_serve.py"


class ServeProcess:
    """One real server: ``python -m skylease serve`` (or ``argv``) in its own process on a free
    loopback port (``--port 0``), its data in ``data``, its database ``db`` (None: SQLite in
    ``data``). Started, stopped (SIGTERM, SIGINT) or killed (SIGKILL) by its PID, and restarted
    on the same data and database; its standard error goes to a file per start (``stderr``)."""

    def __init__(self, data: Path, db: str | None = None, argv: list[str] | None = None,
                 **options: Any) -> None:
        self.data, self.db, self.custom_argv = data, db, argv
        self.options = {"port": 0, "data_dir": str(data), **options} | ({"db": db} if db else {})
        self.tokens: dict[str, str] = {}
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.starts = 0
        self.returncode: int | None = None

    # -- its life -----------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.data / 'skylease.sqlite'}"

    def argv(self, faults: dict[str, int] | None = None) -> list[str]:
        """``python -m skylease serve`` with its options; with ``faults`` (``kill_before_spawn``,
        ``kill_after_spawn``, ``fail_spawn``: a lease id), seamed_serve.py with the same options."""
        if self.custom_argv is not None:
            return self.custom_argv
        if faults:
            return [sys.executable, str(SEAMED), json.dumps({"options": self.options, **faults})]
        argv = [sys.executable, "-m", "skylease", "serve"]
        for key, value in self.options.items():
            argv += ["--" + key.replace("_", "-"), str(value)]
        return argv

    def add_users(self, capsys, users: tuple[tuple[str, bool], ...] = (("alice", False), ("bob", False),
                                                                     ("root", True))) -> dict[str, str]:
        """`skylease serve user add` for each (name, administrator); their tokens in ``tokens``."""
        from skylease.cli import main

        capsys.readouterr()
        for name, admin in users:
            argv = ["serve", "user", "add", name, "--data-dir", str(self.data)]
            argv += (["--admin"] if admin else []) + (["--db", self.db] if self.db else [])
            assert main(argv) == 0
            self.tokens[name] = capsys.readouterr().out.strip()
        return self.tokens

    def stderr_path(self) -> Path:
        return self.data.parent / f"{self.data.name}-server-{self.starts}.err"

    def stderr(self) -> str:
        return self.stderr_path().read_text()

    def start(self, faults: dict[str, int] | None = None, timeout: float = 120, cwd: Path | None = None,
              extra: tuple[str, ...] = ()) -> str:
        """Start it; its URL, once it printed its start line and /health answers ok (waits on that
        state, up to ``timeout`` seconds: a busy machine starts Python slowly)."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        self.data.parent.mkdir(parents=True, exist_ok=True)
        with open(self.stderr_path(), "w") as err:
            self.proc = subprocess.Popen([*self.argv(faults), *extra], cwd=cwd or self.data.parent,
                                         stdin=subprocess.DEVNULL,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        line = self.proc.stdout.readline().strip()
        m = START_RE.match(line)
        if m is None:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"no start line: {line!r}; stderr: {self.stderr()[-3000:]}")
        self.url = m.group(1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=10, verify=False).json()["ok"]:
                    return self.url
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and self.proc.poll() is None, self.stderr()[-3000:]
            time.sleep(0.05)

    def kill9(self) -> None:
        """SIGKILL, by its PID (a crash: nothing of it runs after this)."""
        assert self.proc is not None
        self.proc.kill()
        self.returncode = self.proc.wait(timeout=30)
        self.proc.stdout.close()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> tuple[int, str, str]:
        """Send ``sig`` (by its PID) and wait for it to end: its exit status, the rest of its standard
        output, its standard error. Fails when it does not end within ``timeout`` seconds."""
        if self.proc is None:
            return 0, "", ""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            why = f"the server did not stop on signal {sig}: {self.stderr()[-2000:]}"
            raise AssertionError(why) from None
        self.returncode = self.proc.returncode
        return self.proc.returncode, out, self.stderr()

    def restart(self, faults: dict[str, int] | None = None) -> str:
        """kill -9, then start again on the same data and database."""
        self.kill9()
        return self.start(faults)

    def assert_quiet(self) -> None:
        """No start so far logged an error (nor a replay that differs from the journal)."""
        for k in range(1, self.starts + 1):
            err = (self.data.parent / f"{self.data.name}-server-{k}.err").read_text()
            assert "Traceback" not in err and "ERROR" not in err, err

    # -- its API and its database -------------------------------------------------------------------
    def call(self, method: str, path: str, user: str = "root", **kw: Any) -> httpx.Response:
        auth = {"Authorization": f"Bearer {self.tokens[user]}"}
        return httpx.request(method, self.url + path, headers=auth, timeout=60, **kw)

    def now(self) -> int:
        """Lease time now, by the server's /health."""
        return int(httpx.get(self.url + "/health", timeout=30).json()["now"])

    def leases(self, user: str = "root") -> dict[int, dict[str, Any]]:
        r = self.call("GET", "/leases", user)
        assert r.status_code == 200, r.text
        return {v["id"]: v for v in r.json()}

    def query(self, sql: str) -> list[dict[str, Any]]:
        engine = sa.create_engine(self.db_url)
        try:
            with engine.connect() as c:
                return [dict(r) for r in c.execute(sa.text(sql)).mappings()]
        finally:
            engine.dispose()

    def setting(self, key: str) -> Any:
        """What the server stored at its first start (its clock's epoch and scale, its id)."""
        rows = self.query(f"SELECT value FROM lease_server WHERE key = '{key}'")
        return json.loads(rows[0]["value"])

    def serve_id(self) -> str:
        return self.setting("serve_id")

    def now_from_db(self) -> int:
        """Lease time now, by the server's clock (while it is down too)."""
        return int((time.time() - self.setting("epoch")) * self.setting("time_scale"))

    def sleep_until(self, t: int) -> None:
        """Until lease time ``t``, by the server's clock (while it is down too)."""
        time.sleep(max(0.0, self.setting("epoch") + t / self.setting("time_scale") - time.time()))


@pytest.fixture
def serve_process(tmp_path):
    """Makes real servers: ``serve_process(db=None, name="serve", argv=None, **options)`` is a
    :class:`ServeProcess` with its data in ``tmp_path/name``, not started yet; every one still running
    is stopped after the test (SIGTERM, then SIGKILL, by its PID), and the lease payloads it left are
    killed."""
    made: list[ServeProcess] = []

    def make(db: str | None = None, name: str = "serve", argv: list[str] | None = None,
             **options: Any) -> ServeProcess:
        srv = ServeProcess(tmp_path / name, db, argv, **options)
        made.append(srv)
        return srv

    yield make
    for srv in made:
        if srv.proc is not None and srv.proc.poll() is None:
            with contextlib.suppress(AssertionError):
                srv.stop(timeout=30)
        from .payloads import kill_payloads_of

        kill_payloads_of(srv)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request) -> str | None:
    """The database of a real server: None (SQLite in its data folder), then a fresh PostgreSQL
    database (the ``postgres_url`` fixture: skipped, or failed under .ci/run, without a server)."""
    return None if request.param == "sqlite" else request.getfixturevalue("postgres_url")


# -- a real server with the in-memory lease manager ---------------------------------------------------
#: The server of the tests that need no real payloads: serve() with the in-memory manager of
#: api_fake.py (a seam of serve(), not a switch); its close() leaves a file behind.
FAKE_SERVER = """
import sys
from pathlib import Path
sys.path.insert(0, {here!r})
from api_fake import FakeManager
from skylease.service.server import load_serve_config, serve

def factory(engine, cfg, data_dir):
    m = FakeManager(nodes=4)
    m.close = lambda: (Path(data_dir) / "manager-closed").write_text("closed")
    return m

served = serve(load_serve_config(None, port=0, data_dir={data!r}, **{options!r}), manager_factory=factory,
               announce=lambda s: print(s.line(), flush=True))
print("stopped", flush=True)
"""


def fake_argv(data: Path, **options: str) -> list[str]:
    """The command of a server process with the in-memory manager, data in ``data``."""
    here = str(Path(__file__).resolve().parent)
    return [sys.executable, "-c", FAKE_SERVER.format(here=here, data=str(data), options=options)]


def fake_serve_process(data: Path, **options: str) -> ServeProcess:
    """A :class:`ServeProcess` with the in-memory manager (not started yet)."""
    return ServeProcess(data, argv=fake_argv(data, **options))


@contextlib.contextmanager
def fake_server_with_users(tmp: Path, users: tuple[str, ...] = ("alice", "bob"),
                           admins: tuple[str, ...] = ("root",)) -> Iterator[tuple[str, dict[str, str]]]:
    """A real server process with the in-memory lease manager, data in ``tmp/serve``: its URL and
    each user's token (administrators too); stopped afterwards (for module-scoped servers)."""
    srv = fake_serve_process(tmp / "serve")
    url = srv.start()
    try:
        engine = engine_for(None, tmp / "serve")  # the server's own SQLite database, beside it
        tokens = {u: add_user(engine, u) for u in users}
        tokens |= {u: add_user(engine, u, admin=True) for u in admins}
        engine.dispose()
        yield url, tokens
    finally:
        srv.stop()


@pytest.fixture
def fake_server(serve_process, tmp_path):
    """A started server with the in-memory manager: its URL and data folder."""
    srv = serve_process(argv=fake_argv(tmp_path / "serve"))
    srv.start()
    return srv.url, srv.data


@pytest.fixture
def fake_tokens(fake_server, monkeypatch, capsys) -> dict[str, str]:
    """alice's, bob's and root's (an administrator) tokens on ``fake_server``, made by `serve user add`."""
    from skylease.cli import main

    _, data = fake_server
    out = {}
    for name, admin in (("alice", False), ("bob", False), ("root", True)):
        flags = ["--admin"] if admin else []
        assert main(["serve", "user", "add", name, "--data-dir", str(data), *flags]) == 0
        out[name] = capsys.readouterr().out.strip()
    monkeypatch.setenv("COLUMNS", "200")
    return out


# -- the browser on the test module's server ---------------------------------------------------------
@pytest.fixture
def page(chromium, server):
    """A guarded Chromium page (browser.guarded) on the test module's ``server`` fixture (its URL first)."""
    from .browser import guarded

    with guarded(chromium, server[0]) as p:
        yield p


# -- the in-process app on a real uvicorn server -------------------------------------------------------
@pytest.fixture
def app_server():
    """Serves apps in this process: ``app_server(app, **config)`` is a served.AppServer, a real
    uvicorn server on a free loopback port in a thread (``config``: more of uvicorn's settings), with
    its URL, its ``stop()`` and the records the service logs meanwhile; every one still running is
    stopped after the test."""
    from .served import AppServer

    made: list[AppServer] = []

    def make(app, **config) -> AppServer:
        made.append(AppServer(app, **config))
        return made[-1]

    yield make
    for srv in made:
        if srv.running:
            srv.stop()


# -- a site for real runs served with QoS ---------------------------------------------------------------
@pytest.fixture
def site(tmp_path):
    """A server's data folder with users alice, bob and root (admin), the pools, trace and job of
    qos_runs.py's runs: (root folder, data folder, tokens)."""
    from .qos_runs import make_site

    return make_site(tmp_path)
