"""The dashboard's bags-of-tasks and account pages (issue 21), over :class:`QoSService`'s calls.

    GET /bots                  the caller's bags (an administrator's: all), newest first, a page at a
                               time (``limit``, ``after``): state, progress, credits, t_pred
    GET /bots/live             that page's table (an HTML fragment its script fetches again on a change)
    GET /bots/events           server-sent events: a ``change`` when one of the caller's bags changes
    GET /bots/{id}             one bag: its progress curve with the Oracle's prediction and band, its
                               cloud workers over time, credits ordered and spent
    GET /bots/{id}/live        the live part of that page (an HTML fragment the page's script
                               fetches again on each change while the bag runs)
    GET /bots/{id}/events      server-sent events: a ``change`` when that bag changes (a report,
                               an order, its end)
    GET /account               the caller's balance and ledger movements, newest first
    GET /accounts/{user}       a user's account (one's own; any for an administrator)

A bag or account the caller may not reach is a 404 page, as one that does not exist; its event
stream never says it changed. The event streams need a dashboard session (403 otherwise, and for a
cross-site request), are a few per session (429 past them) and end with the server (:mod:`.sse`).
The charts are SVGs drawn here from the registry's series, on one time axis: no library, nothing
fetched from elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from skylease.model.errors import UserError
from skylease.runtime.qos.service import NotYours, QoSService
from skylease.service.auth import User
from skylease.service.paging import decode, list_url, page_from, split
from skylease.service.web.layout import HEADERS, e, live_attrs, pager, render_page, table
from skylease.service.web.sse import EventStreams, add_live_list

__all__ = ["add_bot_pages", "progress_svg", "workers_svg"]

#: The charts' size in SVG units (they scale to the page's width; the same width and side margins,
#: so their time axes line up).
W, H, H_CW = 800, 320, 170
_L, _R, _T, _B = 56, 16, 16, 40  # margins: the axes' labels
#: Reports drawn as dots too (beyond, the lines alone carry a point per report: a week of reports a
#: minute is 10,000 dots, too heavy to send at each change).
MAX_DOTS = 1000
#: Rows of the cloud workers' table (their text alternative): the latest changes.
MAX_CW_ROWS = 200


def _num(x: float | None, unit: str = "") -> str:
    return "–" if x is None else f"{x:,.1f}{unit}"


def _credits(x: float | None) -> str:  # (bills are hundredths of a credit: one decimal would hide them)
    return "–" if x is None else f"{x:,.2f}"


def _when(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _band(pred: Any) -> tuple[float | None, float | None]:
    """The prediction's band (None, None before there is a prediction)."""
    if pred is None or pred.t_p is None:
        return None, None
    return pred.low, pred.high


def time_span(series: list[Any], pred: Any) -> float:
    """The charts' time axis: from 0 to past the last report and the band's end."""
    return max([p.t for p in series] + [_band(pred)[1] or 0.0, 1.0]) * 1.05


def _axes(t_max: float, h: float, y_ticks: list[tuple[float, str]]) -> tuple[Any, list[str]]:
    """The x scale (bag seconds -> SVG units) and the axes of a chart ``h`` high whose y ticks are
    ``(y, label)``: the time axis has 0, ¼, ½, ¾ and all of ``t_max``, as on every chart here."""
    pw, ph = W - _L - _R, h - _T - _B

    def x(t: float) -> float:
        return _L + pw * t / t_max

    parts = [f'<line class="axis" x1="{_L}" y1="{_T + ph}" x2="{_L + pw}" y2="{_T + ph}"/>',
             f'<line class="axis" x1="{_L}" y1="{_T}" x2="{_L}" y2="{_T + ph}"/>']
    for i in range(5):
        t = t_max * i / 4
        parts.append(f'<text class="tick" x="{x(t):.1f}" y="{_T + ph + 16}" text-anchor="middle">'
                     f"{t:,.0f}</text>")
    parts += [f'<text class="tick" x="{_L - 6}" y="{yy + 4:.1f}" text-anchor="end">{label}</text>'
              for yy, label in y_ticks]
    parts.append(f'<text class="tick" x="{_L + pw / 2}" y="{h - 4}" text-anchor="middle">'
                 "seconds since the bag was registered</text>")
    return x, parts


