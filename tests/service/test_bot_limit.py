"""The per-user bound on bags of tasks (docs/decisions/serve-fair-sharing.md): at most
``max_bots_per_user`` bags running per user (a finished or abandoned bag frees its place; another
user's bags do not count); one more is refused with 409 and the reason, nothing stored. A key of
``skylease serve``'s file (default 1,000); a real server applies it. SQLite and PostgreSQL."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from skylease.control.qos.relay import Report
from skylease.model.errors import UserError
from skylease.runtime.qos.service import MAX_BOTS_PER_USER, BotsRefused, QoSService
from skylease.service.auth import add_user
from skylease.service.leases_api import create_app
from skylease.service.server import ServeConfig, load_serve_config, open_database

from .api_fake import FakeManager
from .conftest import fake_serve_process, three_users


def test_at_most_n_running_bags_per_user(both_databases):
    qos = QoSService(both_databases, max_bots_per_user=2)
    first, second = (qos.register("alice", "nd", 4).id for _ in range(2))
    with pytest.raises(BotsRefused, match="alice already has 2 of at most 2 bags of tasks running"):
        qos.register("alice", "nd", 4)
    assert len(qos.bots("alice")) == 2  # nothing stored
    assert qos.register("bob", "nd", 4).id > second  # bob's count is his own
    qos.report("alice", first, Report(10.0, 4, 4, 4))  # all done: the bag is finished, its place free
    assert qos.bot("alice", first)["state"] == "done"
    third = qos.register("alice", "nd", 4).id
    with pytest.raises(BotsRefused):
        qos.register("alice", "nd", 4)
    assert qos.sweep(10**12, 1.0) == [second, second + 1, third]  # abandoned: places free again
    for _ in range(2):
        qos.register("alice", "nd", 4)
    with pytest.raises(BotsRefused):
        qos.register("alice", "nd", 4)
    with pytest.raises(UserError, match="at least 1"):
        QoSService(both_databases, max_bots_per_user=0)


def test_the_api_answers_409_with_the_reason(engine):
    tokens = three_users(engine)
    app = create_app(FakeManager(), engine, QoSService(engine, max_bots_per_user=1))
    with TestClient(app, raise_server_exceptions=False) as client:
        h = {"Authorization": f"Bearer {tokens['alice']}"}
        body = {"infrastructure": "nd", "n_tasks": 4}
        assert client.post("/qos/bots", json=body, headers=h).status_code == 201
        r = client.post("/qos/bots", json=body, headers=h)
        assert r.status_code == 409 and r.json() == {
            "detail": "alice already has 1 of at most 1 bags of tasks running; one must finish (or be "
                      "abandoned) first"}
        assert len(client.get("/qos/bots", headers=h).json()) == 1
        doc = client.get("/openapi.json").json()["paths"]["/qos/bots"]["post"]["responses"]["409"]
        assert "as many bags running" in doc["description"]


def test_the_servers_key_and_its_default(tmp_path):
    assert ServeConfig().max_bots_per_user == MAX_BOTS_PER_USER == 1000
    conf = tmp_path / "serve.toml"
    conf.write_text("max_bots_per_user = 5\n")
    assert load_serve_config(conf).max_bots_per_user == 5
    conf.write_text("max_bots_per_user = 0\n")
    with pytest.raises(UserError, match="max_bots_per_user"):
        load_serve_config(conf)


def test_a_real_server_applies_the_key(tmp_path):
    data = tmp_path / "serve"
    proc = fake_serve_process(data, max_bots_per_user=2)
    url = proc.start(cwd=tmp_path)
    try:
        engine = open_database(load_serve_config(None, data_dir=data))
        token = add_user(engine, "alice")
        engine.dispose()
        with httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {token}"}) as api:
            codes = [api.post("/qos/bots", json={"infrastructure": "nd", "n_tasks": 4}).status_code
                     for _ in range(3)]
            assert codes == [201, 201, 409]
    finally:
        proc.stop()
