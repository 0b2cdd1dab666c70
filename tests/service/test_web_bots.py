"""The dashboard's bags-of-tasks and account pages (issue 21), in process over a real QoSService on
SQLite: every page needs a session; a user reaches neither another's bag nor their account (404);
values are escaped; a bag's chart has a point per report and the prediction's band once there is
a prediction, and its cloud workers over time on the same time axis (with a table as their text
alternative); the live fragment says whether the bag still runs; the pages' event streams need a
session and tell a user only of their own bags."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from fastapi.testclient import TestClient

from skylease.control.qos.relay import Report
from skylease.runtime.qos.service import QoSService
from skylease.service.auth import add_user
from skylease.service.leases_api import create_app
from skylease.service.server import load_serve_config, open_database

from .conftest import fake_serve_process
from .web import HTML, login


@pytest.fixture
def qos(engine) -> QoSService:
    return QoSService(engine)


@pytest.fixture
def client(manager, engine, qos):
    with TestClient(create_app(manager, engine, qos), raise_server_exceptions=False) as c:
        yield c


def as_user(client: TestClient, token: str) -> TestClient:
    assert login(client, token).status_code == 303
    return client


def points(page: str, kind: str) -> int:
    return len(re.findall(rf'<circle class="pt {kind}"', page))


def test_the_pages_need_a_session(client, qos, tokens):
    bot = qos.register("alice", "nd", 4).id
    for path in ("/bots", "/bots/live", f"/bots/{bot}", f"/bots/{bot}/live", "/account", "/accounts/alice"):
        r = client.get(path, headers=HTML, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/login", path


def test_a_bag_page_draws_a_point_per_report_and_the_band_once_predicted(client, qos, tokens):
    qos.deposit("alice", 50)
    bot = qos.register("alice", "nd", 10, credits=20).id
    as_user(client, tokens["alice"])
    page = client.get(f"/bots/{bot}", headers=HTML).text
    assert points(page, "completed") == 0 and 'class="band"' not in page
    assert "No prediction yet" in page and f'data-events="/bots/{bot}/events"' in page  # running: live
    for i, (t, done, assigned) in enumerate([(5.0, 0, 4), (10.0, 2, 8), (15.0, 5, 10)]):
        qos.report("alice", bot, Report(t, 10, assigned, done))
        page = client.get(f"/bots/{bot}", headers=HTML).text
        assert points(page, "completed") == points(page, "assigned") == i + 1
        assert f'data-points="{i + 1}"' in page
    pred = qos.predict("alice", bot)
    assert pred.t_p is not None
    assert 'class="band"' in page and 'class="pred"' in page
    assert f"{pred.low:,.1f} s to {pred.high:,.1f} s" in page  # the band's text alternative
    assert "5 / 10 completed" in page and "<figcaption>" in page and 'role="img"' in page
    assert re.search(r"<dd>0\.00 / 20\.00 <meter", page)  # credits spent / ordered
    listing = client.get("/bots", headers=HTML).text
    assert f'<a href="/bots/{bot}">{bot}</a>' in listing and "5 / 10" in listing
    assert f"{pred.t_p:,.1f} s" in listing
    live = client.get(f"/bots/{bot}/live", headers=HTML)
    assert live.status_code == 200 and live.headers["x-live-running"] == "1"
    assert points(live.text, "completed") == 3 and "<html" not in live.text  # a fragment
    qos.report("alice", bot, Report(20.0, 10, 10, 10))  # all done
    live = client.get(f"/bots/{bot}/live", headers=HTML)
    assert live.headers["x-live-running"] == "0" and "done" in live.text
    assert "data-events" not in client.get(f"/bots/{bot}", headers=HTML).text


def test_a_long_series_is_drawn_as_lines_without_a_dot_per_report(qos):
    from skylease.service.web.bots import MAX_DOTS, progress_svg

    bot = qos.register("alice", "nd", 5000).id
    for i in range(MAX_DOTS + 1):
        qos.registry.report(bot, float(i), i // 2, i // 2)
    svg = progress_svg(qos.series("alice", bot), 5000, qos.predict("alice", bot))
    assert points(svg, "completed") == 0 and f'data-points="{MAX_DOTS + 1}"' in svg
    line = re.search(r'<polyline class="line completed" points="([^"]*)"', svg)
    assert line and len(line.group(1).split()) == MAX_DOTS + 1  # still a point per report


def test_a_user_reaches_neither_anothers_bag_nor_their_account(client, qos, tokens):
    qos.deposit("bob", 30)
    bobs = qos.register("bob", "nd", 4, credits=10).id
    alices = qos.register("alice", "nd", 4).id
    as_user(client, tokens["alice"])
    for path in (f"/bots/{bobs}", f"/bots/{bobs}/live", "/accounts/bob", "/bots/999999",
                 f"/bots/{2**60}"):
        r = client.get(path, headers=HTML)
        assert r.status_code == 404, path
    listing = client.get("/bots", headers=HTML).text
    assert f'href="/bots/{alices}"' in listing and f'href="/bots/{bobs}"' not in listing
    mine = client.get("/account", headers=HTML).text
    assert "Account of alice" in mine and "No movements yet." in mine
    root = as_user(client, tokens["root"])  # an administrator sees every bag and account
    assert f'href="/bots/{bobs}"' in root.get("/bots", headers=HTML).text
    assert root.get(f"/bots/{bobs}", headers=HTML).status_code == 200
    bob = root.get("/accounts/bob", headers=HTML).text
    assert "<strong>20.00</strong>" in bob  # 30 deposited, 10 ordered
    kinds = re.findall(r"<td>(deposit|order)</td>", bob)
    assert kinds == ["order", "deposit"]  # newest first


def test_values_are_escaped(client, qos, tokens, engine):
    evil = "<script>x</script>"
    qos.deposit("alice", 5, note=evil)
    bot = qos.register("alice", "nd", 4, strategy="9C-C-R").id
    as_user(client, tokens["alice"])
    account = client.get("/account", headers=HTML).text
    assert evil not in account and "&lt;script&gt;x&lt;/script&gt;" in account
    r = client.get("/accounts/%3Cb%3Eeve", headers=HTML)  # another's (or nobody's) account
    assert r.status_code == 404 and "<b>eve" not in r.text and "&lt;b&gt;eve" in r.text
    assert '<a href="/bots">Bags</a>' in client.get(f"/bots/{bot}", headers=HTML).text


def test_a_bag_page_draws_its_cloud_workers_on_the_progress_curves_time_axis(client, qos, tokens):
    from skylease.service.web.bots import workers_svg

    qos.deposit("alice", 50)
    bot = qos.register("alice", "nd", 10, credits=20).id
    as_user(client, tokens["alice"])
    page = client.get(f"/bots/{bot}", headers=HTML).text
    assert 'data-peak="0"' in page and "No cloud worker count reported yet." in page
    reports = [Report(5.0, 10, 4, 0), Report(10.0, 10, 8, 2, workers={1: "booting", 2: "booting"}),
               Report(15.0, 10, 9, 5, workers={1: "busy", 2: "idle", 3: "booting"}),
               Report(20.0, 10, 9, 6, workers={1: "busy", 2: "released", 3: "down"})]
    for r in reports:
        qos.report("alice", bot, r)
    assert [(p.cloud_workers, p.cloud_booting) for p in qos.series("alice", bot)] == \
        [(0, 0), (0, 2), (2, 1), (1, 0)]
    page = client.get(f"/bots/{bot}", headers=HTML).text
    svg = re.search(r'<svg class="chart cws".*?</svg>', page).group(0)
    assert 'data-points="4"' in svg and 'data-peak="2"' in svg and 'role="img"' in svg
    assert "At 20.0 s: 1 cloud workers running, 0 booting. At most 2 running (at 15.0 s)." in svg
    assert '<path class="cws running"' in svg and '<path class="cws started"' in svg
    # the same time axis as the progress curve: the same ticks at the same places
    ticks = re.compile(r'<text class="tick" x="([0-9.]+)" y="[0-9.]+" text-anchor="middle">([0-9,]+)</text>')
    progress = re.search(r'<svg class="chart progress".*?</svg>', page).group(0)
    assert ticks.findall(svg) == ticks.findall(progress) and len(ticks.findall(svg)) == 5
    # its text alternative: a row per change
    rows = re.search(r"Cloud workers at each change</caption>.*?<tbody>(.*?)</tbody>", page).group(1)
    assert re.findall(r"<tr><td>([0-9.]+)</td><td>(\d+)</td><td>(\d+)</td></tr>", rows) == \
        [("5.0", "0", "0"), ("10.0", "0", "2"), ("15.0", "2", "1"), ("20.0", "1", "0")]
    assert "<dd>1 running, 0 booting</dd>" in page
    assert re.search(r'<meter id="credits-meter" min="0" max="20.00" value="[0-9.]+" aria-label=', page)
    # reports stored before the counts were kept (None) draw no step
    old = qos.register("alice", "nd", 10).id
    qos.registry.report(old, 3.0, 1, 2)
    assert "carry no cloud worker count" in workers_svg(qos.series("alice", old), 10.0)


def test_the_bags_list_is_a_live_fragment_too(client, qos, tokens):
    bot = qos.register("alice", "nd", 4).id
    as_user(client, tokens["alice"])
    page = client.get("/bots", headers=HTML).text
    assert f'data-live="/bots/live" data-events="/bots/events" data-version="{qos.version()}"' in page
    qos.report("alice", bot, Report(5.0, 4, 4, 3))
    live = client.get("/bots/live", headers=HTML)
    assert live.status_code == 200 and "<html" not in live.text and "3 / 4" in live.text


def test_the_event_streams_need_a_session_and_a_same_origin_request(client, qos, tokens):
    bot = qos.register("alice", "nd", 4).id
    for path in ("/bots/events", f"/bots/{bot}/events"):
        assert client.get(path).status_code == 403  # no session
        bearer = {"Authorization": f"Bearer {tokens['alice']}"}  # (a token opens no page)
        assert client.get(path, headers=bearer).status_code == 403
    as_user(client, tokens["alice"])
    for path in ("/bots/events", f"/bots/{bot}/events"):
        assert client.get(path, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert "/bots/events" not in client.get("/openapi.json").text


def test_the_change_counter_tells_a_watcher_only_of_the_bags_it_reaches(qos):
    from skylease.runtime.qos.service import TOUCHES

    v0 = qos.version()
    alices = qos.register("alice", "nd", 4).id
    assert qos.version() > v0 and qos.changed("alice", v0) and qos.changed("alice", v0, alices)
    v1 = qos.version()
    qos.deposit("bob", 30)
    bobs = qos.register("bob", "nd", 4, credits=10).id  # register, order
    assert qos.wait_change(v1, 0.01) > v1
    assert not qos.changed("alice", v1) and not qos.changed("alice", v1, bobs)  # bob's: not told
    assert qos.changed(None, v1) and qos.changed(None, v1, bobs) and not qos.changed(None, v1, alices)
    v2 = qos.version()
    qos.report("alice", alices, Report(1.0, 4, 1, 0))
    assert qos.changed("alice", v2, alices) and not qos.changed("bob", v2)
    assert qos.wait_change(qos.version(), 0.01) == qos.version()  # nothing new: waits, same version
    v3 = qos.version()
    for _ in range(TOUCHES):  # as many changes as kept: all of them are still known
        qos.deposit("bob", 1)
    assert not qos.changed("alice", v3)
    qos.deposit("bob", 1)  # one more than kept: a watcher that far behind is told "changed"
    assert qos.changed("alice", v3)
    assert qos.sweep(10**12, 1.0) == [alices, bobs] and qos.changed("alice", qos.version() - 2, alices)


def test_a_bags_event_stream_streams_its_changes_and_does_not_hold_the_server_on_sigterm(tmp_path):
    """A real server: a session's /bots/{id}/events streams a change when the bag gets a report (and
    nothing for another user's bag), and an open stream does not keep SIGTERM from stopping the
    server at once (as the leases' /events)."""
    proc = fake_serve_process(tmp_path / "serve")
    url = proc.start(cwd=tmp_path)
    try:
        engine = open_database(load_serve_config(None, data_dir=tmp_path / "serve"))
        tokens = {u: add_user(engine, u) for u in ("alice", "bob")}
        engine.dispose()
        api = {u: httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {t}"})
               for u, t in tokens.items()}
        mine = api["alice"].post("/qos/bots", json={"infrastructure": "nd", "n_tasks": 4}).json()["id"]
        bobs = api["bob"].post("/qos/bots", json={"infrastructure": "nd", "n_tasks": 4}).json()["id"]
        browser = httpx.Client(base_url=url, timeout=10)
        assert browser.post("/login", data={"token": tokens["alice"]}).status_code == 303
        report = {"t": 1.0, "submitted": 4, "assigned": 2, "completed": 1, "workers": {"1": "busy"}}
        with browser.stream("GET", f"/bots/{mine}/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = stream.iter_lines()
            assert next(lines).startswith("retry:") and next(lines) == "event: hello"
            version = int(next(lines).removeprefix("data: "))
            assert api["bob"].post(f"/qos/bots/{bobs}/reports", json=report).status_code == 200
            assert api["alice"].post(f"/qos/bots/{mine}/reports", json=report).status_code == 200
            got = [next(lines) for _ in range(3)]  # (bob's report made no event: alice's is the next)
            assert got[1] == "event: change" and got[2] == f'data: {{"version": {version + 2}}}', got
            t = time.monotonic()
            code, _, _ = proc.stop()
            assert time.monotonic() - t < 3.0 and code == 0
        browser.close()
        for c in api.values():
            c.close()
    finally:
        proc.stop()
