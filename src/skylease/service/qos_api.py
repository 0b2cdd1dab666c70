"""SpeQuloS's HTTP API (issue 20): bags of tasks, reports, predictions, accounts and credits.

Routes (under the same tokens as the lease routes)::

    POST /qos/bots                      register a bag of tasks (and order credits for it) -> 201
    GET  /qos/bots                      the caller's bags (an administrator's: every bag), a page at a time
    GET  /qos/bots/{id}                 one bag: its progress, state and order
    POST /qos/bots/{id}/reports         a run's report -> what the run must do (Instructions)
    POST /qos/bots/{id}/orders          order more credits for a bag (409 when the balance is short)
    GET  /qos/bots/{id}/prediction      the Oracle's predicted completion time, with its band
    GET  /qos/bots/{id}/series          its progress reports, in order (with its cloud workers then)
    GET  /qos/history/{infrastructure}  finished bags of an infrastructure (what α is learned from)
    GET  /qos/account                   the caller's account: balance and last movements
    GET  /qos/accounts/{user}           an account: balance and last movements (one's own, or admin)
    POST /qos/accounts/{user}/deposits  credit a user's account (administrators only)

A bag or account the caller may not reach is 404, as one that does not exist. A body or path that
does not fit the OpenAPI document's schema is 422 (strict: a string or a boolean is not a number;
no control characters; a strategy is one of the names listed), one the service refuses all the
same (a report going back in time, counts that do not add up, a balance too short) is 409 with the
reason (docs/decisions/serve-request-bodies.md), as is a registration past the user's bound on
running bags. ``GET /qos/bots`` answers a page (:mod:`skylease.service.paging`).
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at run time.
import math
from dataclasses import asdict, is_dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from skylease.control.qos.oracle import HOW_MANY, WHEN
from skylease.control.qos.relay import Report
from skylease.control.qos.strategy import HOW
from skylease.model.host import HostState
from skylease.model.wire import line, whole
from skylease.runtime.qos.bots import MAX_T
from skylease.runtime.qos.service import QoSService
from skylease.service.auth import NAME_RE, list_users
from skylease.service.paging import PAGED, PageQuery, keys_of, page_query, paged
from skylease.service.problems import BODY_ERRORS, FORBIDDEN, Problem, Responses, not_found, refused

__all__ = ["add_qos_routes"]

#: The most tasks a bag may have, and the most times or workers one report may carry.
MAX_TASKS = 10_000_000
MAX_ITEMS = 100_000
_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$"
_Seconds = Annotated[float, Field(ge=0, le=MAX_T, allow_inf_nan=False)]
_Count = whole(0, MAX_TASKS)
_Credits = Annotated[float, Field(gt=0, le=1e12, allow_inf_nan=False)]
#: The strategies a bag may be served with (WHEN-HOWMANY-HOW; "none" serves nothing).
Strategy = Literal[tuple(f"{w}-{m}-{h}" for w in WHEN for m in HOW_MANY for h in HOW)]  # type: ignore[misc]
_WORKER_STATES = Literal[tuple(s.value for s in HostState)]  # type: ignore[misc]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # (a string or a boolean is not a number)


class BotRequest(_Body):
    """A bag of tasks to serve: where it runs, how many tasks, and how to serve it."""

    infrastructure: Annotated[str, Field(min_length=1, max_length=64, pattern=_NAME)]
    n_tasks: whole(1, MAX_TASKS)
    strategy: Strategy = "9C-C-R"
    tick: Annotated[float, Field(gt=0, le=86_400, allow_inf_nan=False)] = 240.0
    pool: Annotated[str, Field(min_length=1, max_length=64, pattern=_NAME)] = "cloud"
    credits: Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)] = 0.0


class ReportBody(_Body):
    """A run's report (see :class:`skylease.control.qos.relay.Report`)."""

    t: _Seconds
    submitted: _Count
    assigned: _Count
    completed: _Count
    since_c: _Count = 0
    completions: Annotated[list[_Seconds], Field(max_length=MAX_ITEMS)] = []
    since_a: _Count = 0
    assignments: Annotated[list[_Seconds], Field(max_length=MAX_ITEMS)] = []
    workers: Annotated[dict[Annotated[str, Field(pattern=r"^[0-9]{1,9}$")], _WORKER_STATES],
                       Field(max_length=MAX_ITEMS, json_schema_extra={"additionalProperties": False})] = {}
    idle: Annotated[list[whole(0, 10**9)], Field(max_length=MAX_ITEMS)] = []
    queued: _Count = 0


class OrderBody(_Body):
    credits: _Credits


class DepositBody(_Body):
    credits: _Credits
    note: line(200) | None = None


