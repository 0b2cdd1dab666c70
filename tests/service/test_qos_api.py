"""SpeQuloS's HTTP API (issue 20), in process over a real QoSService on SQLite and PostgreSQL:
accounts are their owners' (others get 404), deposits are an administrator's, an order larger than
the balance is refused with the reason, a bag's reports are answered by its policy (cloud workers
started at the tail, billed, stopped and paid at the end), and a service restarted on the same
database re-attaches the bag without ordering or billing anything twice."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from skylease.runtime.qos.service import QoSService
from skylease.service.leases_api import create_app

from .api_fake import FakeManager
from .conftest import three_users


@pytest.fixture
def engine(both_databases):
    return both_databases


@pytest.fixture
def tokens(engine) -> dict[str, str]:
    return three_users(engine)


def app_client(engine) -> TestClient:
    return TestClient(create_app(FakeManager(nodes=2), engine, QoSService(engine)),
                      raise_server_exceptions=False)


@pytest.fixture
def client(engine):
    with app_client(engine) as c:
        yield c


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def deposit(client, tokens, user: str, credits: float) -> None:
    r = client.post(f"/qos/accounts/{user}/deposits", json={"credits": credits}, headers=auth(tokens["root"]))
    assert r.status_code == 201, r.text


def test_accounts_are_their_owners_and_deposits_an_administrators(client, tokens):
    r = client.post("/qos/accounts/alice/deposits", json={"credits": 100}, headers=auth(tokens["alice"]))
    assert r.status_code == 403 and "administrator" in r.json()["detail"]
    deposit(client, tokens, "alice", 100)
    me = client.get("/qos/account", headers=auth(tokens["alice"])).json()
    assert me["user"] == "alice" and me["balance"] == 100
    assert [m["kind"] for m in me["movements"]] == ["deposit"]
    assert client.get("/qos/accounts/alice", headers=auth(tokens["alice"])).json()["balance"] == 100
    r = client.get("/qos/accounts/alice", headers=auth(tokens["bob"]))  # bob cannot read alice's
    assert r.status_code == 404 and "alice" in r.json()["detail"]
    assert client.get("/qos/accounts/alice", headers=auth(tokens["root"])).json()["balance"] == 100
    r = client.get("/qos/accounts/nosuch", headers=auth(tokens["root"]))  # not an empty account
    assert r.status_code == 404 and "no user 'nosuch'" in r.json()["detail"]


def test_an_order_larger_than_the_balance_is_refused_with_the_reason(client, tokens):
    deposit(client, tokens, "alice", 10)
    body = {"infrastructure": "nd", "n_tasks": 20, "credits": 11}
    r = client.post("/qos/bots", json=body, headers=auth(tokens["alice"]))
    assert r.status_code == 409 and "alice has 10 credits" in r.json()["detail"]
    assert client.get("/qos/bots", headers=auth(tokens["alice"])).json() == []  # nothing stored
    bot = client.post("/qos/bots", json={**body, "credits": 4}, headers=auth(tokens["alice"])).json()
    assert bot["credits_ordered"] == 4 and bot["served"]
    r = client.post(f"/qos/bots/{bot['id']}/orders", json={"credits": 7}, headers=auth(tokens["alice"]))
    assert r.status_code == 409 and "6 credits" in r.json()["detail"]
    r = client.post(f"/qos/bots/{bot['id']}/orders", json={"credits": 6}, headers=auth(tokens["alice"]))
    assert r.status_code == 200 and r.json()["ordered"] == 10
    assert client.get("/qos/account", headers=auth(tokens["alice"])).json()["balance"] == 0


def test_a_user_neither_sees_nor_spends_nor_reports_for_anothers_bag(client, tokens):
    deposit(client, tokens, "alice", 50)
    deposit(client, tokens, "bob", 50)
    bot = client.post("/qos/bots", json={"infrastructure": "nd", "n_tasks": 5, "credits": 5},
                      headers=auth(tokens["alice"])).json()
    b = auth(tokens["bob"])
    assert client.get("/qos/bots", headers=b).json() == []
    for method, path, body in (("GET", f"/qos/bots/{bot['id']}", None),
                               ("GET", f"/qos/bots/{bot['id']}/prediction", None),
                               ("GET", f"/qos/bots/{bot['id']}/series", None),
                               ("POST", f"/qos/bots/{bot['id']}/orders", {"credits": 1}),
                               ("POST", f"/qos/bots/{bot['id']}/reports",
                                {"t": 1, "submitted": 5, "assigned": 1, "completed": 0})):
        r = client.request(method, path, json=body, headers=b)
        assert r.status_code == 404 and r.json()["detail"] == f"no bag of tasks {bot['id']}", (path, r.text)
    assert client.get("/qos/account", headers=b).json()["balance"] == 50  # bob's credits untouched
    h = client.get("/qos/history/nd", headers=b).json()
    assert h["bots"] == []
    assert [x["id"] for x in client.get("/qos/bots", headers=auth(tokens["root"])).json()] == [bot["id"]]


def report(client, token, bot, t, done, ctimes, workers=None, n=10):
    """A run's report at ``t`` with ``done`` completions (their times in ``ctimes``)."""
    body = {"t": t, "submitted": n, "assigned": min(n, done + 2), "completed": done,
            "completions": ctimes[:done], "workers": {str(k): v for k, v in (workers or {}).items()}}
    r = client.post(f"/qos/bots/{bot}/reports", json=body, headers=auth(token))
    assert r.status_code == 200, r.text
    return r.json()


