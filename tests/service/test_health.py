"""The service's health (issue 33), in process over the in-memory manager and a real QoSService:
``/health`` is 200 while every vital part works and 503 with the reasons once one has stopped; a
route answers 503 with the reason exactly when it needs a stopped part (the lease routes the lease
manager, the QoS routes and pages SpeQuloS's threads, the runs' the runs' sweep); every dashboard
page carries the banner, escaped; the OpenAPI document says so."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from skylease import __version__
from skylease.runtime.health import Unavailable
from skylease.runtime.qos.service import QoSService
from skylease.service.health import LEASES, NEEDS, QOS_DEPOSITS, QOS_SWEEP, RUNS_SWEEP, Vitals
from skylease.service.leases_api import create_app

from .api_fake import FakeManager
from .web import HTML, csrf_of, login

BANNER = "The service is degraded: "


@pytest.fixture
def vitals() -> Vitals:
    return Vitals()


@pytest.fixture
def client(manager, engine, vitals):
    with TestClient(create_app(manager, engine, QoSService(engine), vitals=vitals),
                    raise_server_exceptions=False) as c:
        yield c


def stop(part: str, manager: FakeManager, vitals: Vitals) -> str:
    """Part ``part`` of the server dies; the reason it then gives."""
    if part == LEASES:
        manager.failed = "the lease manager stopped at 2025-01-01T00:00:00Z: RuntimeError: <b>boom</b>"
        return manager.failed
    vital = vitals.vital(part, f"the {part}")
    vital.died(RuntimeError("<b>boom</b>"))
    return vital.failure() or ""


def operations(client: TestClient) -> list[tuple[str, str]]:
    doc = client.get("/openapi.json").json()
    return [(method.upper(), re.sub(r"\{[^}]+\}", "1", path)) for path, item in doc["paths"].items()
            for method in item if method in ("get", "post", "put", "patch", "delete")]


def test_health_is_ok_while_every_part_works(client, vitals):
    vitals.vital(QOS_SWEEP, "the QoS sweep")
    r = client.get("/health")
    assert (r.status_code, r.json()) == (200, {"ok": True, "now": 100, "version": __version__})


@pytest.mark.parametrize("part", [LEASES, QOS_SWEEP, QOS_DEPOSITS, RUNS_SWEEP])
def test_a_route_answers_503_exactly_when_it_needs_the_part_that_stopped(client, manager, vitals, tokens,
                                                                         part):
    for other in {QOS_SWEEP, QOS_DEPOSITS, RUNS_SWEEP} - {part}:
        vitals.vital(other, f"the {other}")  # (alive)
    reason = stop(part, manager, vitals)
    r = client.get("/health")
    assert r.status_code == 503
    assert r.json() == {"ok": False, "now": 100, "version": __version__, "detail": reason}
    auth = {"Authorization": f"Bearer {tokens['alice']}"}
    ops = operations(client)
    assert len(ops) >= 20
    refused = []
    for method, path in ops:
        if path == "/health":
            continue
        body = {"nodes": 1, "duration": 60} if method == "POST" else None
        r = client.request(method, path, headers=auth, json=body)
        if part in NEEDS.get(path.strip("/").split("/")[0], ()):
            assert (r.status_code, r.json()) == (503, {"detail": reason}), (method, path, r.text)
            refused.append(path.split("/")[1])
        else:
            assert r.status_code != 503, (method, path, r.text)
    want = {LEASES: {"leases", "queue", "hosts"}, QOS_SWEEP: {"qos"}, QOS_DEPOSITS: {"qos"},
            RUNS_SWEEP: {"runs"}}[part]
    assert set(refused) == want


def test_every_page_carries_the_banner_and_a_page_that_needs_the_part_is_503(client, manager, vitals, tokens):
    assert login(client, tokens["alice"]).status_code == 303
    whole = client.get("/leases", headers=HTML)
    assert whole.status_code == 200 and BANNER not in whole.text and "degraded" not in whole.text
    vitals.vital(QOS_SWEEP, "the QoS sweep")  # (alive: the server runs SpeQuloS)
    reason = stop(RUNS_SWEEP, manager, vitals)
    shown = BANNER + reason.replace("<b>", "&lt;b&gt;").replace("</b>", "&lt;/b&gt;")
    assert "<b>boom" not in shown
    for path, status in [("/leases", 200), ("/leases/new", 200), ("/bots", 200), ("/account", 200),
                         ("/runs", 503), ("/login", 200)]:
        r = client.get(path, headers=HTML)
        assert r.status_code == status and shown in r.text and "<b>boom" not in r.text, (path, r.status_code)
    r = TestClient(client.app).get("/runs", headers=HTML, follow_redirects=False)  # no session: still told
    assert r.status_code == 503 and shown in r.text
    offered = re.findall(r'<a href="(/[a-z]+)">', r.text.split("<main", 1)[1])  # (the pages that still work)
    assert offered == ["/leases", "/bots"], offered


def test_a_manager_that_stops_after_the_guard_looked_is_503_too(engine, tokens):
    """The lease manager refuses with Unavailable (its thread died between the guard's look and the
    call): the API answers 503 with the reason, the dashboard's form a 503 page."""
    reason = "the lease manager stopped at 2025-01-01T00:00:00Z: RuntimeError: boom"

    class Stopping(FakeManager):
        def request(self, owner, req):
            raise Unavailable(reason)

    with TestClient(create_app(Stopping(), engine), raise_server_exceptions=False) as client:
        r = client.post("/leases", json={"nodes": 1, "duration": 60},
                        headers={"Authorization": f"Bearer {tokens['alice']}"})
        assert (r.status_code, r.json()) == (503, {"detail": reason})
        assert login(client, tokens["alice"]).status_code == 303
        form = client.get("/leases/new", headers=HTML).text
        r = client.post("/leases/new", data={"csrf": csrf_of(form), "type": "best-effort", "duration": "60"},
                        headers=HTML, follow_redirects=False)
        assert r.status_code == 503 and reason in r.text


def test_the_openapi_document_says_503(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert "503" in paths["/health"]["get"]["responses"]
    for path in ("/leases", "/queue", "/qos/bots", "/runs"):
        for op in paths[path].values():
            assert "503" in op["responses"], path
