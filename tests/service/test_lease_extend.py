"""Extensions on the real lease manager (issue 40, item 2; docs/decisions/lease-extensions.md):
``PATCH /leases/{id}`` and ``skylease leases extend`` through ``create_app`` over a
:class:`LocalLeaseManager` on a real uvicorn server: accepted (the plan and the events show the
new end), refused with the latest end and the earliest start that fit, another user's lease 404,
bad bodies 422, the site's rules, and the lease page's Extend form. The leases are advance
reservations far in the future, so nothing here starts a payload but the one test marked
integration (it waits on the lease clock)."""

from __future__ import annotations

import json
import os
import time

import httpx
import pytest

from skylease.cli import main
from skylease.control.leases.changes import ExtensionRules
from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.manager import LocalLeaseManager
from skylease.runtime.leases.site import Site, SiteNode
from skylease.service.auth import add_user
from skylease.service.leases_api import create_app
from skylease.service.server import load_serve_config, open_database

from .web import HTML, csrf_of, login

AR_IN = 1000  # alice's reservation starts this many lease seconds after the test begins...
AR_FOR = 500  # ...and lasts this long, on both nodes


@pytest.fixture
def serve(tmp_path, app_server, payload_sandbox):
    """``serve(rules, time_scale)``: two one-CPU nodes; alice and bob; the URL, tokens, manager."""
    made = []

    def make(rules: ExtensionRules | None = None, time_scale: float = 1
             ) -> tuple[str, dict, LocalLeaseManager]:
        data = tmp_path / f"serve{len(made)}"
        site = Site(tuple(SiteNode(f"node{i}", ResourceTuple(1.0, 1024, 0, 2.0**62)) for i in range(2)),
                    machine=(min(os.sched_getaffinity(0)),))
        engine = open_database(load_serve_config(None, data_dir=data))
        tokens = {u: add_user(engine, u) for u in ("alice", "bob")}
        m = LocalLeaseManager(engine, site, time_scale=time_scale, data_dir=data, sandbox=payload_sandbox,
                              extension_rules=rules).start()
        srv = app_server(create_app(m, engine))
        made.append((srv, m, engine))
        return srv.url, tokens, m

    yield make
    for srv, m, engine in made:
        srv.stop()
        m.close(stop_payloads=True)
        engine.dispose()


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _reserve(url: str, token: str, **body) -> dict:
    r = httpx.post(f"{url}/leases", json={"type": "advance-reservation", "command": "sleep 1", **body},
                   headers=_h(token))
    assert r.status_code == 201, r.text
    return r.json()


def _patch(url: str, token: str, lid: int, body) -> httpx.Response:
    if isinstance(body, dict):
        return httpx.patch(f"{url}/leases/{lid}", json=body, headers=_h(token))
    return httpx.patch(f"{url}/leases/{lid}", content=body,
                       headers={**_h(token), "Content-Type": "application/json"})


def _vm_end(view: dict) -> int:
    return max(p["end"] for p in view["planned"] if p["kind"] == "vm")


def test_an_extension_that_fits_is_accepted_and_shown(serve):
    url, tokens, _ = serve()
    lease = _reserve(url, tokens["alice"], nodes=2, duration=AR_FOR, start_in=AR_IN)
    start = lease["requested_start"]
    r = _patch(url, tokens["alice"], lease["id"], {"by": 100})
    assert r.status_code == 200, r.text
    v = r.json()
    assert _vm_end(v) == start + AR_FOR + 100 and v["requested_duration"] == AR_FOR + 100
    r = _patch(url, tokens["alice"], lease["id"], {"end": start + 700})
    assert r.status_code == 200, r.text
    v = httpx.get(f"{url}/leases/{lease['id']}", headers=_h(tokens["alice"])).json()
    assert _vm_end(v) == start + 700
    assert [(x["seconds"], x["old_end"], x["new_end"]) for x in v["extensions"]] == [
        (100, start + AR_FOR, start + AR_FOR + 100), (100, start + AR_FOR + 100, start + 700)]
    ext = [e for e in v["events"] if e["event"] == "extended"]
    assert [(e["old_end"], e["new_end"]) for e in ext] == [(start + 500, start + 600),
                                                           (start + 600, start + 700)]


