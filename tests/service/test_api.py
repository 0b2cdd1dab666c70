"""The lease manager's HTTP API (issue 19), in process, over a small in-memory manager: every route
needs a token, users see only their own leases, bad bodies are 422/413/415 with a reason and never
a 500, Haizea XML lease elements are accepted, an unexpected error is a generic 500."""

from __future__ import annotations

import json
import logging
import re

import pytest
from fastapi.testclient import TestClient

from skylease.runtime.leases.api import LeaseRequest
from skylease.service.leases_api import MAX_BODY_BYTES, create_app

BE = {"nodes": 1, "duration": 600}


@pytest.fixture
def client(manager, engine):
    """The app with both services, as `skylease serve` makes it (the QoS routes on a real
    QoSService: the token and fuzz tests cover them too)."""
    from skylease.runtime.qos.service import QoSService

    with TestClient(create_app(manager, engine, QoSService(engine)), raise_server_exceptions=False) as c:
        yield c


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def no_traceback(r) -> None:
    assert "Traceback" not in r.text and 'File "' not in r.text, r.text


# -- tokens -----------------------------------------------------------------------------------------
def operations(client: TestClient) -> list[tuple[str, str]]:
    """Every (method, path) of the OpenAPI document, path parameters filled in."""
    doc = client.get("/openapi.json").json()
    return [(method.upper(), re.sub(r"\{[^}]+\}", "1", path)) for path, item in doc["paths"].items()
            for method in item if method in ("get", "post", "put", "patch", "delete")]


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", "Bearer ", "Basic YWxpY2U6eA==", "Token abc",
                                    "Bearer " + "x" * 5000])
def test_every_route_but_health_needs_a_valid_token(client, tokens, header):
    ops = operations(client)
    assert {("GET", "/leases"), ("POST", "/leases"), ("GET", "/leases/1"), ("DELETE", "/leases/1"),
            ("GET", "/queue"), ("GET", "/hosts"), ("GET", "/health")} <= set(ops)
    headers = {} if header is None else {"Authorization": header}
    for method, path in ops:
        r = client.request(method, path, headers=headers, json=BE if method == "POST" else None)
        if path == "/health":
            assert r.status_code == 200, r.text
            continue
        assert r.status_code == 401, (method, path, r.status_code, r.text)
        assert r.headers["www-authenticate"].startswith("Bearer"), (method, path)
        assert isinstance(r.json()["detail"], str)


def test_the_openapi_document_declares_the_bearer_scheme(client):
    doc = client.get("/openapi.json").json()
    schemes = doc["components"]["securitySchemes"]
    assert [s for s in schemes.values() if s == {**s, "type": "http", "scheme": "bearer"}]
    for path, item in doc["paths"].items():
        for method, op in item.items():
            assert bool(op.get("security")) == (path != "/health"), (method, path)
    assert client.get("/docs").status_code == 200 and client.get("/redoc").status_code == 200


def test_docs_and_redoc_load_nothing_from_another_host(client):
    """Swagger UI and ReDoc come from assets inside an installed package; Swagger UI's validator
    badge (an image from its makers' host) is off."""
    for page in ("/docs", "/redoc"):
        r = client.get(page)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert not re.search(r"(?i)(?:https?:)?//[a-z0-9-]+(?:\.[a-z0-9-]+)+", r.text), r.text
        links = re.findall(r'(?:src|href|spec-url)="([^"]+)"', r.text) + re.findall(r"url: '([^']+)'", r.text)
        assert len(links) >= 3, links  # (its script, a style sheet or the favicon, the document)
        for link in links:
            assert link.startswith("/"), (page, link)
            got = client.get(link)
            assert got.status_code == 200 and len(got.content) > 1000, (page, link, got.status_code)
    assert '"validatorUrl": null' in client.get("/docs").text


