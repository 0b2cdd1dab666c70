"""Liveness of ``skylease serve`` (issue 33): a real server process whose lease manager's thread dies
(the spawn of one lease's payload raises, injected through the manager's enactment by
seamed_serve.py) says so within 2 s (``/health`` 503 with the reason), refuses every lease request
and read with 503 and the same reason, keeps the QoS and runs routes, shows a banner on the
dashboard's pages, logs the traceback once, and accepts (201) no lease that will never run: every
lease answered 201 is in the journal and runs after a restart, and no refused one is. On SQLite and
on PostgreSQL.
"""

from __future__ import annotations

import html
import re
import threading
import time
from typing import Any

import httpx
import pytest

from skylease.cli import main

from .browser import AUDIT, guarded, log_in, shot
from .conftest import ServeProcess
from .payloads import (
    TERMINAL,
    assert_no_payload_left,
    assert_processes_match_states,
    wait_for_payloads,
)

# integration: real servers whose lease manager is killed by an injected fault (pytest -m integration)
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("payload_sandbox")]

#: The reason /health and every refused request give.
REASON = re.compile(r"the lease manager stopped at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: "
                    r"RuntimeError: the spawn of lease (\d+) failed \(injected by the test\)")


#: Every VM asks for 256 MB.
MEM = 256


def liveness_server(serve_process, db: str | None, capsys) -> ServeProcess:
    """A real server (not started yet) on a site of 6 nodes at 60 lease seconds a second; alice, bob
    and root (an administrator) added."""
    srv = serve_process(db, time_scale=60, grace=1)
    site = srv.data.parent / "site.toml"
    site.write_text("[[nodes]]\ncount = 6\ncpu = 1\nmemory = 1024\n")
    srv.options["site"] = str(site)
    srv.add_users(capsys)
    return srv


def wait_for_failure(srv: ServeProcess, limit_s: float) -> tuple[float, dict[str, Any]]:
    """Seconds until /health answers 503 (failing past ``limit_s``), and its answer."""
    t0 = time.monotonic()
    while True:
        r = httpx.get(srv.url + "/health", timeout=5)
        waited = time.monotonic() - t0
        if r.status_code == 503:
            return waited, r.json()
        assert r.status_code == 200 and r.json()["ok"] is True, r.text
        assert waited < limit_s, f"/health still answers ok after {waited:.2f} s"
        time.sleep(0.02)


def page(client: httpx.Client, path: str) -> httpx.Response:
    return client.get(path, headers={"Accept": "text/html"})


