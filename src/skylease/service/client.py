"""The client of ``skylease serve`` (issue 19): the ``skylease leases request|cancel|list|show|queue|hosts``
commands call the server through :class:`Client` and print what it answers (cli/server_tables.py).

The server is ``--server``, else ``$SKYLEASE_SERVER``, else the one of the token file ``skylease login``
wrote, else ``http://127.0.0.1:8642``; the token ``--token``, else ``$SKYLEASE_TOKEN``, else the token
file's when it is for that server (runtime/credentials.py). A request the server refuses (4xx) is a
:class:`UserError` with the server's reason (exit 2); a server that fails (5xx), does not answer or
cannot be reached is a :class:`ServiceError` naming its URL (exit 1). HTTPS servers are checked
against the system's certificates, or those of ``$SSL_CERT_FILE`` (a self-signed certificate: point
it there).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from http.client import HTTPException
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from skylease.model.errors import UserError
from skylease.runtime.credentials import read_login, token_for, token_path
from skylease.service.http_transport import Transport, TransportTimeout

if TYPE_CHECKING:
    from skylease.runtime.leases.api import LeaseRequest

# What builds and checks a lease request (pydantic models, the XML and LWF readers) is imported by the
# functions that do it: a command that only reads a list from the server answers sooner without them.

__all__ = ["DEFAULT_SERVER", "Client", "Listed", "ServiceError", "TokenRefused", "parse_seconds",
           "read_request_file", "request_from_options", "server_url"]

DEFAULT_SERVER = "http://127.0.0.1:8642"
#: How long the client waits for an answer (a request is answered once it is journaled).
TIMEOUT_S = 30.0


class ServiceError(Exception):
    """The server failed, did not answer or cannot be reached (exit status 1)."""


class TokenRefused(UserError):
    """The server does not know the token (401)."""


class Listed(list):  # type: ignore[type-arg]
    """The items of a list route; ``more``: the server has more after them (another page)."""

    more: bool = False


# -- building a request ---------------------------------------------------------------------------
def parse_seconds(text: str, option: str) -> int:
    """A duration or time option: whole seconds (``3600``) or ``[D:]HH:MM:SS``."""
    from skylease.traces.lwf import clock_seconds

    s = text.strip()
    if s.isdigit():
        return int(s)
    try:
        return clock_seconds(s)
    except ValueError as exc:
        why = str(exc).partition("]: ")[2]
        raise UserError(f"{text!r} is not a number of seconds or [D:]HH:MM:SS" + (f": {why}" if why else ""),
                        field=option) from None


_OPTION_OF = {"type": "--type", "nodes": "--nodes", "duration": "--duration", "start": "--start",
              "start_in": "--start-in", "cpu": "--cpu", "memory": "--memory", "disk": "--disk",
              "image": "--image", "image_size": "--image-size", "preemptible": "--preemptible",
              "command": "--command", "vm": "--vm", "before_end": "--before-end", "webhook": "--webhook"}


def request_from_options(**options: Any) -> LeaseRequest:
    """A lease request from the command line's options (those that are None are not given); an
    advance reservation when a start is given and no type."""
    from pydantic import ValidationError

    from skylease.runtime.leases.api import LeaseRequest

    given = {k: v for k, v in options.items() if v is not None}
    if "type" not in given and ("start" in given or "start_in" in given):
        given["type"] = "advance-reservation"
    if "duration" not in given:
        raise UserError("a lease needs a duration (--duration SECONDS or HH:MM:SS), or give a FILE",
                        field="--duration")
    try:
        return LeaseRequest.model_validate(given)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        key = str(first["loc"][0]) if first["loc"] else ""
        what = str(first.get("ctx", {}).get("error", first["msg"])) if first["type"] == "value_error" \
            else str(first["msg"])
        raise UserError(what[:1].lower() + what[1:], field=_OPTION_OF.get(key, "--type")) from None


def read_request_file(path: Path) -> tuple[bytes, str]:
    """A lease request file (JSON, or a Haizea XML ``<lease>`` element; ``-``: standard input),
    checked here so that a mistake names the file and its line: the body and its content type."""
    from skylease.model.files import read_text
    from skylease.service.bodies import is_xml, lease_request_from_json, lease_request_from_xml

    if str(path) == "-":
        text, name = sys.stdin.read(), "<stdin>"
    else:
        text, name = read_text(path), str(path)
    if is_xml(text):
        lease_request_from_xml(text, name)
        return text.encode(), "application/xml"
    lease_request_from_json(text, name)
    return text.encode(), "application/json"


# -- talking to the server ------------------------------------------------------------------------
@dataclass(frozen=True)
class Client:
    """The server's URL and a token; its calls share one kept-alive connection (and one TLS context,
    whose making costs tens of milliseconds: a client that sends many requests, or sends one at a
    given moment, must not pay it per call: service/http_transport.py). :meth:`close` it, or use it
    as a context manager."""

    server: str
    token: str
    _http: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_http", Transport(self.server, TIMEOUT_S))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_options(cls, server: str | None, token: str | None) -> Client:
        """The server and token of the options, else of the environment, else of the token file
        (see the module's doc)."""
        url = server_url(server)
        return cls(url, token_for(url, token, "--token"))

    def call(self, method: str, path: str, *, body: bytes | None = None,
             content_type: str | None = None) -> Any:
        """The server's JSON answer to ``method path``."""
        return self._answer(method, path, body=body, content_type=content_type)[1]

    def listing(self, path: str, limit: int | None = None, every: bool = False) -> Listed:
        """A list route's items: its first page of ``limit`` (None: the server's default), or with
        ``every`` all its pages (of ``limit`` items; None: the server's most), one after the other
        (:mod:`skylease.service.paging`); ``more`` says whether items were left on the server."""
        from skylease.service.page_walk import MAX_LIMIT, BadPage, walk  # (not paging: it loads FastAPI)

        size = limit if limit is not None or not every else MAX_LIMIT
        out = Listed()

        def fetch(cursor: str | None) -> tuple[list[Any], str | None]:
            params = {k: v for k, v in (("limit", size), ("after", cursor)) if v is not None}
            r, items = self._answer("GET", path, params=params)
            nxt = r.headers.get("x-next-cursor")
            out.more = nxt is not None
            return items, nxt

        try:
            out.extend(walk(fetch, every))
        except BadPage as exc:
            raise ServiceError(f"the server at {self.server}: {exc.message}") from None
        return out

    def _answer(self, method: str, path: str, *, body: bytes | None = None, content_type: str | None = None,
                params: dict[str, Any] | None = None) -> tuple[Any, Any]:
        """The server's answer to ``method path`` and its JSON (an answer of another kind is a
        ServiceError)."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        try:
            r = self._http.request(method, path, headers=headers, body=body, params=params)
        except TransportTimeout:
            raise ServiceError(f"the server at {self.server} did not answer within {TIMEOUT_S:g} s") from None
        except (HTTPException, OSError, ValueError) as exc:
            raise ServiceError(f"cannot reach the server at {self.server}: {_reason(exc)}") from None
        if r.status_code >= 400:
            detail = _detail(r)
            where = f"the server at {self.server} answered {r.status_code} {r.reason_phrase}: {detail}"
            if r.status_code >= 500:
                raise ServiceError(where)
            if r.status_code == 401:
                raise TokenRefused(f"{detail}: the server at {self.server} does not know this token",
                                   field="--token")
            raise UserError(f"{detail} ({r.status_code} {r.reason_phrase})")
        try:
            return r, r.json()
        except ValueError:
            raise ServiceError(f"the server at {self.server} answered something else than JSON") from None

    def me(self) -> dict[str, Any]:
        """Who the token is: ``{"name": ..., "admin": ...}``."""
        return self.call("GET", "/me")

    def request(self, body: bytes, content_type: str) -> dict[str, Any]:
        return self.call("POST", "/leases", body=body, content_type=content_type)

    def offers(self, params: dict[str, Any]) -> dict[str, Any]:
        """``GET /leases/offers``: when a request of ``params`` (nodes, duration, not_before, cpu,
        memory, disk; None left out) could start, changing nothing."""
        given = {k: v for k, v in params.items() if v is not None}
        return self._answer("GET", "/leases/offers", params=given)[1]

    def cancel(self, lease_id: int) -> dict[str, Any]:
        return self.call("DELETE", f"/leases/{lease_id}")

    def extend(self, lease_id: int, change: dict[str, int]) -> dict[str, Any]:
        """``PATCH /leases/{id}``: ``{"by": seconds}`` or ``{"end": lease time}``."""
        return self.call("PATCH", f"/leases/{lease_id}", body=json.dumps(change).encode(),
                         content_type="application/json")

    def lease(self, lease_id: int) -> dict[str, Any]:
        return self.call("GET", f"/leases/{lease_id}")

    def leases(self, limit: int | None = None, every: bool = False) -> Listed:
        return self.listing("/leases", limit, every)

    def queue(self, limit: int | None = None, every: bool = False) -> Listed:
        return self.listing("/queue", limit, every)

    def hosts(self) -> list[dict[str, Any]]:
        return self.call("GET", "/hosts")

    def vm_log(self, lease_id: int, vnode: int, limit: int | None = None) -> dict[str, Any]:
        """VM ``vnode`` of the lease: its state or exit status and its log's last ``limit`` bytes
        (None: the server's default)."""
        params = None if limit is None else {"bytes": limit}
        return self._answer("GET", f"/leases/{lease_id}/vms/{vnode}/log", params=params)[1]

    # -- SpeQuloS (issue 20) -------------------------------------------------------------------
    def _json(self, method: str, path: str, body: dict[str, Any]) -> Any:
        return self.call(method, path, body=json.dumps(body).encode(), content_type="application/json")

    def qos_account(self, user: str | None = None) -> dict[str, Any]:
        return self.call("GET", "/qos/account" if user is None else f"/qos/accounts/{quote(user, safe='')}")

    def qos_deposit(self, user: str, credits: float, note: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"credits": credits} | ({"note": note} if note else {})
        return self._json("POST", f"/qos/accounts/{quote(user, safe='')}/deposits", body)

    def qos_order(self, bot: int, credits: float) -> dict[str, Any]:
        return self._json("POST", f"/qos/bots/{bot}/orders", {"credits": credits})

    def qos_predict(self, bot: int) -> dict[str, Any]:
        return self.call("GET", f"/qos/bots/{bot}/prediction")

    def qos_bots(self, limit: int | None = None, every: bool = False) -> Listed:
        return self.listing("/qos/bots", limit, every)

    def qos_history(self, infrastructure: str) -> dict[str, Any]:
        return self.call("GET", f"/qos/history/{quote(infrastructure, safe='')}")


def server_url(server: str | None) -> str:
    """The server's URL (see the module's doc), checked: one line naming where it came from."""
    env_server = os.environ.get("SKYLEASE_SERVER", "").strip()
    file = None
    if server is not None:
        url, option = server, "--server"
    elif env_server:
        url, option = env_server, "SKYLEASE_SERVER"
    else:
        login = read_login()
        url, option = (DEFAULT_SERVER, "--server") if login is None else (login.server, "server")
        file = None if login is None else token_path()
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"{url!r} is not a server URL: give http://HOST:PORT or https://HOST:PORT",
                        file=file, field=option)
    try:
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError:
        raise UserError(f"{url!r} has no valid port", file=file, field=option) from None
    return url


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] or type(exc).__name__


def _detail(r: Any) -> str:
    try:
        detail = r.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if detail is None:
        detail = r.text.strip()[:200] or r.reason_phrase
    latest = _earliest(r, "latest_end")
    if latest is not None:  # (a refused extension: the latest end that fits)
        detail = f"{detail}; the latest end that fits is {latest} (lease seconds)"
    earliest = _earliest(r)
    if earliest is not None:  # (a refused AR or IM request: when it would fit)
        detail = f"{detail}; the earliest start that fits is {earliest} (lease seconds)"
    return " ".join(str(detail).split())


def _earliest(r: Any, key: str = "earliest_start") -> int | None:
    try:
        value = r.json().get(key)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
