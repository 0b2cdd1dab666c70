"""The dashboard's bags-of-tasks and account pages (issue 21), in process over a real QoSService on
SQLite: every page needs a session; a user reaches neither another's bag nor their account (404);
values are escaped; a bag's chart has a point per report and the prediction's band once there is
a prediction; the live fragment says whether the bag still runs."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from skylease.control.qos.relay import Report
from skylease.runtime.qos.service import QoSService
from skylease.service.leases_api import create_app

from .test_web_pages import HTML, login


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
    for path in ("/bots", f"/bots/{bot}", f"/bots/{bot}/live", "/account", "/accounts/alice"):
        r = client.get(path, headers=HTML, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/login", path


def test_a_bag_page_draws_a_point_per_report_and_the_band_once_predicted(client, qos, tokens):
    qos.deposit("alice", 50)
    bot = qos.register("alice", "nd", 10, credits=20).id
    as_user(client, tokens["alice"])
    page = client.get(f"/bots/{bot}", headers=HTML).text
    assert points(page, "completed") == 0 and 'class="band"' not in page
    assert "No prediction yet" in page and 'data-refresh="/bots/' in page  # running: refreshed
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
    assert re.search(r"<dd>0\.00 / 20\.00</dd>", page)  # credits spent / ordered
    listing = client.get("/bots", headers=HTML).text
    assert f'<a href="/bots/{bot}">{bot}</a>' in listing and "5 / 10" in listing
    assert f"{pred.t_p:,.1f} s" in listing
    live = client.get(f"/bots/{bot}/live", headers=HTML)
    assert live.status_code == 200 and live.headers["x-bag-running"] == "1"
    assert points(live.text, "completed") == 3 and "<html" not in live.text  # a fragment
    qos.report("alice", bot, Report(20.0, 10, 10, 10))  # all done
    live = client.get(f"/bots/{bot}/live", headers=HTML)
    assert live.headers["x-bag-running"] == "0" and "done" in live.text
    assert "data-refresh" not in client.get(f"/bots/{bot}", headers=HTML).text


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
