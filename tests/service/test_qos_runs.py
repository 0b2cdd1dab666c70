"""Real runs served by SpeQuloS as a service (issue 20): one real `skylease serve`, two users, two
real `skylease run --qos` processes at once on a volatile pool (--volatility on an availability
trace) with one slow worker, and a reliable pool the service rents cloud workers from.

Each run's tail is cut: it finishes sooner than the same run without --qos (same seed, run beside
it). The cloud workers start and stop as the service decides (the runs' stores record them), and
the books balance to the credit: each account is deposits minus what its ledger billed, no bag
spent more than it ordered. Then the same with a `kill -9` of the server during the runs: they go
on without QoS, say so, re-attach when it is back, and the ledger has no lost or doubled movement.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from skylease.runtime.qos.ledger import Ledger
from skylease.service.auth import add_user
from skylease.service.db import create_schema, engine_for

from .qos_runs import N_TASKS, SLOW, deposit, finish, launch, run_argv, server_argv

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so these skip)
# integration: real runs served with QoS, one with a kill -9 of the server (pytest -m integration)
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("payload_sandbox")]

def results(folder: Path) -> dict[str, object]:
    with sqlite3.connect(folder / "results.sqlite") as db:
        tasks = [t for (t,) in db.execute("SELECT task FROM results ORDER BY task")]
        pools = dict(db.execute("SELECT pool, COUNT(*) FROM hosts GROUP BY pool").fetchall())
        ok = db.execute("SELECT COUNT(*) FROM results WHERE status = 'ok'").fetchone()[0]
        downs = db.execute("SELECT COUNT(*) FROM events WHERE kind = 'down'").fetchone()[0]
        unreleased = db.execute("SELECT COUNT(*) FROM hosts WHERE pool = 'cloud' AND released_s IS NULL"
                                ).fetchone()[0]
    return {"tasks": tasks, "hosts": pools, "ok": ok, "downs": downs, "unreleased": unreleased}


def elapsed(folder: Path) -> float:
    return float(json.loads((folder / "summary.json").read_text())["elapsed_s"])


def check_books(data: Path, users: tuple[str, ...]) -> dict[str, list]:
    """Each account: deposits − what its bags spent, from the ledger's rows; no bag spent more than
    it ordered; each bag ordered once, paid once; the orders' cache agrees with the ledger."""
    engine = engine_for(None, data)
    try:
        ledger = Ledger(engine)
        assert ledger.audit() == []
        with engine.connect() as c:
            rows = c.execute(sa.text("SELECT user, bot, kind, amount FROM qos_ledger")).all()
        per_user: dict[str, list] = {}
        for u in users:
            mine = [r for r in rows if r.user == u]
            per_user[u] = mine
            deposits = sum(r.amount for r in mine if r.kind == "deposit")
            bills = sum(r.amount for r in mine if r.kind == "bill")
            bots = {r.bot for r in mine if r.kind == "order"}
            assert len(bots) == 1 and sum(1 for r in mine if r.kind == "order") == 1, mine
            assert sum(1 for r in mine if r.kind == "refund") == 1, mine  # paid once, at the end
            ordered = sum(r.amount for r in mine if r.kind == "order")
            assert 0 < bills <= ordered, (bills, ordered)
            # micro-credits in the table: the balance is deposits - bills, to the credit
            assert ledger.balance(u) == pytest.approx((deposits - bills) / 1e6, abs=1e-6)
        return per_user
    finally:
        engine.dispose()


def test_two_users_two_real_runs_served_at_once_cut_their_tails_and_the_books_balance(site, serve_process):
    root, data, tokens = site
    server = serve_process(argv=server_argv(data))
    url = server.start(cwd=root)
    try:
        for u in ("alice", "bob"):
            deposit(url, tokens, u)
        procs = {"plain-alice": launch(run_argv(root, "plain-alice", None), root),
                 "plain-bob": launch(run_argv(root, "plain-bob", None), root),
                 "qos-alice": launch(run_argv(root, "qos-alice", (url, tokens["alice"])), root),
                 "qos-bob": launch(run_argv(root, "qos-bob", (url, tokens["bob"])), root)}
        errs = {name: finish(p) for name, p in procs.items()}
        bots = {u: httpx.get(f"{url}/qos/bots", headers={"Authorization": f"Bearer {tokens[u]}"}).json()
                for u in ("alice", "bob")}
    finally:
        code, _, server_err = server.stop()
    assert code == 0, server_err[-2000:]
    for u in ("alice", "bob"):
        plain, served = results(root / f"plain-{u}"), results(root / f"qos-{u}")
        assert plain["tasks"] == served["tasks"] == list(range(N_TASKS))  # each task once
        assert served["ok"] == N_TASKS and plain["downs"] >= 2 and served["downs"] >= 2  # the trace played
        assert served["hosts"].get("cloud", 0) >= 1 and "cloud" not in plain["hosts"]  # the service rented
        summary = json.loads((root / f"qos-{u}" / "summary.json").read_text())["qos"]
        assert summary["cws"] == served["hosts"]["cloud"] and served["unreleased"] == 0  # and stopped
        assert summary["done"] and summary["credits_spent"] > 0
        assert elapsed(root / f"qos-{u}") < elapsed(root / f"plain-{u}") - 2.0, u  # the tail was cut
        assert "registered" in errs[f"qos-{u}"]
        assert [(b["owner"], b["state"], b["n_tasks"]) for b in bots[u]] == [(u, "done", N_TASKS)]
    check_books(data, ("alice", "bob"))