def _plain(x: Any) -> Any:
    """A view as JSON-able values (dataclasses and pydantic models alike; NaN as null)."""
    if isinstance(x, BaseModel):
        x = x.model_dump()
    elif is_dataclass(x) and not isinstance(x, type):
        x = asdict(x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def add_qos_routes(app: FastAPI, caller: Any, qos: QoSService, errors: Responses) -> None:
    """Add SpeQuloS's routes to ``app``; ``caller`` is the authenticated-user dependency type;
    ``errors`` the statuses every route may answer."""
    Caller = caller
    BotId = Annotated[int, Path(ge=1, le=2**53, description="The bag's id.")]
    UserName = Annotated[str, Path(pattern=NAME_RE.pattern, description="A user's name.")]
    Infrastructure = Annotated[str, Path(min_length=1, max_length=64, pattern=_NAME,
                                         description="An infrastructure's name.")]
    missing = {**errors, **not_found("bag of tasks")}
    with_body = {**BODY_ERRORS, **errors}
    conflict = refused("refused: the balance is short, or the bag takes no more (the reason is the detail)")
    bound = refused("refused: the balance is short for the credits asked, or the user has as many bags "
                    "running as the server allows (max_bots_per_user; the reason is the detail)")
    Page = Annotated[PageQuery, Depends(page_query("bots"))]

    @app.post("/qos/bots", status_code=201, tags=["qos"], responses={**with_body, **bound})
    def register(body: BotRequest, user: Caller) -> dict[str, Any]:
        """Register a bag of tasks; with ``credits``, order them for it at once (it is served). A
        user may have a bounded number of bags running (the server's ``max_bots_per_user``)."""
        view = qos.register(user.name, body.infrastructure, body.n_tasks, strategy=body.strategy,
                            tick=body.tick, pool=body.pool, credits=body.credits)
        return _plain(qos.bot(user.name, view.id))

    @app.get("/qos/bots", tags=["qos"], responses={**errors, **PAGED})
    def bots(user: Caller, page: Page, request: Request, response: Response) -> list[dict[str, Any]]:
        """The caller's bags (an administrator's: all), oldest first, with their progress and state:
        a page of ``limit``, after the cursor ``after`` (the next one in X-Next-Cursor and Link)."""
        after = keys_of("bots", page)
        views = qos.bots(user.scope, None if after is None else after[0], page.limit + 1)
        return _plain(paged(request, response, views, page.limit, "bots", lambda b: (b["id"],)))

    @app.get("/qos/bots/{bot}", tags=["qos"], responses=missing)
    def bot(bot: BotId, user: Caller) -> dict[str, Any]:
        return _plain(qos.bot(user.scope, bot))

    late = refused("refused: the report goes back in time, its counts do not add up, or the bag has ended "
                   "(the reason is the detail)")

    @app.post("/qos/bots/{bot}/reports", tags=["qos"], responses={**with_body, **missing, **late})
    async def report(bot: BotId, body: ReportBody, user: Caller) -> dict[str, Any]:
        """A run's report: its progress is stored and its bag's policy answers what to do."""
        r = Report(body.t, body.submitted, body.assigned, body.completed, body.since_c,
                   tuple(body.completions), body.since_a, tuple(body.assignments),
                   {int(k): v for k, v in body.workers.items()}, tuple(body.idle), body.queued)
        return _plain(await run_in_threadpool(qos.report, user.name, bot, r))

    @app.post("/qos/bots/{bot}/orders", tags=["qos"], responses={**with_body, **missing, **conflict})
    def order(bot: BotId, body: OrderBody, user: Caller) -> dict[str, Any]:
        """Order credits for one's bag: moved from the account to the bag's order."""
        return _plain(qos.order(user.name, bot, body.credits))

    @app.get("/qos/bots/{bot}/prediction", tags=["qos"], responses=missing)
    def prediction(bot: BotId, user: Caller) -> dict[str, Any]:
        """t_p = α · t_c(r)/r, its ±20 % band, α and the success rate on this infrastructure."""
        return _plain(qos.predict(user.scope, bot))

    @app.get("/qos/bots/{bot}/series", tags=["qos"], responses=missing)
    def series(bot: BotId, user: Caller) -> list[dict[str, Any]]:
        """The bag's progress reports, in order: t, completed, assigned, queued, and its cloud
        workers running and booting then (null in reports stored before skylease kept them)."""
        return _plain(qos.series(user.scope, bot))

    @app.get("/qos/history/{infrastructure}", tags=["qos"], responses=errors)
    def history(infrastructure: Infrastructure, user: Caller) -> dict[str, Any]:
        """Finished bags of an infrastructure: sizes, naive predictions and completion times."""
        h = _plain(qos.history(infrastructure))
        if not user.admin:  # α is learned from every user's bags; the bags listed are one's own
            h["bots"] = [b for b in h["bots"] if b["owner"] == user.name]
        return h

    @app.get("/qos/account", tags=["qos"], responses=errors)
    def my_account(user: Caller) -> dict[str, Any]:
        """The caller's account: balance and last movements."""
        return _plain(qos.account(user.name, user.name))

    @app.get("/qos/accounts/{name}", tags=["qos"], responses={**errors, **not_found("account")})
    def account(name: UserName, user: Caller) -> dict[str, Any]:
        """An account's balance and its last movements (one's own; any for an administrator)."""
        if user.admin and name not in {u.name for u in list_users(qos.ledger.engine)}:
            # an empty account of a typo is not an answer (another's account is 404 for a user already)
            raise HTTPException(404, f"no user {name!r} on this server (`skylease serve user list`)")
        return _plain(qos.account(user.scope, name))

    @app.post("/qos/accounts/{name}/deposits", status_code=201, tags=["qos"],
              responses={**with_body, **FORBIDDEN, 404: {"model": Problem, "description": "no such user"}})
    def deposit(name: UserName, body: DepositBody, user: Caller) -> dict[str, Any]:
        """Credit a user's account (administrators only)."""
        if not user.admin:
            raise HTTPException(403, "only an administrator may deposit credits")
        if name not in {u.name for u in list_users(qos.ledger.engine)}:  # (a typo must not swallow credits)
            raise HTTPException(404, f"no user {name!r} on this server (`skylease serve user list`)")
        return {"user": name, "balance": qos.deposit(name, body.credits, body.note)}

