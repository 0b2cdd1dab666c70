"""The lease manager's HTTP API (issue 19): FastAPI routes over a :class:`LeaseManager`.

Routes (OpenAPI at ``/docs``, ``/redoc`` and ``/openapi.json``)::

    POST   /leases        a lease request (JSON, or application/xml: one Haizea <lease> element) -> 201
    GET    /leases        the caller's leases (an administrator's: every lease), a page at a time
    GET    /leases/offers a dry run: the earliest start of ?nodes=N&duration=D[&not_before=T&cpu=&memory=
                          &disk=], and the nodes free at not_before (docs/decisions/lease-offers.md)
    GET    /leases/{id}   one lease: its events, where it runs, its payloads
    DELETE /leases/{id}   cancel it
    PATCH  /leases/{id}   a later end: {"by": seconds} or {"end": lease time}, within the site's rules;
                          409 with ``latest_end`` (and an AR's ``earliest_start``) when it does not fit
                          (docs/decisions/lease-extensions.md)
    GET    /leases/{id}/events
                          the lease's events as server-sent events, a ``before-end`` warning among them
                          (service/lease_stream.py)
    GET    /leases/{id}/vms/{vnode}/log
                          one VM's payload: its state or exit status and the tail of its log (JSON,
                          ``bytes`` of it: docs/decisions/payload-logs.md)
    GET    /queue         best-effort leases waiting, in queue order, a page at a time
    GET    /hosts         the site's nodes (administrators only)
    GET    /me            the caller: {"name": ..., "admin": ...} (`skylease login` checks a token with it)
    GET    /health        {"ok": true, "now": lease time, "version": ...}; no token needed; 503 with
                          "detail" when a part of the server has stopped (service/health.py)

Every route but ``/health`` and the documentation needs ``Authorization: Bearer TOKEN`` (401
otherwise, with ``WWW-Authenticate: Bearer``). A user sees, shows and cancels only their own
leases; another's is 404, as one that does not exist (so ids tell nothing). A list answers a page
(``limit``, the cursor ``after``; the next page's cursor in ``X-Next-Cursor`` and ``Link``:
:mod:`skylease.service.paging`).

Errors are ``{"detail": "one line"}`` (docs/decisions/serve-request-bodies.md): a body or parameter
that does not fit the OpenAPI document's schema 422 (a control character in any string or in the
path, a string or a boolean where a number goes, JSON nested too deep or with too long a number:
:mod:`skylease.service.guards` and :mod:`skylease.model.wire`), a body over 64 KiB 413 (chunked or
not), an unsupported content type 415, a lease not found 404, and a well-formed request the service
refuses 409 (:class:`LeaseRefused`, and any other :class:`UserError` of a service: the reason is
the detail; a refused advance reservation or immediate lease adds ``earliest_start``), a route
whose part of the server has stopped 503 (the reason: :mod:`skylease.service.health`). Every
status a route can answer is in the OpenAPI document (:mod:`skylease.service.problems`), whose
pages ``/docs`` and ``/redoc`` load nothing from another host (their assets come from the
fastapi-offline package). Nothing a client sends gets a
traceback: an unexpected exception is logged on the server and answered 500 with a generic message.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, which name local
# aliases (Caller, LeaseId), at run time.
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel
from sqlalchemy.engine import Engine
from starlette.convertors import StringConvertor, register_url_convertor

from skylease import __version__
from skylease.model.errors import UserError
from skylease.runtime.health import Unavailable
from skylease.runtime.leases.api import (
    DEFAULT_LOG_BYTES,
    MAX_LOG_BYTES,
    HostView,
    LeaseChange,
    LeaseManager,
    LeaseNotFound,
    LeaseRefused,
    LeaseRequest,
    LeaseView,
    OfferQuery,
    OfferView,
    PayloadLog,
)
from skylease.runtime.leases.webhooks import WebhookNotAllowed
from skylease.service.auth import User
from skylease.service.bodies import BODY, BadBody, is_xml, lease_request_from_json, lease_request_from_xml
from skylease.service.guards import MAX_BODY_BYTES, CatchAll, RequestGuard
from skylease.service.health import LEASES, HealthGuard, Vitals, add_health
from skylease.service.lease_stream import STREAM_S, add_lease_stream
from skylease.service.paging import PAGED, PageQuery, keys_of, page_query, paged
from skylease.service.problems import ERRORS, UNAVAILABLE, Problem
from skylease.service.token_cache import TokenCache

__all__ = ["MAX_BODY_BYTES", "create_app"]


class Me(BaseModel):
    name: str
    admin: bool


class _LeaseIdSegment(StringConvertor):
    """The path segment of ``/leases/{lease_id}``: any (FastAPI answers 422 for one that is not a
    lease id) but the fixed routes beside it, so that ``DELETE /leases/offers`` is 405 as every
    method a fixed path does not have, not a lease id that is not a number."""

    regex = "(?!offers$)[^/]+"


register_url_convertor("lease_id", _LeaseIdSegment())
#: The lease routes' path (its OpenAPI path is /leases/{lease_id}: the convertor's name is dropped).
LEASE_PATH = "/leases/{lease_id:lease_id}"


class Refusal(BaseModel):
    """A refused request: the reason, and for an advance reservation or immediate lease the
    earliest lease time an advance reservation of it would fit (null when none would)."""

    detail: str
    earliest_start: int | None = None
    #: a refused extension: the latest end that fits now (null when none later does)
    latest_end: int | None = None


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


# -- the app ----------------------------------------------------------------------------------------
_ERRORS: dict[int | str, dict[str, Any]] = {**ERRORS, **UNAVAILABLE}  # (every lease route needs the manager)
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
    if first.get("type") == "value_error":  # (our own validators' words, without pydantic's prefix)
        what = str(first.get("ctx", {}).get("error", what))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {what}{more}" if where else f"{what}{more}"


def _json(view: BaseModel, status: int = 200) -> Response:
    """A route's answer as its JSON, as FastAPI would write it, without FastAPI validating again
    the model just built (docs/decisions/serve-throughput.md)."""
    return Response(view.model_dump_json(), status_code=status, media_type="application/json")


def create_app(manager: LeaseManager, engine: Engine, qos: Any = None, runs: Any = None,
               vitals: Vitals | None = None, lease_stream_s: float = STREAM_S,
               tokens: TokenCache | None = None) -> FastAPI:
    """The service's app: the lease routes over ``manager``, users and tokens in ``engine``,
    SpeQuloS's routes over ``qos`` (a :class:`~skylease.runtime.qos.service.QoSService`) if given,
    and the runs' routes over ``runs`` (a :class:`~skylease.runtime.runs.registry.RunRegistry`;
    default: one on ``engine``); ``vitals``: the server's other vital parts (the manager is added);
    ``lease_stream_s``: how long a lease's event stream lasts at most (service/lease_stream.py);
    ``tokens``: the callers' tokens (default: a :class:`TokenCache` of ``engine``)."""
    from skylease.runtime.runs.registry import RunNotFound, RunRegistry

    vitals = Vitals() if vitals is None else vitals
    vitals.add(LEASES, manager.failure)

    runs = RunRegistry(engine) if runs is None else runs
    # /docs and /redoc: their assets from the fastapi-offline package, no validator badge (Swagger UI
    # would fetch it from its makers' host): nothing from another host
    app = FastAPIOffline(title="skylease", version=__version__, swagger_ui_parameters={"validatorUrl": None},
                         description="The skylease lease manager: request, list, show and cancel leases. "
                                     "Every route but /health needs `Authorization: Bearer TOKEN` (a token "
                                     "from `skylease serve user add NAME`).")
    bearer = HTTPBearer(auto_error=False, description="A token printed by `skylease serve user add NAME`.")
    tokens = TokenCache(engine) if tokens is None else tokens

    async def current_user(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> User:
        if creds is None:
            raise HTTPException(401, "missing bearer token (Authorization: Bearer TOKEN)",
                                headers={"WWW-Authenticate": "Bearer"})
        # (on the event loop when the token was looked up less than a second ago: token_cache.py)
        user = tokens.cached(creds.credentials) or await run_in_threadpool(tokens.lookup, creds.credentials)
        if user is None:
            raise HTTPException(401, "invalid token",
                                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return user

    Caller = Annotated[User, Depends(current_user)]
    LeasesPage = Annotated[PageQuery, Depends(page_query("leases"))]
    QueuePage = Annotated[PageQuery, Depends(page_query("queue"))]
    LeaseId = Annotated[int, Path(ge=0, le=2**53, description="The lease's id.")]
    VNode = Annotated[int, Path(ge=0, le=2**31, description="The VM's index in its lease (0 first).")]
    LogBytes = Annotated[int, Query(alias="bytes", ge=1, le=MAX_LOG_BYTES,
                                    description="How much of the log's end, in bytes.")]

    from skylease.service.web.pages import add_pages

    add_pages(app, manager, engine, qos, runs)  # first: its HTML pages share /leases and /hosts with the API

    add_health(app, vitals, manager.now)

    @app.get("/me", response_model=Me, tags=["service"], responses=ERRORS)  # (no manager needed)
    def me(user: Caller) -> Me:
        """Who the token belongs to: the caller's name and whether they are an administrator."""
        return Me(name=user.name, admin=user.admin)

    @app.post("/leases", status_code=201, response_model=LeaseView, tags=["leases"],
              responses={**_ERRORS, 409: {"model": Refusal, "description": "the request is refused"},
                         413: {"model": Problem, "description": "the body is larger than 64 KiB"},
                         415: {"model": Problem, "description": "neither JSON nor XML"}},
              # (only JSON's schema: a JSON Schema cannot say what a Haizea element is, and a document
              # naming application/xml with "any string" would promise what the route refuses)
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": LeaseRequest.model_json_schema()}}}})
    async def request_lease(request: Request, user: Caller) -> LeaseView:
        """Request a lease. Answered with the lease as the scheduler placed it (scheduled, reserved,
        queued) or 409 with the reason it is refused. The body is JSON, or (`Content-Type:
        application/xml`) one Haizea `<lease>` (or `<lease-request>`) element."""
        body = await request.body()
        kind = _media_type(request, body)
        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise BadBody("not UTF-8 text", file=BODY) from None
        req = lease_request_from_xml(text) if kind == "xml" else lease_request_from_json(text)
        return _json(await run_in_threadpool(manager.request, user.name, req), 201)  # type: ignore[return-value]

    @app.get("/leases", response_model=list[LeaseView], tags=["leases"], responses={**_ERRORS, **PAGED})
    def list_leases(user: Caller, page: LeasesPage, request: Request, response: Response) -> list[LeaseView]:
        """The caller's leases (an administrator's: every lease), by id: a page of ``limit``, after
        the cursor ``after`` (the next page's cursor is in the X-Next-Cursor and Link headers)."""
        after = keys_of("leases", page)
        views = manager.leases(user.scope, None if after is None else after[0], page.limit + 1)
        return paged(request, response, views, page.limit, "leases", lambda v: (v.id,))

    @app.get("/leases/offers", response_model=OfferView, tags=["leases"], responses=_ERRORS)
    def lease_offers(user: Caller, query: Annotated[OfferQuery, Query()]) -> OfferView:
        """A dry run (nothing is requested): the earliest lease time at which an advance reservation
        of `nodes` nodes (of `cpu`, `memory`, `disk` each) for `duration` seconds would be accepted,
        not before `not_before` (default now; null with a reason if none would), the nodes free at
        `not_before` for that long (and with best-effort leases preempted), and whether an
        immediate lease of it would start now."""
        return manager.offers(user.name, query)

    @app.get(LEASE_PATH, response_model=LeaseView, tags=["leases"],
             responses={**_ERRORS, **_NOT_FOUND})
    async def show_lease(lease_id: LeaseId, user: Caller) -> LeaseView:
        """One lease: its state events, reservations, where it runs and its payloads."""
        # on the event loop when the manager's lock is free (no hop to a worker thread), else in one
        # (the loop must not wait for the lock): docs/decisions/serve-throughput.md
        nowait = getattr(manager, "lease_nowait", None)
        view = None if nowait is None else nowait(user.scope, lease_id)
        if view is None:
            view = await run_in_threadpool(manager.lease, user.scope, lease_id)
        return _json(view)  # type: ignore[return-value]

    @app.delete(LEASE_PATH, response_model=LeaseView, tags=["leases"],
                responses={**_ERRORS, **_NOT_FOUND})
    def cancel_lease(lease_id: LeaseId, user: Caller) -> LeaseView:
        """Cancel a lease: it leaves the queue or the slot table, and its payloads are stopped."""
        return manager.cancel(user.scope, lease_id)

    @app.patch(LEASE_PATH, response_model=LeaseView, tags=["leases"],
               responses={**_ERRORS, **_NOT_FOUND,
                          409: {"model": Refusal, "description": "the change does not fit, or a site rule "
                                                                 "forbids it"}})
    def extend_lease(lease_id: LeaseId, change: LeaseChange, user: Caller) -> LeaseView:
        """Extend a lease: a later end, `by` that many lease seconds or at the lease time `end`
        (exactly one), within the site's extension rules. Answered with the lease as re-planned, or
        409 with the reason, `latest_end` (the latest end that fits now) and, for an advance
        reservation not started, `earliest_start` (where a reservation of its new length would fit)."""
        return manager.extend(user.scope, lease_id, change)

    @app.get(LEASE_PATH + "/vms/{vnode}/log", response_model=PayloadLog, tags=["leases"],
             responses={**_ERRORS, 404: {"model": Problem, "description": "no such lease visible to the "
                                                                          "caller, or no such VM of it"}})
    def vm_log(lease_id: LeaseId, vnode: VNode, user: Caller,
               limit: LogBytes = DEFAULT_LOG_BYTES) -> PayloadLog:
        """One VM of a lease: its payload's state now or how it ended (exit code, reason), and the
        last ``bytes`` bytes of its log (a VM lease's guest: its serial console)."""
        return manager.log(user.scope, lease_id, vnode, limit)

    add_lease_stream(app, Caller, manager, _ERRORS, LEASE_PATH, lease_stream_s)

    @app.get("/queue", response_model=list[LeaseView], tags=["leases"], responses={**_ERRORS, **PAGED})
    def queue(user: Caller, page: QueuePage, request: Request, response: Response) -> list[LeaseView]:
        """Best-effort leases waiting to start, in queue order (the caller's, or all for an admin),
        a page at a time as ``GET /leases``."""
        after = keys_of("queue", page)
        views = manager.queue(user.scope, None if after is None else after[0], page.limit + 1)
        return paged(request, response, views, page.limit, "queue", lambda v: (v.id,))

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
    app.add_exception_handler(WebhookNotAllowed, answer(422))  # (a lease's webhook the site does not allow)
    def refusal(_request: Request, exc: Exception) -> JSONResponse:
        body: dict[str, Any] = {"detail": str(exc)}
        earliest = getattr(exc, "earliest_start", None)
        if earliest is not None:  # (the detail stays as it was: old clients read only it)
            body["earliest_start"] = earliest
        latest = getattr(exc, "latest_end", None)
        if latest is not None:  # (a refused extension: docs/decisions/lease-extensions.md)
            body["latest_end"] = latest
        return JSONResponse(body, status_code=409)

    app.add_exception_handler(LeaseRefused, refusal)
    app.add_exception_handler(LeaseNotFound, answer(404))
    app.add_exception_handler(UserError, answer(409))  # (well-formed, refused by a service: the reason)
    app.add_exception_handler(Unavailable, answer(503))  # (the manager stopped after the guard looked)
    app.add_exception_handler(
        RequestValidationError,
        lambda _r, exc: JSONResponse({"detail": _readable(exc)}, status_code=422))  # type: ignore[arg-type]
    app.add_middleware(HealthGuard, vitals=vitals)
    app.add_middleware(RequestGuard, routes=app.router.routes)
    app.add_middleware(CatchAll)  # added last: outermost, so it sees what every other layer raises
    return app
