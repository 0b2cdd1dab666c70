"""The dashboard's browser tests' helpers: a guarded Chromium page (any request to a host other than
the server's fails the test), logging in, screenshots, and the accessibility audit (a11y_audit.js).
The ``chromium`` fixture is tests/conftest.py's; the ``page`` fixture (tests/service/conftest.py)
is :func:`guarded`'s page on the test module's ``server``."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

VIEWPORT = {"width": 1280, "height": 800}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "howto"
#: The accessibility audit run in the page (a11y_audit.js without its two lines of header).
AUDIT = (Path(__file__).parent / "a11y_audit.js").read_text().split("\n", 2)[2]


def shot(page, tmp_path: Path, name: str) -> Path:
    """The page as the viewport shows it (1280x800) in ``tmp_path/NAME.png``, and the whole page in
    ``NAME-full.png``; with ``SKYLEASE_DOCS_SCREENSHOTS=1`` the first also becomes the docs' picture
    ``docs/howto/dashboard_NAME.png`` (how they are refreshed)."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path))
    page.screenshot(path=str(tmp_path / f"{name}-full.png"), full_page=True)
    if os.environ.get("SKYLEASE_DOCS_SCREENSHOTS") == "1":
        shutil.copy(path, DOCS / f"dashboard_{name}.png")
    return path


@contextlib.contextmanager
def guarded(chromium, url: str) -> Iterator[Any]:
    """A page of a fresh browser context (no cookies) at 1280x800 whose requests may reach only the
    server at ``url``: any other is aborted, recorded, and fails the test on leaving."""
    origin = urlsplit(url)
    elsewhere: list[str] = []

    def guard(route):
        target = urlsplit(route.request.url)
        if (target.scheme, target.hostname, target.port) == (origin.scheme, origin.hostname, origin.port):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context = chromium.new_context(viewport=VIEWPORT, base_url=url)
    context.route("**/*", guard)
    context.set_default_timeout(5000)
    p = context.new_page()
    p.on("dialog", lambda d: d.accept())  # the Cancel button asks first
    failed: list[str] = []
    # (a request the page gave up by leaving, as its event stream and a refresh under way do, is not
    # a failure)
    p.on("requestfailed", lambda r: failed.append(r.url)
         if r.url not in elsewhere and r.failure != "net::ERR_ABORTED" else None)
    try:
        yield p
    finally:
        context.close()
    assert elsewhere == [], f"the browser asked for something outside the server: {elsewhere}"
    assert failed == [], f"requests that failed: {failed}"


def log_in(page, token: str) -> None:
    page.goto("/")
    assert page.url.endswith("/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
