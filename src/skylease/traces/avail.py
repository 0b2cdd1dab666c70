"""Availability traces of many nodes, their Table 2/3 statistics, and the ``.tr`` directory format.

A :class:`~skylease.model.availability.AvailabilityTrace` is one
:class:`~skylease.model.availability.Availability` per node (sorted, disjoint ``[start, end)``
intervals in seconds) plus the observation window ``[start, end)`` of the trace. Readers of real
formats live next to this module (:mod:`.fta`, :mod:`.spot`, :mod:`.swf`), generators in
:mod:`.dg`, and :func:`load_trace` resolves a name or a path to a trace.

Statistics (the SpeQuloS paper's Tables 2 and 3)
-----------------------------------------------
:func:`trace_stats` computes, over the trace window:

* Table 2 -- the number of available nodes ``N(t)`` as a step function: ``length_days``,
  time-weighted ``mean`` and ``std``, ``min`` and ``max`` (over instants of positive duration);
* Table 3 -- quartiles (25/50/75 %) of availability durations (``av_q25`` ...) and of
  unavailability durations (``unav_q25`` ...), plus their means and counts;
* extras: ``n_nodes``, ``n_active`` (nodes available at least once), ``frac_available``
  (available node-seconds over ``n_nodes * length``) and ``churn_per_node_day`` (state changes
  strictly inside the window, per node and day).

Which intervals count (our decision; the paper does not say): an availability duration is every
availability interval clipped to the window (so an interval cut by the window edge counts with its
clipped length); an unavailability duration is every gap *between two availability intervals of the
same node* inside the window. Gaps before a node's first or after its last interval are not counted:
for real traces they mean "not in the trace yet / any more" rather than "down", and a node that is
never available contributes no duration at all.

:func:`format_stats_table` prints rows of these statistics as a fixed-width text table, and
:data:`PAPER_TABLES` holds the paper's values for comparison.

``.tr`` directories (decision S19 in docs/decisions/spequlos.md)
---------------------------------------------------------------
:func:`read_tr_dir` reads one file per node, ``<node>.tr``, with whitespace-separated lines
``start end state``; only ``state == 1`` lines (available) are used. Blank lines and lines
starting with ``#`` are skipped. Files are read in name order; ``.tr.gz`` files are gunzipped.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skylease.model.availability import Availability, AvailabilityTrace, count_steps
from skylease.model.errors import UserError
from skylease.model.limits import check_number, check_seed, check_size, count
from skylease.traces.tables import DAY, PAPER_TABLES

__all__ = [
    "PAPER_TABLES",
    "STAT_COLUMNS",
    "TRACE_NAMES",
    "TRACE_SOURCES",
    "format_stats_table",
    "load_trace",
    "read_text",  # noqa: F822 (module __getattr__: loaded on first use)
    "read_tr_dir",
    "trace_stats",
]

def __getattr__(name: str) -> Any:
    # read_text is re-exported on first use: skylease.model.files (its home, 0.01-0.02 s with the
    # pydantic file models) is not loaded for the generated traces
    if name == "read_text":
        from skylease.traces.textio import read_text

        return read_text
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Peak bytes per availability interval (or node) of a trace being built and summarised (about 220
#: measured on the 4-million-interval ``seti`` trace): the size limit of :func:`load_trace`.
INTERVAL_BYTES = 256
#: The most availability intervals (and nodes) one trace may hold.
MAX_INTERVALS = 2**23

#: The columns of :func:`format_stats_table`: (key, header, format spec).
STAT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("length_days", "days", ".2f"),
    ("n_nodes", "nodes", "d"),
    ("mean", "mean", ".1f"),
    ("std", "std", ".1f"),
    ("min", "min", ".0f"),
    ("max", "max", ".0f"),
    ("av_q25", "av q25", ".0f"),
    ("av_q50", "av q50", ".0f"),
    ("av_q75", "av q75", ".0f"),
    ("unav_q25", "unav q25", ".0f"),
    ("unav_q50", "unav q50", ".0f"),
    ("unav_q75", "unav q75", ".0f"),
    ("frac_available", "%avail", ".1%"),
    ("churn_per_node_day", "churn/node/day", ".2f"),
)


def _quartiles(x: np.ndarray) -> tuple[float, float, float]:
    if not len(x):
        return (math.nan, math.nan, math.nan)
    q = np.quantile(x, [0.25, 0.5, 0.75])
    return float(q[0]), float(q[1]), float(q[2])


def trace_stats(trace: AvailabilityTrace) -> dict[str, Any]:
    """The Table 2/3 statistics of ``trace`` (see the module docstring for the exact rules).

    Keys: ``name, length_days, n_nodes, n_active, mean, std, min, max, av_q25, av_q50, av_q75,
    av_mean, av_n, unav_q25, unav_q50, unav_q75, unav_mean, unav_n, frac_available,
    churn_per_node_day``. Durations are in seconds; quartiles of an empty set are NaN.
    """
    s, e, node = trace.clipped_intervals()
    length = trace.length
    times, counts = count_steps(s, e, trace.start, trace.end)
    if length > 0:
        widths = np.diff(np.concatenate([times, [trace.end]]))
        mean = float((counts * widths).sum() / length)
        std = float(math.sqrt(max(0.0, (((counts - mean) ** 2) * widths).sum() / length)))
        pos = widths > 0
        cmin, cmax = int(counts[pos].min()), int(counts[pos].max())
    else:
        mean = std = math.nan
        cmin = cmax = 0
    av = e - s
    same = node[1:] == node[:-1]
    unav = (s[1:] - e[:-1])[same]
    unav = unav[unav > 0]
    interior = ((s > trace.start).sum() + (e < trace.end).sum()) if len(s) else 0
    node_days = trace.n_nodes * length / DAY
    aq = _quartiles(av)
    uq = _quartiles(unav)
    return {
        "name": trace.name,
        "length_days": length / DAY,
        "n_nodes": trace.n_nodes,
        "n_active": len(np.unique(node)),
        "mean": mean,
        "std": std,
        "min": cmin,
        "max": cmax,
        "av_q25": aq[0],
        "av_q50": aq[1],
        "av_q75": aq[2],
        "av_mean": float(av.mean()) if len(av) else math.nan,
        "av_n": len(av),
        "unav_q25": uq[0],
        "unav_q50": uq[1],
        "unav_q75": uq[2],
        "unav_mean": float(unav.mean()) if len(unav) else math.nan,
        "unav_n": len(unav),
        "frac_available": float(av.sum() / (trace.n_nodes * length)) if node_days > 0 else math.nan,
        "churn_per_node_day": float(interior / node_days) if node_days > 0 else math.nan,
    }


def _cell(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if spec == "d":
        return f"{int(value):d}"
    return format(value, spec)


def format_stats_table(rows: Iterable[Mapping[str, Any]], columns=STAT_COLUMNS) -> str:
    """A fixed-width text table, one row per statistics mapping (missing keys print ``-``).

    ``rows`` may mix :func:`trace_stats` results and :data:`PAPER_TABLES` entries (give those a
    ``name`` key, e.g. ``{"name": "seti (paper)", **PAPER_TABLES["seti"]}``).
    """
    rows = list(rows)
    header = ["trace", *(h for _, h, _ in columns)]
    body = [[str(r.get("name", "")), *(_cell(r.get(k), f) for k, _, f in columns)] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=True)]
    lines = []
    for i, row in enumerate([header, *body]):
        cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Reading




def _number(path: Path, line: int, name: str, token: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise UserError(f"{token!r} is not a number", file=path, line=line, field=name) from None
    if not math.isfinite(value):
        raise UserError(f"{token!r} is not a finite number", file=path, line=line, field=name)
    return value


def _read_tr_file(path: Path) -> list[tuple[float, float]]:
    from skylease.traces.textio import read_text

    out: list[tuple[float, float]] = []
    for number, raw in enumerate(read_text(path).splitlines(), start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split()
        if len(parts) != 3:
            why = f"expected 3 fields 'start end state', found {len(parts)}"
            raise UserError(why, file=path, line=number)
        a = _number(path, number, "start", parts[0])
        b = _number(path, number, "end", parts[1])
        state = _number(path, number, "state", parts[2])
        if b < a:
            raise UserError(f"end {parts[1]} is before start {parts[0]}", file=path, line=number, field="end")
        if state == 1 and b > a:
            out.append((a, b))
    return out


def read_tr_dir(
    path: str | os.PathLike[str],
    *,
    start: float | None = None,
    end: float | None = None,
    name: str | None = None,
) -> AvailabilityTrace:
    """Read a directory of ``<node>.tr`` files (one node each, in file-name order).

    The window is ``[start, end)``, by default from the earliest to the latest time found in any
    ``state == 1`` line; intervals are clipped to it. Overlapping lines of one file are merged.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise UserError("not a directory of .tr files", file=folder)
    files = sorted(p for p in folder.iterdir() if p.name.endswith((".tr", ".tr.gz")) and p.is_file())
    if not files:
        raise UserError("no .tr files in this directory", file=folder)
    per_node = [_read_tr_file(p) for p in files]
    flat = [iv for node in per_node for iv in node]
    t0 = start if start is not None else (min(a for a, _ in flat) if flat else 0.0)
    t1 = end if end is not None else (max(b for _, b in flat) if flat else t0)
    if t1 < t0:
        raise UserError(f"end {t1} is before start {t0}", file=folder)
    nodes = tuple(
        Availability.from_intervals((max(a, t0), min(b, t1)) for a, b in node) for node in per_node
    )
    meta = {"source": str(folder), "format": "tr", "node_names": tuple(_node_name(p) for p in files)}
    return AvailabilityTrace(name or folder.name, nodes, float(t0), float(t1), None, meta)


