"""The lease page's "Extend" form (issue 40, item 2; docs/decisions/lease-extensions.md): the same
:meth:`LeaseManager.extend` call as ``PATCH /leases/{id}``, behind the dashboard's session and its
CSRF token (:mod:`.pages`' ``page`` wrapper).

    POST /leases/{id}/extend   field ``by``: a duration (3600, 90m, 1h, [D:]HH:MM:SS); 303 to the
                               lease's page, or a page with the mistake (422) or the refusal and
                               what would fit (409), or 404 for another user's lease
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from skylease.model.errors import UserError
from skylease.model.units import parse_duration
from skylease.runtime.leases.api import LeaseChange, LeaseManager, LeaseNotFound, LeaseRefused, LeaseView
from skylease.service.auth import User
from skylease.service.web.layout import csrf_field, e

__all__ = ["add_extend_route", "extend_form"]

#: States a lease can no longer leave: no form (as the lease list's cancel button).
_ENDED = frozenset({"done", "rejected", "refused", "cancelled", "failed"})


def extend_form(view: LeaseView, sid: str) -> str:
    """The form of a lease not over (empty for one that is)."""
    if view.state in _ENDED:
        return ""
    return (f'<form method="post" action="/leases/{e(view.id)}/extend" class="extend">{csrf_field(sid)}'
            '<label for="extend-by">Extend by (seconds, or 30m, 1h, [D:]HH:MM:SS)</label> '
            '<input id="extend-by" name="by" required maxlength="32" inputmode="text"> '
            '<button type="submit">Extend</button></form>')


def add_extend_route(router: APIRouter, manager: LeaseManager, page: Callable[..., Any],
                     render: Callable[..., Response]) -> None:
    """``POST /leases/{id}/extend`` on the pages' router (``page`` checks the session and CSRF)."""

    def extend(request: Request, user: User, sid: str) -> Response:
        lease_id = int(request.path_params["lease_id"])
        back = f'<p><a href="/leases/{lease_id}">Back to lease {lease_id}</a></p>'
        text = str(request.state.form.get("by", "")).strip()
        try:
            by = math.ceil(parse_duration(text))
            change = LeaseChange.model_validate({"by": by})
        except (ValueError, OverflowError, UserError) as exc:
            why = exc.errors(include_url=False)[0]["msg"] if hasattr(exc, "errors") else str(exc)
            return render("Not extended", f'<p class="error">by: {e(why)}</p>{back}', user, sid, 422)
        try:
            if lease_id > 2**53:  # the API's bound on ids: beyond it, no lease
                raise LeaseNotFound(f"no lease {lease_id}")
            manager.extend(user.scope, lease_id, change)
        except LeaseNotFound as exc:
            return render("Not found", f'<p class="error">{e(exc)}</p>', user, sid, 404)
        except LeaseRefused as exc:
            alt = [f"the latest end that fits is {exc.latest_end}" if exc.latest_end is not None else "",
                   f"the earliest start that fits is {exc.earliest_start}" if exc.earliest_start is not None
                   else ""]
            more = "; ".join(a for a in alt if a)
            msg = f"{exc.message}" + (f" ({more}, lease seconds)" if more else "")
            return render("Refused", f'<p class="error">{e(msg)}</p>{back}', user, sid, 409)
        except UserError as exc:
            return render("Refused", f'<p class="error">{e(exc)}</p>{back}', user, sid, 409)
        return RedirectResponse(f"/leases/{lease_id}", status_code=303)

    router.add_api_route("/leases/{lease_id:int}/extend", page(extend), methods=["POST"])
