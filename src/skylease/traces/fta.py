"""Failure Trace Archive (FTA) event traces: ``event_trace.tab`` to an :class:`AvailabilityTrace`.

Format
------
One header line naming the columns, then one whitespace-separated line per event:
``event_id component_id node_id platform_id node_name event_type event_start_time
event_stop_time event_end_reason``. ``event_type`` is 1 (up: the node is available) or 0 (down).
Times are Unix seconds in the FTA files we know (the LANL trace spans 1995-05-19 to 2005-09-09);
times above 1e11 (year 5138 in seconds) are taken as milliseconds and divided by 1000. Columns are
found by their header name, so their order does not matter; extra columns are ignored. The file
may be gzipped (``.gz``).

Decisions [R]
-------------
* A node is available exactly during the union of its up events, minus the union of its down
  events: when an up and a down event of one node overlap, **down wins**. (The LANL file has no
  overlap: each node's events alternate and touch end to start.) Overlapping or touching up events
  merge. Zero-length events are ignored.
* Before a node's first event and after its last one the node is unavailable (not in the trace).
* An **unterminated** event (``event_stop_time`` missing, ``-1`` or NaN) lasts until the end of
  the trace, i.e. the latest time in the (filtered) file: an up event with no end means the node
  was still up when the trace was cut.
* ``event_stop_time < event_start_time`` (other than -1) is malformed: a :class:`UserError`.
* Time 0 of the result is ``start`` seconds after the first event of the (filtered) file;
  ``origin`` is its Unix time. ``start`` and ``end`` are seconds from that first event; the
  result's window is ``[0, end - start)``. Every node of the (filtered) file is kept, in
  ``node_id`` order, even if it is never available in the window (so ``n_nodes`` is the
  platform's size).
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from skylease.model.availability import Availability, AvailabilityTrace
from skylease.model.errors import UserError
from skylease.traces.textio import read_text

__all__ = ["FTA_COLUMNS", "read_fta_events"]

FTA_COLUMNS = (
    "event_id",
    "component_id",
    "node_id",
    "platform_id",
    "node_name",
    "event_type",
    "event_start_time",
    "event_stop_time",
    "event_end_reason",
)
_NEEDED = ("node_id", "platform_id", "event_type", "event_start_time", "event_stop_time")
_MS_THRESHOLD = 1e11


def _locate_bad(path: Path, lines: list[str], header: list[str]) -> UserError:
    """Find the first malformed line by a slow scan (only called when the fast parse failed)."""
    cols = {name: i for i, name in enumerate(header)}
    for number, raw in enumerate(lines[1:], start=2):
        parts = raw.split()
        if not parts:
            continue
        if len(parts) < len(header):
            return UserError(f"expected {len(header)} fields, found {len(parts)}", file=path, line=number)
        for name in _NEEDED:
            token = parts[cols[name]]
            try:
                value = float(token)
            except ValueError:
                return UserError(f"{token!r} is not a number", file=path, line=number, field=name)
            if name == "event_type" and value not in (0.0, 1.0):
                return UserError(f"must be 0 (down) or 1 (up), not {token!r}", file=path, line=number,
                                 field=name)
            if name in ("node_id", "platform_id") and value != int(value):
                return UserError(f"{token!r} is not a whole number", file=path, line=number, field=name)
            if name == "event_start_time" and not math.isfinite(value):
                return UserError(f"{token!r} is not a finite time", file=path, line=number, field=name)
        a, b = float(parts[cols["event_start_time"]]), float(parts[cols["event_stop_time"]])
        if b != -1 and math.isfinite(b) and b < a:
            return UserError(f"{parts[cols['event_stop_time']]} is before event_start_time {a:g}",
                             file=path, line=number, field="event_stop_time")
    return UserError("cannot parse the file as an FTA event trace", file=path)


def _parse(path: Path) -> pd.DataFrame:
    text = read_text(path)
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise UserError("empty file or blank header; expected an FTA event_trace.tab header", file=path,
                        line=1)
    header = lines[0].split()
    missing = [c for c in _NEEDED if c not in header]
    if missing:
        raise UserError(f"header lacks column(s) {', '.join(missing)}", file=path, line=1)
    if len(set(header)) != len(header):
        raise UserError("header names a column twice", file=path, line=1)
    try:
        df = pd.read_csv(io.StringIO(text), sep=r"\s+", header=0, usecols=list(_NEEDED),
                         dtype={c: "float64" for c in _NEEDED}, engine="c")
    except (ValueError, pd.errors.ParserError):
        raise _locate_bad(path, lines, header) from None
    if df[list(_NEEDED[:4])].isna().any().any() or not np.isfinite(df["event_start_time"]).all():
        raise _locate_bad(path, lines, header)
    etype = df["event_type"].to_numpy()
    ids = df[["node_id", "platform_id"]].to_numpy()
    if not np.isin(etype, (0.0, 1.0)).all() or (ids != np.round(ids)).any():
        raise _locate_bad(path, lines, header)
    stop = df["event_stop_time"].to_numpy()
    bad = np.isfinite(stop) & (stop != -1) & (stop < df["event_start_time"].to_numpy())
    if bad.any():
        raise _locate_bad(path, lines, header)
    return df


def _subtract(us: np.ndarray, ue: np.ndarray, ds: np.ndarray, de: np.ndarray) -> Availability:
    """Union of [us, ue) minus union of [ds, de), as an Availability."""
    up = Availability.from_intervals(zip(us, ue, strict=True))
    if not len(ds):
        return up
    down = Availability.from_intervals(zip(ds, de, strict=True))
    pts = np.unique(np.concatenate([up.starts, up.ends, down.starts, down.ends]))
    mids = (pts[:-1] + pts[1:]) / 2

    def inside(a: Availability) -> np.ndarray:
        i = np.searchsorted(a.starts, mids, side="right") - 1
        return (i >= 0) & (mids < a.ends[np.maximum(i, 0)])

    keep = inside(up) & ~inside(down)
    return Availability.from_intervals(zip(pts[:-1][keep], pts[1:][keep], strict=True))


def read_fta_events(
    path: str | os.PathLike[str],
    *,
    platform: int | None = None,
    start: float | None = None,
    end: float | None = None,
    name: str | None = None,
) -> AvailabilityTrace:
    """Read an FTA ``event_trace.tab(.gz)`` file (see the module docstring for every rule).

    ``platform`` keeps only that ``platform_id``; ``start``/``end`` (seconds after the first
    event) bound the window, by default the whole trace.
    """
    path = Path(path)
    df = _parse(path)
    if platform is not None:
        df = df[df["platform_id"] == platform]
        if df.empty:
            raise UserError(f"no event has platform_id {platform}", file=path, field="platform_id")
    if df.empty:
        raise UserError("no events", file=path)
    t_start = df["event_start_time"].to_numpy(float)
    t_stop = df["event_stop_time"].to_numpy(float)
    scale = 1000.0 if np.nanmax(np.concatenate([t_start, t_stop])) > _MS_THRESHOLD else 1.0
    t_start = t_start / scale
    open_ = ~np.isfinite(t_stop) | (t_stop == -1)
    t_stop = t_stop / scale
    last = float(np.nanmax(np.concatenate([t_start, t_stop[~open_]])))
    t_stop[open_] = last
    first = float(t_start.min())
    w0 = 0.0 if start is None else float(start)
    w1 = last - first if end is None else float(end)
    if not w1 >= w0:
        raise UserError(f"end {w1:g} is not after start {w0:g}", file=path, field="end")
    origin = first + w0
    rel_s = np.clip(t_start - origin, 0.0, w1 - w0)
    rel_e = np.clip(t_stop - origin, 0.0, w1 - w0)
    node = df["node_id"].to_numpy().astype(np.int64)
    up = df["event_type"].to_numpy() == 1
    keep = rel_e > rel_s
    all_nodes = np.unique(node)
    order = np.lexsort((rel_s, node))
    node_s, s_s, e_s, up_s, keep_s = node[order], rel_s[order], rel_e[order], up[order], keep[order]

    nodes: list[Availability] = []
    bounds = [*np.searchsorted(node_s, all_nodes, side="left").tolist(), len(node_s)]
    # Fast path: within each node, up intervals sorted and disjoint and no down event overlaps
    # an up one (true of the LANL file): then the up intervals are the answer as they are.
    n_overlap = 0
    for k in range(len(all_nodes)):
        lo, hi = bounds[k], bounds[k + 1]
        m = keep_s[lo:hi]
        s, e, u = s_s[lo:hi][m], e_s[lo:hi][m], up_s[lo:hi][m]
        if len(s) > 1 and (s[1:] < e[:-1]).any():
            n_overlap += 1
            nodes.append(_subtract(s[u], e[u], s[~u], e[~u]))
        else:
            nodes.append(Availability.from_intervals(zip(s[u], e[u], strict=True)) if u.sum() > 1
                         else Availability(s[u], e[u]))
    meta = {
        "source": str(path),
        "format": "fta",
        "platform": platform,
        "node_ids": tuple(int(x) for x in all_nodes),
        "time_scale": "ms" if scale == 1000.0 else "s",
        "nodes_with_overlapping_events": n_overlap,
        "unterminated_events": int(open_.sum()),
    }
    return AvailabilityTrace(name or path.name.split(".")[0], tuple(nodes), 0.0, w1 - w0, origin, meta)
