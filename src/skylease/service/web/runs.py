"""The dashboard's Runs pages (issue 21): runs of ``skylease run`` that reported to the service,
over :class:`~skylease.runtime.runs.registry.RunRegistry`.

    GET /runs                  the caller's runs (an administrator's: all), newest first, a page at a
                               time (``limit``, ``after``): state, counts and progress
    GET /runs/{id}             one run: its facts and its task table, failed tasks first (with the
                               end of their stderr), then running, done and queued ones, a page of
                               :data:`PAGE` rows at a time (``?page=N``)
    GET /runs/live             the runs table of /runs (an HTML fragment its script fetches again
                               on a change)
    GET /runs/events           server-sent events: a ``change`` when one of the caller's runs changes
    GET /runs/{id}/live        the live part of a run's page (fetched again on a change)
    GET /runs/{id}/events      server-sent events: a ``change`` when that run changes (a report, its
                               end), while it runs

``/runs`` and ``/runs/{id}`` share their paths with the JSON API (``_HtmlRoute``: a page only for a
browser's request, with no Authorization header). A run the caller may not reach is a 404 page, as a
missing one. A page holds at most :data:`PAGE` task rows however large the run: the rest are counted
and a page away. The event streams are a few per session (429 past them: :mod:`.sse`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from skylease.runtime.runs.registry import RunNotFound, RunRegistry, RunView, TaskRow
from skylease.service.auth import User
from skylease.service.paging import decode, list_url, page_from, split
from skylease.service.web.layout import HEADERS, e, live_attrs, pager, render_page, table
from skylease.service.web.sse import EventStreams, add_live_list

__all__ = ["PAGE", "add_run_pages"]

#: Task rows a page shows.
PAGE = 200
#: The pages' own style (loaded from their body; nothing inline: the CSP forbids it). Their live
#: parts are kept up to date by dashboard.js, as the bags' are.
ASSETS = '<link rel="stylesheet" href="/static/runs.css">'


def _when(unix: float | None) -> str:
    return "–" if unix is None else datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _state(state: str) -> str:
    return f'<span class="state s-{e(state)}">{e(state)}</span>'


def _progress(r: RunView) -> str:
    ended = r.done + r.failed
    return (f'<progress max="{r.n_tasks}" value="{ended}" '
            f'aria-label="{ended:,} of {r.n_tasks:,} tasks ended"></progress>'
            f" {ended / r.n_tasks:.0%}")


def _counts(r: RunView) -> str:
    return (f'<span class="c-done">{r.done:,} done</span> · '
            f'<span class="c-failed">{r.failed:,} failed</span> · '
            f'{r.running:,} running · {r.queued:,} queued')


def _stderr(row: TaskRow) -> str:
    tail = (row.stderr_tail or "").rstrip()
    if not tail or row.status != "failed":
        return ""
    last = tail.splitlines()[-1]
    return f"<details><summary>{e(last[:120])}</summary><pre>{e(tail)}</pre></details>"


def _task_rows(rows: list[TaskRow]) -> list[list[str]]:
    out = []
    for t in rows:
        where = " / ".join(x for x in (t.host, t.pool) if x)
        out.append([e(t.task), e(t.label), _state(t.status), e(t.attempts),
                    e("–" if t.exit_code is None else t.exit_code), e(where or "–"),
                    e("–" if t.runtime_s is None else f"{t.runtime_s:,.2f}"), e(_when(t.ended)), _stderr(t)])
    return out


def _live(runs: RunRegistry, scope: str | None, run: int, page: int) -> tuple[str, bool]:
    """The live part of a run's page (facts, counts, one page of the task table), and whether the
    run still runs."""
    r = runs.run(scope, run)
    reported = runs.reported(scope, run)
    pages = max(1, -(-reported // PAGE))
    page = min(max(1, page), pages)
    rows = runs.tasks(scope, run, (page - 1) * PAGE, PAGE)
    facts = [("State", _state(r.state)), ("Tasks", f"{r.n_tasks:,}: {_counts(r)}"),
             ("Progress", _progress(r)),
             ("Started", e(_when(r.started))), ("Last report", e(_when(r.updated))),
             ("Ended", e(_when(r.ended)))]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    pager = ""
    if pages > 1:
        prev = f'<a href="/runs/{run}?page={page - 1}" rel="prev">previous</a>' if page > 1 else ""
        nxt = f'<a href="/runs/{run}?page={page + 1}" rel="next">next</a>' if page < pages else ""
        pager = (f'<nav class="pager" aria-label="task table pages">{prev} page {page:,} of {pages:,} '
                 f"({reported:,} tasks reported) {nxt}</nav>")
    unreported = r.n_tasks - reported
    note = (f'<p class="hint">{unreported:,} tasks have not been reported yet (queued, or not started).</p>'
            if unreported > 0 else "")
    heads = ["task", "label", "status", "attempts", "exit", "host / pool", "runtime (s)", "ended", "stderr"]
    first = (page - 1) * PAGE
    html = (f'<dl class="facts">{dl}</dl><section id="tasks">'
            + table(f"Tasks, failed first (rows {first + 1:,} to {first + len(rows):,})", heads,
                    _task_rows(rows), "No task reported yet.")
            + f"{pager}{note}</section>")
    return html, r.state == "running"


def _runs_table(runs: RunRegistry, scope: str | None, request: Request) -> str:
    """A page of the caller's runs, newest first (the query's ``limit`` and ``after``: as the API's)."""
    query = page_from(request.query_params)
    before = decode("runs", query.after)
    views, cursor = split(runs.runs(scope, query.limit + 1, None if before is None else before[0]),
                          query.limit, "runs", lambda r: (r.id,))
    rows = [[f'<a href="/runs/{r.id}">{e(r.name)}</a>', e(r.owner), _state(r.state),
             e(f"{r.done:,}"), e(f"{r.failed:,}"), e(f"{r.running:,}"), e(f"{r.queued:,}"),
             e(_when(r.started)), _progress(r)]
            for r in views]
    heads = ["run", "owner", "state", "done", "failed", "running", "queued", "started", "progress"]
    more = pager("pages of runs", None if query.after is None else list_url("/runs", query.limit),
                 None if cursor is None else list_url("/runs", query.limit, after=cursor))
    return table("Runs, newest first", heads, rows,
                 "No runs yet: `skylease run JOB --report URL` reports one here.") + more


