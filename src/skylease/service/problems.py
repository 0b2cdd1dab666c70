"""The service's error answers as the OpenAPI document shows them: every one is ``{"detail": "one
line"}`` (:class:`Problem`), and each route lists the statuses it can answer from these pieces
(docs/decisions/serve-request-bodies.md says which status means what)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["BODY_ERRORS", "ERRORS", "FORBIDDEN", "UNAVAILABLE", "Problem", "Responses", "not_found",
           "refused"]

Responses = dict[int | str, dict[str, Any]]


class Problem(BaseModel):
    """Every error answer: one line saying what is wrong."""

    detail: str


def _doc(description: str) -> dict[str, Any]:
    return {"model": Problem, "description": description}


#: Every route with a token: no token, and a malformed parameter (path, query; a control character
#: in the path or query string is one).
ERRORS: Responses = {
    401: _doc("no token, or not a valid one"),
    422: _doc("a malformed parameter or body (it does not fit this document's schema): the detail names it"),
}
#: A route with a body: too large, and (with ERRORS' 422) malformed.
BODY_ERRORS: Responses = {
    **ERRORS,
    413: _doc("the body is larger than 64 KiB"),
}
#: A route of an administrator's.
FORBIDDEN: Responses = {403: _doc("not an administrator")}
#: A route that needs the lease manager: it is not running (its reason in the detail).
UNAVAILABLE: Responses = {503: _doc("a part of the server this route needs has stopped (the reason; the "
                                   "server's log has the traceback; restart the server)")}


def not_found(what: str) -> Responses:
    """404: ``what`` does not exist or is not the caller's (the same answer)."""
    return {404: _doc(f"no such {what} visible to the caller")}


def refused(why: str) -> Responses:
    """409: a well-formed request the service refuses (``why``; the detail gives the reason)."""
    return {409: _doc(why)}
