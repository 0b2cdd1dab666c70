"""Standard Workload Format (SWF) logs, and best-effort node availability derived from them.

Reading (:func:`read_swf`)
--------------------------
An SWF file (Parallel Workloads Archive, Feitelson et al.) has header comment lines starting with
``;`` and one job per line with 18 whitespace-separated numbers; ``-1`` means "unknown". The
result is a :class:`pandas.DataFrame` with one row per job in file order and the 18 standard
fields under the names of :data:`SWF_FIELDS`. Times (submit, wait, run, requested time, think
time), average CPU time and memory sizes are float64; the other fields (counts, identifiers,
status) are int64 and must be whole numbers. ``-1`` is kept as is (no NaN): test ``>= 0`` before
use.

The header goes to ``df.attrs``: ``header`` maps each ``; Key: value`` label to its value (a
label that occurs several times, such as ``Partition``, ``Queue`` or ``Note``, maps to the list of
its values, and a continuation line with no label extends the previous value); ``max_nodes``,
``max_procs`` and ``unix_start_time`` are ints (or None when absent); ``source`` is the path. Every
malformed line raises one :class:`UserError` naming the file, the line and the field. ``.gz``
files are gunzipped. No job is filtered out here: users of the reader choose their own filters.
:func:`read_swf_columns` gives the same columns as numpy arrays and the same ``attrs``, without
pandas (0.2 s to import: the lease simulator reads its SWF workloads so, with
:func:`best_effort_columns`).

Best-effort availability (:func:`best_effort_availability`)
------------------------------------------------------------
SpeQuloS's Grid5000 traces (``g5klyo``/``g5kgre``, decision S19 in docs/decisions/spequlos.md) count
a node as available exactly when no regular job runs on it. SWF logs do not say which nodes a job ran
on, so we decided:

* a job runs from ``submit_time + max(wait_time, 0)`` for ``run_time`` seconds; jobs with
  ``run_time <= 0`` or no processor count are skipped;
* it needs ``ceil(procs / procs_per_node)`` nodes, with ``procs`` the allocated processors (the
  requested ones when allocated is ``-1``);
* jobs are placed in start-time order (job-end events before job-start events at the same
  instant) on the **lowest-numbered free nodes** (deterministic first fit);
* if fewer nodes are free than a job needs (logs can oversubscribe, e.g. after a node count
  change), the job gets all free nodes and the shortfall is counted in ``meta["overcommitted_jobs"]``
  and ``meta["missing_node_seconds"]``.

A node is then available on the complement of its busy intervals within the window.
"""

from __future__ import annotations

import heapq
import io
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skylease.model.availability import Availability, AvailabilityTrace
from skylease.model.errors import UserError
from skylease.model.limits import check_size
from skylease.traces.textio import read_text

if TYPE_CHECKING:  # pandas (0.2 s to import) only where a DataFrame is made
    import pandas as pd

__all__ = ["SWF_FIELDS", "best_effort_availability", "best_effort_columns", "read_swf", "read_swf_columns"]

#: The 18 standard SWF fields, in file order.
SWF_FIELDS = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable_number",
    "queue_number",
    "partition_number",
    "preceding_job_number",
    "think_time",
)
_FLOAT_FIELDS = frozenset(
    {"submit_time", "wait_time", "run_time", "average_cpu_time", "used_memory", "requested_time",
     "requested_memory", "think_time"}
)
_INT_FIELDS = tuple(f for f in SWF_FIELDS if f not in _FLOAT_FIELDS)


def _parse_header(lines: list[str]) -> dict[str, Any]:
    header: dict[str, Any] = {}
    last: str | None = None
    for raw in lines:
        text = raw.strip().lstrip(";").strip()
        if not text:
            last = None
            continue
        key, sep, value = text.partition(":")
        if sep and key and " " not in key.strip():
            key, value = key.strip(), value.strip()
            if key in header:
                if not isinstance(header[key], list):
                    header[key] = [header[key]]
                header[key].append(value)
            else:
                header[key] = value
            last = key
        elif last is not None:  # continuation of the previous value
            if isinstance(header[last], list):
                header[last][-1] = f"{header[last][-1]} {text}".strip()
            else:
                header[last] = f"{header[last]} {text}".strip()
    return header


def _header_int(header: dict[str, Any], key: str) -> int | None:
    value = header.get(key)
    if isinstance(value, list):
        value = value[0]
    if value is None:
        return None
    try:
        return int(float(str(value).split()[0]))
    except (ValueError, IndexError):
        return None


def _locate_bad(path: Path, lines: list[str]) -> UserError:
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith(";"):
            continue
        parts = text.split()
        if len(parts) != len(SWF_FIELDS):
            return UserError(f"expected {len(SWF_FIELDS)} fields, found {len(parts)}", file=path, line=number)
        for name, token in zip(SWF_FIELDS, parts, strict=True):
            try:
                value = float(token)
            except ValueError:
                return UserError(f"{token!r} is not a number", file=path, line=number, field=name)
            if not math.isfinite(value):
                return UserError(f"{token!r} is not a finite number", file=path, line=number, field=name)
            if name not in _FLOAT_FIELDS and value != int(value):
                return UserError(f"{token!r} is not a whole number", file=path, line=number, field=name)
    return UserError("cannot parse the file as SWF", file=path)