def test_a_method_a_path_does_not_have_is_405_listing_every_method_it_has(client, tokens):
    """Starlette's 405 names the methods of the one route it tried: the guard lists them all."""
    for path, allowed in [("/leases", "GET, POST"), ("/leases/1", "GET, PATCH, DELETE"),
                          ("/qos/bots", "GET, POST"), ("/runs", "GET, POST"), ("/runs/1/tasks", "GET, POST"),
                          ("/health", "GET")]:
        for method in (m for m in ("OPTIONS", "PUT", "PATCH") if m not in allowed):
            r = client.request(method, path, headers=auth(tokens["alice"]))
            assert r.status_code == 405 and r.headers["allow"] == allowed, (method, path, r.headers)
            assert r.json() == {"detail": "Method Not Allowed"}


def test_health_needs_no_token(client, manager):
    r = client.get("/health")
    assert r.status_code == 200
    assert r.json()["ok"] is True and r.json()["now"] == manager.now() and r.json()["version"]


# -- owners -----------------------------------------------------------------------------------------
def test_a_user_sees_shows_and_cancels_only_their_own_leases(client, tokens):
    r = client.post("/leases", json=BE, headers=auth(tokens["alice"]))
    assert r.status_code == 201, r.text
    lid = r.json()["id"]
    assert r.json()["owner"] == "alice"
    for who in ("bob",):
        h = auth(tokens[who])
        assert client.get(f"/leases/{lid}", headers=h).status_code == 404
        assert client.delete(f"/leases/{lid}", headers=h).status_code == 404
        assert client.get("/leases", headers=h).json() == []
        assert client.get("/queue", headers=h).json() == []
    h = auth(tokens["alice"])
    assert [v["id"] for v in client.get("/leases", headers=h).json()] == [lid]
    assert [v["id"] for v in client.get("/queue", headers=h).json()] == [lid]
    assert client.get(f"/leases/{lid}", headers=h).json()["state"] == "queued"
    # the admin sees every lease and may cancel it
    admin = auth(tokens["root"])
    client.post("/leases", json=BE, headers=auth(tokens["bob"]))
    assert {v["owner"] for v in client.get("/leases", headers=admin).json()} == {"alice", "bob"}
    r = client.delete(f"/leases/{lid}", headers=admin)
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert client.get(f"/leases/{lid}", headers=h).json()["state"] == "cancelled"


def test_hosts_are_for_administrators(client, tokens):
    r = client.get("/hosts", headers=auth(tokens["alice"]))
    assert r.status_code == 403 and "administrator" in r.json()["detail"]
    r = client.get("/hosts", headers=auth(tokens["root"]))
    assert r.status_code == 200 and [h["name"] for h in r.json()] == ["node0", "node1", "node2", "node3"]


def test_a_missing_lease_is_404_for_everyone(client, tokens):
    for who in ("alice", "root"):
        r = client.get("/leases/99", headers=auth(tokens[who]))
        assert r.status_code == 404 and r.json() == {"detail": "no lease 99"}


