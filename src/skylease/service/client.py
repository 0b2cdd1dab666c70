"""The client of ``skylease serve`` (issue 19): the ``skylease leases request|cancel|list|show|queue|hosts``
commands call the server through :class:`Client` and print what it answers with the tables here.

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
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from rich.table import Table

from skylease.model.errors import UserError
from skylease.model.units import clock, duration
from skylease.runtime.credentials import read_login, token_for, token_path

if TYPE_CHECKING:
    from skylease.runtime.leases.api import LeaseRequest

# What builds and checks a lease request (pydantic models, the XML and LWF readers) is imported by the
# functions that do it: a command that only reads a list from the server answers sooner without them.

__all__ = ["DEFAULT_SERVER", "Client", "Listed", "ServiceError", "TokenRefused", "events_table",
           "hosts_table", "lease_detail", "leases_table", "parse_seconds", "read_request_file",
           "record_table", "request_from_options", "rows_table", "server_url"]

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
              "command": "--command"}


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
    """The server's URL and a token; its calls share one HTTP connection pool (and one TLS context,
    whose making costs tens of milliseconds: a client that sends many requests, or sends one at a
    given moment, must not pay it per call). :meth:`close` it, or use it as a context manager."""

    server: str
    token: str
    _http: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        httpx = _httpx()
        object.__setattr__(self, "_http", httpx.Client(timeout=TIMEOUT_S, verify=_verify(self.server)))

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
        httpx = _httpx()

        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        try:
            r = self._http.request(method, self.server + path, headers=headers, content=body, params=params)
        except httpx.TimeoutException:
            raise ServiceError(f"the server at {self.server} did not answer within {TIMEOUT_S:g} s") from None
        except (httpx.HTTPError, OSError, ValueError) as exc:
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

    def cancel(self, lease_id: int) -> dict[str, Any]:
        return self.call("DELETE", f"/leases/{lease_id}")

    def lease(self, lease_id: int) -> dict[str, Any]:
        return self.call("GET", f"/leases/{lease_id}")

    def leases(self, limit: int | None = None, every: bool = False) -> Listed:
        return self.listing("/leases", limit, every)

    def queue(self, limit: int | None = None, every: bool = False) -> Listed:
        return self.listing("/queue", limit, every)

    def hosts(self) -> list[dict[str, Any]]:
        return self.call("GET", "/hosts")

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


def _httpx() -> Any:
    """httpx, without its own command-line tool: its ``__init__`` imports ``httpx._main`` (click,
    pygments, rich's syntax highlighting: a third of its import time) when those are installed, as
    they are here, and takes an ImportError there as "not installed"; a None in ``sys.modules``
    gives that ImportError. (Should a later httpx need the module, it is imported as usual.)"""
    if "httpx" in sys.modules:
        return sys.modules["httpx"]
    blocked = "httpx._main" not in sys.modules
    if blocked:
        sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx
    except ImportError:
        if not blocked:
            raise
        sys.modules.pop("httpx._main", None)
        import httpx
    finally:
        if blocked and "httpx._main" in sys.modules and sys.modules["httpx._main"] is None:
            del sys.modules["httpx._main"]
    return httpx


def _verify(server: str) -> Any:
    """What checks the server's certificate: the system's certificates (or $SSL_CERT_FILE's) for an
    https:// server. An http:// one has no certificate, and loading them is most of a short
    command's time (tens of milliseconds): a context that trusts nothing stands in, never used, as
    the client follows no redirects (a TLS connection through it would fail, not pass unchecked).
    Behind a proxy (whose connection may be TLS) the certificates are loaded as usual."""
    proxied = any(os.environ.get(k) for k in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"))
    if urlsplit(server).scheme != "http" or proxied:
        return True
    import ssl

    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


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
    return " ".join(str(detail).split())


# -- tables ---------------------------------------------------------------------------------------
def _t(v: Any) -> str:
    return "-" if v is None or v == [] else str(v)


#: A lease's fields that are times on the lease clock (seconds since the server's epoch) or lease
#: durations: printed [Nd ]HH:MM:SS, as `leases simulate` prints them (docs/cli.md).
_LEASE_TIMES = ("start", "end", "submit", "requested_start", "requested_duration", "time", "until")


def _lt(key: str, v: Any) -> str:
    return clock(v) if key in _LEASE_TIMES and isinstance(v, int | float) else _t(v)


#: Columns of names and words kept whole (``advance-reservation``, ``local-grid``): the others wrap
#: first on a narrow terminal.
_WHOLE = ("id", "owner", "type", "state", "infrastructure", "strategy", "node", "user", "event", "kind",
          "time")


def _table(*columns: str, title: str | None = None) -> Table:
    """A table whose cells never lose text: names stay whole, and a cell still too long folds onto
    the next line instead of being cut to ``batch-ac…`` (docs/cli.md)."""
    t = Table(title=title)
    for i, c in enumerate(columns):
        t.add_column(c, overflow="fold", no_wrap=i == 0 or c in _WHOLE)
    return t


def _joined(values: Any, sep: str = ",") -> str:
    return sep.join(map(str, values or [])) or "-"


def leases_table(views: list[dict[str, Any]], title: str | None = None) -> Table:
    """Leases, one a row: id, owner, type, state, nodes, start, end, where it runs, why."""
    t = _table("id", "owner", "type", "state", "nodes", "start", "end", "on", "reason", title=title)
    for v in views:
        t.add_row(*(_lt(k, v.get(k)) for k in ("id", "owner", "type", "state", "nodes", "start", "end")),
                  _joined(v.get("running_on"), ", "), _t(v.get("reason")))
    return t


#: The payload tables of a lease's view, by key.
_PAYLOADS = {"payloads": "payloads", "ended_payloads": "payloads that ended"}
_SHOWN = ("id", "owner", "type", "state", "submit", "requested_start", "requested_duration", "nodes", "image",
          "start", "end", "reason", "failed_payloads", "running_on")


def lease_detail(v: dict[str, Any]) -> list[Table]:
    """One lease: its fields, its payloads and its events (each a table)."""
    fields = _table("field", "value", title=f"lease {v.get('id')}")
    for key in (*_SHOWN, *sorted(k for k in v if k not in (*_SHOWN, "events", *_PAYLOADS))):
        value = v.get(key)
        shown = _joined(value, ", ") if isinstance(value, list) else _lt(key, value)
        fields.add_row(key.replace("_", " "), shown)
    out = [fields]
    for key, title in _PAYLOADS.items():
        if v.get(key):
            keys = list(dict.fromkeys(k for p in v[key] for k in p))
            table = _table(*keys, title=title)
            for p in v[key]:
                table.add_row(*(_t(p.get(k)) for k in keys))
            out.append(table)
    out.append(events_table(v.get("events") or []))
    return out


def events_table(events: list[dict[str, Any]]) -> Table:
    """A lease's events in order: when, what, and the rest of each record."""
    t = _table("time", "event", "details", title="events")
    for ev in events:
        rest = {k: val for k, val in ev.items() if k not in ("time", "event")}
        t.add_row(_lt("time", ev.get("time")), _t(ev.get("event")),
                  " ".join(f"{k}={_lt(k, val) if k in _LEASE_TIMES else json.dumps(val)}"
                           for k, val in rest.items()) or "-")
    return t


def hosts_table(hosts: list[dict[str, Any]]) -> Table:
    """The site's nodes: capacity, CPUs, leases running now, cached images."""
    t = _table("node", "cpu", "memory (MB)", "disk (MB)", "CPUs", "leases", "cache", title="hosts")
    for h in hosts:
        t.add_row(*(_t(h.get(k)) for k in ("name", "cpu", "memory", "disk")), _joined(h.get("cpus")),
                  _joined(h.get("leases")), _joined(h.get("cache"), ", "))
    return t


# -- SpeQuloS tables --------------------------------------------------------------------------------
def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.6g}"
    return str(v)


#: SpeQuloS fields that are durations in seconds (since a bag was registered): printed as durations.
_DURATIONS = ("t", "t_c_r", "p", "t_p", "low", "high", "t_pred", "completion_time")


def _value(key: str, v: Any) -> str:
    return duration(v) if key in _DURATIONS and isinstance(v, int | float) and not isinstance(v, bool) \
        else _cell(v)


def record_table(title: str, record: dict[str, Any], skip: tuple[str, ...] = ()) -> Table:
    """One record (an account, a prediction, an order) as a two-column table."""
    t = _table("", "value", title=title)
    for k, v in record.items():
        if k not in skip and not isinstance(v, list | dict):
            t.add_row(k.replace("_", " "), _value(k, v))
    return t


#: Columns that hold a Unix time: shown as the local date and time, to the second.
_WHEN = ("at", "registered_at", "finished_at")


def _when(v: Any) -> str:
    import datetime as dt

    if not isinstance(v, int | float) or not math.isfinite(v):
        return _cell(v)
    return dt.datetime.fromtimestamp(v).isoformat(sep=" ", timespec="seconds")


def rows_table(title: str, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> Table:
    """Records as rows (bags, history, ledger movements), the given columns in order."""
    t = _table(*(c.replace("_", " ") for c in columns), title=title)
    for r in rows:
        t.add_row(*(_when(r.get(c)) if c in _WHEN else _value(c, r.get(c)) for c in columns))
    return t
