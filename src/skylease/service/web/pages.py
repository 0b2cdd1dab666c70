"""The dashboard's pages (issue 21): server-rendered HTML over the same :class:`LeaseManager` calls as
the JSON API, behind a login session (:mod:`.sessions`).

    GET  /               -> /leases
    GET  /login          the login form (a token)
    POST /login          a valid token: a session cookie and 303 to /leases; else the form again, 401;
                         403 from another site (its Origin or Sec-Fetch-Site header says so)
    POST /logout         ends the session
    GET  /leases         the caller's leases (an administrator's: all) and the queue, with cancel buttons,
                         a page of each at a time (``limit``; cursors ``after`` and ``queue_after``)
    GET  /leases/new     the request form; POST: the lease requested (303 to its page), or the form
                         again with the mistake (422, naming the field) or the refusal (409)
    POST /leases/{id}/cancel
    POST /leases/{id}/extend  the lease page's Extend form (:mod:`.extend_form`)
    GET  /hosts          the site's nodes (administrators only)
    /static/...          the one style sheet and the one script (no CDN, nothing from elsewhere)
    /bots, /account ...  the bags of tasks and the account (:mod:`.bots`), when the server runs SpeQuloS
    /runs, /runs/{id}    runs of `skylease run --report` and their task tables (:mod:`.runs`)

``GET /leases``, ``GET /hosts``, ``GET /runs`` and ``GET /runs/{id}`` are also JSON API routes: a
request goes to the page only when it asks for HTML (``Accept: text/html``, as a browser's
navigation does) and carries no ``Authorization`` header, so API clients are unaffected. The
session cookie authorises only these pages, never the JSON API (which wants a bearer token): a
cross-site request cannot use it. It is HttpOnly, SameSite=Strict, Path=/, Secure over HTTPS;
every form carries the session's CSRF token. The login form cannot carry one (there is no session
yet): a login is refused when the browser says it comes from another site (``Origin`` not this
server's, or ``Sec-Fetch-Site`` other than same-origin or none), so a cross-site form cannot log a
browser into someone else's account; a client that sends neither header (curl) is not a browser
posting another site's form, and logs in as before.
No route here is in the OpenAPI document.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from sqlalchemy.engine import Engine
from starlette.routing import Match
from starlette.types import Scope

from skylease.model.errors import UserError
from skylease.runtime.health import Unavailable
from skylease.runtime.leases.api import LeaseManager, LeaseNotFound, LeaseView
from skylease.service.auth import User, user_for_token
from skylease.service.bodies import BadBody, lease_request_from_form
from skylease.service.paging import decode, list_url, page_from, split
from skylease.service.web.layout import csrf_field, e, pager, render_page, table
from skylease.service.web.sessions import (
    SESSION_S,
    create_session,
    csrf_ok,
    end_session,
    user_for_session,
)

__all__ = ["COOKIE", "add_pages", "cross_site"]

#: The session cookie's name.
COOKIE = "skylease_session"
STATIC = Path(__file__).resolve().parent / "static"
#: States a lease can no longer leave: no cancel button.
ENDED = frozenset({"done", "rejected", "refused", "cancelled", "failed"})


class _HtmlRoute(APIRoute):
    """A page that shares its path with a JSON API route: matched only by a request for HTML
    without a bearer token."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        headers = dict(scope.get("headers") or [])
        if b"authorization" in headers or b"text/html" not in headers.get(b"accept", b""):
            return Match.NONE, {}
        return super().matches(scope)


#: The leases page's chart (drawn by gantt.js, loaded right after it, from /leases/gantt.json); the
#: tables below are its text alternative.
GANTT_FIGURE = ('<figure class="gantt"><canvas id="gantt" width="1200" height="200" role="img" '
                'aria-label="Gantt chart of the slot table: nodes by lease time; the tables below give '
                'the same leases as text"></canvas>'
                '<figcaption id="gantt-legend">Slot table</figcaption></figure>'
                '<script src="/static/gantt.js"></script>')


def _login_form(message: str | None = None) -> str:
    alert = f'<p class="error" role="alert">{e(message)}</p>' if message else ""
    return (f'{alert}<form method="post" action="/login" class="login">'
            '<label for="token">Token</label>'
            '<input id="token" name="token" type="password" autocomplete="current-password" required '
            'autofocus>'
            '<p class="hint">The token printed by <code>skylease serve user add NAME</code>.</p>'
            '<button type="submit">Log in</button></form>')


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url.strip().lower())
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:  # (a port out of range: no origin of ours)
        port = -1
    return parts.scheme, parts.hostname or "", port


