"""A bag of tasks' page in a real browser during a real run (issue 21): a real `skylease serve`, a
real `skylease run --qos` on a volatile pool with one slow worker (test_qos_runs.py's: its tail gets
cloud workers from the reliable pool), and Debian's headless Chromium. The run's user logs in, sees
the bags list update without a reload, opens the bag's page and, without reloading (server-sent
events, not polling), sees the progress curve grow (more points), the Oracle's prediction and band
appear and the cloud workers' chart show a running cloud worker, then the bag end (and the page stop
listening). Any request to another host fails the test (the guarded `page` of
tests/service/conftest.py). Screenshots at 1280x800 in tmp_path (with SKYLEASE_DOCS_SCREENSHOTS=1,
the bag's page is copied to docs/howto/dashboard_bot.png)."""

from __future__ import annotations

import time

import httpx
import pytest

from .browser import log_in, shot
from .qos_runs import N_TASKS, deposit, finish, launch, run_argv, server_argv

# integration: a long browser walk beside a real run served with QoS (pytest -m integration)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
# test_qos_runs.py's job, but a task takes 4 s on a cloud worker: the run's reports (every 2 s) find its
# cloud workers running (at 0.2 s, a cloud worker would be done and released between two reports)
JOB = ("python3 -c \"import os,time; w=os.environ.get('SKYLEASE_WORKER'); "
       "time.sleep(18 if w == 'grid-1' else 4 if os.environ.get('SKYLEASE_POOL') == 'cloud' else 0.2)\"\n")


@pytest.fixture
def server(site, serve_process):
    """A real server with alice's account funded: its URL, the tokens, and the run's folder."""
    root, data, tokens = site
    (root / "jobs.txt").write_text(JOB * N_TASKS)
    url = serve_process(argv=server_argv(data)).start(cwd=root)
    deposit(url, tokens, "alice")
    return url, tokens, root


def points(page) -> int:
    return int(page.locator("svg.chart.progress").get_attribute("data-points"))


def peak(page) -> int:
    return int(page.locator("svg.chart.cws").get_attribute("data-peak"))


def test_a_bag_page_grows_live_during_a_real_run_and_shows_the_prediction(page, server, tmp_path):
    url, tokens, root = server
    log_in(page, tokens["alice"])
    page.wait_for_url("**/leases")
    run = launch(run_argv(root, "qos-alice", (url, tokens["alice"])), root)
    try:
        deadline = time.monotonic() + 60
        alice = {"Authorization": f"Bearer {tokens['alice']}"}
        while not (bags := httpx.get(f"{url}/qos/bots", headers=alice).json()):
            assert run.poll() is None and time.monotonic() < deadline, "the run registered no bag"
            time.sleep(0.1)
        bot = bags[0]["id"]
        page.get_by_role("link", name="Bags", exact=True).click()
        page.wait_for_url("**/bots")
        page.evaluate("window.notReloaded = true")
        row = page.get_by_role("table", name="Bags of tasks").locator("tbody tr").first
        before = row.inner_text()
        changed = time.monotonic() + 30  # (the first tasks complete: the row's count moves)
        while row.inner_text() == before:
            assert time.monotonic() < changed, f"the bags list did not change: {before!r}"
            page.wait_for_timeout(200)
        assert page.evaluate("window.notReloaded") is True  # the list updated in place
        assert page.evaluate("window.skyleaseLive.updates") >= 1
        print(f"the bags list, live: {before!r} -> {row.inner_text()!r}")
        page.get_by_role("link", name=str(bot), exact=True).click()
        page.wait_for_url(f"**/bots/{bot}")
        page.evaluate("window.notReloaded = true")
        first = points(page)
        page.get_by_text("Cloud workers as a table").click()  # the text alternative opens...
        had_band = page.locator("svg.chart.progress .band").count() == 1
        grown = time.monotonic() + 30  # (wait_for_function's string would be an eval: the CSP forbids it)
        while points(page) <= first:
            assert time.monotonic() < grown, f"the curve did not grow past {first} points"
            page.wait_for_timeout(200)
        page.locator("svg.chart.progress .band").wait_for(timeout=30_000)
        page.locator("svg.chart.progress line.pred").wait_for(state="attached", timeout=5_000)  # (0 wide)
        assert points(page) > first and page.evaluate("window.notReloaded") is True
        assert page.locator("svg.chart.progress circle.pt.completed").count() == points(page)
        assert "Predicted completion at" in page.locator("svg.chart.progress desc").text_content()
        workers = time.monotonic() + 90  # the tail's cloud workers: booted, then running
        while peak(page) < 1:
            if time.monotonic() > workers or run.poll() is not None:
                series = httpx.get(f"{url}/qos/bots/{bot}/series", headers=alice).json()
                raise AssertionError(f"no cloud worker shown running: {series}, {run.communicate()}")
            page.wait_for_timeout(200)
        assert page.evaluate("window.notReloaded") is True
        assert page.evaluate("window.skyleaseLive.changes") >= 1
        assert "cloud workers running" in page.locator("svg.chart.cws desc").text_content()
        assert page.locator("details#cw-table").get_attribute("open") is not None  # ... and stays open
        assert page.get_by_role("table", name="Cloud workers at each change").locator("tbody tr").count() >= 2
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(tmp_path / "bot-running.png"))  # 1280x800: the facts beside the charts
        page.locator("#live dd", has_text="done").first.wait_for(timeout=120_000)  # the bag ended
        assert page.locator("#live").get_attribute("data-events") is not None  # the same page, stopped
        assert page.evaluate("window.notReloaded") is True
        page.evaluate("window.scrollTo(0, 0)")
        shot(page, tmp_path, "bot")  # (done: the whole curve, the band, the workers)
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
    shot(page, tmp_path, "bots")
    page.get_by_role("link", name="Account", exact=True).click()
    page.wait_for_url("**/account")
    kinds = page.get_by_role("table").locator("tbody tr td:nth-child(2)").all_inner_texts()
    assert kinds[-1] == "deposit" and "order" in kinds and "refund" in kinds  # newest first
    shot(page, tmp_path, "account")
