"""The `skylease qos` commands and the `--qos*` options of `skylease run` (issue 20), against one
real `skylease serve`: every command prints a table, and JSON with --json; a refusal (an order
larger than the balance, a user's deposit, another user's account or bag, a user who does not
exist) is one line and exit 2 with the server's reason; an unreachable server is one line and exit
1; bad credits are refused before any call. `skylease run --qos` checks its options before
anything is written, and a run whose order the service refuses stops before any work."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

import httpx
import pytest

from skylease.cli import main
from skylease.service.auth import add_user
from skylease.service.db import create_schema, engine_for

from .conftest import ServeProcess

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so these skip)
pytestmark = [pytest.mark.filterwarnings("ignore::ResourceWarning"),
              pytest.mark.usefixtures("payload_sandbox")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real server with users alice, bob, carol and root (admin); alice and bob get 100 credits."""
    root = tmp_path_factory.mktemp("qos-cli")
    data = root / "serve"
    data.mkdir()
    engine = engine_for(None, data)
    create_schema(engine)
    tokens = {u: add_user(engine, u, admin=(u == "root")) for u in ("alice", "bob", "carol", "root")}
    engine.dispose()
    proc = ServeProcess(data)  # python -m skylease serve --port 0 --data-dir DATA
    url = proc.start()
    try:
        for u in ("alice", "bob"):
            r = httpx.post(f"{url}/qos/accounts/{u}/deposits", json={"credits": 100},
                           headers={"Authorization": f"Bearer {tokens['root']}"})
            assert r.status_code == 201, r.text
        yield url, tokens
    finally:
        proc.stop()


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("SKYLEASE_TOKEN", raising=False)
    monkeypatch.delenv("SKYLEASE_SERVER", raising=False)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def qos(capsys, server, user: str, *argv: str) -> tuple[int, str, str]:
    url, tokens = server
    with pytest.MonkeyPatch.context() as mp:  # (the token where a user keeps it: --token warns)
        mp.setenv("SKYLEASE_TOKEN", tokens[user])
        return run(capsys, "qos", *argv, "--server", url)


def as_json(capsys, server, user: str, *argv: str):
    code, out, err = qos(capsys, server, user, *argv, "--json")
    assert code == 0 and err == "", err
    return json.loads(out)


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and re.match(r"skylease [a-z ]+: error: ", err), err
    assert "Traceback" not in err, err
    return err


def bag(server, user: str, n_tasks: int = 10, completed: int = 0) -> int:
    """A bag registered by ``user`` (as `skylease run --qos` does), with one report."""
    url, tokens = server
    head = {"Authorization": f"Bearer {tokens[user]}"}
    r = httpx.post(f"{url}/qos/bots", json={"infrastructure": "cli-grid", "n_tasks": n_tasks}, headers=head)
    assert r.status_code == 201, r.text
    bot = r.json()["id"]
    report = {"t": 10.0, "submitted": n_tasks, "assigned": n_tasks, "completed": completed,
              "completions": [float(i + 1) for i in range(completed)]}
    r = httpx.post(f"{url}/qos/bots/{bot}/reports", json=report, headers=head)
    assert r.status_code == 200, r.text
    return bot


def test_every_qos_command_prints_a_table_and_json(server, capsys):
    before = as_json(capsys, server, "alice", "account")["balance"]
    code, out, err = qos(capsys, server, "root", "deposit", "alice", "50", "--note", "a grant")
    assert code == 0 and err == "" and "deposit" in out and "balance" in out
    assert as_json(capsys, server, "root", "deposit", "alice", "5") == {"user": "alice",
                                                                        "balance": before + 55}

    code, out, err = qos(capsys, server, "alice", "account")
    assert code == 0 and "account alice" in out and "last movements" in out and "a grant" in out
    # the movements' times are dates, not Unix seconds
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", out) and "e+09" not in out, out
    account = as_json(capsys, server, "alice", "account")
    assert account["user"] == "alice" and account["balance"] == before + 55
    assert [m["kind"] for m in account["movements"]][:2] == ["deposit", "deposit"]
    assert as_json(capsys, server, "root", "account", "alice")["balance"] == before + 55  # an admin's
    code, out, err = qos(capsys, server, "root", "account", "nosuch")  # not an empty account (issue 36)
    assert code == 2 and out == "" and "no user 'nosuch'" in one_line(err)

    bot = bag(server, "alice", completed=5)
    code, out, err = qos(capsys, server, "alice", "order", str(bot), "12.5")
    assert code == 0 and f"order of bag {bot}" in out and "12.5" in out
    order = as_json(capsys, server, "alice", "order", str(bot), "2.5")
    assert order["bot"] == bot and order["ordered"] == 15 and order["spent"] == 0 and not order["closed"]
    assert as_json(capsys, server, "alice", "account")["balance"] == before + 55 - 15

    code, out, err = qos(capsys, server, "alice", "bots")
    assert code == 0 and "bag(s) of tasks" in out and "cli-grid" in out and "alice" in out
    bots = as_json(capsys, server, "alice", "bots")
    mine = [b for b in bots if b["id"] == bot]
    assert {b["owner"] for b in bots} == {"alice"} and mine[0]["credits_ordered"] == 15
    assert mine[0]["completed"] == 5 and mine[0]["state"] == "running"

    code, out, err = qos(capsys, server, "alice", "predict", str(bot))
    assert code == 0 and f"prediction for bag {bot}" in out and "t p" in out
    p = as_json(capsys, server, "alice", "predict", str(bot))
    assert p["bot"] == bot and p["r"] == 0.5 and p["t_p"] > 0
    assert p["low"] == pytest.approx(0.8 * p["t_p"]) and p["high"] == pytest.approx(1.2 * p["t_p"])

    code, out, err = qos(capsys, server, "alice", "history", "cli-grid")
    assert code == 0 and "cli-grid: α learned from" in out and "finished bags" in out
    h = as_json(capsys, server, "alice", "history", "cli-grid")
    assert h["infrastructure"] == "cli-grid" and isinstance(h["bots"], list) and h["runs"] >= 0


