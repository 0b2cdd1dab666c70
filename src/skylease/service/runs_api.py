"""The runs' HTTP API (issue 21): ``skylease run --report URL`` registers its run here and sends its
task table in batches; the dashboard's Runs pages read the same registry.

Routes (under the same bearer tokens as the lease routes)::

    POST /runs                  register a run -> 201, the run (its id)
    POST /runs/{id}/tasks       a batch of task rows (at most 1,000; the last row of a task wins)
    POST /runs/{id}/finish      the run ended: done, failed or stopped
    GET  /runs                  the caller's runs, newest first (an administrator's: every run), a page
    GET  /runs/{id}             one run: its state and counts
    GET  /runs/{id}/tasks       a page of its task table, failed first (limit, the cursor after, an
                                offset)

A run the caller may not reach is 404, as one that does not exist; only its owner writes to it. A
body that does not fit the OpenAPI document's schema is 422 naming the field (strict: a string or a
boolean is not a number; no control characters but tab and line breaks in a label, a command or a
stderr tail); a batch naming a task the run does not have, or a run past the most a user keeps, is
409 with the reason (docs/decisions/serve-request-bodies.md).
The lists answer pages (:mod:`skylease.service.paging`); a task table's rows are ordered by their
status, so a task whose status changes between two pages may be seen twice or not at all in one walk.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at run time.
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from skylease.runtime.runs.registry import (
    MAX_BATCH,
    MAX_RUN_TASKS,
    RunRegistry,
    RunRequest,
    RunView,
    TaskRow,
    task_rank,
)
from skylease.service.paging import PAGED, PageQuery, keys_of, page_query, paged
from skylease.service.problems import BODY_ERRORS, Responses, not_found, refused

__all__ = ["add_run_routes"]


class TaskBatch(BaseModel):
    """Task rows of one run (an empty batch says the run is alive)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rows: Annotated[list[TaskRow], Field(max_length=MAX_BATCH)]


class FinishBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    state: Literal["done", "failed", "stopped"]


def add_run_routes(app: FastAPI, caller: Any, runs: RunRegistry, errors: Responses) -> None:
    """Add the runs' routes to ``app``; ``caller`` is the authenticated-user dependency type;
    ``errors`` the statuses every route may answer."""
    Caller = caller
    RunId = Annotated[int, Path(ge=0, le=2**53, description="The run's id.")]
    missing = {**errors, **not_found("run")}
    with_body = {**BODY_ERRORS, **errors}
    Page = Annotated[PageQuery, Depends(page_query("runs"))]
    #: (a task table keeps its default page of a batch, as before pages had cursors; its cursor is a
    #: place in a table, (status rank, task): another run's cursor is a place in this one's too)
    TaskPage = Annotated[PageQuery, Depends(page_query("tasks", 2, MAX_BATCH))]

    @app.post("/runs", status_code=201, response_model=RunView, tags=["runs"],
              responses={**with_body, **refused("the user keeps the most runs the service keeps")})
    def register(body: RunRequest, user: Caller) -> RunView:
        """Register a run of `skylease run` (its name, command and number of tasks; its bag's id)."""
        return runs.register(user.name, body)

    @app.post("/runs/{run}/tasks", response_model=RunView, tags=["runs"],
              responses={**with_body, **missing, **refused("a row names a task the run does not have")})
    async def report(run: RunId, body: TaskBatch, user: Caller) -> RunView:
        """A batch of one's run's task rows: stored (one row per task), the run's counts recounted."""
        return await run_in_threadpool(runs.report, user.name, run, body.rows)

    @app.post("/runs/{run}/finish", response_model=RunView, tags=["runs"], responses={**with_body, **missing})
    def finish(run: RunId, body: FinishBody, user: Caller) -> RunView:
        """One's run ended: done (every task ok), failed, or stopped (to be resumed)."""
        return runs.finish(user.name, run, body.state)

    @app.get("/runs", response_model=list[RunView], tags=["runs"], responses={**errors, **PAGED})
    def list_runs(user: Caller, page: Page, request: Request, response: Response) -> list[RunView]:
        """The caller's runs (an administrator's: all), newest first: a page of ``limit``, after the
        cursor ``after`` (the next one in the X-Next-Cursor and Link headers)."""
        before = keys_of("runs", page)
        views = runs.runs(user.scope, page.limit + 1, None if before is None else before[0])
        return paged(request, response, views, page.limit, "runs", lambda r: (r.id,))

    @app.get("/runs/{run}", response_model=RunView, tags=["runs"], responses=missing)
    def show_run(run: RunId, user: Caller) -> RunView:
        return runs.run(user.scope, run)

    @app.get("/runs/{run}/tasks", response_model=list[TaskRow], tags=["runs"],
             responses={**missing, **PAGED})
    def tasks(run: RunId, user: Caller, page: TaskPage, request: Request, response: Response,
              offset: Annotated[int, Query(ge=0, le=MAX_RUN_TASKS, description="Rows to skip (after "
                                           "the cursor, if one is given).")] = 0) -> list[TaskRow]:
        """A page of the run's task table: failed tasks first, then running, done and queued ones;
        ``limit`` rows (default 1,000), after the cursor ``after`` (the next one in the
        X-Next-Cursor and Link headers), ``offset`` of them skipped."""
        after = keys_of("tasks", page, 2)
        rows = runs.tasks(user.scope, run, offset, page.limit + 1,
                          None if after is None else (after[0], after[1]))
        return paged(request, response, rows, page.limit, "tasks", task_rank)