def read_swf_columns(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """What :func:`read_swf` reads, without pandas: its columns as numpy arrays (in
    :data:`SWF_FIELDS` order) and its ``attrs``; the same values and the same errors."""
    path = Path(path)
    text = read_text(path)
    lines = text.splitlines()
    header_lines = [ln for ln in lines if ln.lstrip().startswith(";")]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": no job
            values = np.loadtxt(io.StringIO(text), dtype=np.float64, comments=";", ndmin=2)
    except ValueError:  # a line with another number of fields, or a token that is no number
        raise _locate_bad(path, lines) from None
    if values.size == 0:
        values = np.empty((0, len(SWF_FIELDS)))
    if values.shape[1] != len(SWF_FIELDS) or not np.isfinite(values).all():
        raise _locate_bad(path, lines)
    ints = values[:, [SWF_FIELDS.index(f) for f in _INT_FIELDS]]
    if (ints != np.round(ints)).any():
        raise _locate_bad(path, lines)
    columns = {f: values[:, i].astype(np.int64) if f not in _FLOAT_FIELDS else values[:, i].copy()
               for i, f in enumerate(SWF_FIELDS)}
    header = _parse_header(header_lines)
    attrs = {"header": header, "max_nodes": _header_int(header, "MaxNodes"),
             "max_procs": _header_int(header, "MaxProcs"),
             "unix_start_time": _header_int(header, "UnixStartTime"),
             "source": str(path)}
    return columns, attrs


def read_swf(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read an SWF log (``.swf`` or ``.swf.gz``) into a DataFrame (see the module docstring)."""
    import pandas as pd

    columns, attrs = read_swf_columns(path)
    df = pd.DataFrame(columns)
    df.attrs.update(attrs)
    return df


#: Bytes one node of the cluster costs while its availability is derived (its busy intervals, its
#: place in the free heap, its availability record; a generous bound).
NODE_BYTES = 256


def best_effort_availability(
    jobs: pd.DataFrame,
    n_nodes: int | None = None,
    *,
    procs_per_node: int = 1,
    start: float | None = None,
    end: float | None = None,
    name: str = "best-effort",
) -> AvailabilityTrace:
    """Availability of ``n_nodes`` nodes that are free whenever no job of ``jobs`` runs on them.

    ``jobs`` is a :func:`read_swf` frame (or any frame with ``submit_time``, ``wait_time``,
    ``run_time``, ``allocated_processors`` and ``requested_processors``). ``n_nodes`` defaults to
    the header's ``MaxNodes``, else ``MaxProcs / procs_per_node``, else the largest job. The
    window ``[start, end)`` is in the log's clock, by default from the first submission to the last
    job end; the result's time 0 is ``start`` (``origin`` is the Unix time of ``start`` when the
    header gives ``UnixStartTime``). See the module docstring for the placement rule.
    """
    if procs_per_node < 1:
        raise ValueError("procs_per_node must be at least 1")
    submit = jobs["submit_time"].to_numpy(float)
    wait = jobs["wait_time"].to_numpy(float)
    run = jobs["run_time"].to_numpy(float)
    procs = jobs["allocated_processors"].to_numpy(float)
    req = jobs["requested_processors"].to_numpy(float)
    procs = np.where(procs > 0, procs, req)
    job_start = submit + np.maximum(wait, 0.0)
    ok = (run > 0) & (procs > 0) & (submit >= 0)
    need = np.ceil(procs / procs_per_node).astype(np.int64)
    origin = None  # the header field the node count comes from
    if n_nodes is None:
        attrs = getattr(jobs, "attrs", {})
        if attrs.get("max_nodes"):
            n_nodes, origin = int(attrs["max_nodes"]), "MaxNodes"
        elif attrs.get("max_procs"):
            n_nodes, origin = math.ceil(attrs["max_procs"] / procs_per_node), "MaxProcs"
        else:
            n_nodes = int(need[ok].max()) if ok.any() else 0
    source = getattr(jobs, "attrs", {}).get("source")
    if n_nodes < 1:
        if source is None:
            raise ValueError("n_nodes must be at least 1")
        raise UserError("no node count: the header gives no MaxNodes or MaxProcs and no job ran",
                        file=source)
    check_size(n_nodes, "nodes", NODE_BYTES, file=source, field=origin)
    if start is not None:
        t0 = float(start)
    else:
        t0 = float(submit[submit >= 0].min()) if (submit >= 0).any() else 0.0
    t1 = t0 if not ok.any() else float((job_start + run)[ok].max())
    if end is not None:
        t1 = float(end)
    if t1 < t0:
        raise ValueError(f"empty window [{t0}, {t1})")
    ok &= (job_start < t1) & (job_start + run > t0)
    js, je, jn = job_start[ok], (job_start + run)[ok], need[ok]
    order = np.argsort(js, kind="stable")
    js, je, jn = js[order].tolist(), je[order].tolist(), jn[order].tolist()

    free = list(range(n_nodes))  # a heap of free node indices: first fit = smallest indices
    running: list[tuple[float, int, list[int]]] = []  # (end, seq, nodes)
    busy: list[list[tuple[float, float]]] = [[] for _ in range(n_nodes)]
    over_jobs = 0
    missing = 0.0
    for seq, (a, b, k) in enumerate(zip(js, je, jn, strict=True)):
        while running and running[0][0] <= a:
            _, _, released = heapq.heappop(running)
            for node in released:
                heapq.heappush(free, node)
        take = min(k, len(free))
        if take < k:
            over_jobs += 1
            missing += (k - take) * (min(b, t1) - max(a, t0))
        got = [heapq.heappop(free) for _ in range(take)]
        for node in got:
            busy[node].append((a, b))
        heapq.heappush(running, (b, seq, got))

    nodes: list[Availability] = []
    for intervals in busy:
        if not intervals:
            nodes.append(Availability(np.array([0.0]), np.array([t1 - t0])) if t1 > t0
                         else Availability(np.empty(0), np.empty(0)))
            continue
        arr = np.clip(np.array(intervals, float), t0, t1)
        s = np.concatenate([[t0], arr[:, 1]])
        e = np.concatenate([arr[:, 0], [t1]])
        keep = e > s
        nodes.append(Availability(s[keep] - t0, e[keep] - t0))
    unix = getattr(jobs, "attrs", {}).get("unix_start_time")
    meta = {
        "format": "swf-best-effort",
        "source": getattr(jobs, "attrs", {}).get("source"),
        "procs_per_node": procs_per_node,
        "jobs_placed": len(js),
        "overcommitted_jobs": over_jobs,
        "missing_node_seconds": missing,
        "window": (t0, t1),
    }
    origin = float(unix) + t0 if unix is not None else None
    return AvailabilityTrace(name, tuple(nodes), 0.0, t1 - t0, origin, meta)


def blue_horizon_filter(df: pd.DataFrame, *, days: float = 30.0, procs_per_node: int = 8) -> pd.DataFrame:
    """The Haizea paper's cut of a raw Blue Horizon log (decision H15 in docs/decisions/haizea.md): queues
    1-4, submit times rebased to the first kept job, requested processors turned into nodes
    (÷ ``procs_per_node``), the first ``days`` days. The shipped ``blue_*.swf`` files are already cut
    this way."""
    kept = df[df["queue_number"].isin([1, 2, 3, 4])].copy()
    if kept.empty:
        return kept
    kept["submit_time"] -= kept["submit_time"].iloc[0]
    kept["requested_processors"] //= procs_per_node
    return kept[kept["submit_time"] < days * 86400].reset_index(drop=True)


def best_effort_requests(df: pd.DataFrame) -> pd.DataFrame:
    """Best-effort lease requests from a cut SWF log (decision H15, the 2008 code's ``readers.SWF``).

    Columns: ``job``, ``submit``, ``nodes`` (the requested-processors field of the cut log),
    ``requested`` (requested time), ``run`` (the run time clamped to ``[1, requested]``), ``user``
    (the log's user id, -1 when unknown). Jobs
    cancelled while queued (run time < 0 and status 5) never ran and are dropped (decision H15:
    437 of the 5,545 jobs of ``blue_30days.swf``).
    """
    import pandas as pd

    cols = {f: df[f].to_numpy() for f in _REQUEST_FIELDS}
    return pd.DataFrame(best_effort_columns(cols, df.attrs.get("source", "SWF log")))


_REQUEST_FIELDS = ("job_number", "submit_time", "run_time", "requested_processors", "requested_time",
                   "status", "user_id")


def best_effort_columns(columns: Mapping[str, np.ndarray], source: str = "SWF log") -> dict[str, np.ndarray]:
    """:func:`best_effort_requests` on the columns of :func:`read_swf_columns` (``source``: the file
    named by its error), as int64 arrays, without pandas."""
    cancelled = (columns["run_time"] < 0) & (columns["status"] == 5)
    keep = ~cancelled
    requested = columns["requested_time"][keep].astype(np.int64)
    run = np.minimum(np.maximum(columns["run_time"][keep].astype(np.int64), 1), requested)
    out = {"job": columns["job_number"][keep].astype(np.int64),
           "submit": columns["submit_time"][keep].astype(np.int64),
           "nodes": columns["requested_processors"][keep].astype(np.int64),
           "requested": requested, "run": run,
           "user": columns["user_id"][keep].astype(np.int64)}  # (-1: unknown; the fairness rules' users)
    bad = np.flatnonzero((out["nodes"] < 1) | (out["requested"] < 1))
    if len(bad):
        i = bad[0]
        field_ = "requested_processors" if out["nodes"][i] < 1 else "requested_time"
        raise UserError(f"job {out['job'][i]} has no {field_.replace('_', ' ')}", file=source, field=field_)
    return out