def test_an_order_larger_than_the_balance_is_refused_with_the_reason(server, capsys):
    bot = bag(server, "bob")
    balance = as_json(capsys, server, "bob", "account")["balance"]
    code, out, err = qos(capsys, server, "bob", "order", str(bot), str(balance + 1000))
    assert code == 2 and out == ""
    assert f"bob has {balance:g} credits" in one_line(err) and "409" in err
    assert as_json(capsys, server, "bob", "account")["balance"] == balance  # nothing moved


def test_only_an_administrator_deposits_and_only_to_a_user(server, capsys):
    code, out, err = qos(capsys, server, "alice", "deposit", "alice", "1000")
    assert code == 2 and out == "" and "only an administrator may deposit credits" in one_line(err)
    code, _, err = qos(capsys, server, "root", "deposit", "alcie", "10")  # a typo: no account made
    assert code == 2 and "no user 'alcie'" in one_line(err)
    code, out, err = qos(capsys, server, "root", "account", "alcie")  # no account, and not an empty one
    assert code == 2 and out == "" and "no user 'alcie'" in one_line(err) and "404" in err


def test_a_user_reaches_neither_another_s_account_nor_their_bags(server, capsys):
    bot = bag(server, "alice")
    code, out, err = qos(capsys, server, "bob", "account", "alice")
    assert code == 2 and out == "" and "no account 'alice'" in one_line(err)
    for argv in (("predict", str(bot)), ("order", str(bot), "1")):
        code, out, err = qos(capsys, server, "bob", *argv)
        assert code == 2 and out == "" and f"no bag of tasks {bot}" in one_line(err), argv
    assert bot not in [b["id"] for b in as_json(capsys, server, "bob", "bots")]
    assert bot in [b["id"] for b in as_json(capsys, server, "root", "bots")]  # an admin's: every bag


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("argv", [("account",), ("bots",), ("predict", "1"), ("history", "x"),
                                  ("order", "1", "5"), ("deposit", "alice", "5")])
def test_an_unreachable_server_is_one_line_and_exit_1(capsys, argv):
    url = _closed_port()
    t0 = time.monotonic()
    code, out, err = run(capsys, "qos", *argv, "--server", url, "--token", "t")
    assert code == 1 and out == "" and f"cannot reach the server at {url}" in one_line(err)
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize("credits", ["0", "-1", "-0.5", "nan", "inf", "-inf", "1e13", "2e9"])
@pytest.mark.parametrize("command", [("deposit", "alice"), ("order", "1")])
def test_bad_credits_are_refused_before_any_call(capsys, command, credits):
    # no server listens there: an exit 2 naming CREDITS is an answer given before any call
    code, out, err = run(capsys, "qos", *command, credits, "--server", _closed_port(), "--token", "t")
    assert code == 2 and out == "" and "CREDITS:" in one_line(err) and "must be a number of credits" in err


