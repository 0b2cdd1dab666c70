"""Secrets stay off command lines (issue 33, docs/decisions/serve-secrets.md).

The database: a ``--db`` URL (or a configuration file's ``db``) with a password is refused in one
line naming where and saying how instead, before anything is created and without printing the
password; the password comes from ``--db-password-file``, ``db_password_file`` or
``$SKYLEASE_DB_PASSWORD``, checked against a real PostgreSQL role that logs in over TCP with a
password (skipped without PostgreSQL, failed under SKYLEASE_REQUIRE_POSTGRES=1).

The client: ``skylease login`` checks a token on a real server (``GET /me``) and writes it 0600 in
a 0700 folder (whatever the umask), typed without echo on a terminal or piped; a wrong token
writes nothing; every client command then uses it (``leases``, ``qos``, ``run --report``); the
precedence is --token, $SKYLEASE_TOKEN, the token file; the file's token goes to its own server
only; ``--token`` works with a one-line warning; ``logout`` removes the file.
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import stat
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from skylease.cli import main
from skylease.model.errors import UserError
from skylease.runtime.credentials import Login, read_login, same_server, token_for, token_path, write_login
from skylease.service.db_password import PASSWORD_ENV, db_password
from skylease.service.leases_api import create_app

from .conftest import ServeProcess, fake_serve_process

SECRET = "hunter2-" + "x7Qp"  # a password no message may show


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("skylease") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(autouse=True)
def _no_ambient_secrets(monkeypatch):
    for name in ("SKYLEASE_TOKEN", "SKYLEASE_SERVER", PASSWORD_ENV, "PGPASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")


# -- the database's password ------------------------------------------------------------------------
PASSWORD_URLS = [f"postgresql://alice:{SECRET}@127.0.0.1/skylease",
                 f"postgresql+psycopg://alice:{SECRET}@db.example.org:5432/skylease?sslmode=require",
                 f"postgresql://alice@127.0.0.1/skylease?password={SECRET}",
                 f"postgresql://alice:{SECRET}@127.0.0.1:notaport/skylease"]  # (does not even parse)


@pytest.mark.parametrize("url", PASSWORD_URLS)
@pytest.mark.parametrize("command", [["serve"], ["serve", "user", "add", "alice"], ["serve", "user", "list"],
                                     ["serve", "user", "remove", "alice"]])
def test_a_db_url_with_a_password_on_the_command_line_is_refused(tmp_path, capsys, command, url):
    t0 = time.monotonic()
    code, out, err = run(capsys, *command, "--db", url, "--data-dir", str(tmp_path / "data"))
    line = one_line(err)
    assert code == 2 and out == ""
    name = " ".join(w for w in command if w != "alice")  # the command, not its arguments
    assert line.startswith(f"skylease {name}: error: --db: a URL with a password"), line
    assert "/proc/PID/cmdline" in line and PASSWORD_ENV in line and "--db-password-file" in line
    assert SECRET not in err and not (tmp_path / "data").exists()
    assert time.monotonic() - t0 < 5


def test_a_password_in_the_config_files_db_is_refused_too(tmp_path, capsys):
    cfg = tmp_path / "serve.toml"
    cfg.write_text(f'port = 0\ndb = "postgresql://alice:{SECRET}@127.0.0.1/skylease"\n')
    for command in (["serve"], ["serve", "user", "list"]):
        code, _, err = run(capsys, *command, "--config", str(cfg))
        line = one_line(err)
        assert code == 2 and f"{cfg}: db: a URL with a password" in line and "db_password_file" in line
        assert SECRET not in err
    # a password-less URL in the file is fine, and the command line's --db still wins over the file
    cfg.write_text(f'db = "sqlite:///{tmp_path / "x.sqlite"}"\n')
    assert run(capsys, "serve", "user", "add", "bob", "--config", str(cfg))[0] == 0  # (list creates none)
    code, out, err = run(capsys, "serve", "user", "list", "--config", str(cfg), "--json")
    assert code == 0 and [u["name"] for u in json.loads(out)] == ["bob"], err


def test_a_password_file_goes_with_postgresql_only(tmp_path, capsys):
    (tmp_path / "pw").write_text(SECRET + "\n")
    code, _, err = run(capsys, "serve", "user", "list", "--data-dir", str(tmp_path / "d"),
                       "--db-password-file", str(tmp_path / "pw"))
    assert code == 2 and "--db-password-file: a password file goes with a PostgreSQL --db" in one_line(err)


def test_the_password_comes_from_the_file_then_the_environment(tmp_path):
    pg = "postgresql://alice@127.0.0.1/skylease"
    pw = tmp_path / "pw"
    pw.write_text(f"{SECRET} with spaces\n")
    pw.chmod(0o600)
    warned: list[str] = []
    env = {PASSWORD_ENV: "from-the-environment"}
    assert db_password(pg, pw, environ=env, warn=warned.append) == f"{SECRET} with spaces"  # the file wins
    assert warned == []
    assert db_password(pg, None, environ=env) == "from-the-environment"
    assert db_password(pg, None, environ={}) is None  # libpq's own (PGPASSWORD, ~/.pgpass)
    assert db_password(None, None, environ=env) is None  # SQLite has no password: the variable is not for it
    assert db_password("sqlite:///x.db", None, environ=env) is None
    pw.chmod(0o644)  # others may read it: said, not refused (a service's group may be meant to)
    assert db_password(pg, pw, environ={}, warn=warned.append) == f"{SECRET} with spaces"
    assert len(warned) == 1 and "readable by other users" in warned[0] and "chmod 600" in warned[0]
    assert SECRET not in warned[0]


def test_the_password_file_is_hidden_from_lease_payloads(tmp_path):
    from skylease.service.server import load_serve_config, secret_paths

    (tmp_path / "serve.toml").write_text('db = "postgresql://alice@127.0.0.1/skylease"\n'
                                         'db_password_file = "db-password"\n')
    cfg = load_serve_config(tmp_path / "serve.toml")
    assert tmp_path / "db-password" in secret_paths(cfg) and tmp_path / "serve.toml" in secret_paths(cfg)
    cfg = load_serve_config(tmp_path / "serve.toml", db_password_file=tmp_path / "elsewhere")
    assert tmp_path / "elsewhere" in secret_paths(cfg) and tmp_path / "db-password" not in secret_paths(cfg)


@pytest.mark.parametrize(("text", "says"), [(b"", "is empty"), (b"\n", "is empty"),
                                             (b"one\ntwo\n", "more than one line"),
                                             (b"\xff\xfe\x00", "invalid UTF-8")])
def test_a_bad_password_file_is_one_line_naming_it(tmp_path, capsys, text, says):
    pw = tmp_path / "pw"
    pw.write_bytes(text)
    code, _, err = run(capsys, "serve", "user", "list", "--db", "postgresql://alice@127.0.0.1:1/skylease",
                       "--db-password-file", str(pw))
    line = one_line(err)
    assert code == 2 and str(pw) in line and says in line, line


@pytest.fixture
def pg_role(postgres_url):
    """A role that logs in with a password (scram over TCP to 127.0.0.1), owning a fresh database;
    its URL without the password, and the password. Dropped afterwards."""
    import sqlalchemy as sa

    admin_url = sa.engine.make_url(postgres_url)
    role, password = f"skylease_pw_{secrets.token_hex(4)}", f"{SECRET}-{secrets.token_hex(8)}"
    server = sa.create_engine(admin_url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"))  # (no quote in it)
        conn.execute(sa.text(f'ALTER DATABASE "{admin_url.database}" OWNER TO {role}'))
    tcp = f"postgresql://{role}@127.0.0.1:{admin_url.port or 5432}/{admin_url.database}"
    try:
        yield tcp, password
    finally:
        db = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with db.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :r"),
                         {"r": role})
            conn.execute(sa.text(f"REASSIGN OWNED BY {role} TO CURRENT_USER"))
            conn.execute(sa.text(f"DROP OWNED BY {role}"))
        db.dispose()
        with server.connect() as conn:
            conn.execute(sa.text(f"DROP ROLE IF EXISTS {role}"))
        server.dispose()


def test_the_password_reaches_postgresql_from_the_environment_or_a_file(pg_role, tmp_path, capsys,
                                                                        monkeypatch):
    url, password = pg_role
    # without it, PostgreSQL refuses the role (and the line does not show a password it never had)
    code, _, err = run(capsys, "serve", "user", "add", "alice", "--db", url)
    assert code == 2 and "--db: cannot use the database" in one_line(err) and "password" in err
    monkeypatch.setenv(PASSWORD_ENV, password)
    code, out, err = run(capsys, "serve", "user", "add", "alice", "--db", url)
    assert code == 0 and len(out.strip()) >= 40, err
    assert password not in out + err
    monkeypatch.delenv(PASSWORD_ENV)
    pw = tmp_path / "db-password"
    pw.write_text(password + "\n")
    pw.chmod(0o600)
    code, out, err = run(capsys, "serve", "user", "list", "--db", url, "--db-password-file", str(pw),
                         "--json")
    assert code == 0 and [u["name"] for u in json.loads(out)] == ["alice"] and err == "", err
    # the configuration file's db_password_file (relative to the file's folder); one readable by
    # others works, with a warning
    (tmp_path / "serve.toml").write_text(f'db = "{url}"\ndb_password_file = "db-password"\n')
    pw.chmod(0o640)
    code, out, err = run(capsys, "serve", "user", "list", "--config", str(tmp_path / "serve.toml"), "--json")
    assert code == 0 and [u["name"] for u in json.loads(out)] == ["alice"]
    assert "skylease serve: warning:" in err and "readable by other users" in err and password not in err
    # a wrong password: one line, not showing it
    pw.write_text("not-the-password\n")
    code, _, err = run(capsys, "serve", "user", "list", "--config", str(tmp_path / "serve.toml"))
    assert code == 2 and "password authentication failed" in one_line(err) and "not-the-password" not in err


@pytest.mark.usefixtures("payload_sandbox")  # (a real server: it confines its payloads)
def test_a_server_on_postgresql_with_the_password_in_the_environment(pg_role, tmp_path):
    url, password = pg_role
    os.environ[PASSWORD_ENV] = password  # (its process inherits os.environ; removed again below)
    try:
        proc = ServeProcess(tmp_path / "serve", url)  # python -m skylease serve --port 0 --db URL ...
        served = proc.start()
    finally:
        del os.environ[PASSWORD_ENV]
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert password.encode() not in cmdline and url.encode() in cmdline
        assert httpx.get(served + "/health", timeout=5).json()["ok"] is True
    finally:
        code, out, err = proc.stop()
    assert code == 0 and password not in out + err, err


# -- /me ------------------------------------------------------------------------------------------------
def test_me_needs_a_token_and_answers_its_own_user(manager, engine, tokens):
    with TestClient(create_app(manager, engine), raise_server_exceptions=False) as c:
        assert c.get("/me").status_code == 401
        assert c.get("/me", headers={"Authorization": "Bearer wrong"}).status_code == 401
        for user, admin in (("alice", False), ("bob", False), ("root", True)):
            r = c.get("/me", headers={"Authorization": f"Bearer {tokens[user]}"})
            assert r.status_code == 200 and r.json() == {"name": user, "admin": admin}


# -- the token file -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real server (uvicorn on a free loopback port, the in-memory lease manager) with users
    alice, bob and root (an administrator); its URL and their tokens."""
    tmp = tmp_path_factory.mktemp("secrets")
    data = tmp / "serve"
    proc = fake_serve_process(data)
    url = proc.start(cwd=tmp)
    from skylease.service.auth import add_user
    from skylease.service.db import engine_for

    engine = engine_for(None, data)
    tokens = {u: add_user(engine, u, admin=u == "root") for u in ("alice", "bob", "root")}
    engine.dispose()
    try:
        yield url, tokens
    finally:
        proc.stop()


