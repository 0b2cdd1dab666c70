"""A real run's results, task by task: the failed tasks the summary and report name, and
``skylease export`` (one row per task, as CSV, JSON or Parquet; with ``--attempts``, one row per
try: the tries that ended without the result, ``failed`` and retried, ``lost`` with their host,
``cancelled`` as a losing copy, and the one that gave it, in time order per task, with the worker
and machine each ran on: docs/decisions/failure-classes.md).

A task is named by what the user wrote: its job-file line (when it has one: text files and CSV
rows; a grid task or an item of ``--args`` has none) and its command, or for a Python call its
target and arguments. Its 0-based number (``id``, the job's order) is in the export only, as the
key that joins it to ``results.sqlite``.

Decisions of ours (the issue is silent):

* ``attempts`` counts the tries that ended: each failed or lost try and the one whose result is
  recorded (a losing copy of a duplicated task is not a try).
* Times are UTC, ISO 8601 with milliseconds; ``runtime_s`` is the task's own measured time.
* ``cost_share`` is the task's part of its worker's charge, in proportion to the runtimes of the
  results recorded on that worker (its idle time is shared too); empty while the worker is still
  rented, or when its driver was killed before releasing it. Workers that recorded no result are
  in no share, so the shares add up to at most the run's cost.
* Parquet needs pyarrow, which skylease does not depend on: without it the export is one line
  saying what to install.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skylease.experiments.store import atomic_write_bytes_via
from skylease.model.errors import UserError

if TYPE_CHECKING:  # pandas is imported where a table is built: 0.2 s a run would pay for nothing
    import pandas as pd

#: Failed tasks named in ``summary.json`` (all of them are in the export).
FAILED_IN_SUMMARY = 1000
#: The formats a file's suffix names; ``jobs`` (:data:`JOBS`) is given with --format only.
FORMATS = ("csv", "json", "parquet")
#: ``--format jobs``: the tasks as a job ``skylease run`` takes back
#: (:mod:`skylease.experiments.run_jobfile`).
JOBS = "jobs"
COLUMNS = ("id", "line", "command", "state", "exit_code", "attempts", "started_at", "ended_at",
           "runtime_s", "pool", "worker", "machine", "cost_share", "stdout_tail", "stderr_tail", "result")
#: The prefix of the columns of a grid's (or CSV's) parameters: ``param_NAME``, one per parameter.
PARAM_PREFIX = "param_"


def task_text(spec: Mapping[str, Any]) -> str:
    """What a task runs, in full: its shell command, or ``target(arguments)`` for a Python call."""
    if spec.get("kind") == "shell":
        return str(spec.get("command") or "")
    shown = [repr(a) for a in spec.get("args") or ()]
    shown += [f"{k}={v!r}" for k, v in (spec.get("kwargs") or {}).items()]
    return f"{spec.get('target')}({', '.join(shown)})"


def failed_tasks(store: Any, limit: int | None = None) -> list[dict[str, Any]]:
    """The failed tasks in job order: line, command, exit code, attempts, last stderr line."""
    rows = store.query(
        "SELECT r.task, r.exit_code, r.attempt, r.stderr_tail, t.spec FROM results r JOIN tasks t "
        "ON t.id = r.task WHERE r.status = 'failed' ORDER BY r.task LIMIT ?",
        (-1 if limit is None else int(limit),))
    out = []
    for r in rows:
        spec = json.loads(r["spec"])
        tail = (r["stderr_tail"] or "").strip().splitlines()
        out.append({"line": spec.get("source_line"), "command": task_text(spec), "exit_code": r["exit_code"],
                    "attempts": _tries(store, r["task"]), "stderr": tail[-1] if tail else ""})
    return out


def _tries(store: Any, task: int) -> int:
    row = store.query("SELECT COUNT(*) AS n FROM attempts WHERE task = ? AND outcome IN ('failed', 'lost')",
                      (task,))
    return int(row[0]["n"]) + 1


def task_rows(store: Any) -> pd.DataFrame:
    """One row per task of the run (see the module docstring for the columns)."""
    import pandas as pd

    tasks = pd.DataFrame([dict(r) for r in store.query("SELECT id, spec FROM tasks ORDER BY id")],
                         columns=["id", "spec"])
    res = pd.DataFrame([dict(r) for r in store.query(
        "SELECT r.task AS id, r.status, r.exit_code, r.segment, r.host, r.pool, r.machine, r.runtime_s, "
        "r.started_s + s.started_unix AS start, r.ended_s + s.started_unix AS end, "
        "r.stdout_tail, r.stderr_tail, r.result "
        "FROM results r JOIN segments s ON s.segment = r.segment")],
        columns=["id", "status", "exit_code", "segment", "host", "pool", "machine", "runtime_s", "start",
                 "end", "stdout_tail", "stderr_tail", "result"])
    tries = pd.DataFrame([dict(r) for r in store.query(
        "SELECT task AS id, COUNT(*) AS n FROM attempts WHERE outcome IN ('failed', 'lost') GROUP BY task")],
        columns=["id", "n"])
    hosts = pd.DataFrame([dict(r) for r in store.query("SELECT segment, host, cost FROM hosts")],
                         columns=["segment", "host", "cost"])
    df = tasks.merge(res, on="id", how="left").merge(tries, on="id", how="left")
    specs = [json.loads(s) for s in df["spec"]]
    df["line"] = pd.array([s.get("source_line") for s in specs], dtype="Int64")
    df["command"] = [task_text(s) for s in specs]
    df["state"] = df["status"].fillna("not run")
    df["exit_code"] = pd.array(df["exit_code"], dtype="Int64")
    done = df["status"].notna()
    df["attempts"] = (df["n"].fillna(0) + done.astype(int)).astype(int)
    df["started_at"] = [iso_time(t) for t in df["start"]]
    df["ended_at"] = [iso_time(t) for t in df["end"]]
    df["worker"] = [f"{p}-{int(h)}" if isinstance(p, str) and pd.notna(h) else None
                    for p, h in zip(df["pool"], df["host"], strict=True)]
    df["cost_share"] = _cost_shares(df, hosts)
    df["id"] = df["id"].astype(int)
    params = param_columns(specs)
    for name, values in params.items():
        df[name] = pd.Series(values, index=df.index, dtype=object)
    files = store.task_files()
    extra = []
    if files:  # a run with --transfer/--return: the files each task brought back
        df[FILES_COLUMN] = pd.Series([files_text(files.get(int(i), [])) for i in df["id"]], index=df.index,
                                     dtype=object)
        extra = [FILES_COLUMN]
    return df[[*COLUMNS, *params, *extra]]


#: The column of the returned files (``skylease run --return``), in an export of a run that has any.
FILES_COLUMN = "returned_files"


def files_text(rows: list[Mapping[str, Any]]) -> str:
    """A task's recorded files as one cell: ``NAME (SIZE B)`` per returned file, ``NAME (missing)``
    per file asked for and not brought back, ``; ``-separated; its kept working folder is left out
    (``skylease show`` has it)."""
    shown = [f"{r['name']} ({r['size']} B)" if r["kind"] == "returned" else f"{r['name']} (missing)"
             for r in rows if r["kind"] != "workdir"]
    return "; ".join(shown)


#: The columns of an attempts export, in order.
ATTEMPT_COLUMNS = ("id", "line", "command", "attempt", "outcome", "exit_code", "worker", "machine", "at",
                   "stderr_tail")


def attempt_rows(store: Any) -> pd.DataFrame:
    """One row per try (see the module docstring), ordered by task, then time."""
    import pandas as pd

    specs = {int(r["id"]): json.loads(r["spec"]) for r in store.query("SELECT id, spec FROM tasks")}
    has_machine = any(r["name"] == "machine" for r in store.query("PRAGMA table_info('attempts')"))
    machine = "a.machine" if has_machine else "NULL"  # (a store of format 2 has none: empty)
    rows = [dict(r) for r in store.query(
        f"SELECT a.task AS id, a.attempt, a.outcome, a.exit_code, a.host, {machine} AS machine, "
        "a.t_s + s.started_unix AS t, a.stderr_tail, NULL AS pool FROM attempts a "
        "JOIN segments s ON s.segment = a.segment")]
    rows += [dict(r) for r in store.query(
        "SELECT r.task AS id, r.attempt, r.status AS outcome, r.exit_code, r.host, r.machine, "
        "r.ended_s + s.started_unix AS t, r.stderr_tail, r.pool FROM results r "
        "JOIN segments s ON s.segment = r.segment")]
    pools = {(int(r["segment"]), int(r["host"])): r["pool"] for r in store.query(
        "SELECT segment, host, pool FROM hosts")}
    out = []
    for r in sorted(rows, key=lambda r: (r["id"], r["t"] if r["t"] is not None else 0.0)):
        spec = specs.get(int(r["id"]), {})
        pool = r["pool"] or next((p for (_, h), p in pools.items() if h == r["host"]), None)
        out.append({"id": int(r["id"]), "line": spec.get("source_line"), "command": task_text(spec),
                    "attempt": r["attempt"], "outcome": r["outcome"], "exit_code": r["exit_code"],
                    "worker": None if r["host"] is None or pool is None else f"{pool}-{int(r['host'])}",
                    "machine": r["machine"], "at": iso_time(r["t"]), "stderr_tail": r["stderr_tail"] or ""})
    df = pd.DataFrame(out, columns=list(ATTEMPT_COLUMNS))
    for col in ("line", "attempt", "exit_code"):
        df[col] = pd.array(df[col], dtype="Int64")
    return df


def param_columns(specs: list[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """``param_NAME`` -> each task's value of the parameter NAME (None where a task has none), in
    the order the job names them. A column of one type keeps it (numbers stay numbers, 1 and 2.5
    alike); one that mixes types, or holds lists or tables (a callable's grid), is written as text
    (JSON for those), so that every format, Parquet too, can hold it."""
    names: dict[str, None] = {}
    for spec in specs:
        names.update(dict.fromkeys(spec.get("params") or {}))
    columns = {}
    for name in names:
        values = [(spec.get("params") or {}).get(name) for spec in specs]
        kinds = {float if type(v) is int else type(v) for v in values if v is not None}  # 1 and 2.5: numbers
        if len(kinds) > 1 or kinds & {list, dict}:
            values = [v if v is None else v if isinstance(v, str) else json.dumps(v) for v in values]
        columns[PARAM_PREFIX + name] = values
    return columns


def _cost_shares(df: pd.DataFrame, hosts: pd.DataFrame) -> pd.Series:
    """Each result's part of its worker's charge, in proportion to the runtimes it recorded."""
    import pandas as pd

    done = df.loc[df["status"].notna(), ["segment", "host", "runtime_s"]].copy()
    if done.empty:
        return pd.Series([None] * len(df), index=df.index, dtype=object)
    done = done.join(done.groupby(["segment", "host"])["runtime_s"].agg(["sum", "count"]),
                     on=["segment", "host"])
    done = done.merge(hosts, on=["segment", "host"], how="left").set_index(done.index)
    rt = done["runtime_s"].fillna(0.0)
    weight = (rt / done["sum"]).where(done["sum"] > 0, 1.0 / done["count"])
    share = (done["cost"] * weight).astype(object).where(done["cost"].notna(), None)
    return share.reindex(df.index).astype(object).where(lambda s: s.notna(), None)


def iso_time(t: Any) -> str | None:
    if _missing(t):
        return None
    when = dt.datetime.fromtimestamp(float(t), dt.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def export_format(fmt: str | None, output: str | Path | None) -> str:
    """The export format: as given, else from the output file's suffix, else (no suffix) CSV.

    A suffix that names no format is refused without --format (``x.xlsx`` got CSV), and one that
    names another format than --format is refused (``--format csv --output x.json``): the file's
    name must not lie about its bytes. With --format, any other suffix is the user's choice
    (``--format csv --output tasks.txt``)."""
    suffix = Path(str(output)).suffix.lower().lstrip(".") if output not in (None, "-") else ""
    if fmt is None:
        if suffix and suffix not in FORMATS:
            raise UserError(f"{output}: .{suffix} is not a format skylease writes; name the file "
                            f".{', .'.join(FORMATS)}, or give --format", field="--output")
        fmt = suffix or "csv"
    fmt = fmt.lower()
    if fmt not in (*FORMATS, JOBS):
        raise UserError(f"unknown format {fmt!r}; one of {', '.join((*FORMATS, JOBS))}", field="--format")
    if suffix in FORMATS and suffix != fmt:
        raise UserError(f"{output}: a .{suffix} name for {fmt} data; name it .{fmt} (or leave --format out)",
                        field="--output")
    if fmt == "parquet":
        if importlib.util.find_spec("pyarrow") is None:
            raise UserError("parquet needs pyarrow, which is not installed: pip install pyarrow "
                            "(or use --format csv or json)", field="--format")
        if output == "-":
            raise UserError("parquet is binary: give a file with --output", field="--output")
    return fmt


def export_bytes(df: pd.DataFrame, fmt: str) -> bytes:
    """The task rows as a file's bytes."""
    if fmt == "csv":
        return df.to_csv(index=False).encode("utf-8")
    if fmt == "json":
        records = [{k: (None if _missing(v) else _plain(v)) for k, v in row.items()}
                   for row in df.to_dict(orient="records")]
        return (json.dumps(records, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def _missing(v: Any) -> bool:
    """None, NaN or pandas' NA (whose type is checked by name: pandas is not imported here)."""
    return v is None or type(v).__name__ == "NAType" or (isinstance(v, float) and v != v)


def _plain(v: Any) -> Any:
    """numpy scalars as Python ones, for json."""
    return v.item() if hasattr(v, "item") else v


def write_export(data: bytes, path: Path) -> None:
    """Write atomically (a temporary file renamed into place): a reader never sees half of it."""
    if path.is_dir():
        raise UserError("is a folder; give a file name", file=path, field="--output")
    if not path.parent.is_dir():
        raise UserError(f"no folder {path.parent}", file=path, field="--output")
    try:
        atomic_write_bytes_via(path, lambda tmp: Path(tmp).write_bytes(data))
    except OSError as e:
        raise UserError(f"cannot write: {e.strerror or e}", file=path, field="--output") from None


def open_run(out: str | Path) -> Any:
    """The run's store, read-only: it must be one skylease made (it is never written here)."""
    from skylease.runtime.store import STORE_NAME, ResultStore

    return ResultStore(Path(out) / STORE_NAME, readonly=True)


def export_run(out: str | Path, *, fmt: str | None = None, output: str | Path | None = None,
               failed: bool = False, attempts: bool = False) -> tuple[str, int, bytes | None]:
    """``skylease export``: the per-task results of the run in ``out`` written to ``output``
    (default ``OUT/tasks.FMT``; ``-`` returns the bytes for standard output instead); ``failed``:
    only the tasks that failed or have no result. Format ``jobs`` writes those tasks as a job
    ``skylease run`` takes (:func:`skylease.experiments.run_jobfile.job_text`; default file
    ``OUT/jobs.txt``, ``OUT/jobs.json`` for the ``--args`` list of a job of Python calls: never a
    ``tasks.json`` export's name). Returns where
    they went, the number of rows (tasks), and the bytes when ``output`` is ``-``. ``attempts``: one
    row per try instead (:func:`attempt_rows`; default file ``OUT/attempts.FMT``)."""
    fmt = export_format(fmt, output)
    if attempts and fmt == JOBS:
        raise UserError("--attempts writes rows of tries, not a job file: give csv, json or parquet",
                        field="--attempts")
    store = open_run(out)
    try:
        if fmt == JOBS:
            from skylease.experiments.run_jobfile import job_text, unfinished_tasks

            if failed:
                tasks = unfinished_tasks(store)
            else:
                tasks = [{"id": int(r["id"]), "spec": json.loads(r["spec"])}
                         for r in store.query("SELECT id, spec FROM tasks ORDER BY id")]
            text, kind = job_text(tasks) if tasks else ("", "shell")
            data, n, name = text.encode("utf-8"), len(tasks), "jobs.json" if kind == "python" else "jobs.txt"
        elif attempts:
            df = attempt_rows(store)
            if failed:
                df = df[df["id"].isin(set(task_rows(store).query("state != 'ok'")["id"]))]
            data, n, name = export_bytes(df, fmt), len(df), f"attempts.{fmt}"
        else:
            df = task_rows(store)
            if failed:
                df = df[df["state"] != "ok"]
            data, n, name = export_bytes(df, fmt), len(df), f"tasks.{fmt}"
    finally:
        store.close()
    if output == "-":
        return "-", n, data
    target = Path(out) / name if output is None else Path(output)
    write_export(data, target)
    return str(target), n, None