def test_one_that_does_not_fit_is_refused_with_the_latest_end_and_the_earliest_start(serve, capsys,
                                                                                       monkeypatch):
    url, tokens, _ = serve()
    alice = _reserve(url, tokens["alice"], nodes=2, duration=AR_FOR, start_in=AR_IN)
    s = alice["requested_start"]
    _reserve(url, tokens["bob"], nodes=2, duration=100, start=s + 600)  # [s + 600, s + 700)
    r = _patch(url, tokens["alice"], alice["id"], {"by": 300})
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["latest_end"] == s + 600 and body["earliest_start"] == s + 700, body
    assert body["detail"].startswith(f"lease {alice['id']} not extended: "), body
    v = httpx.get(f"{url}/leases/{alice['id']}", headers=_h(tokens["alice"])).json()
    assert _vm_end(v) == s + AR_FOR and v["extensions"] == []  # nothing changed
    monkeypatch.setenv("SKYLEASE_SERVER", url)
    monkeypatch.setenv("SKYLEASE_TOKEN", tokens["alice"])
    monkeypatch.setenv("COLUMNS", "200")
    code = main(["leases", "extend", str(alice["id"]), "--by", "5m"])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"the latest end that fits is {s + 600}" in lines[0], err
    assert f"the earliest start that fits is {s + 700}" in lines[0], err
    code = main(["leases", "extend", str(alice["id"]), "--end", str(s + 600), "--json"])  # the latest end
    out = capsys.readouterr().out
    assert code == 0 and _vm_end(json.loads(out)) == s + 600, out


def test_another_users_lease_is_404_and_bad_bodies_are_422(serve):
    url, tokens, _ = serve()
    lid = _reserve(url, tokens["alice"], nodes=1, duration=AR_FOR, start_in=AR_IN)["id"]
    r = _patch(url, tokens["bob"], lid, {"by": 10})
    assert r.status_code == 404 and r.json() == {"detail": f"no lease {lid}"}, r.text
    assert _patch(url, tokens["alice"], 999, {"by": 10}).status_code == 404
    assert httpx.patch(f"{url}/leases/{lid}", json={"by": 10}).status_code == 401
    for body, says in (({}, "exactly one"), ({"by": 0}, "by"), ({"by": 1, "end": 2}, "exactly one"),
                       ({"by": "5"}, "by"), ({"by": 1.5}, "by"), ({"colour": 1}, "colour"),
                       (b"{by: 1}", "JSON")):
        r = _patch(url, tokens["alice"], lid, body)
        assert r.status_code == 422 and says in r.json()["detail"], (body, r.text)
    r = _patch(url, tokens["alice"], lid, {"end": 5})  # well-formed, not later: refused
    assert r.status_code == 409 and "is not later" in r.json()["detail"], r.text
    v = httpx.get(f"{url}/leases/{lid}", headers=_h(tokens["alice"])).json()
    assert v["requested_duration"] == AR_FOR and v["extensions"] == []


def test_the_sites_rules(serve):
    url, tokens, _ = serve(ExtensionRules(max_duration=AR_FOR + 150, max_extensions=1))
    lease = _reserve(url, tokens["alice"], nodes=1, duration=AR_FOR, start_in=AR_IN)
    s, lid = lease["requested_start"], lease["id"]
    r = _patch(url, tokens["alice"], lid, {"by": 200})
    assert r.status_code == 409 and f"allows {AR_FOR + 150} s" in r.json()["detail"], r.text
    assert r.json()["latest_end"] == s + AR_FOR + 150
    assert _patch(url, tokens["alice"], lid, {"by": 100}).status_code == 200
    r = _patch(url, tokens["alice"], lid, {"by": 10})
    assert r.status_code == 409 and "the site allows 1" in r.json()["detail"], r.text
    url, tokens, _ = serve(ExtensionRules(extend_within=60))
    lease = _reserve(url, tokens["alice"], nodes=1, duration=AR_FOR, start_in=AR_IN)
    r = _patch(url, tokens["alice"], lease["id"], {"by": 10})
    end = lease["requested_start"] + AR_FOR
    assert r.status_code == 409 and f"from lease time {end - 60}" in r.json()["detail"], r.text