def cross_site(request: Request) -> str | None:
    """Why a browser's request comes from another site, or None: same origin, or a client that
    sends neither header. A browser's ``Sec-Fetch-Site`` is its word (same-origin or none: typed
    or bookmarked); a browser without it (older ones) is judged by its ``Origin``, where ``null``
    (a sandboxed frame, a page without referrers) may come from anywhere."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        ok = site.strip().lower() in ("same-origin", "none")
        return None if ok else f"this form came from another site (Sec-Fetch-Site: {site})"
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin is not None and (origin.strip() == "null" or _origin(origin) != _origin(own)):
        return f"this form came from another site (Origin: {origin})"
    return None


#: The request form's fields: (name, label, input type, hint); the advanced ones are folded.
_BASIC = (("nodes", "Nodes", "number", "how many nodes (VMs), 1 by default"),
          ("duration", "Duration (s)", "number", "lease seconds; required"),
          ("start_in", "Starts in (s)", "number",
           "advance reservations only: lease seconds from now (or give the start below)"))
_ADVANCED = (("start", "Start (lease time, s)", "number", "advance reservations: instead of 'starts in'"),
             ("cpu", "CPUs per node", "text", "1 by default"),
             ("memory", "Memory per node (MB)", "number", "1024 by default"),
             ("disk", "Disk per node (MB)", "number", "0 by default"),
             ("image", "Disk image", "text", "a name; staged to the nodes before the start"),
             ("image_size", "Image size (MB)", "number", "with an image"),
             ("command", "Command", "text", "each VM's payload (a shell line); default: a loop lasting "
              "the lease"),
             ("before_end", "Warn before the end (s)", "number", "lease seconds before its planned end "
              "(its events, its payloads); blank: the site's, 0: none"))
_TYPES = (("best-effort", "Best effort (queued, preemptible)"),
          ("advance-reservation", "Advance reservation (at a given time)"),
          ("immediate", "Immediate (now or refused)"))


def _request_form(sid: str, now: int, values: dict[str, str] | None = None, error: BadBody | str | None = None
                  ) -> str:
    """The request form, with the values given (after a mistake) and the mistake next to its field."""
    values = values or {}
    bad = error.field if isinstance(error, BadBody) else None

    def field(name: str, label: str, kind: str, hint: str) -> str:
        wrong = ' aria-invalid="true"' if name == bad else ""
        extra = ' min="0" step="1"' if kind == "number" else ""
        required = " required" if name == "duration" else ""
        return (f'<div class="field"><label for="f-{name}">{e(label)}</label>'
                f'<input id="f-{name}" name="{name}" type="{kind}"{extra}{required}{wrong} '
                f'value="{e(values.get(name, ""))}" aria-describedby="h-{name}">'
                f'<span class="hint" id="h-{name}">{e(hint)}</span></div>')

    def select(name: str, label: str, choices: tuple[tuple[str, str], ...]) -> str:
        wrong = ' aria-invalid="true"' if name == bad else ""
        chosen = values.get(name, choices[0][0])
        options = "".join(f'<option value="{v}"{" selected" if v == chosen else ""}>{e(t)}</option>'
                          for v, t in choices)
        return (f'<div class="field"><label for="f-{name}">{e(label)}</label>'
                f'<select id="f-{name}" name="{name}"{wrong}>{options}</select></div>')

    alert = ""
    if error is not None:
        where = f"{error.field}: " if isinstance(error, BadBody) and error.field else ""
        text = error.message if isinstance(error, BadBody) else error
        alert = f'<p class="error" role="alert" id="form-error">{e(where)}{e(text)}</p>'
    return (f'{alert}<p class="now">Lease clock: {e(now)} s. Times are lease seconds.</p>'
            f'<form method="post" action="/leases/new" class="request">{csrf_field(sid)}'
            + select("type", "Type", _TYPES)
            + "".join(field(*f) for f in _BASIC)
            + '<details' + (" open" if bad in {f[0] for f in _ADVANCED} | {"preemptible"} else "")
            + '><summary>More: start time, resources, image, preemptible, command</summary>'
            + "".join(field(*f) for f in _ADVANCED)
            + select("preemptible", "Preemptible", (("", "the type's default"), ("yes", "yes"), ("no", "no")))
            + "</details>"
            '<button type="submit">Request</button></form>')


def _lease_rows(leases: list[LeaseView], sid: str) -> list[list[str]]:
    rows = []
    for v in leases:
        cancel = "" if v.state in ENDED else (
            f'<form method="post" action="/leases/{v.id}/cancel" data-confirm="Cancel lease {v.id}?">'
            f'{csrf_field(sid)}'
            f'<button type="submit" aria-label="Cancel lease {v.id}">Cancel</button></form>')
        state = f'<span class="state s-{e(v.state)}">{e(v.state)}</span>'
        rows.append([f'<a href="/leases/{v.id}">{e(v.id)}</a>', e(v.owner), e(v.type), state,
                     e(v.nodes), e(v.start), e(v.end), e(v.reason), cancel])
    return rows


# -- the routes -------------------------------------------------------------------------------------
def add_pages(app: FastAPI, manager: LeaseManager, engine: Engine, qos: Any = None, runs: Any = None) -> None:
    """The dashboard's routes on ``app``; called before the API's routes (the pages sharing a path
    with an API route must be tried first). ``qos``: a QoSService, whose bags and accounts get pages;
    ``runs``: a RunRegistry, whose runs get pages."""
    from skylease.service.web.sse import EventStreams

    router = APIRouter(include_in_schema=False)

    async def form(request: Request) -> dict[str, str]:
        body = (await request.body()).decode("utf-8", "replace")
        return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}

    def session(request: Request) -> tuple[User, str] | None:
        sid = request.cookies.get(COOKIE)
        user = user_for_session(engine, sid)
        return None if user is None or sid is None else (user, sid)

    streams = EventStreams(session)  # (one count of open streams for every page's streams)
    app.state.stream_places = streams.places  # (what is open, for whoever watches the server)

    def to_login() -> RedirectResponse:
        return RedirectResponse("/login", status_code=303)

    def page(handler: Callable[[Request, User, str], Any]) -> Callable[[Request], Any]:
        """A page needing a session (else to /login); a POST also needs the session's CSRF token."""
        async def endpoint(request: Request) -> Response:
            found = await run_in_threadpool(session, request)
            if found is None:
                return to_login()
            user, sid = found
            if request.method == "POST":
                fields = request.state.form = await form(request)
                if not csrf_ok(sid, fields.get("csrf")):
                    return render_page("Forbidden", '<p class="error">The form has expired or did not '
                                       'come from this site (CSRF token missing or wrong). '
                                       '<a href="/leases">Back</a></p>', user, sid, 403)
            try:
                return await run_in_threadpool(handler, request, user, sid)
            except Unavailable as exc:  # (it stopped after the health guard looked: the banner says why)
                return render_page("Service unavailable", f'<p class="error">{e(exc)}</p>', user, sid, 503)
        return endpoint

    from skylease.service.web.gantt import add_gantt

    @router.get("/")
    def root() -> RedirectResponse:
        return RedirectResponse("/leases", status_code=303)

    @router.get("/login")
    def login_form() -> HTMLResponse:
        return render_page("Log in", _login_form())

    @router.post("/login")
    async def login(request: Request) -> Response:
        if (why := cross_site(request)) is not None:  # (a login CSRF: see the module)
            return render_page("Log in", _login_form(f"Not logged in: {why}."), status=403)
        token = (await form(request)).get("token", "").strip()
        user = await run_in_threadpool(user_for_token, engine, token)
        if user is None:
            return render_page("Log in", _login_form("invalid token"), status=401)
        sid = await run_in_threadpool(create_session, engine, user.name)
        out = RedirectResponse("/leases", status_code=303)
        out.set_cookie(COOKIE, sid, max_age=SESSION_S, path="/", httponly=True, samesite="strict",
                       secure=request.url.scheme == "https")
        return out

    def logout(_request: Request, _user: User, sid: str) -> Response:
        end_session(engine, sid)
        out = to_login()
        out.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return out

    def leases(request: Request, user: User, sid: str) -> Response:
        scope = user.scope
        try:  # a page of each list: the address's limit, and a cursor for each
            query = page_from(request.query_params)
            queue_after = page_from(request.query_params, "queue_after").after
            after, q_after = decode("leases", query.after), decode("queue", queue_after)
        except UserError as exc:
            return render_page("Bad request", f'<p class="error">{e(exc)}</p>', user, sid, 422)
        mine, cursor = split(manager.leases(scope, after and after[0], query.limit + 1), query.limit,
                             "leases", lambda v: (v.id,))
        queue, q_cursor = split(manager.queue(scope, q_after and q_after[0], query.limit + 1), query.limit,
                                "queue", lambda v: (v.id,))
        heads = ["id", "owner", "type", "state", "nodes", "start", "end", "note", "action"]

        def nav(label: str, here: str | None, there: str | None, key: str, **keep: str | None) -> str:
            """A table's page links (the other table's cursor kept: each moves on its own)."""
            first = None if here is None else list_url("/leases", query.limit, **keep)
            on = None if there is None else list_url("/leases", query.limit, **{key: there}, **keep)
            return pager(label, first, on)

        body = (f'<p class="now">Lease clock: {e(manager.now())} s · '
                '<a href="/leases/new">Request a lease</a></p>' + GANTT_FIGURE
                + '<div id="lease-tables">'
                + table("Leases", heads, _lease_rows(mine, sid), "No leases yet.")
                + nav("pages of leases", query.after, cursor, "after", queue_after=queue_after)
                + '<h2 id="queue">Queue</h2>'
                + table("Best-effort leases waiting, in queue order",
                         ["id", "owner", "nodes", "duration", "submitted"],
                         [[e(v.id), e(v.owner), e(v.nodes), e(v.requested_duration), e(v.submit)]
                          for v in queue], "The queue is empty.")
                + nav("pages of the queue", queue_after, q_cursor, "queue_after", after=query.after)
                + "</div>")
        return render_page("Leases", body, user, sid)

    def request_form(_request: Request, user: User, sid: str) -> Response:
        when = '<p><a href="/leases/when">When could a lease start?</a> (a dry run: nothing is booked)</p>'
        return render_page("Request a lease", _request_form(sid, manager.now()) + when, user, sid)

    def request_lease(request: Request, user: User, sid: str) -> Response:
        fields = request.state.form
        try:
            view = manager.request(user.name, lease_request_from_form(fields))
        except BadBody as exc:
            form_again = _request_form(sid, manager.now(), fields, exc)
            return render_page("Request a lease", form_again, user, sid, 422)
        except UserError as exc:  # refused by the scheduler: the reason (and when it fits), the form kept
            earliest = getattr(exc, "earliest_start", None)
            why = exc.message + ("" if earliest is None else f" The earliest start that fits: lease time "
                                 f"{earliest}.")
            form_again = _request_form(sid, manager.now(), fields, why)
            return render_page("Request a lease", form_again, user, sid, 409)
        return RedirectResponse(f"/leases/{view.id}", status_code=303)

    def cancel(request: Request, user: User, sid: str) -> Response:
        lease_id = int(request.path_params["lease_id"])
        try:
            if lease_id > 2**53:  # the API's bound on ids: beyond it, no lease (and no SQL overflow)
                raise LeaseNotFound(f"no lease {lease_id}")
            manager.cancel(user.scope, lease_id)
        except LeaseNotFound as exc:
            return render_page("Not found", f'<p class="error">{e(exc)}</p>', user, sid, 404)
        except UserError as exc:
            return render_page("Refused", f'<p class="error">{e(exc)}</p>', user, sid, 409)
        return RedirectResponse("/leases", status_code=303)

    def hosts(_request: Request, user: User, sid: str) -> Response:
        if not user.admin:
            return render_page("Forbidden", '<p class="error">Only an administrator may list the hosts.</p>',
                         user, sid, 403)
        now = time.time()
        rows = [[e(h.name), e(h.host or "(this machine)"),
                 e(h.state if h.reason is None else f"{h.state}: {h.reason}"),
                 e("-" if h.last_contact is None else f"{max(0.0, now - h.last_contact):.0f} s ago"),
                 e(h.cpu), e(h.memory), e(h.disk), e(", ".join(map(str, h.leases))),
                 e(", ".join(h.cache)), e(h.vms or "-")] for h in manager.hosts()]
        heads = ["node", "host", "state", "last contact", "CPU", "memory (MB)", "disk (MB)", "leases now",
                 "image cache", "VMs run under"]
        body = table("The site's nodes", heads, rows, "No nodes.")
        return render_page("Hosts", body, user, sid)

    add_gantt(router, manager, page, streams, _HtmlRoute, render_page)  # the chart, /events, a lease's page
    router.add_api_route("/logout", page(logout), methods=["POST"])
    router.add_api_route("/leases", page(leases), methods=["GET"], route_class_override=_HtmlRoute)
    router.add_api_route("/leases/new", page(request_form), methods=["GET"])
    router.add_api_route("/leases/new", page(request_lease), methods=["POST"])
    router.add_api_route("/leases/{lease_id:int}/cancel", page(cancel), methods=["POST"])
    from skylease.service.web.extend_form import add_extend_route

    add_extend_route(router, manager, page, render_page)  # the lease page's Extend form
    from skylease.service.web.when_form import add_when_route

    add_when_route(router, manager, page, render_page, _HtmlRoute)  # "When could it start?"
    router.add_api_route("/hosts", page(hosts), methods=["GET"], route_class_override=_HtmlRoute)
    if qos is not None:
        from skylease.service.web.bots import add_bot_pages  # (only with a QoS service)

        add_bot_pages(router, page, qos, streams)
    if runs is not None:
        from skylease.service.web.runs import add_run_pages

        add_run_pages(router, page, runs, _HtmlRoute, streams)
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
