"""Counter-offers on the real lease manager (issue 40, item 1; docs/decisions/lease-offers.md):
``GET /leases/offers`` and ``skylease leases when`` answer the earliest start of a request, and that
is where the lease really starts when it is requested at once (one second earlier is refused, and
the refusal's 409 carries the same earliest start). The app is ``create_app`` over a
:class:`LocalLeaseManager` on a real uvicorn server; nothing here starts a payload (every lease is
far in the future, or refused)."""

from __future__ import annotations

import json

import httpx
import pytest

from skylease.cli import main

from .served_manager import served_manager
from .web import HTML, csrf_of, login

AR_IN = 1000  # alice's reservation starts this many lease seconds after the test begins...
AR_FOR = 500  # ...and lasts this long, on both nodes


@pytest.fixture
def served(tmp_path, app_server, payload_sandbox):
    """Two one-CPU nodes, a lease clock at one lease second per second; alice and bob."""
    yield from served_manager(tmp_path, app_server, payload_sandbox, nodes=2)


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _reserve(url: str, token: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/leases", json={"type": "advance-reservation", "command": "sleep 1", **body},
                      headers=_h(token))


def test_the_offered_start_is_where_the_lease_starts_and_a_second_earlier_is_refused(served):
    url, tokens, manager = served
    r = _reserve(url, tokens["alice"], nodes=2, duration=AR_FOR, start_in=AR_IN)
    assert r.status_code == 201, r.text
    alice_end = r.json()["requested_start"] + AR_FOR
    before = [v.model_dump() for v in manager.leases(None)]
    r = httpx.get(f"{url}/leases/offers", params={"nodes": 2, "duration": 2000}, headers=_h(tokens["bob"]))
    assert r.status_code == 200, r.text
    o = r.json()
    # [now, now + 2000) meets alice's reservation on both nodes: after it, and nothing is free now
    assert o["earliest_start"] == alice_end and not o["immediate"] and o["reason"] is None
    assert o["nodes_free_at"] == {"at": o["now"], "free": 0, "with_preemption": 0}
    assert [v.model_dump() for v in manager.leases(None)] == before  # a dry run: nothing changed
    early = _reserve(url, tokens["bob"], nodes=2, duration=2000, start=alice_end - 1)
    assert early.status_code == 409 and early.json()["detail"].startswith("lease 2 refused: ")
    assert early.json()["earliest_start"] == alice_end  # the refusal says when it would fit
    r = _reserve(url, tokens["bob"], nodes=2, duration=2000, start=o["earliest_start"])
    assert r.status_code == 201 and r.json()["state"] == "scheduled", r.text
    plan = [(p["kind"], p["start"], p["end"]) for p in r.json()["planned"]]
    assert plan == [("vm", alice_end, alice_end + 2000)], plan  # the scheduler's plan: it starts there
    # an immediate lease that cannot start now: refused, with the earliest start after both ARs
    r = httpx.post(f"{url}/leases", json={"type": "immediate", "nodes": 2, "duration": 2000},
                   headers=_h(tokens["alice"]))
    assert r.status_code == 409 and r.json()["earliest_start"] == alice_end + 2000, r.text
    # a best-effort lease is never refused for want of room: no earliest start to say
    r = httpx.post(f"{url}/leases", json={"nodes": 3, "duration": 10}, headers=_h(tokens["alice"]))
    assert r.status_code == 409 and "earliest_start" not in r.json(), r.text
    # once bob's reservation is over, both nodes are free
    r = httpx.get(f"{url}/leases/offers", params={"nodes": 1, "duration": 60, "not_before": alice_end + 2000},
                  headers=_h(tokens["alice"]))
    assert r.json()["earliest_start"] == alice_end + 2000
    assert r.json()["nodes_free_at"] == {"at": alice_end + 2000, "free": 2, "with_preemption": 2}


@pytest.mark.parametrize(("query", "says"), [
    ({"duration": 0}, "duration"),
    ({"duration": 60, "nodes": "two"}, "nodes"),
    ({"nodes": 1}, "duration"),
    ({"duration": 60, "cpu": -1}, "cpu"),
    ({"duration": 60, "colour": "red"}, "colour"),
])
def test_a_bad_query_is_422_with_its_reason_and_no_token_is_401(served, query, says):
    url, tokens, _ = served
    r = httpx.get(f"{url}/leases/offers", params=query, headers=_h(tokens["alice"]))
    assert r.status_code == 422 and says in r.json()["detail"], r.text
    assert httpx.get(f"{url}/leases/offers", params={"duration": 60}).status_code == 401


