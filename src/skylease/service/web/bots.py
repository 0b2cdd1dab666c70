"""The dashboard's bags-of-tasks and account pages (issue 21), over :class:`QoSService`'s calls.

    GET /bots                  the caller's bags (an administrator's: all): state, progress, credits, t_pred
    GET /bots/{id}             one bag: its progress curve with the Oracle's prediction and band, credits
    GET /bots/{id}/live        the live part of that page (an HTML fragment the page's script
                               fetches every 2 s while the bag runs)
    GET /account               the caller's balance and ledger movements, newest first
    GET /accounts/{user}       a user's account (one's own; any for an administrator)

A bag or account the caller may not reach is a 404 page, as one that does not exist. The chart is
an SVG drawn here from the registry's series: no library, nothing fetched from elsewhere.
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
from skylease.service.web.layout import HEADERS, e, render_page, table

__all__ = ["add_bot_pages", "progress_svg"]

#: The chart's size in SVG units (it scales to the page's width).
W, H = 800, 320
_L, _R, _T, _B = 56, 16, 16, 40  # margins: the axes' labels
#: The browser refreshes a running bag's page this often (ms): reports come every few seconds.
REFRESH_MS = 2000
#: Reports drawn as dots too (beyond, the lines alone carry a point per report: a week of reports a
#: minute is 10,000 dots, too heavy to send every 2 s).
MAX_DOTS = 1000


def _num(x: float | None, unit: str = "") -> str:
    return "–" if x is None else f"{x:,.1f}{unit}"


def _credits(x: float | None) -> str:  # (bills are hundredths of a credit: one decimal would hide them)
    return "–" if x is None else f"{x:,.2f}"


def _when(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def progress_svg(series: list[Any], n_tasks: int, pred: Any) -> str:
    """The bag's progress curve (completed and assigned tasks over the bag's time, a point per
    report) with the Oracle's predicted completion time and its band, as an inline SVG."""
    low = pred.low if pred is not None and pred.t_p is not None else None
    high = pred.high if low is not None else None
    t_max = max([p.t for p in series] + [high or 0.0, 1.0]) * 1.05
    pw, ph = W - _L - _R, H - _T - _B

    def x(t: float) -> float:
        return _L + pw * t / t_max

    def y(k: float) -> float:
        return _T + ph * (1.0 - k / n_tasks)

    parts = [f'<line class="axis" x1="{_L}" y1="{_T + ph}" x2="{_L + pw}" y2="{_T + ph}"/>',
             f'<line class="axis" x1="{_L}" y1="{_T}" x2="{_L}" y2="{_T + ph}"/>']
    for i in range(5):  # ticks: 0, ¼, ½, ¾, all of the time and of the tasks
        t, k = t_max * i / 4, n_tasks * i / 4
        parts.append(f'<text class="tick" x="{x(t):.1f}" y="{_T + ph + 16}" text-anchor="middle">'
                     f"{t:,.0f}</text>")
        parts.append(f'<text class="tick" x="{_L - 6}" y="{y(k) + 4:.1f}" text-anchor="end">{k:,.0f}</text>')
    parts.append(f'<text class="tick" x="{_L + pw / 2}" y="{H - 4}" text-anchor="middle">'
                 "seconds since the bag was registered</text>")
    if low is not None:
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
    return (f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-labelledby="chart-title chart-desc" '
            f'data-points="{len(series)}" xmlns="http://www.w3.org/2000/svg">'
            f'<title id="chart-title">Progress of the bag</title><desc id="chart-desc">{e(desc)}</desc>'
            + "".join(parts) + "</svg>")


def _live(qos: QoSService, scope: str | None, bot: int) -> tuple[str, bool]:
    """The live part of a bag's page, and whether the bag still runs."""
    b = qos.bot(scope, bot)
    pred = qos.predict(scope, bot)
    series = qos.series(scope, bot)
    running = b["state"] == "running"
    facts = [("State", e(b["state"])), ("Progress", f'{b["completed"]:,} / {b["n_tasks"]:,} completed, '
                                                    f'{b["assigned"]:,} assigned, {b["queued"]:,} queued'),
             ("Last report", f'{_num(b["t"], " s")} ({b["reports"]:,} reports)'),
             ("Predicted completion", "–" if pred.t_p is None else
              f'{_num(pred.t_p, " s")} (±{pred.tolerance:.0%}: {_num(pred.low, " s")} to '
              f'{_num(pred.high, " s")};'
              f' α = {pred.alpha:.3g} from {pred.runs} finished bags)'),
             ("Completed at", _num(b["completion_time"], " s")),
             ("Credits spent / ordered", f'{_credits(b["credits_spent"])} / {_credits(b["credits_ordered"])}'
              if b["credits_ordered"] is not None else "none ordered (progress and predictions only)")]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    legend = ('<ul class="legend"><li><span class="key completed"></span>completed</li>'
              '<li><span class="key assigned"></span>assigned</li>'
              '<li><span class="key band"></span>Oracle\'s prediction ±20 %</li></ul>')
    html = (f'<dl class="facts">{dl}</dl><figure>{progress_svg(series, b["n_tasks"], pred)}'
            f'<figcaption>Tasks completed and assigned over time, one point per report, with the '
            f"Oracle's predicted completion time and its band. {legend}</figcaption></figure>")
    return html, running


