"""The runs' HTTP API (issue 21), in process on a real database: every route needs a token, a user
reaches only their own runs (another's is 404, as a missing one), an administrator reads all; bad
bodies are 422 (or 409, 413) with the reason and never a 500; GET /runs and /runs/{id} are pages for
a browser and JSON for a client with a token."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from skylease.service.leases_api import create_app

from .conftest import three_users

RUN = {"name": "jobs.txt", "command": "skylease run jobs.txt", "n_tasks": 5}


@pytest.fixture
def client(manager, both_databases):
    with TestClient(create_app(manager, both_databases), raise_server_exceptions=False) as c:
        yield c, three_users(both_databases)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_every_runs_route_needs_a_token(client):
    c, _ = client
    for method, path in (("POST", "/runs"), ("GET", "/runs"), ("GET", "/runs/1"), ("POST", "/runs/1/tasks"),
                         ("POST", "/runs/1/finish"), ("GET", "/runs/1/tasks")):
        r = c.request(method, path, json={} if method == "POST" else None)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer"), (method, path)


def test_a_run_reported_and_read_back_by_its_owner_only(client):
    c, tokens = client
    a, b, root = auth(tokens["alice"]), auth(tokens["bob"]), auth(tokens["root"])
    r = c.post("/runs", json=RUN, headers=a)
    assert r.status_code == 201, r.text
    rid = r.json()["id"]
    assert (r.json()["owner"], r.json()["state"], r.json()["queued"]) == ("alice", "running", 5)
    rows = [{"task": 0, "status": "done", "label": "sleep 1"},
            {"task": 3, "status": "failed", "exit_code": 3, "stderr_tail": "boom"},
            {"task": 1, "status": "running", "host": "0", "pool": "local"}]
    r = c.post(f"/runs/{rid}/tasks", json={"rows": rows}, headers=a)
    assert r.status_code == 200 and (r.json()["done"], r.json()["failed"], r.json()["running"]) == (1, 1, 1)
    assert [t["task"] for t in c.get(f"/runs/{rid}/tasks", headers=a).json()] == [3, 1, 0]
    assert [t["task"] for t in c.get(f"/runs/{rid}/tasks?offset=1&limit=1", headers=a).json()] == [1]
    # bob: not found, as a missing run, for reading and writing alike
    for method, path, body in (("GET", f"/runs/{rid}", None), ("GET", f"/runs/{rid}/tasks", None),
                               ("POST", f"/runs/{rid}/tasks", {"rows": rows}),
                               ("POST", f"/runs/{rid}/finish", {"state": "done"})):
        r = c.request(method, path, json=body, headers=b)
        assert r.status_code == 404 and r.json() == {"detail": f"no run {rid}"}, (method, path)
    assert c.get("/runs", headers=b).json() == []
    assert c.get("/runs/999", headers=a).status_code == 404
    # the administrator reads every run; only its owner writes to it
    assert [x["id"] for x in c.get("/runs", headers=root).json()] == [rid]
    assert c.get(f"/runs/{rid}", headers=root).json()["owner"] == "alice"
    assert c.post(f"/runs/{rid}/finish", json={"state": "done"}, headers=root).status_code == 404
    r = c.post(f"/runs/{rid}/finish", json={"state": "failed"}, headers=a)
    assert r.status_code == 200 and r.json()["state"] == "failed" and r.json()["ended"] is not None


@pytest.mark.parametrize(("path", "body", "status", "says"), [
    ("/runs", {**RUN, "n_tasks": 0}, 422, "n_tasks: Input should be greater than or equal to 1"),
    ("/runs", {**RUN, "n_tasks": 10**7}, 422, "n_tasks: Input should be less than or equal to 1000000"),
    ("/runs", {**RUN, "name": "x" * 201}, 422, "name: String should have at most 200 characters"),
    ("/runs", {**RUN, "colour": "red"}, 422, "colour: Extra inputs are not permitted"),
    ("/runs", {**RUN, "name": "a\x00b"}, 422, "name: must not contain control characters: U+0000"),
    ("/runs", {**RUN, "name": "a\nb"}, 422, "name: must not contain control characters: U+000A"),
    ("/runs", {**RUN, "command": "a\x1bb"}, 422, "command: must not contain control characters: U+001B"),
    ("/runs", {**RUN, "n_tasks": "5"}, 422, "n_tasks: Input should be a valid integer"),
    ("RUN/tasks", {"rows": [{"task": 5, "status": "done"}]}, 409, "task 5 is not in this run of 5 tasks"),
    ("RUN/tasks", {"rows": [{"task": 0, "status": "lost"}]}, 422, "rows.0.status: Input should be"),
    ("RUN/tasks", {"rows": [{"task": 0, "status": "done"}] * 1001}, 422,
     "rows: List should have at most 1000 items"),
    ("RUN/tasks", {"rows": [{"task": 0, "status": "failed", "stderr_tail": "x" * 2049}]}, 422,
     "rows.0.stderr_tail: String should have at most 2048 characters"),
    ("RUN/tasks", {"rows": [{"task": i, "status": "failed", "stderr_tail": "x" * 2048} for i in range(40)]},
     413, "request body larger than 64 KiB"),
    ("RUN/finish", {"state": "running"}, 422, "state: Input should be 'done', 'failed' or 'stopped'"),
])
def test_bad_bodies_are_refused_with_the_reason(client, path, body, status, says):
    c, tokens = client
    a = auth(tokens["alice"])
    rid = c.post("/runs", json=RUN, headers=a).json()["id"]
    r = c.post(path.replace("RUN", f"/runs/{rid}"), json=body, headers=a)
    assert r.status_code == status and says in r.json()["detail"], r.text
    assert c.get(f"/runs/{rid}/tasks", headers=a).json() == []  # nothing written


def test_runs_paths_are_pages_for_a_browser_and_json_for_a_client(client):
    c, tokens = client
    rid = c.post("/runs", json=RUN, headers=auth(tokens["alice"])).json()["id"]
    html = {"Accept": "text/html"}
    for path in ("/runs", f"/runs/{rid}", f"/runs/{rid}/live"):
        r = c.get(path, headers=html, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/login", path  # no session: log in
    assert c.get(f"/runs/{rid}", headers={**html, **auth(tokens["alice"])}).json()["id"] == rid
    paths = c.get("/openapi.json").json()["paths"]
    assert "/runs/{run}/live" not in paths and "/runs/{run}/tasks" in paths


def test_the_runs_pages_are_live_by_a_session_only_event_stream(client):
    """The Runs list and a running run's page carry what dashboard.js needs (their fragment, their
    event stream, the version they were rendered at); the streams answer only a dashboard session
    on a same-origin request (not a bearer token) and are not in the OpenAPI document; the
    fragment of an ended run says so (the script stops listening)."""
    import re

    c, tokens = client
    rid = c.post("/runs", json=RUN, headers=auth(tokens["alice"])).json()["id"]
    for path in ("/runs/events", f"/runs/{rid}/events"):
        assert c.get(path).status_code == 403
        assert c.get(path, headers=auth(tokens["alice"])).status_code == 403
    assert c.post("/login", data={"token": tokens["alice"]}, follow_redirects=False).status_code == 303
    html = {"Accept": "text/html"}
    for path in ("/runs/events", f"/runs/{rid}/events"):
        assert c.get(path, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    listing = c.get("/runs", headers=html).text
    assert re.search(r'data-live="/runs/live" data-events="/runs/events" data-version="\d+"', listing)
    page = c.get(f"/runs/{rid}", headers=html).text
    assert re.search(rf'data-live="/runs/{rid}/live\?page=1" data-events="/runs/{rid}/events"', page)
    live = c.get("/runs/live", headers=html)
    assert live.status_code == 200 and "<html" not in live.text and "jobs.txt" in live.text
    assert c.get(f"/runs/{rid}/live", headers=html).headers["x-live-running"] == "1"
    c.post(f"/runs/{rid}/finish", json={"state": "done"}, headers=auth(tokens["alice"]))
    assert c.get(f"/runs/{rid}/live", headers=html).headers["x-live-running"] == "0"
    assert "data-events" not in c.get(f"/runs/{rid}", headers=html).text  # ended: nothing to follow
    assert "/runs/events" not in c.get("/openapi.json").text