# -- skylease run --qos ------------------------------------------------------------------------
URL = "http://127.0.0.1:1"
QOS = ["--qos", URL, "--qos-token", "t", "--reliable-pool", "cloud"]
BAD_RUNS = [
    (["--qos", URL, "--qos-token", "t"], "--reliable-pool"),
    ([*QOS, "--tail-qos", "9A-C-D"], "--tail-qos"),
    (["--qos", "127.0.0.1:8642", "--qos-token", "t", "--reliable-pool", "cloud"], "--qos"),
    (["--qos", "ftp://host", "--qos-token", "t", "--reliable-pool", "cloud"], "--qos"),
    (["--qos", "http://127.0.0.1:99999", "--qos-token", "t", "--reliable-pool", "cloud"], "--qos"),
    (["--qos", URL, "--reliable-pool", "cloud"], "--qos-token"),
    (["--qos", URL, "--qos-token", " ", "--reliable-pool", "cloud"], "--qos-token"),
    (["--qos-credits", "5"], "--qos-credits"),
    (["--qos-token", "t"], "--qos-token"),
    (["--qos-infrastructure", "grid"], "--qos-infrastructure"),
    ([*QOS, "--qos-strategy", "9X-C-D"], "--qos-strategy"),
    ([*QOS, "--qos-strategy", "none"], "--qos-strategy"),
    ([*QOS, "--qos-credits", "nan"], "--qos-credits"),
    ([*QOS, "--qos-credits", "-3"], "--qos-credits"),
    ([*QOS, "--qos-credits", "1e10"], "--qos-credits"),
    ([*QOS, "--qos-infrastructure", "my grid"],
     "--qos-infrastructure"),
    ([*QOS, "--qos-infrastructure", ""],
     "--qos-infrastructure"),
]


@pytest.mark.parametrize(("argv", "field"), BAD_RUNS, ids=[" ".join(a) for a, _ in BAD_RUNS])
def test_run_checks_its_qos_options_first(tmp_path, capsys, argv, field):
    (tmp_path / "jobs.txt").write_text("true\n")
    out = tmp_path / "new" / "X"
    t0 = time.monotonic()
    code, _, err = run(capsys, "run", str(tmp_path / "jobs.txt"), "--out", str(out), *argv)
    assert code == 2 and f"{field}:" in one_line(err), err
    assert time.monotonic() - t0 < 10
    assert not (tmp_path / "new").exists()  # nothing written


def test_a_run_whose_order_is_refused_stops_before_any_work(server, tmp_path, capsys, monkeypatch):
    url, tokens = server
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.txt").write_text("true\n" * 3)
    (tmp_path / "pools.toml").write_text("[pools.grid]\nmax_count = 1\n[pools.cloud]\nmax_count = 1\n")
    balance = as_json(capsys, server, "carol", "account")["balance"]  # carol has had no deposit
    code, out, err = run(capsys, "run", "jobs.txt", "--out", "out", "--pools", "pools.toml", "--pool", "grid",
                         "--qos", url, "--qos-token", tokens["carol"], "--reliable-pool", "cloud",
                         "--qos-credits", "30")
    assert code == 2 and out == ""
    refused = f"--qos: the QoS service at {url} refused: carol has {balance:g} credits, 30 asked"
    assert refused in one_line(err)
    assert not Path("out").exists()  # no folder, no results store: nothing to --resume
    assert as_json(capsys, server, "carol", "bots") == []  # no bag left behind


def test_a_token_the_service_does_not_know_stops_the_run_first(server, tmp_path, capsys, monkeypatch):
    url, _ = server
    monkeypatch.setenv("SKYLEASE_TOKEN", "not-a-token")  # the token may come from the environment
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.txt").write_text("true\n")
    (tmp_path / "pools.toml").write_text("[pools.grid]\nmax_count = 1\n[pools.cloud]\nmax_count = 1\n")
    code, _, err = run(capsys, "run", "jobs.txt", "--out", "out", "--pools", "pools.toml", "--pool", "grid",
                       "--qos", url, "--reliable-pool", "cloud")
    assert code == 2 and "--qos: the QoS service" in one_line(err) and "refused" in err
    assert not Path("out").exists()


def test_the_command_that_resumes_a_served_run_is_served_too(tmp_path, capsys, monkeypatch):
    """The `--resume` command a --qos run prints (when stopped, and in its report) keeps --qos and
    how the bag is served, so that it passes the option checks; the token is never in it."""
    import shlex

    from skylease.experiments.run_next import resume_command
    from skylease.experiments.run_options import RunOptions

    (tmp_path / "jobs.txt").write_text("true\n")
    opts = RunOptions(out=tmp_path / "out", qos=URL, qos_token="secret-token", reliable_pool="cloud",
                      qos_credits=30, qos_strategy="9A-C-D", qos_infrastructure="my-grid")
    command = resume_command(str(tmp_path / "jobs.txt"), opts)
    assert "secret-token" not in command
    words = shlex.split(command)
    for flag, value in (("--qos", URL), ("--reliable-pool", "cloud"), ("--qos-credits", "30"),
                        ("--qos-strategy", "9A-C-D"), ("--qos-infrastructure", "my-grid")):
        assert words[words.index(flag) + 1] == value, command
    monkeypatch.setenv("SKYLEASE_TOKEN", "secret-token")  # the token the resumed run reads
    code, _, err = run(capsys, *words[1:])
    # every option passed its checks: what is left is that this run never started (before the fix:
    # "--reliable-pool: goes with --tail-qos", the --qos options being left out)
    assert code == 2 and "no run to resume here" in one_line(err), err
