"""The dashboard's pages (issue 21), in process over the in-memory manager: login sets an HttpOnly,
SameSite=Strict session cookie stored only as a digest; a wrong token is 401 and sets nothing;
every page needs a session; every POST needs the session's CSRF token; the cookie never authorises
the JSON API; a user's page shows only their leases; every value is HTML-escaped."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from skylease.runtime.leases.api import LeaseRequest, LeaseView
from skylease.service.auth import token_digest
from skylease.service.db import web_sessions
from skylease.service.leases_api import create_app
from skylease.service.web.pages import COOKIE

from .web import HTML, csrf_of, login

BE = LeaseRequest(nodes=1, duration=600)


@pytest.fixture
def client(manager, engine):
    with TestClient(create_app(manager, engine), raise_server_exceptions=False) as c:
        yield c


def test_login_sets_an_httponly_strict_session_cookie(client, tokens):
    page = client.get("/login")
    assert page.status_code == 200
    assert '<label for="token">Token</label>' in page.text and '<input id="token"' in page.text
    r = login(client, tokens["alice"])
    assert r.status_code == 303 and r.headers["location"] == "/leases"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    attrs = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attrs and "secure" not in attrs  # plain HTTP here
    assert client.get("/leases", headers=HTML).status_code == 200
    over_https = login(TestClient(client.app, base_url="https://testserver"), tokens["alice"])
    assert "secure" in {a.strip().lower() for a in over_https.headers["set-cookie"].split(";")}


def test_a_wrong_token_is_401_and_sets_no_cookie(client, tokens):
    for token in ("", "not-a-token", tokens["alice"] + "x"):
        r = login(client, token)
        assert r.status_code == 401 and "invalid token" in r.text and "set-cookie" not in r.headers
    assert client.get("/leases", headers=HTML, follow_redirects=False).status_code == 303


@pytest.mark.parametrize("path", ["/", "/leases", "/hosts"])
def test_pages_redirect_to_login_without_a_session(client, path):
    r = client.get(path, headers=HTML, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] in ("/login", "/leases")
    client.cookies.set(COOKIE, "forged-session-id")
    r = client.get("/leases", headers=HTML, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login"


def test_a_post_without_or_with_a_wrong_csrf_token_is_403(client, manager, tokens):
    lease = manager.request("alice", BE)
    login(client, tokens["alice"])
    for data in ({}, {"csrf": ""}, {"csrf": "0" * 64}):
        assert client.post(f"/leases/{lease.id}/cancel", data=data, follow_redirects=False).status_code == 403
        assert client.post("/logout", data=data, follow_redirects=False).status_code == 403
    assert manager.lease(None, lease.id).state == "queued"  # nothing was cancelled
    # another session's CSRF token is not this one's
    other = TestClient(client.app)
    login(other, tokens["alice"])
    theirs = csrf_of(other.get("/leases", headers=HTML).text)
    assert client.post(f"/leases/{lease.id}/cancel", data={"csrf": theirs},
                       follow_redirects=False).status_code == 403
    mine = csrf_of(client.get("/leases", headers=HTML).text)
    r = client.post(f"/leases/{lease.id}/cancel", data={"csrf": mine}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/leases"
    assert manager.lease(None, lease.id).state == "cancelled"


def test_a_session_cookie_does_not_authorise_the_json_api(client, manager, tokens):
    lease = manager.request("alice", BE)
    login(client, tokens["alice"])
    assert client.cookies.get(COOKIE)
    for method, path in (("GET", "/leases"), ("GET", "/queue"), ("GET", f"/leases/{lease.id}"),
                         ("DELETE", f"/leases/{lease.id}"), ("POST", "/leases"), ("GET", "/hosts")):
        r = client.request(method, path, json={"duration": 60})
        assert r.status_code == 401 and r.json()["detail"].startswith("missing bearer token"), (method, path)
    assert manager.lease(None, lease.id).state == "queued"
    # the bearer API is as before, even for a client that asks for HTML
    r = client.get("/leases", headers={**HTML, "Authorization": f"Bearer {tokens['alice']}"})
    assert r.status_code == 200 and [v["id"] for v in r.json()] == [lease.id]


def test_logout_ends_the_session(client, engine, tokens):
    login(client, tokens["alice"])
    sid = client.cookies.get(COOKIE)
    r = client.post("/logout", data={"csrf": csrf_of(client.get("/leases", headers=HTML).text)},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login"
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(web_sessions)).scalar_one() == 0
    client.cookies.set(COOKIE, sid)  # the old cookie, replayed
    assert client.get("/leases", headers=HTML, follow_redirects=False).status_code == 303


def test_a_users_page_does_not_list_anothers_leases(client, manager, tokens):
    a = manager.request("alice", BE)
    b = manager.request("bob", LeaseRequest(nodes=2, duration=900))
    login(client, tokens["alice"])
    page = client.get("/leases", headers=HTML).text
    assert f'action="/leases/{a.id}/cancel"' in page and f'action="/leases/{b.id}/cancel"' not in page
    assert "bob" not in page
    # nor can alice cancel bob's lease through the page
    r = client.post(f"/leases/{b.id}/cancel", data={"csrf": csrf_of(page)}, follow_redirects=False)
    assert r.status_code == 404 and manager.lease(None, b.id).state == "queued"
    r = client.post(f"/leases/{2**64}/cancel", data={"csrf": csrf_of(page)}, follow_redirects=False)
    assert r.status_code == 404
    assert client.get("/hosts", headers=HTML).status_code == 403
    root = TestClient(client.app)
    login(root, tokens["root"])
    page = root.get("/leases", headers=HTML).text
    assert f'action="/leases/{a.id}/cancel"' in page and f'action="/leases/{b.id}/cancel"' in page
    hosts = root.get("/hosts", headers=HTML)
    assert hosts.status_code == 200 and "node3" in hosts.text


def test_the_session_id_is_stored_only_as_a_digest(client, engine, tokens):
    login(client, tokens["alice"])
    sid = client.cookies.get(COOKIE)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(web_sessions)).all()
    assert len(rows) == 1 and rows[0].id_sha256 == token_digest(sid)
    assert all(sid not in str(v) for v in rows[0])


def test_every_value_is_html_escaped(client, manager, tokens):
    evil = "<script>alert(1)</script>"
    with manager._lock:
        manager._leases[7] = LeaseView(id=7, owner=evil, type="best-effort", submit=0, requested_start=None,
                                       requested_duration=60, nodes=1, image=None, start=None, end=None,
                                       state="queued", reason=f'"><img src=x onerror=alert(2)>{evil}')
    login(client, tokens["root"])
    page = client.get("/leases", headers=HTML).text
    assert "<script>alert" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_pages_are_not_in_the_openapi_document(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert not {"/login", "/logout", "/", "/leases/{lease_id}/cancel"} & set(paths)
    assert set(paths["/leases"]) == {"get", "post"}


def test_removing_a_user_ends_their_sessions(client, engine, tokens):
    from skylease.service.auth import remove_user

    login(client, tokens["alice"])
    remove_user(engine, "alice")
    assert client.get("/leases", headers=HTML, follow_redirects=False).status_code == 303
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(web_sessions)).scalar_one() == 0


def test_the_request_form_requests_a_lease_as_the_json_api_would(client, manager, tokens):
    """The form's fields are a lease request's keys, checked as a JSON body is: a good request is a
    lease owned by the caller (303 to its page); a mistake is 422 naming the field, the form kept;
    a refusal is 409 with the scheduler's reason; no CSRF token, no lease."""
    assert client.get("/leases/new", headers=HTML, follow_redirects=False).status_code == 303  # no session
    login(client, tokens["alice"])
    form = client.get("/leases/new", headers=HTML)
    assert form.status_code == 200
    for name in ("type", "nodes", "duration", "start_in", "start", "cpu", "memory", "image", "preemptible",
                 "command"):
        assert f'<label for="f-{name}">' in form.text and f'id="f-{name}" name="{name}"' in form.text
    csrf = csrf_of(form.text)
    assert 'href="/leases/new"' in client.get("/leases", headers=HTML).text

    good = {"csrf": csrf, "type": "advance-reservation", "nodes": "2", "duration": "1800", "start_in": "600",
            "cpu": "", "memory": "", "preemptible": ""}
    assert client.post("/leases/new", data={**good, "csrf": ""}, follow_redirects=False).status_code == 403
    assert manager.leases(None) == []
    r = client.post("/leases/new", data=good, follow_redirects=False)
    assert r.status_code == 303
    lease = manager.leases(None)[0]
    assert r.headers["location"] == f"/leases/{lease.id}"
    assert (lease.owner, lease.type, lease.nodes, lease.requested_duration) == \
        ("alice", "advance-reservation", 2, 1800)

    for fields, field, says in (({"duration": "1.5"}, "duration", "whole number"),
                                ({"nodes": "two"}, "nodes", "whole number"),
                                ({"duration": ""}, "duration", "required"),
                                ({"preemptible": "maybe"}, "preemptible", "yes, no or blank")):
        r = client.post("/leases/new", data={**good, **fields}, follow_redirects=False)
        assert r.status_code == 422, fields
        alert = re.search(r'<p class="error" role="alert" id="form-error">([^<]*)</p>', r.text)
        assert alert and alert.group(1).startswith(f"{field}: ") and says in alert.group(1), r.text
        assert re.search(rf'id="f-{field}" name="{field}" [^>]*aria-invalid="true"', r.text)
        assert 'value="1800"' in r.text or field == "duration"  # the values given are kept
    r = client.post("/leases/new", data={**good, "type": "best-effort"}, follow_redirects=False)
    assert r.status_code == 422 and "takes no start" in r.text
    evil = '"><script>alert(1)</script>'
    r = client.post("/leases/new", data={**good, "image": evil}, follow_redirects=False)
    assert r.status_code == 422 and "<script>alert" not in r.text and "&lt;script&gt;" in r.text
    assert len(manager.leases(None)) == 1  # no mistake made a lease

    r = client.post("/leases/new", data={**good, "nodes": "5"}, follow_redirects=False)  # 4 nodes here
    assert r.status_code == 409 and "refused" in r.text