@pytest.mark.integration  # waits about 4 s on the lease clock
def test_a_running_default_payload_runs_to_the_new_end(serve):
    # an immediate lease of 40 lease s at 20 lease s per second (2 real seconds), its default payload
    # (no command: it times its own work); extended by 40 at once: it runs to 80, not 40
    url, tokens, _ = serve(time_scale=20)
    r = httpx.post(f"{url}/leases", json={"type": "immediate", "duration": 40}, headers=_h(tokens["alice"]))
    assert r.status_code == 201, r.text
    lid = r.json()["id"]
    deadline = time.monotonic() + 10
    while not httpx.get(f"{url}/leases/{lid}", headers=_h(tokens["alice"])).json()["payloads"]:
        assert time.monotonic() < deadline, "its payload did not start"
        time.sleep(0.05)
    r = _patch(url, tokens["alice"], lid, {"by": 40})
    assert r.status_code == 200, r.text
    old_end, new_end = (r.json()["extensions"][0][k] for k in ("old_end", "new_end"))
    assert new_end == old_end + 40
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        v = httpx.get(f"{url}/leases/{lid}", headers=_h(tokens["alice"])).json()
        if v["state"] == "done":
            break
        time.sleep(0.2)
    assert v["state"] == "done" and v["end"] == new_end, v  # no premature end at the old one
    ended = [(p["state"], p["reason"]) for p in v["ended_payloads"]]
    assert ("killed", "replaced: its lease was extended") in ended and len(ended) == 2, ended


def test_the_lease_pages_extend_form(serve):
    url, tokens, _ = serve()
    alice = _reserve(url, tokens["alice"], nodes=2, duration=AR_FOR, start_in=AR_IN)
    s, lid = alice["requested_start"], alice["id"]
    _reserve(url, tokens["bob"], nodes=2, duration=100, start=s + 600)
    with httpx.Client(base_url=url) as browser:
        assert login(browser, tokens["alice"]).status_code == 303
        page = browser.get(f"/leases/{lid}", headers=HTML)
        assert page.status_code == 200 and f'action="/leases/{lid}/extend"' in page.text
        csrf = csrf_of(page.text)
        r = browser.post(f"/leases/{lid}/extend", data={"csrf": csrf, "by": "1m"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"/leases/{lid}", r.text
        r = browser.post(f"/leases/{lid}/extend", data={"csrf": csrf, "by": "1h"})
        assert r.status_code == 409 and f"the latest end that fits is {s + 600}" in r.text, r.text
        r = browser.post(f"/leases/{lid}/extend", data={"csrf": csrf, "by": "soon"})
        assert r.status_code == 422 and "is not a duration" in r.text, r.text
        r = browser.post(f"/leases/{lid}/extend", data={"by": "1m"})  # no CSRF token: refused
        assert r.status_code == 403
    v = httpx.get(f"{url}/leases/{lid}", headers=_h(tokens["alice"])).json()
    assert _vm_end(v) == s + AR_FOR + 60 and len(v["extensions"]) == 1
    with httpx.Client(base_url=url) as browser:  # bob: alice's lease is not his
        login(browser, tokens["bob"])
        csrf = csrf_of(browser.get("/leases", headers=HTML).text)
        r = browser.post(f"/leases/{lid}/extend", data={"csrf": csrf, "by": "1m"})
        assert r.status_code == 404, r.text
