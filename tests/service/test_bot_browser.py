"""A bag of tasks' page in a real browser during a real run (issue 21): a real `skylease serve`, a
real `skylease run --qos` on a volatile pool with one slow worker (test_qos_runs.py's), and Debian's
headless Chromium. The run's user logs in, opens the bag's page as soon as the bag is registered and,
without reloading, sees the progress curve grow (more points) and the Oracle's prediction and band
appear, then the bag end (and the page stop refreshing). Any request to another host fails the test
(the guarded `page` of test_dashboard_browser.py). Screenshots at 1280x800 in tmp_path."""

from __future__ import annotations

import time

import httpx
import pytest

from .test_dashboard_browser import log_in, page  # noqa: F401 (page: a fixture, on this module's server)
from .test_qos_runs import deposit, finish, launch, run_argv, server_argv, site  # noqa: F401 (site: a fixture)
from .test_serve import start, stop

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def server(site):  # noqa: F811 (the fixture imported above)
    """A real server with alice's account funded: its URL, the tokens, and the run's folder."""
    root, data, tokens = site
    proc, url = start(server_argv(data), root)
    try:
        deposit(url, tokens, "alice")
        yield url, tokens, root
    finally:
        stop(proc)


def points(page) -> int:  # noqa: F811 (page: the fixture's value)
    return int(page.locator("svg.chart").get_attribute("data-points"))


def test_a_bag_page_grows_live_during_a_real_run_and_shows_the_prediction(page, server, tmp_path):  # noqa: F811
    url, tokens, root = server
    log_in(page, tokens["alice"])
    page.wait_for_url("**/leases")
    run = launch(run_argv(root, "qos-alice", (url, tokens["alice"])), root)
    try:
        deadline = time.monotonic() + 60
        while not (bags := httpx.get(f"{url}/qos/bots", headers={"Authorization": f"Bearer {tokens['alice']}"}
                                     ).json()):
            assert run.poll() is None and time.monotonic() < deadline, "the run registered no bag"
            time.sleep(0.1)
        bot = bags[0]["id"]
        page.get_by_role("link", name="Bags", exact=True).click()
        page.wait_for_url("**/bots")
        page.get_by_role("link", name=str(bot), exact=True).click()
        page.wait_for_url(f"**/bots/{bot}")
        page.evaluate("window.__notReloaded = true")
        first = points(page)
        had_band = page.locator("svg.chart .band").count() == 1
        grown = time.monotonic() + 30  # (wait_for_function's string would be an eval: the CSP forbids it)
        while points(page) <= first:
            assert time.monotonic() < grown, f"the curve did not grow past {first} points"
            page.wait_for_timeout(200)
        page.locator("svg.chart .band").wait_for(timeout=30_000)
        page.locator("svg.chart line.pred").wait_for(state="attached", timeout=5_000)  # (0 wide: "hidden")
        assert points(page) > first and page.evaluate("window.__notReloaded") is True
        assert page.locator("svg.chart circle.pt.completed").count() == points(page)
        assert "Predicted completion at" in page.locator("svg.chart desc").text_content()
        page.screenshot(path=str(tmp_path / "bot.png"), full_page=True)
        page.locator("#live dd", has_text="done").first.wait_for(timeout=120_000)  # the bag ended
        assert page.locator("#live").get_attribute("data-refresh") is not None  # the same page, stopped
        assert page.evaluate("window.__notReloaded") is True
        page.screenshot(path=str(tmp_path / "bot-done.png"), full_page=True)
        page.set_viewport_size({"width": 390, "height": 800})  # a phone's width: the chart shrinks
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.screenshot(path=str(tmp_path / "bot-390.png"), full_page=True)
        page.set_viewport_size({"width": 1280, "height": 800})
        finish(run)
    finally:
        if run.poll() is None:
            run.kill()
    print(f"prediction shown from the first load: {had_band}")
    page.get_by_role("link", name="Bags", exact=True).click()
    page.wait_for_url("**/bots")
    row = page.get_by_role("table", name="Bags of tasks").locator("tbody tr")
    assert row.count() == 1 and "done" in row.inner_text() and f"{20} / {20}" in row.inner_text()
    page.screenshot(path=str(tmp_path / "bots.png"), full_page=True)
    page.get_by_role("link", name="Account", exact=True).click()
    page.wait_for_url("**/account")
    kinds = page.get_by_role("table").locator("tbody tr td:nth-child(2)").all_inner_texts()
    assert kinds[-1] == "deposit" and "order" in kinds and "refund" in kinds  # newest first
    page.screenshot(path=str(tmp_path / "account.png"), full_page=True)