def test_a_dead_lease_manager_says_so_and_refuses_what_needs_it(serve_process, database_url, monkeypatch,
                                                                capsys):
    srv = liveness_server(serve_process, database_url, capsys)
    srv.start({"fail_spawn": 2})
    be = {"type": "best-effort", "memory": MEM, "nodes": 1, "duration": 3600}
    assert srv.call("POST", "/leases", "alice", json=be).status_code == 201
    first = wait_for_payloads(srv, 1, 1)
    r = srv.call("POST", "/leases", "bob", json=be)  # journaled, answered; its spawn kills the thread
    assert r.status_code == 201 and r.json()["id"] == 2, r.text
    waited, health = wait_for_failure(srv, 2.0)
    assert health["ok"] is False and health["now"] >= 0 and REASON.fullmatch(health["detail"]), health
    reason = health["detail"]

    # every lease route answers 503 with the reason; none journals anything
    for method, path, user in [("POST", "/leases", "alice"), ("POST", "/leases", "bob"),
                               ("GET", "/leases", "alice"), ("GET", "/leases/1", "alice"),
                               ("DELETE", "/leases/1", "alice"), ("GET", "/queue", "bob"),
                               ("GET", "/hosts", "root"), ("GET", "/leases", "root")]:
        r = srv.call(method, path, user, json=be if method == "POST" else None)
        assert (r.status_code, r.json()) == (503, {"detail": reason}), (method, path, r.text)
    assert [row["id"] for row in srv.query("SELECT id FROM leases ORDER BY id")] == [1, 2]
    # the client says so in one line, exit status 1 (the server failed)
    monkeypatch.setenv("SKYLEASE_SERVER", srv.url)
    monkeypatch.setenv("SKYLEASE_TOKEN", srv.tokens["alice"])
    assert main(["leases", "list"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"skylease leases list: error: the server at {srv.url} answered 503 Service Unavailable: "
                   f"{reason}"), err
    # the routes that do not need the lease manager work
    assert srv.call("GET", "/qos/account", "alice").status_code == 200
    assert srv.call("GET", "/runs", "alice").status_code == 200

    # the dashboard: a banner on every page, the lease pages 503
    banner = f"The service is degraded: {html.escape(reason)}"
    with httpx.Client(base_url=srv.url, timeout=10) as browser:
        assert banner in page(browser, "/login").text
        r = browser.post("/login", data={"token": srv.tokens["alice"]})
        assert r.status_code == 303, r.text
        for path, status in [("/runs", 200), ("/bots", 200), ("/account", 200), ("/leases", 503),
                             ("/leases/1", 503), ("/leases/new", 503)]:
            r = page(browser, path)
            assert r.status_code == status and banner in r.text, (path, r.status_code, r.text[:2000])

    # the traceback was logged once, however many requests were refused
    err = srv.stderr()
    assert err.count("Traceback (most recent call last)") == 1, err
    assert err.count("ERROR") == 1 and "RuntimeError: the spawn of lease 2 failed" in err, err

    # a restart carries on: lease 2, answered 201 before the thread died, runs; lease 1 is adopted
    srv.stop()
    srv.start()
    assert httpx.get(srv.url + "/health", timeout=5).json()["ok"] is True
    views = srv.leases()
    assert sorted(views) == [1, 2] and views[2]["state"] == "active" and views[2]["owner"] == "bob", views
    assert wait_for_payloads(srv, 2, 1) and wait_for_payloads(srv, 1, 1) == first
    for lid in (1, 2):
        assert srv.call("DELETE", f"/leases/{lid}").status_code == 200
    print(f"/health said so {waited:.3f} s after the answer that preceded the failure")


def test_no_lease_is_accepted_that_will_never_run(serve_process, database_url, capsys):
    """Three clients request leases as fast as they can while the thread dies (on the spawn of lease
    4; the site has 6 nodes, so leases 1-6 start at once): every answer is 201 or 503, no refused
    request is journaled, and each lease answered 201 is, and after a restart runs (leases 1-6, 4's
    payload started then) or waits in the queue for a node."""
    srv = liveness_server(serve_process, database_url, capsys)
    srv.start({"fail_spawn": 4})
    body = {"type": "best-effort", "memory": MEM, "nodes": 1, "duration": 3600}
    answers: list[tuple[int, Any]] = []
    lock = threading.Lock()

    def client(user: str) -> None:
        for _ in range(20):
            r = srv.call("POST", "/leases", user, json=body)
            with lock:
                answers.append((r.status_code, r.json()))
            if r.status_code != 201:
                return

    threads = [threading.Thread(target=client, args=(u,)) for u in ("alice", "bob", "root")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    wait_for_failure(srv, 2.0)
    assert {status for status, _ in answers} == {201, 503}, answers
    accepted = sorted(a["id"] for status, a in answers if status == 201)
    refused = [a["detail"] for status, a in answers if status == 503]
    assert all(REASON.fullmatch(d) and REASON.fullmatch(d).group(1) == "4" for d in refused), refused
    assert accepted == list(range(1, len(accepted) + 1)) and 4 in accepted, accepted
    assert [row["id"] for row in srv.query("SELECT id FROM leases ORDER BY id")] == accepted

    assert 4 not in {r["lease"] for r in srv.query("SELECT * FROM lease_payloads")}
    print(f"{len(accepted)} leases accepted, {len(refused)} requests refused; server log:\n{srv.stderr()}")

    srv.stop()
    srv.start()
    views = srv.leases()
    assert sorted(views) == accepted, views
    states = {i: v["state"] for i, v in views.items()}
    assert [i for i in accepted if states[i] == "active"] == accepted[:6], states
    assert all(states[i] in ("pending", "scheduled") for i in accepted[6:]), states
    assert wait_for_payloads(srv, 4, 1)  # started now, once
    assert_processes_match_states(srv)
    for lid in accepted:
        assert srv.call("DELETE", f"/leases/{lid}").status_code == 200
    assert_no_payload_left(srv)
    assert all(v["state"] in TERMINAL for v in srv.leases().values())


@pytest.mark.timeout(180)
def test_the_dashboard_tells_an_open_page_and_every_page_why(chromium, serve_process, tmp_path, capsys):
    """In headless Chromium: alice's leases page is open when the manager's thread dies; the page
    reloads and says why (the lease pages answer 503), every other page carries the banner, and
    those pages pass the dashboard's accessibility audit (the banner's contrast among the rest)."""
    srv = liveness_server(serve_process, None, capsys)
    srv.start({"fail_spawn": 2})
    be = {"type": "best-effort", "memory": MEM, "nodes": 1, "duration": 3600}
    try:
        with guarded(chromium, srv.url) as p:
            log_in(p, srv.tokens["alice"])
            p.wait_for_url("**/leases")
            assert p.locator(".degraded").count() == 0
            for _ in range(2):  # the second lease's spawn kills the manager's thread
                assert srv.call("POST", "/leases", "alice", json=be).status_code == 201
            p.locator(".degraded").wait_for(timeout=10_000)  # the open page reloaded itself
            assert p.evaluate("document.title").startswith("Service unavailable")
            banner = p.get_by_role("alert").inner_text()
            assert banner.startswith("The service is degraded: ") and REASON.search(banner), banner
            assert p.evaluate(AUDIT) == [], p.url
            shot(p, tmp_path, "degraded")
            p.get_by_role("link", name="Runs").click()  # (offered: it still works)
            p.wait_for_url("**/runs")
            for path, status in [("/leases/1", 503), ("/runs", 200), ("/bots", 200), ("/account", 200)]:
                assert p.goto(path).status == status, path
                assert REASON.search(p.get_by_role("alert").inner_text()), path
                assert p.evaluate(AUDIT) == [], path
    finally:
        srv.stop()  # (and serve_process kills whatever payload it left)
