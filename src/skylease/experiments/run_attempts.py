"""Every try of every task of a run, one row each (``skylease export --attempts``): the tries that
ended without the result (``failed`` and retried, ``lost`` with their host, ``cancelled`` as a
losing copy) and the one that gave it (``ok`` or ``failed`` for good), in time order per task, with
the worker and machine each ran on (docs/decisions/failure-classes.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from skylease.experiments.run_results import iso_time, task_text

if TYPE_CHECKING:
    import pandas as pd

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
