"""The dashboard's page layout (issue 21): escaping, the page frame with its navigation, tables,
the CSRF field and the headers every page carries; shared by the pages of service/web.

Every page also carries the banner of a degraded service (docs/decisions/serve-liveness.md): the
service's health guard (:mod:`skylease.service.health`) sets :data:`DEGRADED`, for each request, to
how to ask why the server is degraded; the page frame asks when it renders.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

from fastapi.responses import HTMLResponse

from skylease.service.auth import User
from skylease.service.web.sessions import csrf_token

__all__ = ["DEGRADED", "HEADERS", "banner", "csrf_field", "e", "live_attrs", "pager", "render_page",
           "table"]

# (same-origin, not no-referrer: a browser then sends the page's own Origin with its forms, which
# the login checks, instead of "null"; other hosts still get no referrer)
HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
            "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'"}


def e(value: Any) -> str:
    """Every value a page shows goes through here."""
    return html.escape("" if value is None else str(value), quote=True)


#: For the request being served: why the server is degraded (one line), or None while it is whole.
DEGRADED: ContextVar[Callable[[], str | None] | None] = ContextVar("skylease_degraded", default=None)


def banner() -> str:
    """The degraded service's banner (empty while the server is whole)."""
    failure = DEGRADED.get()
    reason = failure() if failure is not None else None
    if reason is None:
        return ""
    return (f'<p class="error degraded" role="alert">The service is degraded: {e(reason)}. Restart the '
            "server (<code>skylease serve</code>): it carries on from its database.</p>")


def render_page(title: str, body: str, user: User | None = None, sid: str | None = None,
          status: int = 200) -> HTMLResponse:
    nav = ""
    if user is not None and sid is not None:
        hosts = '<li><a href="/hosts">Hosts</a></li>' if user.admin else ""
        nav = (f'<nav aria-label="main"><ul><li><a href="/leases">Leases</a></li>{hosts}'
               '<li><a href="/bots">Bags</a></li><li><a href="/runs">Runs</a></li>'
               '<li><a href="/account">Account</a></li></ul>'
               f'<span class="who">{e(user.name)}{" (admin)" if user.admin else ""}</span>'
               f'<form method="post" action="/logout">{csrf_field(sid)}'
               '<button type="submit">Log out</button></form>'
               "</nav>")
    doc = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
           f'<meta name="viewport" content="width=device-width, initial-scale=1">'
           f'<title>{e(title)} · skylease</title><link rel="stylesheet" href="/static/dashboard.css">'
           f'<script src="/static/dashboard.js" defer></script></head><body>'
           f'<header><a class="brand" href="/">skylease</a>{nav}</header>'
           f'<main id="main">{banner()}<h1>{e(title)}</h1>{body}</main></body></html>')
    return HTMLResponse(doc, status_code=status, headers=HEADERS)


def csrf_field(sid: str) -> str:
    return f'<input type="hidden" name="csrf" value="{e(csrf_token(sid))}">'


def table(caption: str, heads: Iterable[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f'<p class="empty">{e(empty)}</p>'
    th = "".join(f'<th scope="col">{e(h)}</th>' for h in heads)
    trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return (f'<div class="scroll"><table><caption>{e(caption)}</caption><thead><tr>{th}</tr></thead>'
            f"<tbody>{trs}</tbody></table></div>")


def live_attrs(fragment: str, events: str, version: int) -> str:
    """What dashboard.js needs to keep an element live: where to fetch it again, the event stream
    that says when, and the changes counter's version the page was rendered at. The fragment's
    answer says ``X-Live-Running: 0`` once nothing more will change (the script stops listening)."""
    return f' data-live="{e(fragment)}" data-events="{e(events)}" data-version="{e(version)}"'


def pager(label: str, first: str | None, after: str | None) -> str:
    """The links of a list's page (docs/decisions/serve-fair-sharing.md): back to the first page
    (``first``, None on the first page) and on to the next (``after``, None on the last)."""
    if first is None and after is None:
        return ""
    links = [f'<a href="{e(url)}" rel="{rel}">{text}</a>' for url, rel, text in
             ((first, "first", "first page"), (after, "next", "next page")) if url is not None]
    return f'<nav class="pager" aria-label="{e(label)}">{" · ".join(links)}</nav>'