def _node_name(p: Path) -> str:
    return p.name.removesuffix(".gz").removesuffix(".tr")


# --------------------------------------------------------------------------------------------------
# Registry

#: The shipped files behind the named real traces: name -> (data set, file, description).
_SPOT = "c1.xlarge-us-east-1a.json.gz"
TRACE_SOURCES: dict[str, tuple[str, str, str]] = {
    "spot10": ("spot", _SPOT, "bid ladder, S = $10/h, on c1.xlarge us-east-1a 2016, paper's price level"),
    "spot100": ("spot", _SPOT, "bid ladder, S = $100/h, c1.xlarge us-east-1a 2016, paper's price level"),
    "g5klyo": ("swf-blue", "blue_30days.swf", "best effort on SDSC Blue Horizon, 144 x 8 procs, 30 days"),
    "g5kgre": ("swf-nasa", "NASA-iPSC-1993-3.1-cln.swf.gz", "best effort, NASA iPSC/860, 128 nodes, 31 days"),
    "lanl": ("fta-lanl", "lanl_event_trace.tab.gz", "FTA LANL event trace, 3577 nodes, 1995-2005"),
}
TRACE_NAMES = ("seti", "nd", *TRACE_SOURCES)


def load_trace(
    spec: str,
    seed: int | np.random.Generator | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    n_nodes: int | None = None,
    duration_s: float | None = None,
) -> AvailabilityTrace:
    """Resolve a trace name or path to an :class:`AvailabilityTrace`.

    Names (the SpeQuloS traces, decision S19, and what stands in for them here):

    * ``seti``, ``nd`` -- :func:`~skylease.traces.dg.seti_like` / :func:`~skylease.traces.dg.nd_like`
      with ``seed``; ``n_nodes`` and ``duration_s`` override their paper-sized defaults.
    * ``spot10``, ``spot100`` -- :func:`~skylease.traces.spot.bid_ladder` with S = $10/h or $100/h
      on ``spot/c1.xlarge-us-east-1a.json.gz`` (the c1 type closest to the paper's), its prices
      scaled to the paper's level (:func:`~skylease.traces.spot.calibrated_prices`, decision S18: Table
      2's maxima of 87 and 877 nodes), the whole 60 days.
    * ``g5klyo`` -- :func:`~skylease.traces.swf.best_effort_availability` on the Blue Horizon log
      ``swf/blue_30days.swf`` (144 nodes of 8 processors, 30 days): a busy machine whose free-node
      count swings widely, like Lyon's (Tables 2/5: "varies a lot", high volatility).
    * ``g5kgre`` -- the same on the NASA Ames iPSC/860 log (128 nodes), its first 31 days (the
      paper's length): more free nodes, mixed durations.
    * ``lanl`` -- :func:`~skylease.traces.fta.read_fta_events` on ``fta/lanl_event_trace.tab.gz``.

    Paths: ``*.tab`` / ``*.tab.gz`` (FTA), ``*.json`` / ``*.json.gz`` (a spot price history, with
    S = $10/h), ``*.swf`` / ``*.swf.gz`` (best effort, one node per processor unless the header
    gives ``MaxNodes``), or a directory of ``.tr`` files. Shipped files are found with
    :func:`skylease.traces.datasets.locate` in ``data_dir`` (default: the skylease data folder).
    ``duration_s`` cuts file traces to ``[0, duration_s)``.

    Generated traces (an int ``seed``) and the SWF-derived ones are cached on disk
    (:mod:`skylease.traces.cache`): each is built once per machine.

    A trace must fit the memory budget of :mod:`skylease.model.limits`: at most
    :data:`MAX_INTERVALS` availability intervals and nodes (``n_nodes`` times the expected
    intervals per node of a generated trace; ``n_nodes`` times the price changes of a spot ladder).
    """
    # each reader's own dependencies (pandas for SWF and FTA) are imported only by its branch
    key = spec.strip()
    if seed is not None and not isinstance(seed, np.random.Generator):
        check_seed(seed)
    if n_nodes is not None:
        if isinstance(n_nodes, bool) or not isinstance(n_nodes, int | np.integer) or n_nodes < 1:
            raise UserError(f"must be a whole number >= 1, got {n_nodes!r}", field="--nodes")
        check_size(n_nodes, "nodes", INTERVAL_BYTES, field="--nodes")
    if duration_s is not None:
        check_number(duration_s, "--days", above=0)
    trace: AvailabilityTrace
    if key in ("seti", "nd"):
        from skylease.traces import cache, dg

        nodes = n_nodes or (dg.SETI_DEFAULT_NODES if key == "seti" else dg.ND_DEFAULT_NODES)
        days = (duration_s if duration_s is not None else PAPER_TABLES[key]["length_days"] * DAY) / DAY
        per_node = days * DAY / dg.mean_cycle_s(key) + 1
        check_size(nodes * per_node, "availability intervals", INTERVAL_BYTES, field="--nodes x --days",
                   asked=f"{key} with {nodes:,} nodes over {days:,.6g} days gives about "
                         f"{count(nodes * per_node)}")
        gen = dg.seti_like if key == "seti" else dg.nd_like
        kwargs: dict[str, Any] = {} if duration_s is None else {"duration_s": duration_s}
        if seed is None or isinstance(seed, np.random.Generator):  # not reproducible: not cached
            return gen(n_nodes=n_nodes, seed=seed, **kwargs)
        length = duration_s if duration_s is not None else PAPER_TABLES[key]["length_days"] * DAY
        params = {"n_nodes": nodes, "duration_s": float(length), "seed": int(seed)}
        return cache.cached_trace(gen.__name__, params, lambda: gen(n_nodes=n_nodes, seed=seed, **kwargs))
    if key in TRACE_SOURCES:
        from skylease.traces import datasets

        ds, file, _ = TRACE_SOURCES[key]
        path = datasets.locate(ds, Path(data_dir) if data_dir is not None else None) / file
        if key.startswith("spot"):
            from skylease.traces import spot

            times, prices = spot.read_spot_prices(path)
            _check_ladder(times, n_nodes)
            prices, factor = spot.calibrated_prices(prices)
            trace = spot.bid_ladder(times, prices, 10.0 if key == "spot10" else 100.0, n_nodes, name=key)
            trace.meta["price_factor"] = factor
        elif key == "g5klyo":
            trace = _best_effort(path, key, 144, procs_per_node=8)
        elif key == "g5kgre":
            trace = _best_effort(path, key, None, end=31 * DAY)
        else:
            from skylease.traces import fta

            trace = fta.read_fta_events(path, name=key)
    else:
        path = Path(key).expanduser()
        low = path.name.lower()
        if path.is_dir():
            trace = read_tr_dir(path)
        elif low.endswith((".tab", ".tab.gz")):
            from skylease.traces import fta

            trace = fta.read_fta_events(path)
        elif low.endswith((".json", ".json.gz")):
            from skylease.traces import spot

            times, prices = spot.read_spot_prices(path)
            _check_ladder(times, n_nodes)
            trace = spot.bid_ladder(times, prices, 10.0, n_nodes, name=low.split(".")[0])
        elif low.endswith((".swf", ".swf.gz")):
            trace = _best_effort(path, low.split(".")[0], n_nodes)
        elif path.exists():
            raise UserError("unknown trace format (expected .tab, .json, .swf or a .tr directory)", file=path)
        else:
            raise UserError(f"unknown trace {spec!r}: not a file or directory, and not one of "
                            f"{', '.join(TRACE_NAMES)}")
    if duration_s is not None and duration_s < trace.length:
        trace = trace.window(trace.start, trace.start + duration_s)
    return trace