#: The only routes anyone may reach without a token or a session.
OPEN = {"/health", "/login", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/static", "/", ""}


def test_every_route_but_the_open_ones_needs_a_token_or_a_session(manager, engine):
    """Every route of the app (the API, the pages, the QoS routes, whatever comes later), asked
    without credentials as an API client and as a browser: 401, or 303 to the login page, or 403."""
    from starlette.routing import Mount

    from skylease.runtime.qos.service import QoSService

    app = create_app(manager, engine, QoSService(engine))
    client = TestClient(app, raise_server_exceptions=False)
    def flat(routes):  # (an included router is one entry: its routes are inside it)
        for route in routes:
            inner = getattr(route, "original_router", None)
            yield from flat(inner.routes) if inner is not None else (route,)

    seen = 0
    for route in flat(app.routes):
        path = getattr(route, "path", "")
        if path in OPEN or isinstance(route, Mount):
            continue
        url = re.sub(r"\{[^}]+\}", "1", path)
        for method in sorted(getattr(route, "methods", None) or {"GET"}):
            if method in ("HEAD", "OPTIONS"):
                continue
            for headers in ({}, HTML):
                r = client.request(method, url, headers=headers, json={}, follow_redirects=False)
                to_login = r.status_code == 303 and r.headers["location"] == "/login"
                assert r.status_code in (401, 403) or to_login, (method, path, headers, r.status_code)
                seen += 1
    assert seen >= 40, seen
