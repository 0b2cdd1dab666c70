"""A dashboard page's server-sent event stream (issue 21): ``change`` events from a change counter.

The stream answers only a dashboard session (not a bearer token) on a same-origin request
(``Sec-Fetch-Site``, which browsers send): else 403. It starts with a ``hello`` carrying the
counter's version (a page compares it with the version it was rendered at: a change in between is
not lost), then sends one ``change`` per new version that ``relevant`` accepts. It lasts at most
``STREAM_S`` (the browser reconnects, ``retry``) and ends within ``WAKE_S`` of the client leaving
or of the server stopping (``app.state.stopping``), so it never holds a stopping server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from skylease.service.auth import User
from skylease.service.web.layout import HEADERS, live_attrs, render_page

__all__ = ["STREAM_S", "WAKE_S", "add_live_list", "change_stream", "same_origin"]

#: Real seconds between two looks at whether the client left or the server stops.
WAKE_S = 0.5
#: Real seconds an event stream lasts: the browser reconnects (``retry``), so no stream outlives a
#: client long.
STREAM_S = 300.0


def same_origin(request: Request) -> bool:
    site = request.headers.get("sec-fetch-site")
    return site in (None, "same-origin")


async def change_stream(request: Request, session: Callable[[Request], tuple[User, str] | None],
                        version: Callable[[], int], wait_change: Callable[[int, float], int],
                        relevant: Callable[[User, int], bool] | None = None) -> Response:
    """The event stream of ``request``: ``version()`` is the counter, ``wait_change(seen, timeout)``
    waits for it to move (in a worker thread: it blocks); ``relevant(user, since)`` says whether
    the changes after ``since`` concern the session's user (None: every change does)."""
    found = await run_in_threadpool(session, request)
    if found is None or not same_origin(request):
        return JSONResponse({"detail": "a dashboard session is needed"}, status_code=403)
    user = found[0]
    stopping: Callable[[], bool] = getattr(request.app.state, "stopping", lambda: False)

    async def stream() -> AsyncIterator[str]:
        seen = version()
        yield f"retry: 2000\nevent: hello\ndata: {seen}\n\n"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STREAM_S
        while loop.time() < deadline and not stopping() and not await request.is_disconnected():
            now = await run_in_threadpool(wait_change, seen, WAKE_S)
            if now == seen:
                continue
            if relevant is None or await run_in_threadpool(relevant, user, seen):
                yield f"event: change\ndata: {json.dumps({'version': now})}\n\n"
            seen = now

    headers: dict[str, Any] = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


def add_live_list(router: APIRouter, page: Callable[..., Any], path: str, title: str,
                  version: Callable[[], int], fragment: Callable[[User], str], *, head: str = "",
                  route_class: type | None = None) -> None:
    """A list page at ``path`` kept live by dashboard.js: its body is ``fragment(user)`` (a table),
    fetched again from ``path/live`` at each change of the stream ``path/events`` (added by the
    caller, with what it may tell whom). ``head`` goes before the list (a style sheet)."""
    element = path.strip("/").replace("/", "-")

    def list_page(_request: Request, user: User, sid: str) -> Response:
        seen = version()  # (read first: a change while rendering is streamed, not lost)
        body = (f'{head}<div id="{element}"{live_attrs(f"{path}/live", f"{path}/events", seen)}>'
                f"{fragment(user)}</div>")
        return render_page(title, body, user, sid)

    def list_live(_request: Request, user: User, _sid: str) -> Response:
        return HTMLResponse(fragment(user), headers=HEADERS)

    extra = {} if route_class is None else {"route_class_override": route_class}
    router.add_api_route(path, page(list_page), methods=["GET"], **extra)
    router.add_api_route(f"{path}/live", page(list_live), methods=["GET"])
