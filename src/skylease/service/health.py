"""The service's health (issue 33, "liveness"; docs/decisions/serve-liveness.md): the vital parts of
a server, ``GET /health``, and the guard that refuses a request needing a part that has stopped.

A server's :class:`Vitals` name its parts, each with how to ask why it stopped
(:meth:`skylease.runtime.health.Vital.failure`, or the lease manager's ``failure()``): ``leases``
(the lease manager: its thread and its payload watcher), ``qos-sweep`` and ``qos-deposit-policy``
(SpeQuloS's threads), ``runs-sweep``. A route needs the parts :data:`NEEDS` gives for the first
segment of its path (the JSON API's routes and the dashboard's pages alike): the lease routes need
the lease manager, the QoS routes and pages SpeQuloS's threads, the runs' the runs' sweep; the rest
(``/health``, ``/login``, ``/logout``, ``/``, the documentation, ``/static``) need none.

While a part has stopped: ``GET /health`` answers 503 ``{"ok": false, "detail": "the lease manager
stopped at ...: RuntimeError: ...", ...}``; a request that needs it answers 503 with the same
``detail`` (a browser's page request: a page saying so); every dashboard page carries a banner
saying why (:func:`skylease.service.web.layout.banner`). Nothing is logged per request: the part's
death was logged once, with its traceback, when it happened.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from skylease import __version__
from skylease.runtime.health import Vital
from skylease.service.web.layout import DEGRADED, render_page

__all__ = ["LEASES", "NEEDS", "QOS_DEPOSITS", "QOS_SWEEP", "RUNS_SWEEP", "Health", "HealthGuard", "Vitals",
           "add_health"]

LEASES = "leases"
QOS_SWEEP = "qos-sweep"
QOS_DEPOSITS = "qos-deposit-policy"
RUNS_SWEEP = "runs-sweep"
_QOS = (QOS_SWEEP, QOS_DEPOSITS)
#: The parts each family of routes needs, by the first segment of its path (a path not here needs
#: none). The QoS and runs routes do not need the lease manager: they keep working without it.
NEEDS: dict[str, tuple[str, ...]] = {
    "leases": (LEASES,), "queue": (LEASES,), "hosts": (LEASES,), "events": (LEASES,),
    "qos": _QOS, "bots": _QOS, "account": _QOS, "accounts": _QOS,
    "runs": (RUNS_SWEEP,),
}
#: The dashboard's lists a refusal page offers when they still work: (label, path, the part that
#: says whether this server has them).
_PAGES = (("Leases", "/leases", LEASES), ("Bags of tasks", "/bots", QOS_SWEEP), ("Runs", "/runs", RUNS_SWEEP))

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Vitals:
    """The vital parts of a server, by name, each with its ``failure()`` (why it stopped, or None)."""

    def __init__(self) -> None:
        self._parts: dict[str, Callable[[], str | None]] = {}

    def add(self, name: str, failure: Callable[[], str | None]) -> None:
        self._parts[name] = failure

    def __contains__(self, name: object) -> bool:
        return name in self._parts

    def vital(self, name: str, what: str) -> Vital:
        """A new part ``name`` (``what`` names it in its failure line), added and returned."""
        part = Vital(what)
        self.add(name, part.failure)
        return part

    def failure(self, names: Iterable[str] | None = None) -> str | None:
        """Why the parts ``names`` (default: all) cannot serve, one line each joined by ``; ``, or
        None while they all work (a name not added is a part this server does not run)."""
        chosen = self._parts if names is None else [n for n in names if n in self._parts]
        reasons = [r for n in chosen if (r := self._parts[n]()) is not None]
        return "; ".join(reasons) if reasons else None


class Health(BaseModel):
    ok: bool
    now: int  # lease seconds since the server's epoch
    version: str
    detail: str | None = None  # why it is not ok: which part stopped, when, on what


def add_health(app: FastAPI, vitals: Vitals, now: Callable[[], int]) -> None:
    """``GET /health``: 200 while every part works, else 503 with the reasons (no token needed)."""

    @app.get("/health", response_model=Health, response_model_exclude_none=True, tags=["service"],
             responses={503: {"model": Health, "description": "a part of the server has stopped: "
                                                              "`detail` says which, when and why; restart "
                                                              "the server"}})
    def health() -> Any:
        """Whether the server works, its lease clock and its version (no token needed)."""
        reason = vitals.failure()
        answer = Health(ok=reason is None, now=now(), version=__version__, detail=reason)
        if reason is None:
            return answer
        return JSONResponse(answer.model_dump(), status_code=503)


class HealthGuard:
    """ASGI: a request that needs a part that has stopped (:data:`NEEDS`) is answered 503 with the
    reason, as ``{"detail": ...}`` or, to a browser asking for a page, as a page; every request
    lets the dashboard's pages ask for the banner (:data:`~skylease.service.web.layout.DEGRADED`)."""

    def __init__(self, app: ASGIApp, vitals: Vitals) -> None:
        self.app, self.vitals = app, vitals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = DEGRADED.set(self.vitals.failure)
        try:
            first = str(scope.get("path", "")).strip("/").split("/", 1)[0]
            reason = self.vitals.failure(NEEDS.get(first, ()))
            if reason is None:
                await self.app(scope, receive, send)
            else:
                await self._refusal(scope, reason)(scope, receive, send)
        finally:
            DEGRADED.reset(token)

    def _refusal(self, scope: Scope, reason: str) -> Response:
        headers = dict(scope.get("headers") or [])
        if b"authorization" in headers or b"text/html" not in headers.get(b"accept", b""):  # (not a page)
            return JSONResponse({"detail": reason}, status_code=503)
        working = [f'<a href="{path}">{label}</a>' for label, path, part in _PAGES
                   if part in self.vitals and self.vitals.failure(NEEDS[path.strip("/")]) is None]
        still = f" These pages still work: {', '.join(working)}." if working else ""
        body = f"<p>This page needs a part of the server that has stopped (see above).{still}</p>"
        return render_page("Service unavailable", body, status=503)
