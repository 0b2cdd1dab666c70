"""The lease manager's HTTP API (issue 19): FastAPI routes over a :class:`LeaseManager`.

Routes (OpenAPI at ``/docs``, ``/redoc`` and ``/openapi.json``)::

    POST   /leases        a lease request (JSON, or application/xml: one Haizea <lease> element) -> 201
    GET    /leases        the caller's leases (an administrator's: every lease)
    GET    /leases/{id}   one lease: its events, where it runs, its payloads
    DELETE /leases/{id}   cancel it
    GET    /queue         best-effort leases waiting, in queue order
    GET    /hosts         the site's nodes (administrators only)
    GET    /me            the caller: {"name": ..., "admin": ...} (`skylease login` checks a token with it)
    GET    /health        {"ok": true, "now": lease time, "version": ...}; no token needed; 503 with
                          "detail" when a part of the server has stopped (service/health.py)

Every route but ``/health`` and the documentation needs ``Authorization: Bearer TOKEN`` (401
otherwise, with ``WWW-Authenticate: Bearer``). A user sees, shows and cancels only their own
leases; another's is 404, as one that does not exist (so ids tell nothing).

Errors are ``{"detail": "one line"}``: a malformed body or parameter 422, a body over 64 KiB 413,
an unsupported content type 415, a refused request (:class:`LeaseRefused`) 409, a lease not found
404, any other :class:`UserError` 400, a route whose part of the server has stopped 503 (the
reason: :mod:`skylease.service.health`). Nothing a client sends gets a traceback: an unexpected
exception is logged on the server and answered 500 with a generic message.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, which name local
# aliases (Caller, LeaseId), at run time.
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from sqlalchemy.engine import Engine

from skylease import __version__
from skylease.model.errors import UserError
from skylease.runtime.health import Unavailable
from skylease.runtime.leases.api import (
    HostView,
    LeaseManager,
    LeaseNotFound,
    LeaseRefused,
    LeaseRequest,
    LeaseView,
)
from skylease.service.auth import User, user_for_token
from skylease.service.bodies import BODY, BadBody, is_xml, lease_request_from_json, lease_request_from_xml
from skylease.service.health import LEASES, HealthGuard, Vitals, add_health

__all__ = ["MAX_BODY_BYTES", "create_app"]

#: The largest request body the service reads.
MAX_BODY_BYTES = 64 * 1024

log = logging.getLogger("skylease.service")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _TooLarge(Exception):
    pass


class Problem(BaseModel):
    """Every error answer: one line saying what is wrong."""

    detail: str


class Me(BaseModel):
    name: str
    admin: bool


# -- request bodies -------------------------------------------------------------------------------
def _media_type(request: Request, body: bytes) -> str:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype in ("", "application/x-www-form-urlencoded", "text/plain"):  # curl -d: look at the text
        return "xml" if is_xml(body) else "json"
    if ctype == "application/json" or ctype.endswith("+json"):
        return "json"
    if ctype in ("application/xml", "text/xml") or ctype.endswith("+xml"):
        return "xml"
    raise HTTPException(415, f"unsupported content type {ctype!r}: send application/json or application/xml")


# -- the ASGI guards --------------------------------------------------------------------------------
class _BodyLimit:
    """Refuse a body over ``limit`` bytes: at once when its Content-Length says so, else as soon as
    more has been received (a chunked body)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await _too_large(self.limit)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        await self.app(scope, limited, send)


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse({"detail": f"request body larger than {limit // 1024} KiB"}, status_code=413)


class _CatchAll:
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
            await JSONResponse({"detail": "internal server error (the server's log has the details)"},
                               status_code=500)(scope, receive, send)


# -- the app ----------------------------------------------------------------------------------------
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "no token, or not a valid one"},
    422: {"model": Problem, "description": "a malformed parameter or body"},
    503: {"model": Problem, "description": "a part of the server this route needs has stopped (the reason; "
                                           "restart the server)"},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "no such lease visible to the caller"}}


def _readable(exc: RequestValidationError) -> str:
    """pydantic's first error as one line: where, and what is wrong."""
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body",))
    what = str(first.get("msg", "invalid"))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {what}{more}" if where else f"{what}{more}"


