"""One lease's event stream (issue 40, item 4): ``GET /leases/{id}/events``, server-sent events.

Each event of the lease's view (``GET /leases/{id}``'s ``events``: the scheduler's, and
``before-end`` when its warning is given, docs/decisions/before-end-warnings.md) is sent once, as
``event: <its name>`` with the event's JSON as ``data`` and its rank as ``id``: first those that
happened, then each new one as the lease manager's state changes. The stream ends once the lease is
over (done, rejected, cancelled) and its events are sent, after ``stream_s`` real seconds (the
client reconnects: ``retry``; ``Last-Event-ID`` skips what it has seen), when the client leaves,
or when the server stops. Bearer token as every API route: a lease of another user is 404.
Waiting holds no thread (the manager's ``wait_change_async``).
"""

# No `from __future__ import annotations`: FastAPI reads the route's annotations at run time.
import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import FastAPI, Header, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from skylease.runtime.leases.api import LeaseManager, LeaseView
from skylease.service.problems import Problem

__all__ = ["STREAM_S", "add_lease_stream", "event_key"]

#: Real seconds one stream lasts at most (the client reconnects).
STREAM_S = 300.0
#: Real seconds between two looks at whether the client left or the server stops.
WAKE_S = 0.5
_OVER = ("done", "rejected", "cancelled")
#: One server-sent event of the stream (as the OpenAPI document says it): its rank, its name and its
#: JSON (a ``retry`` alone comes first).
_EVENT = {"type": "object", "properties": {
    "id": {"type": "string", "description": "its rank in the lease's events (1 first)"},
    "event": {"type": "string", "description": "its name, the event's `event` (start, before-end, ...)"},
    "data": {"type": "string", "contentMediaType": "application/json",
             "description": "the event as the lease's `events` list it"},
    "retry": {"type": "integer"}}}


class EventStream(StreamingResponse):
    """A server-sent event stream (its media type is the OpenAPI document's for the route)."""

    media_type = "text/event-stream"


def event_key(ev: dict[str, Any]) -> tuple[Any, ...]:
    """What names an event across views: its time, its name and its planned start or end (a run's
    ``until`` may change once it ends: not part of it)."""
    return (ev.get("time"), ev.get("event"), ev.get("planned_start"), ev.get("end"), ev.get("image"))


def _frames(view: LeaseView, sent: dict[tuple[Any, ...], int], rank: list[int]) -> list[tuple[int, str]]:
    """The events of ``view`` not sent yet (``sent``: key -> how many of that key were sent), each
    with its rank (``rank[0]``: the last one given)."""
    out = []
    seen: dict[tuple[Any, ...], int] = {}
    for ev in view.events:
        key = event_key(ev)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= sent.get(key, 0):
            continue
        sent[key] = seen[key]
        rank[0] += 1
        data = json.dumps(ev, sort_keys=True)
        out.append((rank[0], f"id: {rank[0]}\nevent: {ev.get('event')}\ndata: {data}\n\n"))
    return out


def add_lease_stream(app: FastAPI, caller: Any, manager: LeaseManager, errors: dict[int | str, Any],
                     path: str, stream_s: float = STREAM_S) -> None:
    """The route on ``app`` at ``path + "/events"`` (``path``: the lease routes' path), for the
    ``caller`` dependency (the bearer token's user)."""
    LeaseId = Annotated[int, Path(ge=0, le=2**53, description="The lease's id.")]

    @app.get(path + "/events", tags=["leases"], response_model=None,
             responses={**errors,
                        404: {"model": Problem, "description": "no such lease visible to the caller"},
                        200: {"description": "server-sent events: one per event of the lease",
                              "content": {"text/event-stream": {"schema": _EVENT}}}})
    async def lease_events(lease_id: LeaseId, user: caller, request: Request,  # type: ignore[valid-type]
                           last_event_id: Annotated[int, Header(ge=0, le=2**31)] = 0
                           ) -> EventStream:
        """The lease's events as server-sent events (`event:` its name, `data:` its JSON, as in the
        lease's `events`): those so far, then each new one (a `before-end` warning among them) until
        the lease is over, or for a few minutes (reconnect with `Last-Event-ID`)."""
        owner = user.scope
        first = manager.version()  # (read before the view: a change after it is not lost)
        view = await run_in_threadpool(manager.lease, owner, lease_id)  # (404 before the stream starts)
        stopping = getattr(request.app.state, "stopping", lambda: False)

        async def stream() -> AsyncIterator[str]:
            sent: dict[tuple[Any, ...], int] = {}
            rank = [0]
            skip = last_event_id
            yield "retry: 2000\n\n"
            current = view
            loop = asyncio.get_running_loop()
            deadline = loop.time() + stream_s
            seen = first
            while True:
                for n, frame in _frames(current, sent, rank):
                    if n > skip:
                        yield frame
                if current.state in _OVER or loop.time() >= deadline or stopping() \
                        or await request.is_disconnected():
                    return
                while await manager.wait_change_async(seen, max(0.0, min(WAKE_S, deadline - loop.time()))) \
                        == seen:
                    if loop.time() >= deadline or stopping() or await request.is_disconnected():
                        return
                seen = manager.version()
                current = await run_in_threadpool(manager.lease, owner, lease_id)

        return EventStream(stream(), media_type="text/event-stream",
                           headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
