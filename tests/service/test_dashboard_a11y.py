"""The dashboard's accessible basics (issue 21), checked on every page in headless Chromium against
a running server (the in-memory lease manager, with a bag of tasks and a run reported to it):

- the document has a language, a title and one ``<h1>``;
- every form control and button has an accessible name (a ``<label>``, or ``aria-label``), every
  chart (``canvas``, ``svg``) a role and a name, every table a caption;
- no positive ``tabindex``; the keyboard reaches every link, button and field by Tab, in order, and
  the focused one is outlined;
- text contrast is at least 4.5:1 (3:1 for large text) against the background it is drawn on
  (WCAG 2.x AA, relative luminance);
- at a phone's width (390 px) no page scrolls sideways (wide tables scroll inside their box).
"""

from __future__ import annotations

import httpx
import pytest

from .browser import AUDIT, VIEWPORT, guarded, log_in
from .conftest import fake_server_with_users

# integration: the accessibility audit of every page in a browser (pytest -m integration)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

#: What Tab should reach, in document order.
FOCUSABLE = """() => Array.from(document.querySelectorAll(
  'a[href], button, input:not([type=hidden]), select, textarea, summary'))
  .filter((el) => el.checkVisibility({ visibilityProperty: true }))  // (not in a closed <details>)
  .map((el) => el.outerHTML.slice(0, 60))"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server with alice's lease, bag of tasks (reported) and run (with a failure), and root."""
    with fake_server_with_users(tmp_path_factory.mktemp("a11y"), ("alice",)) as (url, tokens):
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens['alice']}"},
                          timeout=10) as api:
            lease = api.post("/leases", json={"nodes": 1, "duration": 600}).json()["id"]
            bag = api.post("/qos/bots", json={"infrastructure": "nd", "n_tasks": 4}).json()["id"]
            api.post(f"/qos/bots/{bag}/reports", json={"t": 2.0, "submitted": 4, "assigned": 3,
                                                       "completed": 2, "workers": {}})
            run = api.post("/runs", json={"name": "jobs.txt", "n_tasks": 3}).json()["id"]
            api.post(f"/runs/{run}/tasks", json={"rows": [
                {"task": 0, "status": "done", "label": "echo 0"},
                {"task": 1, "status": "failed", "exit_code": 3, "stderr_tail": "boom\n", "label": "false"}]})
        yield url, tokens, {"lease": lease, "bag": bag, "run": run}


def pages(ids: dict[str, int]) -> list[str]:
    return ["/leases", "/leases/new", "/leases/when?nodes=1&duration=60", f"/leases/{ids['lease']}",
            "/hosts", "/bots", f"/bots/{ids['bag']}",
            "/account", "/runs", f"/runs/{ids['run']}"]


def test_every_page_passes_the_accessibility_basics(chromium, server):
    url, tokens, ids = server
    with guarded(chromium, url) as p:  # (nothing from elsewhere: the test fails on it)
        p.goto("/login")
        assert p.evaluate(AUDIT) == [], "/login"
        log_in(p, tokens["root"])
        p.wait_for_url("**/leases")
        checked = 0
        for path in pages(ids):
            assert p.goto(path).status == 200, path
            p.wait_for_load_state("load")
            assert p.evaluate(AUDIT) == [], path

            # the keyboard: Tab visits every link, button and field in document order, outlined
            want = p.evaluate(FOCUSABLE)
            p.evaluate("document.activeElement && document.activeElement.blur()")
            got = []
            for _ in want:
                p.keyboard.press("Tab")
                got.append(p.evaluate("document.activeElement.outerHTML.slice(0, 60)"))
                outline = p.evaluate("getComputedStyle(document.activeElement).outlineStyle")
                assert outline not in ("none", ""), (path, got[-1])
            assert got == want, (path, got, want)

            # a phone's width: nothing scrolls sideways
            p.set_viewport_size({"width": 390, "height": 800})
            assert p.evaluate("document.documentElement.scrollWidth") <= 390, path
            p.set_viewport_size(VIEWPORT)
            checked += 1
        assert checked == len(pages(ids))
        # the audit itself finds what it looks for: pale text, an unlabelled field, a nameless chart
        p.evaluate("""() => { const t = document.createElement("p"); t.textContent = "pale";
            t.style.color = "#b0b0b0"; document.querySelector("main").append(t);
            document.querySelector("main").append(document.createElement("input"));
            document.querySelector("main").append(document.createElement("canvas")); }""")
        found = p.evaluate(AUDIT)
        assert len(found) == 3 and found[0].startswith("input without a label"), found
        assert found[1].startswith("a chart without")
        assert found[2].startswith("contrast 2.") and "pale" in found[2]