def add_bot_pages(router: APIRouter, page: Callable[[Callable[[Request, User, str], Any]], Any],
                  qos: QoSService) -> None:
    """The bags' and account pages on ``router``; ``page`` wraps a handler with the session check."""

    def scope_of(user: User) -> str | None:
        return None if user.admin else user.name

    def missing(user: User, sid: str, exc: Exception) -> HTMLResponse:
        return render_page("Not found", f'<p class="error">{e(exc)}</p>', user, sid, 404)

    def bot_id(request: Request) -> int:
        bot = int(request.path_params["bot"])
        if bot > 2**53:  # the API's bound on ids: beyond it, no bag
            raise NotYours(f"no bag of tasks {bot}")
        return bot

    def bots(_request: Request, user: User, sid: str) -> Response:
        rows = []
        for b in reversed(qos.bots(scope_of(user))):  # newest first
            credits = "–" if b["credits_ordered"] is None else \
                f'{_credits(b["credits_spent"])} / {_credits(b["credits_ordered"])}'
            rows.append([f'<a href="/bots/{b["id"]}">{b["id"]}</a>', e(b["owner"]), e(b["infrastructure"]),
                         f'<span class="state s-{e(b["state"])}">{e(b["state"])}</span>',
                         f'{b["completed"]:,} / {b["n_tasks"]:,}', e(_when(b["registered_at"])),
                         e(credits), e(_num(b["t_pred"], " s"))])
        heads = ["id", "owner", "infrastructure", "state", "completed / n", "registered",
                 "credits spent / ordered", "predicted completion"]
        return render_page("Bags of tasks", table("Bags of tasks", heads, rows,
                                             "No bags of tasks yet: `skylease run --qos` registers one."),
                     user, sid)

    def bot(request: Request, user: User, sid: str) -> Response:
        try:
            bid = bot_id(request)
            live, running = _live(qos, scope_of(user), bid)
            b = qos.bot(scope_of(user), bid)
        except (NotYours, UserError) as exc:
            return missing(user, sid, exc)
        head = (f'<p class="now">Owner {e(b["owner"])} · infrastructure {e(b["infrastructure"])} · strategy '
                f'{e(b["strategy"])} · registered {e(_when(b["registered_at"]))} · '
                '<a href="/bots">all bags</a></p>')
        refresh = f' data-refresh="/bots/{bid}/live" data-every="{REFRESH_MS}"' if running else ""
        cws = ('<p class="hint">Cloud workers over time: planned (the reports carry them, the registry '
               "does not keep them yet); the credits spent are their bills.</p>")
        body = f'{head}<section id="live"{refresh}>{live}</section>{cws}'
        return render_page(f"Bag of tasks {bid}", body, user, sid)

    def bot_live(request: Request, user: User, _sid: str) -> Response:
        try:
            live, running = _live(qos, scope_of(user), bot_id(request))
        except (NotYours, UserError) as exc:
            return HTMLResponse(e(exc), status_code=404, headers=HEADERS)
        # the script stops refreshing once the bag no longer runs
        return HTMLResponse(live, headers={**HEADERS, "X-Bag-Running": "1" if running else "0"})

    def account_page(user: User, sid: str, name: str) -> Response:
        try:
            acc = qos.account(scope_of(user), name)
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

    router.add_api_route("/bots", page(bots), methods=["GET"])
    router.add_api_route("/bots/{bot:int}", page(bot), methods=["GET"])
    router.add_api_route("/bots/{bot:int}/live", page(bot_live), methods=["GET"])
    router.add_api_route("/account", page(account), methods=["GET"])
    router.add_api_route("/accounts/{name}", page(other_account), methods=["GET"])