def test_kill_9_of_the_server_during_two_runs_loses_and_doubles_no_movement(site, serve_process):
    """The server dies once both bags are registered and reporting, and comes back 4 s later on
    the same port: the runs go on without QoS meanwhile and say so, re-attach (and say so), get
    their cloud workers for the tail from the restarted service, and finish every task once."""
    root, data, tokens = site
    # A longer bag of longer tasks (0.6 s off grid-1): its tail comes after the restart even when one
    # run starts seconds after the other (a cold run is up in well under a second now, so with 0.2 s
    # tasks the first bag could be over, its last report sent, before the second one registered).
    n = 2 * N_TASKS
    (root / "jobs.txt").write_text(SLOW.replace("else 0.2", "else 0.6") * n)
    server = serve_process(argv=server_argv(data))
    url = server.start(cwd=root)
    procs = {}
    try:
        for u in ("alice", "bob"):
            deposit(url, tokens, u)
        procs = {u: launch(run_argv(root, f"qos-{u}", (url, tokens[u])), root) for u in ("alice", "bob")}
        deadline = time.monotonic() + 60
        while True:  # both bags registered and reporting
            bags = [b for u in ("alice", "bob") for b in httpx.get(
                f"{url}/qos/bots", headers={"Authorization": f"Bearer {tokens[u]}"}).json() if b["reports"]]
            if len(bags) == 2:
                break
            assert time.monotonic() < deadline, "the bags never reported"
            time.sleep(0.1)
        server.kill9()
        time.sleep(4)  # the runs report meanwhile (every 2 s): nobody answers
        url2 = server.start(cwd=root, extra=("--port", url.rsplit(":", 1)[1]))
        assert url2 == url
        errs = {u: finish(p) for u, p in procs.items()}
        bots = {u: httpx.get(f"{url}/qos/bots", headers={"Authorization": f"Bearer {tokens[u]}"}).json()
                for u in ("alice", "bob")}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        server.stop()
    for u in ("alice", "bob"):
        r = results(root / f"qos-{u}")
        assert r["tasks"] == list(range(n)) and r["ok"] == n  # nothing lost, nothing twice
        assert "unreachable" in errs[u] and "served again" in errs[u], errs[u][-2000:]
        assert r["hosts"].get("cloud", 0) >= 1  # rented by the restarted service
        assert [(b["state"], b["n_tasks"]) for b in bots[u]] == [("done", n)]
    per_user = check_books(data, ("alice", "bob"))
    for rows in per_user.values():
        assert any(r.kind == "bill" for r in rows)


def test_the_deposit_policy_tops_every_account_up_periodically(tmp_path, serve_process):
    """`qos_deposit_cap` and `qos_deposit_every` in the server's config: each user's balance is
    brought up to the cap at the start and every period after (the paper's deposit policy), one
    ledger row per top-up, and never above the cap."""
    data = tmp_path / "serve"
    data.mkdir()
    engine = engine_for(None, data)
    create_schema(engine)
    tokens = {u: add_user(engine, u) for u in ("alice", "bob")}
    engine.dispose()
    config = tmp_path / "serve.toml"
    config.write_text(f'data_dir = "{data}"\nport = 0\nqos_deposit_cap = 120.0\nqos_deposit_every = 1.0\n')
    server = serve_process(argv=[sys.executable, "-m", "skylease", "serve", "--config", str(config)])
    url = server.start(cwd=tmp_path)
    try:
        def account(u: str) -> dict:
            return httpx.get(f"{url}/qos/account", headers={"Authorization": f"Bearer {tokens[u]}"}).json()

        deadline = time.monotonic() + 10
        while account("alice")["balance"] != 120 or account("bob")["balance"] != 120:
            assert time.monotonic() < deadline, (account("alice"), account("bob"))
            time.sleep(0.1)
        r = httpx.post(f"{url}/qos/bots", json={"infrastructure": "nd", "n_tasks": 3, "credits": 45},
                       headers={"Authorization": f"Bearer {tokens['alice']}"})
        assert r.status_code == 201 and account("alice")["balance"] == 75
        while account("alice")["balance"] != 120:  # topped up again within a period
            assert time.monotonic() < deadline + 5, account("alice")
            time.sleep(0.1)
        time.sleep(1.5)  # another period: nothing to add
        moves = account("alice")["movements"]
        assert [m["kind"] for m in moves].count("deposit") == 2 and account("alice")["balance"] == 120
        assert sum(m["amount"] for m in moves if m["kind"] == "deposit") == 165
    finally:
        server.stop()