# -- bodies -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "ctype", "status", "says"), [
    (b'{"nodes": 0, "duration": 60}', "application/json", 422, "nodes: must be a whole number >= 1"),
    (b'{"nodes": 1}', "application/json", 422, "duration: required"),
    (b'{"nodes": 1, "duration": 60, "colour": "red"}', "application/json", 422, "unknown key 'colour'"),
    (b'{"duration": 60,\n "type": "advance-reservation"}', "application/json", 422, "exactly one of 'start'"),
    (b'{"duration": 1e400}', "application/json", 422, "duration"),
    (b'{"duration": 60, "cpu": NaN}', "application/json", 422, "cpu"),
    (b'{"duration": 60, "image": "../../etc/passwd"}', "application/json", 422, "image"),
    (b'{"duration": 60, "command": "' + b"x" * 5000 + b'"}', "application/json", 422, "command"),
    (b'{"duration": 60, "nodes": "2"}', "application/json", 422, "nodes: must be a whole number >= 1"),
    (b'{"duration": 60, "nodes": true}', "application/json", 422, "nodes: must be a whole number >= 1"),
    (b'{"duration": 60, "nodes": 1.5}', "application/json", 422, "nodes: must be a whole number >= 1"),
    (b'{"duration": 60, "cpu": "1"}', "application/json", 422, "cpu: must be"),
    (b'{"duration": 60, "command": "a\\u0000"}', "application/json", 422, "command: must not contain"),
    (b'{"duration": ' + b"[" * 60000 + b"}", "application/json", 422, "nested more than 32 levels deep"),
    (b'{"duration": ' + b"1" * 5000 + b"}", "application/json", 422, "a number longer than 100 characters"),
    (b'{"duration": ' + b"1" * 5000 + b"}", "", 422, "a number longer than 100 characters"),
    (b'{"duration": ' + b"[" * 60000 + b"}", "application/x-www-form-urlencoded", 422, "nested more than 32"),
    (b'{"duration": 60, "x": "\xff"}', "application/json", 422, "not UTF-8"),
    (b'{"duration": 60, "type": "advance-reservation", "start_in": 5, "start": null}', "application/json",
     201, None),
    (b'{"duration": 60, "real_duration": 120}', "application/json", 201, None),
    (b'{"duration": 60, "vm": true}', "application/json", 422, "vm: a VM lease needs an image"),
    (b'{"duration": 60, "vm": true, "image": "g", "command": "true"}', "application/json", 422,
     "vm: a VM lease takes no command"),
    (b'{"duration": 60, "vm": 1, "image": "g"}', "application/json", 422, "vm:"),
    (b'{"duration": 60, "vm": true, "image": "g"}', "application/json", 201, None),
    (b'{"duration": ', "application/json", 422, "not valid JSON"),
    (b"[1, 2]", "application/json", 422, "must be a JSON object"),
    (b'"x"', "application/json", 422, "must be a JSON object"),
    (b"", "application/json", 422, "not valid JSON"),
    (b"\xff\xfe{", "application/json", 422, "not UTF-8"),
    (b'{"duration": 60}', "image/png", 415, "unsupported content type"),
    (b"<lease", "application/xml", 422, "not well-formed XML"),
    (b"<workload/>", "application/xml", 422, "not <lease> or <lease-request>"),
    (b'<!DOCTYPE x [<!ENTITY a "aaaa">]><lease/>', "application/xml", 422, "DOCTYPE"),
    (b'<lease><nodes><node-set numnodes="inf"/></nodes></lease>', "application/xml", 422, "numnodes"),
    (b'<lease><nodes><node-set numnodes="1"/></nodes><start/><duration time="x"/></lease>', "application/xml",
     422, "duration"),
], ids=lambda v: v if isinstance(v, int | str) and not isinstance(v, bytes) else None)
def test_a_bad_body_is_answered_with_its_reason(client, tokens, body, ctype, status, says):
    r = client.post("/leases", content=body, headers={**auth(tokens["alice"]), "Content-Type": ctype})
    assert r.status_code == status, r.text
    if says is None:  # (well-formed: the rules at the edges accept what they should)
        return
    detail = r.json()["detail"]
    assert isinstance(detail, str) and says in detail and "\n" not in detail, detail
    no_traceback(r)


def test_a_body_over_64_kib_is_413(client, tokens):
    h = {**auth(tokens["alice"]), "Content-Type": "application/json"}
    big = json.dumps({**BE, "command": "x" * MAX_BODY_BYTES}).encode()
    r = client.post("/leases", content=big, headers=h)
    assert r.status_code == 413 and "64 KiB" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit holds while the body is read
        for _ in range(20):
            yield b" " * 8192

    for path in ("/leases", "/qos/bots", "/runs", "/qos/accounts/alice/deposits"):
        r = client.post(path, content=chunks(), headers=h)
        assert r.status_code == 413 and "64 KiB" in r.json()["detail"], (path, r.text)


