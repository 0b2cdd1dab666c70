"""The Runs pages in a real browser (issue 21): a real `skylease serve` process and Debian's headless
Chromium (the guarded ``page`` fixture of conftest.py: every request to another host fails the test).
alice logs in, opens Runs, sees her runs and not bob's, opens a run of 10,000 tasks (loaded in under
a second, one page of rows), whose first rows are its failed tasks with their stderr; a task failing
while the page is open appears at the top by itself; the run links to its bag of tasks. A screenshot
at 1280x800 is saved in the test's tmp_path (and copied to docs/howto/dashboard_runs.png when
SKYLEASE_DOCS_SCREENSHOTS=1)."""

from __future__ import annotations

import time

import httpx
import pytest

from .browser import log_in, shot
from .conftest import fake_server_with_users

# integration: a long browser walk over a run of 10,000 tasks (pytest -m integration)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
BIG = 10_000
FAILED = [17, 404, 2_500, 9_700]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The server's URL, each user's token, and the ids of alice's big run, her small one and bob's."""
    with fake_server_with_users(tmp_path_factory.mktemp("runs"), admins=()) as (url, tokens):
        api = {u: httpx.Client(base_url=url, headers={"Authorization": f"Bearer {t}"}, timeout=30)
               for u, t in tokens.items()}
        ids = {}
        ids["small"] = api["alice"].post("/runs", json={"name": "small.txt", "n_tasks": 3}).json()["id"]
        api["alice"].post(f"/runs/{ids['small']}/tasks", json={"rows": [
            {"task": i, "status": "done", "label": f"echo {i}"} for i in range(3)]})
        api["alice"].post(f"/runs/{ids['small']}/finish", json={"state": "done"})
        r = api["alice"].post("/runs", json={"name": "sweep.txt", "n_tasks": BIG, "bot": 12,
                                             "command": "skylease run sweep.txt --out out"})
        ids["big"] = r.json()["id"]
        for lo in range(0, BIG - 200, 250):  # all done or failed but the last 200 (running or queued)
            rows = [{"task": i, "label": f"./simulate --case {i}", "attempts": 1, "host": f"node{i % 8}",
                     "pool": "local", "runtime_s": 1.0 + i % 7, "ended": 1.7e9 + i,
                     **({"status": "failed", "exit_code": 3, "stderr_tail": f"case {i}: diverged\n"}
                        if i in FAILED else {"status": "done", "exit_code": 0})}
                    for i in range(lo, min(lo + 250, BIG - 200))]
            assert api["alice"].post(f"/runs/{ids['big']}/tasks", json={"rows": rows}).status_code == 200
        api["alice"].post(f"/runs/{ids['big']}/tasks", json={"rows": [
            {"task": i, "status": "running", "host": f"node{i % 8}", "pool": "local"}
            for i in range(BIG - 200, BIG - 190)]})
        ids["bob"] = api["bob"].post("/runs", json={"name": "bobs-secret.txt", "n_tasks": 2}).json()["id"]
        try:
            yield url, tokens, ids, api
        finally:
            for c in api.values():
                c.close()


def test_runs_listed_and_a_run_shows_its_failed_tasks_first_live(page, server, tmp_path):
    _url, tokens, ids, api = server
    log_in(page, tokens["alice"])
    page.wait_for_url("**/leases")
    page.get_by_role("link", name="Runs").click()
    page.wait_for_url("**/runs")
    runs = page.get_by_role("table", name="Runs, newest first")
    names = runs.locator("tbody tr td:first-child").all_inner_texts()
    assert names == ["sweep.txt", "small.txt"]  # newest first; bob's run is not listed
    assert "bobs-secret" not in page.locator("main").inner_text()
    shot(page, tmp_path, "runs_list")
    # a run registered now appears in the open list by itself (server-sent events), within 2 s
    page.evaluate("window.notReloaded = true")
    new = api["alice"].post("/runs", json={"name": "late.txt", "n_tasks": 3}).json()["id"]
    t = time.monotonic()
    runs.get_by_role("link", name="late.txt").wait_for(timeout=2000)
    assert time.monotonic() - t < 2.0 and page.evaluate("window.notReloaded") is True
    api["alice"].post(f"/runs/{new}/finish", json={"state": "done"})

    t0 = time.monotonic()
    runs.get_by_role("link", name="sweep.txt").click()
    page.wait_for_url(f"**/runs/{ids['big']}")
    page.wait_for_load_state("load")
    load_s = time.monotonic() - t0
    assert load_s < 1.0, f"a run of {BIG:,} tasks took {load_s:.2f} s to load"
    table = page.locator("#tasks table")
    cells = table.locator("tbody tr td:nth-child(3)").all_inner_texts()
    assert len(cells) == 200  # one page of rows, not 10,000
    assert cells[:len(FAILED)] == ["failed"] * len(FAILED) and cells[len(FAILED)] == "running"
    first = table.locator("tbody tr td:first-child").all_inner_texts()[:len(FAILED)]
    assert first == [str(i) for i in FAILED]
    assert "case 17: diverged" in table.locator("tbody tr").first.inner_text()  # its stderr's last line
    assert page.get_by_role("link", name="12").get_attribute("href") == "/bots/12"  # its bag of tasks
    assert "page 1 of 50" in page.locator("nav.pager").inner_text()
    shot(page, tmp_path, "runs")

    # a task failing now reaches the top of the open page by itself, within 2 s, without a reload
    page.evaluate("window.notReloaded = true")
    r = api["alice"].post(f"/runs/{ids['big']}/tasks", json={"rows": [
        {"task": 5, "status": "failed", "exit_code": 9, "stderr_tail": "killed\n"}]})
    assert r.status_code == 200
    t = time.monotonic()
    table.locator("tbody tr").first.get_by_role("cell", name="5", exact=True).wait_for(timeout=2000)
    assert time.monotonic() - t < 2.0 and page.evaluate("window.notReloaded") is True
    assert table.locator("tbody tr td:nth-child(3)").all_inner_texts()[:len(FAILED) + 1] == \
        ["failed"] * (len(FAILED) + 1)
    assert f"{len(FAILED) + 1} failed" in page.locator("dl.facts").inner_text()

    # the next page of the table, and bob's run: not found, as a missing one
    page.get_by_role("link", name="next").click()
    page.wait_for_url(f"**/runs/{ids['big']}?page=2")
    assert "page 2 of 50" in page.locator("nav.pager").inner_text()
    assert page.goto(f"/runs/{ids['bob']}").status == 404
    assert page.goto("/runs/987654").status == 404