def _best_effort(path: Path, name: str, n_nodes: int | None, *, procs_per_node: int = 1,
                 end: float | None = None) -> AvailabilityTrace:
    """:func:`~skylease.traces.swf.best_effort_availability` of the SWF log at ``path``, cached
    under the log's content."""
    from skylease.traces import cache

    def build() -> AvailabilityTrace:
        from skylease.traces import swf

        return swf.best_effort_availability(swf.read_swf(path), n_nodes, procs_per_node=procs_per_node,
                                            end=end, name=name)

    try:
        digest = cache.file_digest(path)
    except OSError:
        return build()  # the reader names the file in its one-line error
    params = {"file": digest, "name": name, "n_nodes": n_nodes, "procs_per_node": procs_per_node, "end": end}
    return cache.cached_trace("swf_best_effort", params, build)


def _check_ladder(times: np.ndarray, n_nodes: int | None) -> None:
    """A bid ladder of ``n_nodes`` nodes has at most one interval per price change and node."""
    if n_nodes is not None:
        check_size(n_nodes * (len(times) + 1), "availability intervals", INTERVAL_BYTES, field="--nodes",
                   asked=f"{n_nodes:,} bids on {len(times):,} price changes give up to "
                         f"{n_nodes * (len(times) + 1):,}")


def stats_with_paper(
    specs: Sequence[str],
    seed: int = 0,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    n_nodes: int | None = None,
    duration_s: float | None = None,
) -> list[dict[str, Any]]:
    """Table 2/3 statistics of each trace in ``specs``, each followed by the paper's row if it has one."""
    rows: list[dict[str, Any]] = []
    for spec in specs:
        trace = load_trace(spec, seed, data_dir=data_dir, n_nodes=n_nodes, duration_s=duration_s)
        rows.append({**trace_stats(trace), "source": "ours"})
        key = spec.strip()
        if key in PAPER_TABLES:
            rows.append({"name": f"{key} (paper)", "source": "paper", **PAPER_TABLES[key]})
    return rows