def test_a_refused_request_is_409_with_the_reason(client, tokens, manager):
    r = client.post("/leases", json={"nodes": 5, "duration": 60}, headers=auth(tokens["alice"]))
    assert r.status_code == 409 and r.json() == {"detail": "asks for 5 nodes; the site has 4"}
    past = {"type": "advance-reservation", "start": manager.now() - 1, "duration": 60}
    r = client.post("/leases", json=past, headers=auth(tokens["alice"]))
    assert r.status_code == 409 and "before now" in r.json()["detail"]


@pytest.mark.parametrize("path", ["/leases/-1", "/leases/x", "/leases/1e3", f"/leases/{2**64}"])
def test_a_bad_lease_id_is_422(client, tokens, path):
    for method in ("GET", "DELETE"):
        r = client.request(method, path, headers=auth(tokens["alice"]))
        assert r.status_code == 422 and r.json()["detail"].startswith("path.lease_id: "), r.text


def test_an_unexpected_error_is_a_generic_500_and_logged_on_the_server(client, tokens, manager, caplog):
    def boom(owner, req):
        raise RuntimeError("secret internals /var/lib/x")

    manager.request = boom
    with caplog.at_level(logging.ERROR, logger="skylease.service"):
        r = client.post("/leases", json=BE, headers=auth(tokens["alice"]))
    assert r.status_code == 500
    assert r.json() == {"detail": "internal server error (the server's log has the details)"}
    assert "secret" not in r.text
    no_traceback(r)
    assert "secret internals" in caplog.text and "Traceback" in caplog.text


# -- XML --------------------------------------------------------------------------------------------
def lease_elements(text: str) -> list[str]:
    return re.findall(r"<lease-request\b.*?</lease-request>", text, flags=re.S)


def test_haizea_lease_elements_are_accepted(client, tokens, shared_data):
    path = shared_data / "lwf" / "scenarios" / "preemption.lwf"
    be, ar = lease_elements(path.read_text())
    h = {**auth(tokens["alice"]), "Content-Type": "application/xml"}
    lease = re.search(r"<lease[\s>].*?</lease>", be, flags=re.S).group(0)  # the bare <lease> element too
    for body in (be, lease):
        r = client.post("/leases", content=body.encode(), headers=h)
        assert r.status_code == 201, r.text
        v = r.json()
        assert (v["type"], v["nodes"], v["requested_duration"], v["image"]) == ("best-effort", 1, 3600,
                                                                                 "foobar1.img")
    r = client.post("/leases", content=ar.encode(), headers=h)
    assert r.status_code == 201, r.text
    v = r.json()
    assert (v["type"], v["nodes"], v["requested_start"], v["requested_duration"]) == (
        "advance-reservation", 4, 1800, 1800)


def test_xml_maps_to_the_same_request_as_json():
    from skylease.service.bodies import lease_request_from_json, lease_request_from_xml

    xml = ('<lease id="7" preemptible="false"><nodes><node-set numnodes="3"><res type="CPU" amount="50"/>'
           '<res type="Memory" amount="512"/><res type="Disk" amount="100"/></node-set></nodes>'
           '<start><exact time="01:00:00.00"/></start><duration time="00:10:30.50"/>'
           '<software><disk-image id="img.img" size="1024"/></software></lease>')
    want = LeaseRequest(type="advance-reservation", nodes=3, cpu=0.5, memory=512, disk=100, start=3600,
                        duration=631, image="img.img", image_size=1024, preemptible=False)
    assert lease_request_from_xml(xml) == want
    assert lease_request_from_json(want.model_dump_json()) == want
    now = xml.replace('<start><exact time="01:00:00.00"/></start>', "<start><now/></start>")
    assert lease_request_from_xml(now).type == "immediate"


def test_content_type_may_be_left_to_the_text(client, tokens):
    """curl -d sends application/x-www-form-urlencoded: the text says whether it is XML or JSON."""
    r = client.post("/leases", content=json.dumps(BE).encode(),
                    headers={**auth(tokens["alice"]), "Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 201, r.text