def progress_svg(series: list[Any], n_tasks: int, pred: Any, t_max: float | None = None) -> str:
    """The bag's progress curve (completed and assigned tasks over the bag's time, a point per
    report) with the Oracle's predicted completion time and its band, as an inline SVG.
    ``t_max``: the time axis's end (default :func:`time_span`)."""
    low, high = _band(pred)
    t_max = time_span(series, pred) if t_max is None else t_max
    ph = H - _T - _B

    def y(k: float) -> float:
        return _T + ph * (1.0 - k / n_tasks)

    x, parts = _axes(t_max, H, [(y(n_tasks * i / 4), f"{n_tasks * i / 4:,.0f}") for i in range(5)])
    if low is not None and high is not None:
        parts.append(f'<rect class="band" x="{x(low):.1f}" y="{_T}" width="{x(high) - x(low):.1f}" '
                     f'height="{ph}"><title>±{pred.tolerance:.0%}: {low:,.1f} s to {high:,.1f} s</title>'
                     "</rect>")
        parts.append(f'<line class="pred" x1="{x(pred.t_p):.1f}" y1="{_T}" x2="{x(pred.t_p):.1f}" '
                     f'y2="{_T + ph}"><title>predicted completion: {pred.t_p:,.1f} s</title></line>')
    for name in ("assigned", "completed"):
        pts = [(x(p.t), y(getattr(p, name))) for p in series]
        if pts:
            line = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            parts.append(f'<polyline class="line {name}" points="{line}"/>')
        if len(pts) <= MAX_DOTS:
            parts += [f'<circle class="pt {name}" cx="{a:.1f}" cy="{b:.1f}" r="2.5"/>' for a, b in pts]
    last = series[-1] if series else None
    desc = (f"{len(series)} reports. " + (
        f"At {last.t:,.1f} s: {last.completed:,} of {n_tasks:,} tasks completed, {last.assigned:,} assigned. "
        if last else "No report yet. ") + (
        f"Predicted completion at {pred.t_p:,.1f} s (band {low:,.1f} s to {high:,.1f} s)."
        if low is not None else "No prediction yet (it needs a completed task)."))
    return (f'<svg class="chart progress" viewBox="0 0 {W} {H}" role="img" '
            'aria-labelledby="chart-title chart-desc" '
            f'data-points="{len(series)}" xmlns="http://www.w3.org/2000/svg">'
            f'<title id="chart-title">Progress of the bag</title><desc id="chart-desc">{e(desc)}</desc>'
            + "".join(parts) + "</svg>")


