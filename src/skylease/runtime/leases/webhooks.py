"""Signed webhook deliveries of warnings before a lease's end (docs/decisions/before-end-warnings.md).

A site allows webhook URLs by prefix and signs every delivery with its secret; a lease names its
URL (:func:`check_url`: one that no prefix allows is refused, 422). A delivery is an HTTP POST of a
JSON body with these headers::

    Content-Type: application/json
    X-Skylease-Event: before-end
    X-Skylease-Delivery: <lease>-<planned end>      (the same for every attempt: receivers dedupe on it)
    X-Skylease-Timestamp: <Unix seconds of this attempt>
    X-Skylease-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>

The signed text binds the timestamp to the body, so a receiver that refuses old timestamps refuses
a replayed delivery too (:func:`verify` is the check, the one the how-to's receiver does).

:class:`Deliveries` sends them from a thread of its own (never under the lease manager's lock):
an attempt that cannot connect, times out or gets a 5xx is tried again after a bounded backoff
(:data:`BACKOFF_S`), at most :data:`ATTEMPTS` attempts; a 2xx is delivered, any other status is a
refusal (not retried). Each attempt's outcome is passed to ``record`` (kept in the database and
shown in the lease's view).
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from skylease.model.errors import UserError

__all__ = ["ATTEMPTS", "BACKOFF_S", "Deliveries", "Delivery", "WebhookNotAllowed", "check_prefix",
           "check_url", "sign", "verify"]

log = logging.getLogger("skylease.leases.webhooks")

#: Attempts of one delivery at most.
ATTEMPTS = 5
#: Real seconds before the 2nd, 3rd, ... attempt (bounded: the last try is 7.5 s after the first's end).
BACKOFF_S = (0.5, 1.0, 2.0, 4.0)
#: Real seconds one attempt may take (connect, send, answer).
TIMEOUT_S = 5.0
SIGNATURE = "X-Skylease-Signature"
TIMESTAMP = "X-Skylease-Timestamp"
DELIVERY = "X-Skylease-Delivery"
EVENT = "X-Skylease-Event"


class WebhookNotAllowed(UserError):
    """A lease's webhook URL that the site does not allow (the service answers 422)."""


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of ``"<timestamp>." + body``."""
    mac = hmac.new(secret, str(int(timestamp)).encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(secret: bytes, timestamp: str, body: bytes, signature: str, *, now: float | None = None,
           tolerance_s: float = 300.0) -> bool:
    """Whether a delivery is genuine: its signature matches (compared in constant time) and its
    timestamp is within ``tolerance_s`` of ``now`` (default: the clock's)."""
    try:
        ts = int(timestamp)
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - ts) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, ts, body), signature)


def check_prefix(prefix: str) -> str:
    """A site's allowed prefix: an http or https URL ending with ``/`` (so that
    ``http://a:80/`` does not allow ``http://a:8000/``), else ValueError."""
    try:
        url = httpx.URL(prefix)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{prefix!r} is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host or not prefix.endswith("/") or url.userinfo:
        raise ValueError(f"{prefix!r} is not an http(s) URL prefix ending with '/' (with no user name)")
    return prefix


def check_url(url: str, prefixes: Sequence[str]) -> str:
    """``url`` if one of ``prefixes`` allows it, else :class:`WebhookNotAllowed` saying which are."""
    if not prefixes:
        raise WebhookNotAllowed("this server allows no webhook (its configuration has no webhook_prefixes)",
                                field="webhook")
    if not any(url.startswith(p) for p in prefixes) or ".." in url.split("?")[0]:
        raise WebhookNotAllowed(f"{url!r} is not under a URL this server allows: {', '.join(prefixes)}",
                                field="webhook")
    return url


@dataclass(order=True)
class Delivery:
    """One webhook to send: ``row`` (its record's id), ``url``, the ``body`` signed at each attempt,
    ``delivery`` (its id header) and the ``attempts`` made so far; ordered by when it is next due."""

    due: float
    row: int = field(compare=False)
    url: str = field(compare=False)
    body: bytes = field(compare=False)
    delivery: str = field(compare=False)
    attempts: int = field(default=0, compare=False)


#: record(row, attempt, state): an attempt's outcome (``n``, ``at``, ``status`` or ``error``) and the
#: delivery's state after it: ``pending``, ``delivered`` or ``failed``.
Record = Callable[[int, dict[str, Any], str], None]


class Deliveries:
    """The webhook sender: :meth:`put` queues a delivery, a thread sends it (see the module's
    docstring). ``transport``: httpx's (None: the network's)."""

    def __init__(self, secret: bytes, record: Record, *, attempts: int = ATTEMPTS,
                 backoff_s: Sequence[float] = BACKOFF_S, timeout_s: float = TIMEOUT_S,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.secret, self.record = secret, record
        self.attempts, self.backoff_s = attempts, tuple(backoff_s)
        # (trust_env off: a proxy of the environment must not carry a site's webhooks)
        self.client = httpx.Client(timeout=timeout_s, follow_redirects=False, trust_env=False,
                                   transport=transport)
        self._heap: list[Delivery] = []
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="skylease-webhooks", daemon=True)
        self._thread.start()

    def put(self, d: Delivery) -> None:
        with self._cond:
            heapq.heappush(self._heap, d)
            self._cond.notify()

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)
        self.client.close()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closing and (not self._heap or self._heap[0].due > time.time()):
                    self._cond.wait(None if not self._heap else max(0.0, self._heap[0].due - time.time()))
                if self._closing:
                    return  # (what is pending stays pending in the database: the next start sends it)
                d = heapq.heappop(self._heap)
            try:
                self._attempt(d)
            except Exception:  # a record that failed (a lost database): logged, the thread goes on
                log.exception("webhook %s: recording an attempt failed", d.delivery)

    def _attempt(self, d: Delivery) -> None:
        d.attempts += 1
        ts = int(time.time())
        headers = {"Content-Type": "application/json", EVENT: "before-end", DELIVERY: d.delivery,
                   TIMESTAMP: str(ts), SIGNATURE: sign(self.secret, ts, d.body)}
        outcome: dict[str, Any] = {"n": d.attempts, "at": round(time.time(), 3)}
        retry = False
        try:
            status = self.client.post(d.url, content=d.body, headers=headers).status_code
            outcome["status"] = status
            retry = status >= 500
            state = "delivered" if 200 <= status < 300 else "pending" if retry else "failed"
        except httpx.HTTPError as exc:  # (no answer: it may be back soon)
            outcome["error"] = f"{type(exc).__name__}: {exc}"[:300]
            retry, state = True, "pending"
        if retry and d.attempts >= self.attempts:
            state = "failed"
        self.record(d.row, outcome, state)
        if state == "pending":
            d.due = time.time() + self.backoff_s[min(d.attempts, len(self.backoff_s)) - 1]
            self.put(d)


def body_of(payload: dict[str, Any]) -> bytes:
    """The JSON body of a delivery (compact, keys sorted: the bytes signed are the bytes sent)."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
