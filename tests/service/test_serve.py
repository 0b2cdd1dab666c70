"""``skylease serve`` and the client commands (issue 19): the server refuses a non-loopback address
without --allow-remote and TLS in one line; `serve user add` prints a token once; a real server
process (uvicorn on a free loopback port) answers the client commands with tables and JSON, maps
their errors to one line and exit 2 (refused) or 1 (server failed or unreachable), and stops
cleanly on SIGTERM and SIGINT. Until the real lease manager lands, the server runs the in-memory
manager of api_fake.py; the last test runs `python -m skylease serve` itself when it can."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from skylease.cli import main

from .api_fake import FakeManager
from .conftest import ServeProcess, fake_serve_process

HERE = Path(__file__).resolve().parent

def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("skylease"), err
    assert "Traceback" not in err
    return lines[0]


# -- serve's checks -------------------------------------------------------------------------------
@pytest.mark.parametrize(("extra", "missing"), [
    ([], "missing --allow-remote, --tls-cert, --tls-key"),
    (["--allow-remote"], "missing --tls-cert, --tls-key"),
    (["--tls-cert", "CERT", "--tls-key", "KEY"], "missing --allow-remote"),
])
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "example.org", "192.0.2.1"])
def test_serve_refuses_a_non_loopback_address_in_one_line(tmp_path, capsys, host, extra, missing):
    for name in ("CERT", "KEY"):
        (tmp_path / name).write_text("x")
    extra = [str(tmp_path / a) if a in ("CERT", "KEY") else a for a in extra]
    code, out, err = run(capsys, "serve", "--host", host, "--data-dir", str(tmp_path / "d"), *extra)
    assert code == 2 and out == ""
    line = one_line(err)
    assert "--host" in line and "not a loopback address" in line and missing in line, line
    assert not (tmp_path / "d").exists()  # refused before anything is made


def test_serve_checks_the_tls_files_before_it_starts(tmp_path, capsys):
    (tmp_path / "cert.pem").write_text("not a certificate\n")
    (tmp_path / "key.pem").write_text("not a key\n")
    base = ["serve", "--host", "0.0.0.0", "--allow-remote", "--data-dir", str(tmp_path / "d")]
    for extra, says in ((["--tls-cert", str(tmp_path / "cert.pem")], "--tls-cert needs --tls-key"),
                        (["--tls-cert", str(tmp_path / "nope"), "--tls-key", str(tmp_path / "key.pem")],
                         "file not found"),
                        (["--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem")],
                         "not a certificate and its key")):
        code, _, err = run(capsys, *base, *extra)
        assert code == 2 and says in one_line(err), err
    assert not (tmp_path / "d").exists()


def test_loopback_addresses_need_nothing_more():
    from skylease.service.server import is_loopback

    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.1", "example.org", ""]))


def test_a_config_file_is_read_and_options_win(tmp_path):
    from skylease.service.server import load_serve_config

    (tmp_path / "serve.toml").write_text('port = 9000\ntime_scale = 60.0\ndata_dir = "state"\n')
    cfg = load_serve_config(tmp_path / "serve.toml", port=9001)
    assert (cfg.port, cfg.time_scale, cfg.data_dir) == (9001, 60.0, str(tmp_path / "state"))
    (tmp_path / "bad.toml").write_text('port = 9000\nallow_remote = "yes"\n')
    from skylease.model.errors import UserError

    with pytest.raises(UserError, match=r"bad.toml:2: allow_remote: must be true or false"):
        load_serve_config(tmp_path / "bad.toml")


def test_the_log_level_is_a_key_and_an_option_a_wrong_one_is_one_line(tmp_path, capsys):
    from skylease.model.errors import UserError
    from skylease.service.server import load_serve_config

    assert load_serve_config(None).log_level == "warning"
    (tmp_path / "serve.toml").write_text('port = 9000\nlog_level = "info"\n')
    assert load_serve_config(tmp_path / "serve.toml").log_level == "info"
    assert load_serve_config(tmp_path / "serve.toml", log_level="debug").log_level == "debug"
    (tmp_path / "bad.toml").write_text('log_level = "loud"\n')
    with pytest.raises(UserError, match=r"bad.toml:1: log_level: "):
        load_serve_config(tmp_path / "bad.toml")
    assert main(["serve", "--log-level", "loud"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "skylease serve: error: --log-level: 'loud' is not one of 'warning', 'info', 'debug'"]


def test_a_port_in_use_is_one_line(tmp_path):
    from skylease.model.errors import UserError
    from skylease.service.server import load_serve_config, serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        cfg = load_serve_config(None, port=taken.getsockname()[1], data_dir=tmp_path)
        with pytest.raises(UserError, match="in use") as exc:
            serve(cfg, manager_factory=lambda *_: FakeManager())
    assert exc.value.field == "--port"


# -- users ----------------------------------------------------------------------------------------
def test_user_add_prints_the_token_once(tmp_path, capsys):
    data = str(tmp_path / "d")
    code, out, err = run(capsys, "serve", "user", "add", "alice", "--data-dir", data)
    assert code == 0
    token = out.strip()
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token) and out == token + "\n"
    assert "shown only now" in err
    code, out, err = run(capsys, "serve", "user", "add", "alice", "--data-dir", data)
    assert code == 2 and out == "" and "user 'alice' already exists" in one_line(err)
    code, out, _ = run(capsys, "serve", "user", "list", "--data-dir", data, "--json")
    assert code == 0 and [u["name"] for u in json.loads(out)] == ["alice"] and token not in out
    url = f"sqlite:///{tmp_path / 'd' / 'skylease.sqlite'}"
    code, out, _ = run(capsys, "serve", "user", "add", "bob", "--db", url)
    assert code == 0
    code, out, _ = run(capsys, "serve", "user", "list", "--data-dir", data)
    assert "alice" in out and "bob" in out


def test_user_add_reads_the_database_of_the_config_file(tmp_path, capsys):
    (tmp_path / "serve.toml").write_text('data_dir = "state"\n')
    assert run(capsys, "serve", "user", "add", "carol", "--config", str(tmp_path / "serve.toml"))[0] == 0
    assert (tmp_path / "state" / "skylease.sqlite").is_file()


def test_user_add_with_a_bad_db_is_one_line(tmp_path, capsys):
    for db in ("zz", "", "mysql://x@localhost/y"):
        code, _, err = run(capsys, "serve", "user", "add", "dan", "--db", db)
        assert code == 2 and "--db" in one_line(err)


# -- the client against a real server process -----------------------------------------------------
def test_the_server_prints_where_it_is_and_stops_cleanly_on_sigterm(tmp_path):
    data = tmp_path / "serve"
    proc = fake_serve_process(data)
    url = proc.start()
    assert url.startswith("http://127.0.0.1:")
    r = httpx.get(url + "/openapi.json")
    assert r.status_code == 200 and "/leases" in r.json()["paths"]
    code, out, err = proc.stop(signal.SIGTERM)
    assert code == 0 and out.strip().endswith("stopped") and "Traceback" not in err, err
    assert (data / "manager-closed").read_text() == "closed"


def test_ctrl_c_stops_it_cleanly_too(tmp_path):
    data = tmp_path / "serve"
    proc = fake_serve_process(data)
    proc.start()
    code, _, err = proc.stop(signal.SIGINT)
    assert code == 0 and "Traceback" not in err and (data / "manager-closed").exists(), err


def test_the_client_commands_print_tables_and_json(fake_server, fake_tokens, capsys, tmp_path, monkeypatch,
                                                   shared_data):
    url, _ = fake_server
    monkeypatch.setenv("SKYLEASE_SERVER", url)
    monkeypatch.setenv("SKYLEASE_TOKEN", fake_tokens["alice"])
    code, out, err = run(capsys, "leases", "request", "--nodes", "2", "--duration", "00:10:00")
    assert code == 0 and "queued" in out and "alice" in out, err
    code, out, _ = run(capsys, "leases", "request", "--duration", "60", "--start-in", "600", "--json")
    ar = json.loads(out)
    assert code == 0 and ar["type"] == "advance-reservation" and ar["requested_start"] == 100 + 600
    (tmp_path / "req.json").write_text('{"nodes": 1,\n "duration": 120}\n')
    code, out, _ = run(capsys, "leases", "request", str(tmp_path / "req.json"), "--json")
    assert code == 0 and json.loads(out)["requested_duration"] == 120
    text = (shared_data / "lwf" / "scenarios" / "preemption.lwf").read_text()
    element = re.findall(r"<lease-request\b.*?</lease-request>", text, flags=re.S)[0]
    (tmp_path / "lease.xml").write_text(element)
    code, out, _ = run(capsys, "leases", "request", str(tmp_path / "lease.xml"), "--json")
    assert code == 0 and json.loads(out)["image"] == "foobar1.img"
    code, out, _ = run(capsys, "leases", "list", "--json")
    ids = [v["id"] for v in json.loads(out)]
    assert code == 0 and len(ids) >= 3
    code, out, _ = run(capsys, "leases", "list")
    assert code == 0 and f"{len(ids)} lease(s)" in out
    code, out, _ = run(capsys, "leases", "queue")
    assert code == 0 and "queue:" in out
    code, out, _ = run(capsys, "leases", "show", str(ids[0]))
    assert code == 0 and f"lease {ids[0]}" in out and "events" in out and "submit" in out
    code, out, _ = run(capsys, "leases", "cancel", str(ids[0]), "--json")
    assert code == 0 and json.loads(out)["state"] == "cancelled"
    code, out, _ = run(capsys, "leases", "hosts", "--token", fake_tokens["root"])
    assert code == 0 and "node3" in out
    code, out, _ = run(capsys, "leases", "hosts", "--token", fake_tokens["root"], "--json")
    assert [h["name"] for h in json.loads(out)] == ["node0", "node1", "node2", "node3"]
    # bob sees none of alice's leases
    code, out, _ = run(capsys, "leases", "list", "--token", fake_tokens["bob"], "--json")
    assert code == 0 and json.loads(out) == []


def test_the_client_maps_errors_to_one_line(fake_server, fake_tokens, capsys, tmp_path, monkeypatch):
    url, _ = fake_server
    monkeypatch.setenv("SKYLEASE_SERVER", url)
    monkeypatch.setenv("SKYLEASE_TOKEN", fake_tokens["alice"])
    cases = [  # (argv, exit status, what the line says)
        (["leases", "show", "99"], 2, "no lease 99 (404 Not Found)"),
        (["leases", "cancel", "99"], 2, "no lease 99"),
        (["leases", "hosts"], 2, "only an administrator may list the hosts (403 Forbidden)"),
        (["leases", "request", "--nodes", "9", "--duration", "60"], 2, "asks for 9 nodes; the site has 4"),
        (["leases", "list", "--token", "wrong"], 2, "--token: invalid token"),
        (["leases", "request", "--duration", "60", "--command", "fail inside the manager"], 1,
         "answered 500 Internal Server Error: internal server error"),
        # refused before anything is sent
        (["leases", "show", "-5"], 2, "ID: '-5' is not a lease id"),
        (["leases", "cancel", "x1"], 2, "ID: 'x1' is not a lease id"),
        (["leases", "request", "--nodes", "0", "--duration", "60"], 2, "--nodes"),
        (["leases", "request", "--duration", "1:2"], 2, "--duration: '1:2' is not a duration"),
        (["leases", "request", "--nodes", "2"], 2, "--duration: a lease needs a duration"),
        (["leases", "request", "--duration", "60", "--type", "later"], 2, "--type"),
        (["leases", "request", "--duration", "60", "--type", "immediate", "--start", "5"], 2, "--type"),
        (["leases", "request", str(tmp_path / "missing.json")], 2, "missing.json: file not found"),
        (["leases", "request", str(tmp_path / "bad.json")], 2, "bad.json:2: nodes: must be a whole number"),
        (["leases", "request", str(tmp_path / "bad.json"), "--nodes", "1"], 2, "not both"),
        # request files are JSON: strict (a string is not a number), bounded before they are parsed
        (["leases", "request", str(tmp_path / "text.json")], 2, "text.json:2: nodes: must be a whole number"),
        (["leases", "request", str(tmp_path / "deep.json")], 2, "deep.json:1: nested more than 32 levels"),
        (["leases", "request", "--duration", "60", "--command", "a\x1bb"], 2,
         "--command: must not contain control characters: U+001B"),
        (["leases", "list", "--server", "ftp://x"], 2, "--server: 'ftp://x' is not a server URL"),
        (["leases", "list", "--token", ""], 2, None),
    ]
    (tmp_path / "bad.json").write_text('{"duration": 60,\n "nodes": -1}\n')
    (tmp_path / "text.json").write_text('{"duration": 60,\n "nodes": "2"}\n')
    (tmp_path / "deep.json").write_text('{"duration": ' + "[" * 60_000 + "}\n")
    for argv, status, says in cases:
        code, out, err = run(capsys, *argv)
        assert code == status, (argv, code, out, err)
        line = one_line(err)
        assert code == status and (says is None or says in line), (argv, code, err)
    monkeypatch.delenv("SKYLEASE_TOKEN")
    code, _, err = run(capsys, "leases", "list")
    assert code == 2 and "--token: no token" in one_line(err)


def test_an_unreachable_server_is_one_line_naming_it(capsys, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    code, out, err = run(capsys, "leases", "list", "--server", url, "--token", "t")
    assert code == 1 and out == "" and f"cannot reach the server at {url}" in one_line(err)
    assert time.monotonic() - t0 < 10


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a certificate")
def test_with_a_certificate_it_serves_https_and_the_client_checks_it(tmp_path, capsys, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    data = tmp_path / "serve"
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    proc = fake_serve_process(data, tls_cert=str(cert), tls_key=str(key))
    url = proc.start()
    try:
        assert url.startswith("https://127.0.0.1:")
        assert main(["serve", "user", "add", "alice", "--data-dir", str(data)]) == 0
        token = capsys.readouterr().out.strip()
        code, out, err = run(capsys, "leases", "request", "--duration", "60", "--server", url,
                             "--token", token, "--json")
        assert code == 0 and json.loads(out)["owner"] == "alice", err
        monkeypatch.delenv("SSL_CERT_FILE")  # a certificate nobody vouches for: refused, in one line
        code, _, err = run(capsys, "leases", "list", "--server", url, "--token", token)
        assert code == 1 and "CERTIFICATE_VERIFY_FAILED" in one_line(err)
    finally:
        assert proc.stop()[0] == 0


@pytest.mark.usefixtures("payload_sandbox")  # (a real server: it confines its payloads)
def test_python_m_skylease_serve_answers_and_stops(tmp_path):
    proc = ServeProcess(tmp_path / "serve", time_scale=60)  # python -m skylease serve --port 0 ...
    url = proc.start()
    assert httpx.get(url + "/leases").status_code == 401
    code, out, err = proc.stop()
    assert code == 0 and "skylease serve: stopped" in out and "Traceback" not in err, err