def login(capsys, monkeypatch, token: str, *argv: str) -> tuple[int, str, str]:
    """`skylease login ARGV` with ``token`` piped on standard input."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(token + "\n"))
    return run(capsys, "login", *argv)


def test_login_writes_the_token_file_0600_and_the_client_commands_use_it(server, capsys, monkeypatch):
    url, tokens = server
    path = token_path()
    assert str(path).startswith(os.environ["XDG_CONFIG_HOME"])  # (XDG_CONFIG_HOME honoured)
    old = os.umask(0)  # the most permissive umask: the modes must not depend on it
    try:
        code, out, err = login(capsys, monkeypatch, tokens["alice"], "--server", url + "/")
    finally:
        os.umask(old)
    assert code == 0 and f"logged in to {url} as alice; token saved in {path}" in out, err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert read_login(path) == Login(url, tokens["alice"])
    assert os.listdir(path.parent) == ["token"]  # (no temporary file left behind)
    # the client commands need neither --server nor --token now
    code, out, err = run(capsys, "qos", "account", "--json")
    assert code == 0 and json.loads(out)["user"] == "alice" and err == "", err
    code, out, err = run(capsys, "leases", "request", "--duration", "60", "--json")
    assert code == 0 and json.loads(out)["owner"] == "alice" and err == "", err
    code, out, _ = run(capsys, "leases", "list", "--json")
    assert code == 0 and [v["owner"] for v in json.loads(out)] == ["alice"]


def test_a_wrong_token_writes_nothing(server, capsys, monkeypatch):
    url, tokens = server
    code, _, err = login(capsys, monkeypatch, "not-a-token-of-this-server", "--server", url)
    assert code == 2 and "does not know this token; nothing written" in one_line(err)
    assert not token_path().exists() and not token_path().parent.exists()
    write_login(Login(url, tokens["bob"]))
    before = token_path().read_bytes()
    for token, says in (("wrong", "does not know this token"), ("", "no token on standard input"),
                        ("two words", "not a token"), ("x" * 600, "not a token")):
        code, _, err = login(capsys, monkeypatch, token, "--server", url)
        assert code == 2 and says in one_line(err) and "x" * 100 not in err, (token, err)
    assert token_path().read_bytes() == before
    code, _, err = login(capsys, monkeypatch, tokens["alice"], "--server", "ftp://example.org")
    assert code == 2 and "--server: 'ftp://example.org' is not a server URL" in one_line(err)
    with socket_closed() as closed:
        code, _, err = login(capsys, monkeypatch, tokens["alice"], "--server", closed)
    assert code == 1 and f"cannot reach the server at {closed}" in one_line(err)
    assert token_path().read_bytes() == before


class socket_closed:
    """The URL of a loopback port nothing listens on."""

    def __enter__(self) -> str:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return f"http://127.0.0.1:{s.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        pass


def test_login_reads_the_token_without_echo_on_a_terminal(server, tmp_path):
    import pty
    import select

    url, tokens = server
    pid, fd = pty.fork()
    if pid == 0:  # the child: `skylease login` on the terminal
        os.execvpe(sys.executable, [sys.executable, "-m", "skylease", "login", "--server", url],
                   {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)})
    seen = b""
    deadline = time.monotonic() + 60
    sent = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child ended
                break
            if not chunk:
                break
            seen += chunk
        if not sent and b"Token for " in seen:
            os.write(fd, tokens["bob"].encode() + b"\n")
            sent = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert tokens["bob"].encode() not in seen and b"as bob; token saved in" in seen, seen
    assert read_login(tmp_path / "skylease" / "token") == Login(url, tokens["bob"])


def test_the_precedence_is_the_option_then_the_environment_then_the_file(server, capsys, monkeypatch):
    url, tokens = server
    write_login(Login(url, tokens["alice"]))
    who = lambda *argv: json.loads(run(capsys, "qos", "account", "--json", *argv)[1])["user"]  # noqa: E731
    assert who() == "alice"
    monkeypatch.setenv("SKYLEASE_TOKEN", tokens["bob"])
    assert who() == "bob"
    assert who("--token", tokens["root"]) == "root"
    # the option works, with one line of warning (after the answer: an error stays one line)
    code, out, err = run(capsys, "qos", "account", "--json", "--token", tokens["root"])
    line = one_line(err)
    assert code == 0 and json.loads(out)["user"] == "root"
    assert line.startswith("skylease qos account: warning: --token is readable by every local user") and \
        "skylease login" in line and "SKYLEASE_TOKEN" in line and tokens["root"] not in line
    code, _, err = run(capsys, "qos", "account", "--token", "wrong")
    assert code == 2 and "--token: invalid token" in one_line(err)


def test_the_files_token_goes_to_its_own_server_only(server, capsys, tmp_path):
    url, tokens = server
    write_login(Login(url, tokens["alice"]))
    with socket_closed() as other:
        code, _, err = run(capsys, "leases", "list", "--server", other)
    line = one_line(err)
    assert code == 2 and f"--token: no token for {other} (the token file {token_path()} is for {url})" in line
    assert f"skylease login --server {other}" in line
    assert same_server("http://127.0.0.1:8642", "HTTP://127.0.0.1:8642/")
    assert same_server("http://example.org", "http://Example.org:80")
    assert not same_server("http://example.org", "https://example.org")
    assert not same_server("http://127.0.0.1:8642", "http://127.0.0.1:8643")
    assert token_for(url + "/", None, "--qos-token") == tokens["alice"]
    with pytest.raises(UserError, match=re.escape("--report-token: no token for http://127.0.0.1:9")):
        token_for("http://127.0.0.1:9", None, "--report-token")
    # a token file others may read is refused, as ssh refuses such a key
    token_path().chmod(0o644)
    code, _, err = run(capsys, "leases", "list")
    assert code == 2 and "open to other users" in one_line(err) and f"chmod 600 {token_path()}" in err
    assert tokens["alice"] not in err


def test_logout_removes_the_token_file(server, capsys):
    url, tokens = server
    write_login(Login(url, tokens["alice"]))
    code, out, _ = run(capsys, "logout")
    assert code == 0 and f"token file {token_path()} removed" in out and not token_path().exists()
    code, out, _ = run(capsys, "logout")
    assert code == 0 and "no token file" in out
    code, _, err = run(capsys, "leases", "list", "--server", url)
    assert code == 2 and "--token: no token for" in one_line(err)


def test_a_relative_xdg_config_home_is_ignored():
    assert token_path({"XDG_CONFIG_HOME": "relative/dir"}) == Path.home() / ".config" / "skylease" / "token"
    assert token_path({"XDG_CONFIG_HOME": "/etc/xdg-here"}) == Path("/etc/xdg-here/skylease/token")


def test_a_run_reports_with_the_token_file_and_warns_about_report_token(server, capsys, tmp_path):
    url, tokens = server
    write_login(Login(url, tokens["bob"]))
    (tmp_path / "jobs.txt").write_text("true\ntrue\n")
    code, _, err = run(capsys, "run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "a"), "--policy",
                       "fixed:1", "--report", url)
    assert code == 0 and "reported to" in err and "warning" not in err, err
    runs = httpx.get(f"{url}/runs", headers={"Authorization": f"Bearer {tokens['bob']}"}, timeout=10).json()
    assert [r["owner"] for r in runs] == ["bob"]
    code, _, err = run(capsys, "run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "b"), "--policy",
                       "fixed:1", "--report", url, "--report-token", tokens["root"])
    assert code == 0 and "skylease run: warning: --report-token is readable by every local user" in err, err