def workers_svg(series: list[Any], t_max: float) -> str:
    """The bag's cloud workers over its time (a step per report: running, and started = running
    plus booting), on the time axis ``t_max`` of its progress curve, as an inline SVG."""
    known = [(p.t, p.cloud_workers or 0, p.cloud_booting or 0) for p in series if p.cloud_workers is not None]
    top = max([r + b for _, r, b in known] + [1])
    ph = H_CW - _T - _B

    def y(k: float) -> float:
        return _T + ph * (1.0 - k / top)

    ticks = sorted({0, top // 2, top})
    x, parts = _axes(t_max, H_CW, [(y(k), f"{k:,}") for k in ticks])
    base = _T + ph
    if known:
        # a step holds a report's count until the next report (the last one: a step of no width)
        run = [f"M{x(known[0][0]):.1f},{base:.1f}"]
        started = []
        for i, (t, r, b) in enumerate(known):
            nxt = x(known[i + 1][0]) if i + 1 < len(known) else x(t)
            run.append(f"V{y(r):.1f}H{nxt:.1f}")
            started.append(f"M{x(t):.1f},{y(r + b):.1f}H{nxt:.1f}" if i == 0 else
                           f"V{y(r + b):.1f}H{nxt:.1f}")
        run.append(f"V{base:.1f}Z")
        parts.append(f'<path class="cws running" d="{"".join(run)}"/>')
        parts.append(f'<path class="cws started" d="{"".join(started)}"/>')
        t, r, b = known[-1]
        parts.append(f'<circle class="cws now" cx="{x(t):.1f}" cy="{y(r):.1f}" r="3"/>')
    peak = max(known, key=lambda p: p[1], default=None)
    if peak is None:
        desc = ("No cloud worker count reported yet." if not series else
                "The reports carry no cloud worker count (they were stored before skylease kept it).")
    else:
        t, r, b = known[-1]
        desc = (f"At {t:,.1f} s: {r:,} cloud workers running, {b:,} booting. "
                f"At most {peak[1]:,} running (at {peak[0]:,.1f} s).")
    return (f'<svg class="chart cws" viewBox="0 0 {W} {H_CW}" role="img" aria-labelledby="cw-title cw-desc" '
            f'data-points="{len(known)}" data-peak="{0 if peak is None else peak[1]}" '
            'xmlns="http://www.w3.org/2000/svg"><title id="cw-title">Cloud workers of the bag</title>'
            f'<desc id="cw-desc">{e(desc)}</desc>' + "".join(parts) + "</svg>")


def workers_table(series: list[Any]) -> str:
    """The cloud workers' text alternative: a row per report where the counts changed (the latest
    :data:`MAX_CW_ROWS`), in a disclosure."""
    rows, last = [], None
    for p in series:
        now = (p.cloud_workers, p.cloud_booting)
        if p.cloud_workers is not None and now != last:
            rows.append([e(f"{p.t:,.1f}"), e(f"{p.cloud_workers:,}"), e(f"{p.cloud_booting or 0:,}")])
        last = now
    more = f" (the latest {MAX_CW_ROWS:,} of {len(rows):,})" if len(rows) > MAX_CW_ROWS else ""
    return ('<details class="cw-table" id="cw-table"><summary>Cloud workers as a table</summary>'
            + table(f"Cloud workers at each change{more}", ["t (s)", "running", "booting"],
                    rows[-MAX_CW_ROWS:], "No cloud worker count reported yet.") + "</details>")


def _credits_meter(b: dict[str, Any]) -> str:
    """Credits spent / ordered, as text and as a meter."""
    if b["credits_ordered"] is None:
        return "none ordered (progress and predictions only: no cloud workers)"
    spent, ordered = b["credits_spent"] or 0.0, b["credits_ordered"]
    return (f'{_credits(spent)} / {_credits(ordered)} <meter id="credits-meter" min="0" '
            f'max="{ordered:.2f}" value="{min(spent, ordered):.2f}" '
            f'aria-label="credits spent of those ordered"></meter>')


def _live(qos: QoSService, scope: str | None, bot: int) -> tuple[str, bool]:
    """The live part of a bag's page, and whether the bag still runs."""
    b = qos.bot(scope, bot)
    pred = qos.predict(scope, bot)
    series = qos.series(scope, bot)
    running = b["state"] == "running"
    last_cw = next((p for p in reversed(series) if p.cloud_workers is not None), None)
    facts = [("State", e(b["state"])), ("Progress", f'{b["completed"]:,} / {b["n_tasks"]:,} completed, '
                                                    f'{b["assigned"]:,} assigned, {b["queued"]:,} queued'),
             ("Last report", f'{_num(b["t"], " s")} ({b["reports"]:,} reports)'),
             ("Predicted completion", "–" if pred.t_p is None else
              f'{_num(pred.t_p, " s")} (±{pred.tolerance:.0%}: {_num(pred.low, " s")} to '
              f'{_num(pred.high, " s")};'
              f' α = {pred.alpha:.3g} from {pred.runs} finished bags)'),
             ("Completed at", _num(b["completion_time"], " s")),
             ("Cloud workers", "–" if last_cw is None else
              f"{last_cw.cloud_workers:,} running, {last_cw.cloud_booting or 0:,} booting"),
             ("Credits spent / ordered", _credits_meter(b))]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    legend = ('<ul class="legend"><li><span class="key completed"></span>completed</li>'
              '<li><span class="key assigned"></span>assigned</li>'
              '<li><span class="key band"></span>Oracle\'s prediction ±20 %</li></ul>')
    cw_legend = ('<ul class="legend"><li><span class="key running"></span>running</li>'
                 '<li><span class="key started"></span>started (running and booting)</li></ul>')
    t_max = time_span(series, pred)
    html = (f'<dl class="facts">{dl}</dl><figure>{progress_svg(series, b["n_tasks"], pred, t_max)}'
            f'<figcaption>Tasks completed and assigned over time, one point per report, with the '
            f"Oracle's predicted completion time and its band. {legend}</figcaption></figure>"
            f'<figure class="cws">{workers_svg(series, t_max)}<figcaption>Cloud workers the bag had at '
            f"each report, on the same time axis; the credits pay for them. {cw_legend}"
            f"</figcaption></figure>{workers_table(series)}")
    return html, running


#: The cursor's list name of the dashboard's bags (newest first, unlike the API's: oldest first).
NEWEST = "bots.newest"


def _bots_table(qos: QoSService, scope: str | None, request: Request) -> str:
    """A page of the caller's bags, newest first (the query's ``limit`` and ``after``)."""
    query = page_from(request.query_params)
    before = decode(NEWEST, query.after)
    views = qos.bots(scope, None if before is None else before[0], query.limit + 1, newest_first=True)
    bags, cursor = split(views, query.limit, NEWEST, lambda b: (b["id"],))
    rows = []
    for b in bags:
        credits = "–" if b["credits_ordered"] is None else \
            f'{_credits(b["credits_spent"])} / {_credits(b["credits_ordered"])}'
        rows.append([f'<a href="/bots/{b["id"]}">{b["id"]}</a>', e(b["owner"]), e(b["infrastructure"]),
                     f'<span class="state s-{e(b["state"])}">{e(b["state"])}</span>',
                     f'{b["completed"]:,} / {b["n_tasks"]:,}', e(_when(b["registered_at"])),
                     e(credits), e(_num(b["t_pred"], " s"))])
    heads = ["id", "owner", "infrastructure", "state", "completed / n", "registered",
             "credits spent / ordered", "predicted completion"]
    more = pager("pages of bags of tasks", None if query.after is None else list_url("/bots", query.limit),
                 None if cursor is None else list_url("/bots", query.limit, after=cursor))
    empty = "No bags of tasks yet: `skylease run --qos` registers one."
    return table("Bags of tasks", heads, rows, empty) + more


def add_bot_pages(router: APIRouter, page: Callable[[Callable[[Request, User, str], Any]], Any],
                  qos: QoSService, streams: EventStreams) -> None:
    """The bags' and account pages on ``router``; ``page`` wraps a handler with the session check,
    ``streams`` opens the event streams (403, not a redirect, without a session)."""

    def missing(user: User, sid: str, exc: Exception) -> HTMLResponse:
        return render_page("Not found", f'<p class="error">{e(exc)}</p>', user, sid, 404)

    def bot_id(request: Request) -> int:
        bot = int(request.path_params["bot"])
        if bot > 2**53:  # the API's bound on ids: beyond it, no bag
            raise NotYours(f"no bag of tasks {bot}")
        return bot

    def bot(request: Request, user: User, sid: str) -> Response:
        version = qos.version()
        try:
            bid = bot_id(request)
            live, running = _live(qos, user.scope, bid)
            b = qos.bot(user.scope, bid)
        except (NotYours, UserError) as exc:
            return missing(user, sid, exc)
        head = (f'<p class="now">Owner {e(b["owner"])} · infrastructure {e(b["infrastructure"])} · strategy '
                f'{e(b["strategy"])} · registered {e(_when(b["registered_at"]))} · '
                '<a href="/bots">all bags</a></p>')
        attrs = live_attrs(f"/bots/{bid}/live", f"/bots/{bid}/events", version) if running else ""
        body = f'{head}<section id="live" aria-live="off"{attrs}>{live}</section>'
        return render_page(f"Bag of tasks {bid}", body, user, sid)

    def bot_live(request: Request, user: User, _sid: str) -> Response:
        try:
            live, running = _live(qos, user.scope, bot_id(request))
        except (NotYours, UserError) as exc:
            return HTMLResponse(e(exc), status_code=404, headers=HEADERS)
        # the script stops listening once the bag no longer runs
        return HTMLResponse(live, headers={**HEADERS, "X-Live-Running": "1" if running else "0"})

    async def bots_events(request: Request) -> Response:
        return await streams(request, qos.version, qos.wait_change_async,
                             lambda user, since: qos.changed(user.scope, since))

    async def bot_events(request: Request) -> Response:
        bid = int(request.path_params["bot"])  # (another's bag, or none: its stream tells nothing)
        return await streams(request, qos.version, qos.wait_change_async,
                             lambda user, since: qos.changed(user.scope, since, bid))

    def account_page(user: User, sid: str, name: str) -> Response:
        try:
            acc = qos.account(user.scope, name)
        except (NotYours, UserError) as exc:
            return missing(user, sid, exc)
        rows = [[e(_when(m.at)), e(m.kind), e(f"{m.amount:,.2f}"),
                 "" if m.bot is None else f'<a href="/bots/{m.bot}">{m.bot}</a>', e(m.worker), e(m.note)]
                for m in acc["movements"]]
        body = (f'<p class="balance">Balance: <strong>{acc["balance"]:,.2f}</strong> credits</p>'
                + table(f"Ledger of {acc['user']}, newest first", ["when", "kind", "credits", "bag",
                                                                     "worker", "note"],
                         rows, "No movements yet."))
        return render_page(f"Account of {name}", body, user, sid)

    def account(_request: Request, user: User, sid: str) -> Response:
        return account_page(user, sid, user.name)

    def other_account(request: Request, user: User, sid: str) -> Response:
        return account_page(user, sid, request.path_params["name"])

    add_live_list(router, page, "/bots", "Bags of tasks", qos.version,
                  lambda user, request: _bots_table(qos, user.scope, request))
    router.add_api_route("/bots/events", bots_events, methods=["GET"])
    router.add_api_route("/bots/{bot:int}", page(bot), methods=["GET"])
    router.add_api_route("/bots/{bot:int}/live", page(bot_live), methods=["GET"])
    router.add_api_route("/bots/{bot:int}/events", bot_events, methods=["GET"])
    router.add_api_route("/account", page(account), methods=["GET"])
    router.add_api_route("/accounts/{name}", page(other_account), methods=["GET"])