def test_other_methods_are_405_not_a_lease_id_that_is_no_number(served):
    url, tokens, _ = served
    for method in ("DELETE", "POST", "PUT"):
        r = httpx.request(method, f"{url}/leases/offers", headers=_h(tokens["alice"]))
        assert r.status_code == 405 and r.headers["allow"] == "GET", (method, r.status_code, r.text)
    r = httpx.delete(f"{url}/leases/offersx", headers=_h(tokens["alice"]))
    assert r.status_code == 422 and r.json()["detail"].startswith("path.lease_id: "), r.text


def test_a_request_the_site_cannot_hold_gets_no_start_and_why(served):
    url, tokens, _ = served
    r = httpx.get(f"{url}/leases/offers", params={"nodes": 3, "duration": 60}, headers=_h(tokens["bob"]))
    assert r.status_code == 200 and r.json()["earliest_start"] is None
    assert r.json()["reason"] == "asks for 3 nodes; the cluster has 2"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_skylease_leases_when(served, capsys, monkeypatch):
    url, tokens, _ = served
    monkeypatch.setenv("SKYLEASE_SERVER", url)
    monkeypatch.setenv("SKYLEASE_TOKEN", tokens["alice"])
    monkeypatch.setenv("COLUMNS", "200")
    assert _reserve(url, tokens["alice"], nodes=1, duration=AR_FOR, start_in=AR_IN).status_code == 201
    code, out, err = _run(capsys, "leases", "when", "--nodes", "2", "--duration", "20m", "--json")
    assert code == 0, err
    o = json.loads(out)
    assert o["earliest_start"] is not None and o["nodes_free_at"]["free"] == 1
    code, out, err = _run(capsys, "leases", "when", "--nodes", "2", "--duration", "20m")
    assert code == 0 and "earliest start" in out and "nodes free at" in out, err
    code, out, err = _run(capsys, "leases", "request", "--nodes", "2", "--duration", "20m", "--type",
                          "immediate")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"the earliest start that fits is {o['earliest_start']}" in lines[0], err
    for argv, says in ((["--duration", "0"], "--duration"), (["--duration", "1h", "--nodes", "0"], "--nodes"),
                       (["--duration", "1h", "--not-before", "soon"], "--not-before"),
                       (["--duration", "1h", "--cpu", "0"], "--cpu")):
        code, out, err = _run(capsys, "leases", "when", *argv)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and says in lines[0] and "Traceback" not in err, (argv, err)


def test_the_dashboards_when_page_and_a_refused_forms_earliest_start(served):
    url, tokens, _ = served
    r = _reserve(url, tokens["alice"], nodes=2, duration=AR_FOR, start_in=AR_IN)
    alice_end = r.json()["requested_start"] + AR_FOR
    with httpx.Client(base_url=url) as browser:
        assert browser.get("/leases/when", headers=HTML, follow_redirects=False).status_code == 303  # login
        assert login(browser, tokens["bob"]).status_code == 303
        form = browser.get("/leases/new", headers=HTML)
        assert 'href="/leases/when"' in form.text
        empty = browser.get("/leases/when", headers=HTML)
        assert empty.status_code == 200 and 'action="/leases/when"' in empty.text
        assert 'id="offer"' not in empty.text  # (no duration asked: the form alone)
        page = browser.get("/leases/when", params={"nodes": "2", "duration": "2000"}, headers=HTML)
        assert page.status_code == 200 and 'id="offer"' in page.text, page.text
        assert f"lease time {alice_end}" in page.text  # the API's answer: after alice's reservation
        api = httpx.get(f"{url}/leases/offers", params={"nodes": 2, "duration": 2000},
                        headers=_h(tokens["bob"])).json()
        assert api["earliest_start"] == alice_end
        for bad, field in (({"nodes": "two", "duration": "60"}, "nodes"), ({"duration": "soon"}, "duration"),
                           ({"nodes": "0", "duration": "60"}, "nodes")):
            r = browser.get("/leases/when", params=bad, headers=HTML)
            assert r.status_code == 422 and f"{field}: " in r.text, (bad, r.text)
        # a refused reservation on the request form says when it would fit
        csrf = csrf_of(form.text)
        r = browser.post("/leases/new", data={"csrf": csrf, "type": "advance-reservation", "nodes": "2",
                                              "duration": "2000", "start": str(alice_end - 1)})
        assert r.status_code == 409 and f"The earliest start that fits: lease time {alice_end}." in r.text, \
            r.text
    # the API's GET /leases/when is a lease id that is no number, as before (the page is for browsers)
    r = httpx.get(f"{url}/leases/when", headers=_h(tokens["bob"]))
    assert r.status_code == 422, r.text
