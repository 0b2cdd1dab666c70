"""The dashboard's Gantt chart, live updates and lease page (issue 21).

    GET /leases/gantt.json  the slot table for the page's own script: per lease its bars (VM runs,
                            suspensions, resumptions, migrations, image transfers) and ``now``
    GET /events             server-sent events: one ``change`` each time the lease manager's state
                            changes (the page then refetches the chart and the table); at most a
                            few open per session (:mod:`.sse`)
    GET /leases/{id}        a lease's page: its timeline, its state events, and each VM's exit
                            status with the last lines of its log (the first PAGE_VMS VMs)

All need a session (not a bearer token) and are not in the OpenAPI document; the JSON and the event
stream answer only same-origin requests (``Sec-Fetch-Site``, which browsers send). The bars are the
lease views' events as the manager records them (``lease_events``): nothing is scheduled here. The
chart draws every lease of the caller (not a page of them: it is the slot table's picture); the
manager builds their views from a snapshot, outside its lock (runtime/leases/views.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from skylease.runtime.leases.api import LeaseManager, LeaseNotFound, LeaseView
from skylease.service.auth import User
from skylease.service.web.layout import e, table
from skylease.service.web.sse import EventStreams, same_origin

__all__ = ["add_gantt", "gantt_model"]

#: A lease's page shows the logs of this many of its VMs at most (the API has every one's).
PAGE_VMS = 16
#: ... their last this many lines, from at most this many bytes.
PAGE_LOG_LINES = 20
PAGE_LOG_BYTES = 4096

#: A lease event that is a bar of the chart -> the bar's kind.
BAR_KINDS = {"start": "vm", "suspend": "suspend", "resume": "resume", "shutdown": "shutdown",
             "transfer": "transfer"}


def lease_bars(view: LeaseView, now: int) -> list[dict[str, Any]]:
    """A lease's bars from its recorded events, then its plan not begun yet (``plan``: true):
    ``kind``, ``nodes`` (indices), ``start``, ``end``, ``state`` (``done`` or ``active`` or
    ``planned``, from ``now``)."""
    bars = []
    for ev in view.events:
        kind = BAR_KINDS.get(ev.get("event", ""))
        if kind is not None and "until" in ev and "nodes" in ev:
            start, end = ev["time"], ev["until"]
        elif ev.get("event") == "migrate":
            kind, start, end = "migrate", ev["time"], ev["time"]
        else:
            continue
        state = "done" if end <= now else ("active" if start <= now else "planned")
        bar = {"kind": kind, "nodes": list(ev.get("nodes", ev.get("to", []))), "start": start, "end": end,
               "state": state}
        if kind == "migrate":
            bar["from"] = list(ev["from"])
        bars.append(bar)
    for r in view.planned:  # the plan ahead: drawn faded until it begins (then it is an event)
        bars.append({"kind": r["kind"], "nodes": list(r["nodes"]), "start": r["start"], "end": r["end"],
                     "state": "planned", "plan": True})
    return bars


def _vm_logs(manager: LeaseManager, user: User, view: LeaseView) -> str:
    """Each VM's state or exit status and the last lines of its log (read outside the manager's lock:
    LeaseManager.log), as a table; a lease of more VMs says how to see the others."""
    rows = []
    for k in range(min(view.nodes, PAGE_VMS)):
        x = manager.log(user.scope, view.id, k, PAGE_LOG_BYTES)
        code = "" if x.exit_code is None else str(x.exit_code)
        lines = x.text.splitlines()[-PAGE_LOG_LINES:]
        shown = (f'<span class="error">{e(x.log_error)}</span>' if x.log_error else
                 f'<pre class="log">{e(chr(10).join(lines))}</pre>' if lines else "")
        rows.append([e(k), e(x.node or ""), f'<span class="state s-{e(x.state.replace(" ", "-"))}">'
                     f"{e(x.state)}</span>", e(code), e(x.reason or ""), e(x.log), shown])
    more = (f"<p>Lease {view.id} has {view.nodes} VMs: the first {PAGE_VMS} are shown; "
            f"<code>skylease leases logs {view.id} --vnode K</code> shows any.</p>"
            if view.nodes > PAGE_VMS else "")
    return ("<h2>VMs</h2>"
            + table(f"VMs of lease {view.id}: exit status and the last {PAGE_LOG_LINES} lines of each log",
                    ["VM", "node", "state", "exit code", "reason", "log", "last lines"], rows, "No VM.")
            + more)


def gantt_model(manager: LeaseManager, owner: str | None) -> dict[str, Any]:
    """The chart's JSON: ``now``, ``nodes`` (names), ``leases`` (id, owner, type, state, bars)."""
    now = manager.now()
    nodes = [h.name for h in manager.hosts()]
    leases = [{"id": v.id, "owner": v.owner, "type": v.type, "state": v.state, "bars": lease_bars(v, now)}
              for v in manager.leases(owner)]
    return {"now": now, "nodes": nodes, "leases": leases}