def add_run_pages(router: APIRouter, page: Callable[[Callable[[Request, User, str], Any]], Any],
                  runs: RunRegistry, html_route: type, streams: EventStreams) -> None:
    """The Runs pages on ``router``; ``page`` wraps a handler with the session check, ``html_route``
    is the route class of a page sharing its path with the JSON API, ``streams`` opens the event
    streams (403, not a redirect, without a session)."""

    def ids(request: Request) -> tuple[int, int]:
        run = int(request.path_params["run"])
        if run > 2**53:
            raise RunNotFound(f"no run {run}")
        try:
            number = int(request.query_params.get("page", "1"))
        except ValueError:
            number = 1
        return run, max(1, min(number, 10**7))

    def run_page(request: Request, user: User, sid: str) -> Response:
        version = runs.version()
        try:
            run, number = ids(request)
            live, running = _live(runs, user.scope, run, number)
            r = runs.run(user.scope, run)
        except RunNotFound as exc:
            return render_page("Not found", f'<p class="error">{e(exc)}</p>', user, sid, 404)
        bag = f' · bag of tasks <a href="/bots/{r.bot}">{r.bot}</a>' if r.bot is not None else ""
        head = (f'<p class="now">Run {r.id} of {e(r.owner)}{bag} · <code>{e(r.command)}</code> · '
                '<a href="/runs">all runs</a></p>')
        attrs = (live_attrs(f"/runs/{run}/live?page={number}", f"/runs/{run}/events", version)
                 if running else "")
        body = f'{ASSETS}{head}<section id="run-live" aria-live="off"{attrs}>{live}</section>'
        return render_page(f"Run {r.name}", body, user, sid)

    def live_part(request: Request, user: User, _sid: str) -> Response:
        try:
            run, number = ids(request)
            live, running = _live(runs, user.scope, run, number)
        except RunNotFound as exc:
            return HTMLResponse(e(exc), status_code=404, headers=HEADERS)
        # (the script stops listening once the run no longer runs)
        return HTMLResponse(live, headers={**HEADERS, "X-Live-Running": "1" if running else "0"})

    async def list_events(request: Request) -> Response:
        return await streams(request, runs.version, runs.wait_change_async,
                             lambda user, since: runs.changes.changed(user.scope, since))

    async def run_events(request: Request) -> Response:
        rid = int(request.path_params["run"])  # (another's run, or none: its stream tells nothing)
        return await streams(request, runs.version, runs.wait_change_async,
                             lambda user, since: runs.changes.changed(user.scope, since, rid))

    add_live_list(router, page, "/runs", "Runs", runs.version,
                  lambda user, request: _runs_table(runs, user.scope, request), head=ASSETS,
                  route_class=html_route)
    router.add_api_route("/runs/{run:int}", page(run_page), methods=["GET"], route_class_override=html_route)
    router.add_api_route("/runs/events", list_events, methods=["GET"])
    router.add_api_route("/runs/{run:int}/live", page(live_part), methods=["GET"])
    router.add_api_route("/runs/{run:int}/events", run_events, methods=["GET"])
