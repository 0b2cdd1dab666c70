"""The dashboard in a real browser (issue 21): a real `skylease serve` process (the in-memory manager
of api_fake.py, as test_serve.py runs it) and Debian's headless Chromium driven by Playwright. A user
logs in by typing a token, sees their lease and not another's, cancels it with its button and sees it
leave the queue; a wrong token is refused; an administrator sees the hosts. Every request the browser
makes goes through a handler that aborts and records any to a host other than the server's: each
test fails on one. A screenshot of each page at 1280x800 is saved in the test's tmp_path."""

from __future__ import annotations

import re

import httpx
import pytest

from .browser import VIEWPORT, log_in, shot
from .conftest import fake_server_with_users

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The server's URL, each user's token, and the ids of alice's and bob's best-effort leases."""
    with fake_server_with_users(tmp_path_factory.mktemp("dashboard")) as (url, tokens):
        ids = {}
        for name, nodes in (("alice", 1), ("bob", 2)):
            r = httpx.post(url + "/leases", json={"nodes": nodes, "duration": 600},
                           headers={"Authorization": f"Bearer {tokens[name]}"}, timeout=10)
            assert r.status_code == 201, r.text
            ids[name] = r.json()["id"]
        yield url, tokens, ids


def test_a_user_logs_in_sees_their_lease_only_and_cancels_it(page, server, tmp_path):
    _, tokens, ids = server
    log_in(page, tokens["alice"])
    page.wait_for_url("**/leases")
    assert page.locator("header .who").inner_text() == "alice"
    assert page.get_by_role("link", name="Hosts").count() == 0  # not an administrator
    table = page.get_by_role("table", name="Leases")
    mine = table.locator("tbody tr", has=page.locator(f'form[action="/leases/{ids["alice"]}/cancel"]'))
    assert mine.count() == 1
    assert table.locator(f'form[action="/leases/{ids["bob"]}/cancel"]').count() == 0
    assert "bob" not in page.locator("main").inner_text()
    queue = page.get_by_role("table", name="Best-effort leases waiting, in queue order")
    assert queue.locator("tbody tr").count() == 1
    # the page's own style sheet and script were loaded (from the server itself)
    assert page.evaluate("getComputedStyle(document.querySelector('header')).display") == "flex"
    shot(page, tmp_path, "leases")
    page.set_viewport_size({"width": 390, "height": 800})  # a phone's width: the table scrolls inside
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(tmp_path / "leases-390.png"), full_page=True)
    page.set_viewport_size(VIEWPORT)

    page.get_by_role("button", name=f"Cancel lease {ids['alice']}").click()
    page.wait_for_url("**/leases")
    page.get_by_text("The queue is empty.").wait_for()
    row = table.locator("tbody tr").first
    assert "cancelled" in row.inner_text() and row.get_by_role("button").count() == 0

    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/login")
    page.goto("/leases")
    assert page.url.endswith("/login")


def test_a_wrong_token_is_refused(page, server, tmp_path):
    page.goto("/login")
    shot(page, tmp_path, "login")
    log_in(page, "not-the-token")
    page.get_by_role("alert").wait_for()
    assert page.get_by_role("alert").inner_text() == "invalid token"
    assert page.context.cookies() == []
    page.screenshot(path=str(tmp_path / "login-refused.png"))


def test_a_form_of_another_site_cannot_log_the_browser_in(chromium, server):
    """A login CSRF: a page served from another loopback port (another origin, the same site)
    posts alice's token to /login as it loads. Chromium says where the form came from; the server
    refuses it (403, the reason on the page) and the browser holds no session."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    from .served import serving

    url, tokens, _ = server
    html = (f'<form id="f" method="post" action="{url}/login"><input name="token" value="{tokens["alice"]}">'
            '</form><script>document.getElementById("f").submit()</script>')
    other = Starlette(routes=[Route("/", lambda _r: HTMLResponse(html))])
    with serving(other) as (elsewhere, _records):
        context = chromium.new_context(base_url=url)
        try:
            page = context.new_page()
            answers: list[int] = []
            page.on("response", lambda r: answers.append(r.status) if r.url == f"{url}/login" else None)
            page.goto(elsewhere)
            page.wait_for_url(f"{url}/login")
            page.get_by_role("alert").wait_for()
            assert answers == [403]
            said = page.get_by_role("alert").inner_text()
            assert "came from another site (Sec-Fetch-Site: same-site)" in said, said
            assert [c["name"] for c in context.cookies()] == []
            log_in(page, tokens["alice"])  # the server's own form, in the same browser: logged in
            page.wait_for_url("**/leases")
            assert [c["name"] for c in context.cookies()] == ["skylease_session"]
        finally:
            context.close()


def test_an_administrator_sees_the_hosts(page, server, tmp_path):
    _, tokens, ids = server
    log_in(page, tokens["root"])
    page.wait_for_url("**/leases")
    assert page.get_by_role("table", name="Leases").locator(
        f'form[action="/leases/{ids["bob"]}/cancel"]').count() == 1
    page.get_by_role("link", name="Hosts").click()
    page.wait_for_url("**/hosts")
    rows = page.get_by_role("table", name="The site's nodes").locator("tbody tr")
    assert rows.count() == 4 and rows.first.locator("td").first.inner_text() == "node0"
    cells = [c.inner_text() for c in rows.first.locator("td").all()]
    assert cells[1:4] == ["(this machine)", "up", "-"], cells  # host, state, last contact
    shot(page, tmp_path, "hosts")
    page.keyboard.press("Tab")  # keyboard-usable: the first Tab reaches a link
    assert page.evaluate("document.activeElement.tagName") == "A"


def test_a_lease_is_requested_with_the_form(page, server, tmp_path):
    """From the leases page by keyboard to the form: a mistake is shown next to its field (which
    keeps the values typed); corrected, the request makes a lease and shows its page."""
    _, tokens, _ = server
    log_in(page, tokens["bob"])
    page.wait_for_url("**/leases")
    page.get_by_role("link", name="Request a lease").focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/leases/new")
    page.get_by_label("Type").select_option("best-effort")
    page.get_by_label("Nodes").fill("3")
    page.get_by_label("Duration (s)").fill("90.5")
    page.evaluate("document.querySelector('form.request').noValidate = true")  # (the server's check)
    page.get_by_role("button", name="Request").click()
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert alert.inner_text().startswith("duration: must be a whole number")
    assert page.get_by_label("Duration (s)").get_attribute("aria-invalid") == "true"
    assert page.get_by_label("Nodes").input_value() == "3"
    shot(page, tmp_path, "request")
    page.get_by_label("Duration (s)").fill("900")
    page.get_by_role("button", name="Request").click()
    page.wait_for_url(re.compile(r".*/leases/\d+$"))
    facts = page.locator("dl.facts").inner_text()
    assert "bob" in facts and "best-effort" in facts and "queued" in facts