def add_gantt(router: APIRouter, manager: LeaseManager, page: Callable[..., Any], streams: EventStreams,
              html_route: type, render: Callable[..., Response]) -> None:
    """The routes above on ``router`` (the pages' router: its ``page`` wrapper checks the session;
    ``streams`` opens the event streams, and finds a request's session)."""

    async def gantt_json(request: Request) -> Response:
        found = await run_in_threadpool(streams.session, request)
        if found is None or not same_origin(request):
            return JSONResponse({"detail": "a dashboard session is needed"}, status_code=403)
        model = await run_in_threadpool(gantt_model, manager, found[0].scope)
        return JSONResponse(model, headers={"Cache-Control": "no-store"})

    async def events(request: Request) -> Response:
        # (every change: a user's chart holds their own leases, but the slot table they share with
        # others moves too: a preemption by another's reservation is theirs to see)
        return await streams(request, manager.version, manager.wait_change_async)

    from skylease.service.web.extend_form import extend_form

    def lease_page(request: Request, user: User, sid: str) -> Response:

        lease_id = int(request.path_params["lease_id"])
        try:
            if lease_id > 2**53:
                raise LeaseNotFound(f"no lease {lease_id}")
            view = manager.lease(user.scope, lease_id)
        except LeaseNotFound as exc:
            return render("Not found", f'<p class="error">{e(exc)}</p>', user, sid, 404)
        now = manager.now()
        names = {h.index: h.name for h in manager.hosts()}
        bars = lease_bars(view, now)
        def where(b: dict[str, Any]) -> str:
            to = ", ".join(names.get(k, str(k)) for k in b["nodes"])
            return to if "from" not in b else ", ".join(names.get(k, str(k)) for k in b["from"]) + " → " + to

        rows = [[e(b["kind"]), e(where(b)), e(b["start"]), e(b["end"]), e(b["state"])] for b in bars]
        evs = [[e(ev.get("time")), e(ev.get("event")),
                e(", ".join(f"{k}={v}" for k, v in ev.items() if k not in ("time", "event")))]
               for ev in view.events]
        facts = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in (
            ("owner", e(view.owner)), ("type", e(view.type)),
            ("state", f'<span class="state s-{e(view.state)}">{e(view.state)}</span>'),
            ("nodes", e(view.nodes)), ("start", e(view.start)), ("end", e(view.end)),
            *((("reclaimed", e(view.reclaimed)),) if view.reclaimed else ())))
        chart = (f'<figure class="gantt"><canvas id="gantt" data-lease="{e(view.id)}" width="1200" '
                 f'height="120" role="img" aria-label="Timeline of lease {e(view.id)}"></canvas>'
                 '<figcaption id="gantt-legend"></figcaption></figure>'
                 '<script src="/static/gantt.js"></script>')
        overheads = [[e(o["kind"]), e(o["vnode"]), e(f'{o["reserved_start"]}-{o["reserved_end"]}'),
                      e(o["reserved_s"]), e(f'{o["started"]}-{o["ended"]}'), e(o["measured_s"]),
                      '<span class="state s-rejected">overran</span>' if o["overran"] else "within"]
                     for o in view.overheads]
        lates = [[e(x["at"]), e(x["seconds"]), "given back" if x["given_back"] else "not given back"]
                 for x in view.late_starts]
        body = ('<p><a href="/leases">All leases</a></p>'
                f'<p class="now">Lease clock: {e(now)} s</p>{chart}'
                f'<div id="lease-tables"><dl class="facts">{facts}</dl>{extend_form(view, sid)}'
                + table(f"Reservations of lease {view.id}", ["kind", "nodes", "start", "end", "state"], rows,
                         "No reservation carried out yet.")
                + (table(f"Suspensions, resumptions and transfers of lease {view.id}: reserved beside "
                         "measured (lease time)", ["kind", "VM", "reserved", "reserved s", "measured",
                                                   "measured s",
                                          "fit"], overheads, "") if overheads else "")
                + (table(f"Work of lease {view.id} begun late after an overrun", ["at", "seconds lost",
                                                                                  "scheduler"], lates, "")
                   if lates else "")
                + _vm_logs(manager, user, view)
                + "<h2>Events</h2>"
                + table(f"Events of lease {view.id}", ["time", "event", "details"], evs, "No events.")
                + "</div>")
        return render(f"Lease {view.id}", body, user, sid)

    router.add_api_route("/leases/gantt.json", gantt_json, methods=["GET"])
    router.add_api_route("/events", events, methods=["GET"])
    router.add_api_route("/leases/{lease_id:int}", page(lease_page), methods=["GET"],
                         route_class_override=html_route)
