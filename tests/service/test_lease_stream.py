"""A lease's event stream (``GET /leases/{id}/events``, service/lease_stream.py) on a real uvicorn
server over the in-memory lease manager: the lease's events as server-sent events, each once, the
new ones as they come, until the lease is over; ``Last-Event-ID`` skips what was seen; a token is
needed and reaches only its owner's leases (an administrator's: all). And the server's warning keys
(service/warning_config.py): their mistakes are one line naming the key."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from skylease.model.errors import UserError
from skylease.service.auth import add_user
from skylease.service.db import create_schema, engine_for
from skylease.service.leases_api import create_app
from skylease.service.server import load_serve_config
from skylease.service.warning_config import warning_config

from .api_fake import FakeManager


@pytest.fixture
def served(tmp_path, app_server):
    engine = engine_for(None, tmp_path / "serve")
    create_schema(engine)
    tokens = {u: add_user(engine, u, admin=u == "root") for u in ("alice", "bob", "root")}
    manager = FakeManager(nodes=4)
    srv = app_server(create_app(manager, engine, lease_stream_s=10))
    yield srv.url, tokens, manager
    srv.stop()
    engine.dispose()


def _frames(url: str, token: str, lid: int, **headers: str) -> list[tuple[str, str, dict]]:
    out, ident, name = [], None, None
    with httpx.stream("GET", f"{url}/leases/{lid}/events", timeout=20,
                      headers={"Authorization": f"Bearer {token}", **headers}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.read()
        for line in r.iter_lines():
            if line.startswith("id: "):
                ident = line[4:]
            elif line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                out.append((ident, name, json.loads(line[6:])))
    return out


def test_the_stream_sends_each_event_once_the_new_ones_as_they_come_and_ends_with_the_lease(served):
    url, tokens, manager = served
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    r = httpx.post(f"{url}/leases", json={"type": "advance-reservation", "start_in": 50, "duration": 10},
                   headers=alice)
    assert r.status_code == 201, r.text
    lid = r.json()["id"]

    def later() -> None:  # (while the stream is open: a new event comes through it, then it ends)
        with manager._lock:
            v = manager._leases[lid]
            new = {"time": 120, "event": "before-end", "end": 160}
            manager._leases[lid] = v.model_copy(update={"events": [*v.events, new]})
            manager.changes.bump()
        httpx.delete(f"{url}/leases/{lid}", headers=alice)

    timer = threading.Timer(0.5, later)
    timer.start()
    try:
        got = _frames(url, tokens["alice"], lid)
    finally:
        timer.join()
    view = httpx.get(f"{url}/leases/{lid}", headers=alice).json()
    assert view["state"] == "cancelled"
    assert [ev for _i, _n, ev in got] == view["events"] and [i for i, _n, _e in got] == ["1", "2", "3"]
    assert got[-1][1] == "before-end" and got[-1][2] == {"time": 120, "event": "before-end", "end": 160}
    # reconnected after the second: the third only; an administrator sees it too
    assert [i for i, _n, _e in _frames(url, tokens["alice"], lid, **{"Last-Event-ID": "2"})] == ["3"]
    assert len(_frames(url, tokens["root"], lid)) == 3


def test_the_stream_needs_a_token_and_reaches_only_its_owners_leases(served):
    url, tokens, _manager = served
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    r = httpx.post(f"{url}/leases", json={"duration": 10}, headers=alice)
    lid = r.json()["id"]
    r = httpx.get(f"{url}/leases/{lid}/events", timeout=10)
    assert r.status_code == 401 and r.json()["detail"].startswith("missing bearer token")
    for who, path in (("bob", f"/leases/{lid}/events"), ("alice", "/leases/999/events")):
        r = httpx.get(url + path, headers={"Authorization": f"Bearer {tokens[who]}"}, timeout=10)
        assert r.status_code == 404 and r.json()["detail"].startswith("no lease"), r.text
    r = httpx.get(f"{url}/leases/{lid}/events", headers={"Authorization": f"Bearer {tokens['alice']}",
                                                         "Last-Event-ID": "x"}, timeout=10)
    assert r.status_code == 422 and "last-event-id" in r.json()["detail"], r.text


def test_the_warning_keys_mistakes_are_one_line_naming_the_key(tmp_path):
    def config(text: str):
        path = tmp_path / "serve.toml"
        path.write_text(text)
        return load_serve_config(path)

    with pytest.raises(UserError) as e:
        config('webhook_prefixes = ["http://127.0.0.1:9000"]\n')
    assert e.value.field == "webhook_prefixes[0]" and e.value.line == 1 and "ending with '/'" in str(e.value)
    with pytest.raises(UserError) as e:
        warning_config(config('webhook_prefixes = ["http://127.0.0.1:9000/"]\n'))
    assert e.value.field == "webhook_prefixes" and "without webhook_secret_file" in str(e.value)
    (tmp_path / "short").write_text("short\n")
    with pytest.raises(UserError) as e:
        warning_config(config('webhook_prefixes = ["http://127.0.0.1:9000/"]\n'
                              'webhook_secret_file = "short"\n'))
    assert e.value.field == "webhook_secret_file" and "16 characters" in str(e.value)
    with pytest.raises(UserError) as e:
        warning_config(config('webhook_secret_file = "missing"\n'))
    assert e.value.field == "webhook_secret_file" and "not found" in str(e.value)
    (tmp_path / "good").write_text("0123456789abcdef-good\n")
    got = warning_config(config('before_end = 600\nwebhook_prefixes = ["http://127.0.0.1:9000/"]\n'
                                'webhook_secret_file = "good"\n'))
    assert (got.before_end, got.prefixes) == (600, ("http://127.0.0.1:9000/",))
    assert got.secret == b"0123456789abcdef-good"
