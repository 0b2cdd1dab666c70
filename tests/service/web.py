"""The dashboard's pages through a client (FastAPI's TestClient or httpx): what a browser sends."""

from __future__ import annotations

import re

#: What a browser accepts: the pages answer HTML to it.
HTML = {"Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"}


def login(client, token: str):
    """POST /login with ``token`` (not following the redirect)."""
    return client.post("/login", data={"token": token}, follow_redirects=False)


def csrf_of(page: str) -> str:
    """The CSRF token of a page's form."""
    m = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert m, page
    return m.group(1)
