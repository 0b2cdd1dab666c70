"""One kept-alive HTTP(S) connection from a client to one server, on the standard library's
:mod:`http.client`.

Why not httpx (which the server's tests use): a client command is a whole process, and importing
httpx with httpcore, h11 and anyio is most of what ``skylease leases list`` spends before it asks
anything (docs/performance.md, "Client commands"); :mod:`http.client` is loaded anyway. What the
client needs of a transport is small: one connection reused by its calls (the lease timelines send
requests at given moments and must not pay a connection, let alone a TLS context, per call), a
timeout, TLS checked against the system's certificates (or ``$SSL_CERT_FILE``'s), and the proxy
settings of the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``), as urllib reads them.

A request on a reused connection that the server closed in between (its keep-alive timeout: 5 s
for uvicorn) is sent again on a new connection only when sending it twice cannot do anything twice
(GET, HEAD); anything else goes on a new connection when the kept one has been idle for longer than
:data:`FRESH_AFTER_S`, so it is never in doubt whether the server got it.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

__all__ = ["FRESH_AFTER_S", "Response", "Transport", "TransportTimeout"]

#: A non-idempotent request goes on a new connection when the kept one has been idle this long
#: (well under any server's keep-alive timeout).
FRESH_AFTER_S = 1.0
_IDEMPOTENT = frozenset({"GET", "HEAD"})
#: What a server that closed a kept-alive connection looks like to the next request on it.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class TransportTimeout(OSError):
    """The server did not answer within the transport's timeout."""


@dataclass(frozen=True)
class Response:
    """A server's answer: its status, reason, headers (names in lower case) and body."""

    status_code: int
    reason_phrase: str
    headers: dict[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON (ValueError when it is not)."""
        return json.loads(self.content)


class Transport:
    """Requests to the server at ``base_url`` (``http://HOST:PORT`` or ``https://...``) over one
    kept-alive connection; ``timeout`` seconds for each connect and read."""

    def __init__(self, base_url: str, timeout: float) -> None:
        parts = urlsplit(base_url)
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.timeout = timeout
        self._proxy = _proxy_for(parts.scheme, self.host, parts.netloc.rpartition("@")[2])
        self._context: ssl.SSLContext | None = None
        self._conn: http.client.HTTPConnection | None = None
        self._used_at = 0.0

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, *, headers: dict[str, str], body: bytes | None = None,
                params: dict[str, Any] | None = None) -> Response:
        """Send ``method path`` (with ``params`` as its query) and read the whole answer. Raises
        :class:`TransportTimeout`, or an :class:`OSError` / :class:`http.client.HTTPException`
        saying why the server could not be reached or answered nonsense."""
        target = path + ("?" + urlencode(params) if params else "")
        if self._conn is not None and method not in _IDEMPOTENT \
                and time.monotonic() - self._used_at > FRESH_AFTER_S:
            self.close()
        reused = self._conn is not None
        try:  # (nested: a resend's own failure must meet the handlers below too)
            try:
                return self._send(method, target, headers, body)
            except _STALE:
                if not (reused and method in _IDEMPOTENT):
                    raise
                self.close()
                return self._send(method, target, headers, body)
        except TimeoutError:
            self.close()
            raise TransportTimeout(f"no answer within {self.timeout:g} s") from None
        except BaseException:
            self.close()
            raise

    def _send(self, method: str, target: str, headers: dict[str, str], body: bytes | None) -> Response:
        conn = self._connection()
        if self._proxy is not None and self.scheme == "http":  # a plain-HTTP proxy takes the whole URL
            host = f"[{self.host}]" if ":" in self.host else self.host  # (an IPv6 address)
            target = f"http://{host}:{self.port}{target}"
            headers = headers | self._proxy[1]
        conn.request(method, target, body=body, headers=headers)
        r = conn.getresponse()
        content = r.read()
        self._used_at = time.monotonic()
        if r.will_close:
            self.close()
        return Response(r.status, r.reason, {k.lower(): v for k, v in r.getheaders()}, content)

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is not None:
            return self._conn
        if self.scheme == "https":
            if self._context is None:  # made once: tens of milliseconds (docs/performance.md)
                self._context = ssl.create_default_context()
            if self._proxy is None:
                conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout, context=self._context)
            else:  # CONNECT through the proxy, then TLS with the server itself
                (phost, pport), auth = self._proxy
                conn = http.client.HTTPSConnection(phost, pport, timeout=self.timeout, context=self._context)
                conn.set_tunnel(self.host, self.port, headers=auth)
        elif self._proxy is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        else:
            (phost, pport), _ = self._proxy
            conn = http.client.HTTPConnection(phost, pport, timeout=self.timeout)
        self._conn = conn
        return conn


def _proxy_for(scheme: str, host: str, netloc: str) -> tuple[tuple[str, int], dict[str, str]] | None:
    """The proxy the environment names for ``scheme`` (its host and port, and the header carrying
    its credentials), or None (none set, or ``NO_PROXY`` covers ``host`` or ``netloc``, the URL's
    ``host:port`` as written: what urllib itself checks, so that an entry ``host:port`` counts; the
    bare host too, so that an IPv6 entry without brackets does)."""
    if not any(k.lower().endswith("_proxy") for k in os.environ):  # (urllib.request: 15 ms to import)
        return None
    import urllib.request

    url = urllib.request.getproxies().get(scheme)
    if not url or urllib.request.proxy_bypass(netloc) or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(url if "://" in url else "http://" + url)
    auth = {}
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        auth["Proxy-Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return (parts.hostname or "", parts.port or 80), auth
