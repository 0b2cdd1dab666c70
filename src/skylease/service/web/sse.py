"""A dashboard page's server-sent event stream (issue 21): ``change`` events from a change counter.

The stream answers only a dashboard session (not a bearer token) on a same-origin request
(``Sec-Fetch-Site``, which browsers send): else 403. It starts with a ``hello`` carrying the
counter's version (a page compares it with the version it was rendered at: a change in between is
not lost), then sends one ``change`` per new version that ``relevant`` accepts. It lasts at most
``STREAM_S`` (the browser reconnects, ``retry``) and ends within ``WAKE_S`` of the client leaving
or of the server stopping (``app.state.stopping``), so it never holds a stopping server.

Fair sharing (docs/decisions/serve-fair-sharing.md): a stream waits on the event loop
(:meth:`~skylease.runtime.changes.Changes.wait_async`), so it holds no worker thread however long
it stays open, and a session may have at most :data:`MAX_STREAMS_PER_SESSION` streams open at once
(a user, over all their sessions, :data:`MAX_STREAMS_PER_USER`): the next one is refused with 429, a
reason and ``Retry-After``. A stream's place is given back when it ends, whatever ends it (its
time is up, the client leaves, the server stops).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from skylease.model.errors import UserError
from skylease.service.auth import User
from skylease.service.web.layout import HEADERS, e, live_attrs, render_page

__all__ = ["MAX_STREAMS_PER_SESSION", "MAX_STREAMS_PER_USER", "RETRY_AFTER_S", "STREAM_S", "WAKE_S",
           "EventStreams", "StreamPlaces", "add_live_list", "same_origin"]

#: Real seconds between two looks at whether the client left or the server stops.
WAKE_S = 0.5
#: Real seconds an event stream lasts: the browser reconnects (``retry``), so no stream outlives a
#: client long.
STREAM_S = 300.0
#: Event streams one dashboard session may have open at once: as many as a browser opens to one
#: host over HTTP/1.1 (six), a few tabs of live pages.
MAX_STREAMS_PER_SESSION = 6
#: Event streams one user may have open at once, over all their sessions (five browsers' worth).
MAX_STREAMS_PER_USER = 5 * MAX_STREAMS_PER_SESSION
#: The Retry-After of a stream refused for the cap (seconds): a tab closed frees its place at once.
RETRY_AFTER_S = 10


def same_origin(request: Request) -> bool:
    site = request.headers.get("sec-fetch-site")
    return site in (None, "same-origin")


class StreamPlaces:
    """The open event streams, counted per session and per user (taken and given back on the
    event loop; a lock all the same, as the count is cheap and a test may share it with threads)."""

    def __init__(self, per_session: int = MAX_STREAMS_PER_SESSION, per_user: int = MAX_STREAMS_PER_USER
                 ) -> None:
        self.per_session, self.per_user = per_session, per_user
        self._sessions: Counter[str] = Counter()
        self._users: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self, sid: str, user: str) -> str | None:
        """A place for a new stream of session ``sid`` of ``user``: None when taken, else the reason
        it is refused."""
        with self._lock:
            if self._sessions[sid] >= self.per_session:
                return (f"this session has {self._sessions[sid]} event streams open, the most a session may "
                        "have: close a tab of the dashboard (or wait for a stream to end) and try again")
            if self._users[user] >= self.per_user:
                return (f"{user} has {self._users[user]} event streams open over their sessions, the most a "
                        "user may have: close some dashboard tabs and try again")
            self._sessions[sid] += 1
            self._users[user] += 1
            return None

    def give(self, sid: str, user: str) -> None:
        with self._lock:
            for counts, key in ((self._sessions, sid), (self._users, user)):
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]

    def open(self, sid: str | None = None) -> int:
        """Streams open (of session ``sid``; None: all)."""
        with self._lock:
            return sum(self._sessions.values()) if sid is None else self._sessions[sid]


class _PlacedStream(StreamingResponse):
    """A stream that takes its place when it starts (else answers 429) and gives it back when it
    ends, however it ends (``__call__`` returns, or is cancelled: the client left)."""

    def __init__(self, content: AsyncIterator[str], places: StreamPlaces, sid: str, user: str,
                 headers: dict[str, Any]) -> None:
        super().__init__(content, media_type="text/event-stream", headers=headers)
        self.places, self.sid, self.user = places, sid, user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.places.take(self.sid, self.user)
        if refused is not None:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]  # (never started)
            await JSONResponse({"detail": refused}, status_code=429,
                               headers={"Retry-After": str(RETRY_AFTER_S)})(scope, receive, send)
            return
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.places.give(self.sid, self.user)


class EventStreams:
    """The dashboard's event streams: each needs a session (``session(request)``: the user and
    session id, or None), and takes a place of ``places``."""

    def __init__(self, session: Callable[[Request], tuple[User, str] | None],
                 places: StreamPlaces | None = None) -> None:
        self.session = session
        self.places = StreamPlaces() if places is None else places

    async def __call__(self, request: Request, version: Callable[[], int],
                       wait_change: Callable[[int, float], Awaitable[int]],
                       relevant: Callable[[User, int], bool] | None = None) -> Response:
        """The event stream of ``request``: ``version()`` is the counter, ``await wait_change(seen,
        timeout)`` waits for it to move (on the event loop); ``relevant(user, since)`` says whether
        the changes after ``since`` concern the session's user (None: every change does; it must be
        quick: it runs on the event loop)."""
        found = await run_in_threadpool(self.session, request)
        if found is None or not same_origin(request):
            return JSONResponse({"detail": "a dashboard session is needed"}, status_code=403)
        user, sid = found
        stopping: Callable[[], bool] = getattr(request.app.state, "stopping", lambda: False)

        async def stream() -> AsyncIterator[str]:
            seen = version()
            yield f"retry: 2000\nevent: hello\ndata: {seen}\n\n"
            loop = asyncio.get_running_loop()
            deadline = loop.time() + STREAM_S
            while loop.time() < deadline and not stopping() and not await request.is_disconnected():
                now = await wait_change(seen, WAKE_S)
                if now == seen:
                    continue
                if relevant is None or relevant(user, seen):
                    yield f"event: change\ndata: {json.dumps({'version': now})}\n\n"
                seen = now

        headers: dict[str, Any] = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return _PlacedStream(stream(), self.places, sid, user.name, headers)


def add_live_list(router: APIRouter, page: Callable[..., Any], path: str, title: str,
                  version: Callable[[], int], fragment: Callable[[User, Request], str], *, head: str = "",
                  route_class: type | None = None) -> None:
    """A list page at ``path`` kept live by dashboard.js: its body is ``fragment(user, request)`` (a
    table: the page of the list the request's query names), fetched again from ``path/live`` (with
    the same query) at each change of the stream ``path/events`` (added by the caller, with what it
    may tell whom). ``head`` goes before the list (a style sheet)."""
    element = path.strip("/").replace("/", "-")

    def list_page(request: Request, user: User, sid: str) -> Response:
        seen = version()  # (read first: a change while rendering is streamed, not lost)
        try:
            listed = fragment(user, request)
        except UserError as exc:  # (a wrong limit or cursor in the address)
            return render_page("Bad request", f'<p class="error">{e(exc)}</p>', user, sid, 422)
        page = {k: v for k in ("limit", "after") if (v := request.query_params.get(k)) is not None}
        live = f"{path}/live" + (f"?{urlencode(page)}" if page else "")
        body = f'{head}<div id="{element}"{live_attrs(live, f"{path}/events", seen)}>{listed}</div>'
        return render_page(title, body, user, sid)

    def list_live(request: Request, user: User, _sid: str) -> Response:
        try:
            return HTMLResponse(fragment(user, request), headers=HEADERS)
        except UserError as exc:
            return HTMLResponse(e(exc), status_code=422, headers=HEADERS)

    extra = {} if route_class is None else {"route_class_override": route_class}
    router.add_api_route(path, page(list_page), methods=["GET"], **extra)
    router.add_api_route(f"{path}/live", page(list_live), methods=["GET"])
