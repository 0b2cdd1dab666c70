"""The tables the client commands print of a server's answers (``skylease leases ...``,
``skylease qos ...``): lease times as durations and clock times, money and credits with two decimals
(docs/cli.md). Imported only to print them: ``--json`` answers without rich."""

from __future__ import annotations

import json
import math
from typing import Any

from rich.table import Table

from skylease.model.units import clock, duration

__all__ = ["events_table", "hosts_table", "lease_detail", "leases_table", "record_table", "rows_table"]


# -- tables ---------------------------------------------------------------------------------------
def _t(v: Any) -> str:
    return "-" if v is None or v == [] else str(v)


#: A lease's fields that are times on the lease clock (seconds since the server's epoch) or lease
#: durations: printed [Nd ]HH:MM:SS, as `leases simulate` prints them (docs/cli.md).
_LEASE_TIMES = ("start", "end", "submit", "requested_start", "requested_duration", "time", "until", "old_end",
                "new_end")


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
_PAYLOADS = {"payloads": "payloads", "ended_payloads": "payloads that ended",
             "overheads": "suspensions, resumptions and transfers: reserved beside measured (lease time)",
             "late_starts": "work begun late after an overrun (lease time), and whether it was given back",
             "extensions": "extensions: when asked, by how much, its end before and after (lease time)"}
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


def hosts_table(hosts: list[dict[str, Any]], now: float | None = None) -> Table:
    """The site's nodes: where each is (its host, or this machine), whether it answers and when it
    last did, capacity, CPUs, leases running now, cached images, how VM guests run there."""
    t = _table("node", "host", "state", "last contact", "cpu", "memory (MB)", "disk (MB)", "CPUs", "leases",
               "cache", "VMs run under", title="hosts")
    for h in hosts:
        state = h.get("state") or "up"
        if h.get("reason") and state != "up":
            state = f"{state}: {h['reason']}"
        t.add_row(_t(h.get("name")), _t(h.get("host") or "(this machine)"), _t(state),
                  last_contact(h.get("last_contact"), now),
                  *(_t(h.get(k)) for k in ("cpu", "memory", "disk")), _joined(h.get("cpus")),
                  _joined(h.get("leases")), _joined(h.get("cache"), ", "), _t(h.get("vms")))
    return t


def last_contact(unix: float | None, now: float | None = None) -> str:
    """When a host last answered, as an age (``-``: this machine, or never)."""
    if unix is None:
        return "-"
    import time

    age = max(0.0, (time.time() if now is None else now) - float(unix))
    return f"{age:.0f} s ago" if age < 120 else f"{age / 60:.0f} min ago"


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


def offer_table(o: dict[str, Any]) -> Table:
    """A counter-offer (``GET /leases/offers``): lease times as the lease tables print them."""
    t = _table("", "value", title="when it could start")
    free = o.get("nodes_free_at") or {}
    start = o.get("earliest_start")
    rows = [("earliest start", "none" if start is None else clock(start)),
            ("now", clock(o["now"])),
            (f"nodes free at {clock(free.get('at', o['now']))}", _cell(free.get("free"))),
            ("  with best-effort leases preempted", _cell(free.get("with_preemption"))),
            ("an immediate lease would start now", "yes" if o.get("immediate") else "no")]
    if o.get("reason"):
        rows.append(("why none", str(o["reason"])))
    for k, v in rows:
        t.add_row(k, v)
    return t