def test_a_bags_series_carries_its_cloud_workers_at_each_report(client, tokens):
    deposit(client, tokens, "alice", 50)
    bot = client.post("/qos/bots", json={"infrastructure": "nd", "n_tasks": 10, "credits": 5},
                      headers=auth(tokens["alice"])).json()["id"]
    report(client, tokens["alice"], bot, 1.0, 0, [])
    report(client, tokens["alice"], bot, 2.0, 1, [1.5], {1: "booting", 2: "booting"})
    report(client, tokens["alice"], bot, 3.0, 2, [1.5, 2.5], {1: "busy", 2: "idle", 3: "released"})
    series = client.get(f"/qos/bots/{bot}/series", headers=auth(tokens["alice"]))
    assert series.status_code == 200
    assert series.json() == [
        {"t": 1.0, "completed": 0, "assigned": 2, "queued": 0, "cloud_workers": 0, "cloud_booting": 0},
        {"t": 2.0, "completed": 1, "assigned": 3, "queued": 0, "cloud_workers": 0, "cloud_booting": 2},
        {"t": 3.0, "completed": 2, "assigned": 4, "queued": 0, "cloud_workers": 2, "cloud_booting": 0}]


def test_reports_are_answered_by_the_policy_and_a_restart_orders_and_bills_nothing_twice(engine, tokens):
    """9A-G-R with 30 credits (2 CPU hours: greedy rents 2 CWs; 0.25 credit per CW per 60 s tick):
    once 9 of 10 tasks are assigned the service starts them, bills each tick, and at the end
    stops them and refunds the rest. The service is replaced midway by a fresh one on the same
    database (a restart): it re-attaches the bag on its order (with the same strategy and tick),
    stops the CWs the old one started (nobody bills them any more) and rents anew for the tail,
    and the ledger never holds the order twice."""
    a = tokens["alice"]
    ctimes = [10.0 * (i + 1) for i in range(10)]
    with app_client(engine) as c:
        deposit(c, tokens, "alice", 50)
        bot = c.post("/qos/bots", json={"infrastructure": "nd", "n_tasks": 10, "strategy": "9A-G-R",
                                        "tick": 60, "credits": 30}, headers=auth(a)).json()["id"]
        first = report(c, a, bot, 0, 0, ctimes)
        assert first["start"] == [] and first["next_t"] == 60  # the next tick
        ans = report(c, a, bot, 60, 7, ctimes)  # 9 assigned of 10: the WHEN rule holds
        assert ans["serve"] == "reschedule" and len(ans["start"]) == 2
        assert ans["credits_spent"] == pytest.approx(2 * 0.25)  # each billed its first tick
        started = ans["start"]
        ans = report(c, a, bot, 120, 8, ctimes, workers={w: "busy" for w in started})
        assert ans["start"] == ans["stop"] == [] and ans["credits_spent"] == pytest.approx(4 * 0.25)
    with app_client(engine) as c:  # the service restarted: a new QoSService on the same database
        ans = report(c, a, bot, 130, 8, ctimes, workers={w: "busy" for w in started})
        # the old CWs are stopped (nobody bills them now); the re-attached policy serves from 130 on
        assert sorted(ans["stop"]) == sorted(started) and ans["start"] == [] and ans["next_t"] == 180
        ans = report(c, a, bot, 180, 9, ctimes, workers={w: "released" for w in started})
        # its first tick sees the tail and rents floor(29 / 15) = 1 CW, with a new id
        assert ans["serve"] == "reschedule" and len(ans["start"]) == 1
        assert not set(ans["start"]) & set(started)
        again = ans["start"]
        ans = report(c, a, bot, 200, 10, ctimes, workers={**{w: "released" for w in started},
                                                          **{w: "busy" for w in again}})
        assert ans["done"] and ans["stop"] == again
        acct = c.get("/qos/account", headers=auth(a)).json()
        kinds = [m["kind"] for m in acct["movements"]]
        assert kinds.count("order") == 1 and kinds.count("deposit") == 1 and kinds.count("refund") == 1
        bills = [m for m in acct["movements"] if m["kind"] == "bill"]
        assert len(bills) == 5 and sum(m["amount"] for m in bills) == pytest.approx(1.25)  # 4 + 1 ticks
        assert acct["balance"] == pytest.approx(50 - 1.25)
        view = c.get(f"/qos/bots/{bot}", headers=auth(a)).json()
        assert view["state"] == "done" and view["completion_time"] == 100.0
        assert view["credits_spent"] == pytest.approx(1.25) and not view["served"]


def test_a_bag_whose_run_went_silent_is_abandoned_and_its_credits_come_back(engine, tokens):
    """The server's sweep (every minute, `qos_abandon_after` = 1 h by default): a running bag with no
    report for that long is abandoned, its policy dropped and its order paid back; a bag that
    reports is left alone."""
    import time

    qos = QoSService(engine)
    qos.deposit("alice", 50)
    silent = qos.register("alice", "nd", 10, strategy="9C-C-R", tick=60, credits=20).id
    alive = qos.register("alice", "nd", 10, strategy="9C-C-R", tick=60, credits=20).id
    assert qos.ledger.balance("alice") == 10
    later = time.time() + 2 * 3600
    qos.registry.report(alive, 2 * 3600 - 30, 1, 2, 8)  # reported half a minute before `later`
    assert qos.sweep(later, 3600) == [silent]
    assert qos.bot("alice", silent)["state"] == "abandoned" and qos.scheduler.served(silent) is None
    assert qos.ledger.order_of(silent).closed and qos.ledger.balance("alice") == 30
    assert qos.bot("alice", alive)["state"] == "running" and qos.scheduler.served(alive) is not None
    assert qos.sweep(later, 3600) == []  # nothing twice
