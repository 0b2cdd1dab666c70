"""The dashboard's "When could it start?" page (issue 40, item 1; docs/decisions/lease-offers.md): the
same :meth:`LeaseManager.offers` dry run as ``GET /leases/offers`` and ``skylease leases when``, behind
the dashboard's session. It changes nothing, so it is a GET form (no CSRF token needed).

    GET /leases/when[?nodes=N&duration=D[&not_before=T]]   the form, and with a duration the answer:
                                                           the earliest start, whether an immediate
                                                           lease would start now, the nodes free; a
                                                           mistake is said next to the form (422)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from skylease.model.errors import UserError
from skylease.model.units import parse_duration
from skylease.runtime.leases.api import LeaseManager, OfferQuery, OfferView
from skylease.service.auth import User
from skylease.service.web.layout import e

__all__ = ["add_when_route", "when_form"]

#: The form's fields: name, label, hint.
_FIELDS = (("nodes", "Nodes", "how many (1 by default)"),
           ("duration", "Duration", "seconds, or 30m, 1h, [D:]HH:MM:SS"),
           ("not_before", "Not before", "a lease time (seconds); empty: now"))


def when_form(values: dict[str, str] | None = None) -> str:
    """The form, with the values asked (if any)."""
    values = values or {}
    fields = "".join(
        f'<div class="field"><label for="w-{name}">{e(label)}</label>'
        f'<input id="w-{name}" name="{name}" maxlength="32"{" required" if name == "duration" else ""} '
        f'value="{e(values.get(name, ""))}" aria-describedby="wh-{name}">'
        f'<span class="hint" id="wh-{name}">{e(hint)}</span></div>' for name, label, hint in _FIELDS)
    return (f'<form method="get" action="/leases/when" class="request">{fields}'
            '<button type="submit">When could it start?</button></form>')


def _query(values: dict[str, str]) -> OfferQuery:
    """The dry run the form asks (UserError naming the field for a mistake)."""
    asked: dict[str, Any] = {}
    for name in ("nodes", "not_before"):
        text = values.get(name, "").strip()
        if text:
            if not text.isdigit():
                raise UserError(f"must be a whole number, got {text!r}", field=name)
            asked[name] = int(text)
    text = values.get("duration", "").strip()
    try:
        asked["duration"] = math.ceil(parse_duration(text))
    except (ValueError, OverflowError, UserError) as exc:
        raise UserError(str(getattr(exc, "message", exc)), field="duration") from None
    try:
        return OfferQuery.model_validate(asked)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise UserError(first["msg"], field=".".join(map(str, first["loc"]))) from None


def _answer(query: OfferQuery, o: OfferView) -> str:
    start = ("no start fits: " + (o.reason or "") if o.earliest_start is None
             else f"lease time {o.earliest_start}" + (" (now)" if o.earliest_start == o.now else ""))
    free = o.nodes_free_at
    rows = [("Earliest start", start),
            ("An immediate lease would start now", "yes" if o.immediate else "no"),
            (f"Nodes free at {free.at} for the whole duration", str(free.free)),
            ("… with best-effort leases preempted", str(free.with_preemption))]
    body = "".join(f'<tr><th scope="row">{e(k)}</th><td>{e(v)}</td></tr>' for k, v in rows)
    return (f'<div class="scroll"><table class="offer" id="offer"><caption>{e(query.nodes)} node(s) for '
            f'{e(query.duration)} lease seconds (lease clock: {e(o.now)} s)</caption>{body}</table></div>')


def add_when_route(router: APIRouter, manager: LeaseManager, page: Callable[..., Any],
                   render: Callable[..., Response], html_route: type) -> None:
    """``GET /leases/when`` on the pages' router (``page`` checks the session; ``html_route``: the
    path is a lease's in the API, so the page is matched only by a browser's request for HTML)."""

    def when(request: Request, user: User, sid: str) -> Response:
        values = {k: request.query_params.get(k, "") for k, _, _ in _FIELDS}
        if not values["duration"]:
            return render("When could it start?", when_form(values), user, sid)
        try:
            query = _query(values)
        except UserError as exc:
            alert = f'<p class="error" role="alert">{e(exc.field)}: {e(exc.message)}</p>'
            return render("When could it start?", alert + when_form(values), user, sid, 422)
        answer = _answer(query, manager.offers(user.name, query))
        return render("When could it start?", answer + when_form(values), user, sid)

    router.add_api_route("/leases/when", page(when), methods=["GET"], route_class_override=html_route)
