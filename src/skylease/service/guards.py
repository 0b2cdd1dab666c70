"""The service's ASGI guards: what every request passes before a route sees it, and what every
answer passes on its way out (docs/decisions/serve-request-bodies.md).

:class:`RequestGuard`, in this order:

- a path or query string holding a control character (``%00`` ...) is 422, on every route: no
  database is asked to store or look up such a name (PostgreSQL refuses a NUL with an error);
- the body is read here, whole, before any route: one over :data:`MAX_BODY_BYTES` is 413 as soon
  as that is known (its Content-Length, or the bytes received of a chunked one), on every route;
- a JSON body (``application/json``, ``*+json``, or no content type: what FastAPI parses as
  JSON) that is not UTF-8, nests deeper than :data:`~skylease.model.files.JSON_MAX_DEPTH` or
  holds a number longer than :data:`~skylease.model.files.JSON_MAX_NUMBER` characters is 422,
  before anything parses it;
- a 405 answer's ``Allow`` lists every method the path has (Starlette's lists those of the one
  route it tried).

:class:`CatchAll` logs an unexpected exception with its traceback and answers a generic 500.
Every refusal is ``{"detail": "one line"}``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote_plus

from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match

from skylease.model.errors import UserError
from skylease.model.files import check_json_limits
from skylease.model.wire import control_problem
from skylease.service.bodies import BODY

__all__ = ["MAX_BODY_BYTES", "CatchAll", "RequestGuard", "is_json"]

#: The largest request body the service reads.
MAX_BODY_BYTES = 64 * 1024

log = logging.getLogger("skylease.service")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _problem(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def is_json(content_type: str) -> bool:
    """Whether FastAPI reads a body of this Content-Type (its value, parameters and all) as JSON."""
    media = content_type.split(";")[0].strip().lower()
    return media in ("", "application/json") or (media.startswith("application/") and media.endswith("+json"))


def _where_control(scope: Scope) -> str | None:
    path = scope.get("path", "")
    if (problem := control_problem(path)) is not None:
        return f"path: {problem}"
    raw = scope.get("query_string", b"").decode("latin-1")
    if raw and (problem := control_problem(unquote_plus(raw, errors="replace"))) is not None:
        return f"query string: {problem}"
    return None


class RequestGuard:
    """See the module: control characters in the path, the body's size and its JSON's shape, the
    ``Allow`` header of a 405 (the methods of every route of ``routes`` matching the path)."""

    def __init__(self, app: ASGIApp, routes: list[BaseRoute], limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.routes, self.limit = app, routes, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if (problem := _where_control(scope)) is not None:
            await _problem(422, problem)(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            await self._too_large(scope, receive, send)
            return
        chunks, size, ended = [], 0, False
        while not ended:
            message = await receive()
            if message["type"] != "http.request":  # the client left: nothing to answer
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await self._too_large(scope, receive, send)
                return
            ended = not message.get("more_body", False)
        body = b"".join(chunks)
        if body and is_json(headers.get(b"content-type", b"").decode("latin-1")):
            try:
                check_json_limits(body.decode("utf-8-sig"), BODY)
            except UnicodeDecodeError:
                await _problem(422, f"{BODY}: not UTF-8 text")(scope, receive, send)
                return
            except UserError as exc:
                await _problem(422, str(exc))(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # (then: the client's disconnection, which event streams wait for)

        async def allow_all(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                allowed = ", ".join(self._methods(scope)).encode("latin-1")
                message["headers"] = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"allow"]
                message["headers"].append((b"allow", allowed))
            await send(message)

        await self.app(scope, replay, allow_all)

    def _methods(self, scope: Scope) -> list[str]:
        """Every method some route answers at this path (for these headers)."""
        return [m for m in _METHODS
                if any(r.matches({**scope, "method": m})[0] is Match.FULL for r in self.routes)]

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _problem(413, f"{BODY} larger than {self.limit // 1024} KiB",
                       {"Connection": "close"})(scope, receive, send)


class CatchAll:
    """An unexpected exception: logged here, with its traceback; the client gets a generic 500."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception:
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if started or scope["type"] != "http":
                raise
            generic = _problem(500, "internal server error (the server's log has the details)")
            await generic(scope, receive, send)
