"""The vital parts of a long-lived server (issue 33, "liveness"): threads that must keep running, and,
once one has died, why (docs/decisions/serve-liveness.md).

A :class:`Vital` is one such part: the lease manager's loop, the payload watcher of the local nodes,
a sweep of the service. Its thread runs through :meth:`Vital.thread` (or reports with
:meth:`Vital.died`); the exception that ended it is logged once, with its traceback, and from then
on :meth:`Vital.failure` says in one line what stopped, when and why (``the lease manager stopped
at 2025-06-01T12:00:00Z: RuntimeError: ...``). A call that needs a dead part raises
:class:`Unavailable` with that line (the service answers 503 with it): it is refused, never half
done, and never logged again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["MAX_REASON", "Unavailable", "Vital"]

log = logging.getLogger("skylease.health")

#: The longest exception message a failure line keeps (characters).
MAX_REASON = 300


class Unavailable(Exception):
    """A part of the server the call needs has stopped: the message says which, when and why."""


class Vital:
    """A part of a server that must keep running; ``what`` names it in the failure line (``the
    lease manager``). Alive until :meth:`died`; only the first death counts."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._reason: str | None = None
        self._lock = threading.Lock()

    def died(self, exc: BaseException) -> None:
        """It stopped on ``exc``: recorded, and logged with its traceback (the first time only)."""
        message = " ".join(str(exc).split())
        if len(message) > MAX_REASON:
            message = message[:MAX_REASON - 3] + "..."
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        reason = f"{self.what} stopped at {at}: {type(exc).__name__}" + (f": {message}" if message else "")
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
        log.error("%s", reason, exc_info=exc)

    def failure(self) -> str | None:
        """Why it stopped (one line), or None while it runs. Takes no lock a caller may wait on."""
        return self._reason

    def check(self) -> None:
        """Raise :class:`Unavailable` with the reason if it has stopped."""
        reason = self._reason
        if reason is not None:
            raise Unavailable(reason)

    def thread(self, target: Callable[[], object], name: str) -> threading.Thread:
        """A daemon thread (not started) running ``target``: an exception that ends it is its
        death (a return is a clean stop: the server is closing)."""
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # (a thread's last word: recorded, not left to the excepthook)
                self.died(exc)

        return threading.Thread(target=run, name=name, daemon=True)