def create_app(manager: LeaseManager, engine: Engine, qos: Any = None, runs: Any = None,
               vitals: Vitals | None = None) -> FastAPI:
    """The service's app: the lease routes over ``manager``, users and tokens in ``engine``,
    SpeQuloS's routes over ``qos`` (a :class:`~skylease.runtime.qos.service.QoSService`) if given,
    and the runs' routes over ``runs`` (a :class:`~skylease.runtime.runs.registry.RunRegistry`;
    default: one on ``engine``); ``vitals``: the server's other vital parts (the manager is added)."""
    from skylease.runtime.runs.registry import RunNotFound, RunRegistry

    vitals = Vitals() if vitals is None else vitals
    vitals.add(LEASES, manager.failure)

    runs = RunRegistry(engine) if runs is None else runs
    app = FastAPI(title="skylease", version=__version__,
                  description="The skylease lease manager: request, list, show and cancel leases. Every "
                              "route but /health needs `Authorization: Bearer TOKEN` (a token from "
                              "`skylease serve user add NAME`).")
    bearer = HTTPBearer(auto_error=False, description="A token printed by `skylease serve user add NAME`.")

    def current_user(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> User:
        if creds is None:
            raise HTTPException(401, "missing bearer token (Authorization: Bearer TOKEN)",
                                headers={"WWW-Authenticate": "Bearer"})
        user = user_for_token(engine, creds.credentials)
        if user is None:
            raise HTTPException(401, "invalid token",
                                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return user

    Caller = Annotated[User, Depends(current_user)]
    LeaseId = Annotated[int, Path(ge=0, le=2**53, description="The lease's id.")]

    from skylease.service.web.pages import add_pages

    add_pages(app, manager, engine, qos, runs)  # first: its HTML pages share /leases and /hosts with the API

    add_health(app, vitals, manager.now)

    @app.get("/me", response_model=Me, tags=["service"], responses=_ERRORS)
    def me(user: Caller) -> Me:
        """Who the token belongs to: the caller's name and whether they are an administrator."""
        return Me(name=user.name, admin=user.admin)

    @app.post("/leases", status_code=201, response_model=LeaseView, tags=["leases"],
              responses={**_ERRORS, 409: {"model": Problem, "description": "the request is refused"},
                         413: {"model": Problem, "description": "the body is larger than 64 KiB"},
                         415: {"model": Problem, "description": "neither JSON nor XML"}},
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": LeaseRequest.model_json_schema()},
                  "application/xml": {"schema": {"type": "string", "description":
                                                 "One Haizea <lease> (or <lease-request>) element."}}}}})
    async def request_lease(request: Request, user: Caller) -> LeaseView:
        """Request a lease. Answered with the lease as the scheduler placed it (scheduled, reserved,
        queued) or 409 with the reason it is refused."""
        body = await request.body()
        kind = _media_type(request, body)
        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise BadBody("not UTF-8 text", file=BODY) from None
        req = lease_request_from_xml(text) if kind == "xml" else lease_request_from_json(text)
        return await run_in_threadpool(manager.request, user.name, req)

    @app.get("/leases", response_model=list[LeaseView], tags=["leases"], responses=_ERRORS)
    def list_leases(user: Caller) -> list[LeaseView]:
        """The caller's leases (an administrator's: every lease), by id."""
        return manager.leases(user.scope)

    @app.get("/leases/{lease_id}", response_model=LeaseView, tags=["leases"],
             responses={**_ERRORS, **_NOT_FOUND})
    def show_lease(lease_id: LeaseId, user: Caller) -> LeaseView:
        """One lease: its state events, reservations, where it runs and its payloads."""
        return manager.lease(user.scope, lease_id)

    @app.delete("/leases/{lease_id}", response_model=LeaseView, tags=["leases"],
                responses={**_ERRORS, **_NOT_FOUND})
    def cancel_lease(lease_id: LeaseId, user: Caller) -> LeaseView:
        """Cancel a lease: it leaves the queue or the slot table, and its payloads are stopped."""
        return manager.cancel(user.scope, lease_id)

    @app.get("/queue", response_model=list[LeaseView], tags=["leases"], responses=_ERRORS)
    def queue(user: Caller) -> list[LeaseView]:
        """Best-effort leases waiting to start, in queue order (the caller's, or all for an admin)."""
        return manager.queue(user.scope)

    @app.get("/hosts", response_model=list[HostView], tags=["site"],
             responses={**_ERRORS, 403: {"model": Problem, "description": "not an administrator"}})
    def hosts(user: Caller) -> list[HostView]:
        """The site's nodes: capacity, the leases on each now, the images in each cache (admins)."""
        if not user.admin:
            raise HTTPException(403, "only an administrator may list the hosts")
        return manager.hosts()

    if qos is not None:
        from skylease.runtime.qos.ledger import CreditRefused
        from skylease.runtime.qos.service import NotYours
        from skylease.service.qos_api import add_qos_routes

        add_qos_routes(app, Caller, qos, _ERRORS)
        app.add_exception_handler(CreditRefused, lambda _r, e: JSONResponse({"detail": str(e)}, 409))
        app.add_exception_handler(NotYours, lambda _r, e: JSONResponse({"detail": str(e)}, 404))

    from skylease.service.runs_api import add_run_routes

    add_run_routes(app, Caller, runs, _ERRORS)
    app.add_exception_handler(RunNotFound, lambda _r, e: JSONResponse({"detail": str(e)}, 404))

    def answer(status: int) -> Callable[[Request, Exception], JSONResponse]:
        def handler(_request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"detail": str(exc)}, status_code=status)
        return handler

    app.add_exception_handler(BadBody, answer(422))
    app.add_exception_handler(LeaseRefused, answer(409))
    app.add_exception_handler(LeaseNotFound, answer(404))
    app.add_exception_handler(UserError, answer(400))
    app.add_exception_handler(Unavailable, answer(503))  # (the manager stopped after the guard looked)
    app.add_exception_handler(_TooLarge, lambda _r, _e: _too_large(MAX_BODY_BYTES))
    app.add_exception_handler(
        RequestValidationError,
        lambda _r, exc: JSONResponse({"detail": _readable(exc)}, status_code=422))  # type: ignore[arg-type]
    app.add_middleware(HealthGuard, vitals=vitals)
    app.add_middleware(_BodyLimit)
    app.add_middleware(_CatchAll)  # added last: outermost, so it sees what every other layer raises
    return app
