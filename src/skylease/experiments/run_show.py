"""One task of a real run seen whole (``skylease show OUT TASK``), and the tasks that did not
succeed written back as a job (``skylease failed OUT``, ``skylease export --failed --format jobs``).

Both read the run's ``results.sqlite`` read-only (a run may be running).

Decisions of ours (the issue is silent):

* A task is named as ``skylease export`` names it: its id (the ``id`` column, 0-based in job
  order), or ``line:N`` for the task of line N of its job file (a text job's line, a CSV row's
  line; a grid task or an ``--args`` item has none).
* The failed tasks are written back as :mod:`skylease.experiments.run_jobfile` writes a job.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from skylease.experiments.run_jobfile import job_text, unfinished_tasks
from skylease.experiments.run_results import open_run, task_text
from skylease.model.errors import UserError

#: How the TASK argument is written when it names a job-file line.
LINE_PREFIX = "line:"


def show_task(out: str | Path, ref: str) -> dict[str, Any]:
    """Everything the run recorded of one task (``ref``: its id, or ``line:N``)."""
    store = open_run(out)
    try:
        tid, spec = _find(store, out, ref)
        res = store.query(
            "SELECT r.*, s.started_unix FROM results r JOIN segments s ON s.segment = r.segment "
            "WHERE r.task = ?", (tid,))
        tries = store.query(
            "SELECT a.*, s.started_unix FROM attempts a JOIN segments s ON s.segment = a.segment "
            "WHERE a.task = ? ORDER BY a.segment, a.t_s", (tid,))
        files = store.task_files(tid).get(tid, [])
    finally:
        store.close()
    r = dict(res[0]) if res else None
    earlier = [{"attempt": a["attempt"], "outcome": a["outcome"], "exit_code": a["exit_code"],
                "worker": None if a["host"] is None else f"host {a['host']}",
                "machine": dict(a).get("machine"),  # (none in a store of format 2)
                "at": _iso(a["started_unix"] + a["t_s"]), "stderr_tail": a["stderr_tail"] or ""}
               for a in tries]
    ended_tries = sum(1 for a in tries if a["outcome"] in ("failed", "lost"))
    shown: dict[str, Any] = {
        "out": str(out), "id": tid, "line": spec.get("source_line"), "kind": spec.get("kind"),
        "command": task_text(spec), "params": dict(spec.get("params") or {}),
        "state": r["status"] if r else "not run", "exit_code": r["exit_code"] if r else None,
        "attempts": ended_tries + (1 if r else 0), "earlier_attempts": earlier,
        # --return: the files its result brought back (OUT/files/ID/NAME), those missing, and its
        # working folder when kept (no --cleanup)
        "files": [{**f, "path": str(Path(out) / "files" / str(tid) / f["name"])} if f["kind"] == "returned"
                  else f for f in files],
    }
    if spec.get("kind") != "shell":
        shown.update(target=spec.get("target"), args=list(spec.get("args") or ()),
                     kwargs=dict(spec.get("kwargs") or {}))
    if r is None:
        shown.update(pool=None, worker=None, machine=None, started_at=None, ended_at=None,
                     duration_s=None, runtime_s=None, stdout_tail="", stderr_tail="", result=None)
        return shown
    base = r["started_unix"]
    start = None if r["started_s"] is None else base + r["started_s"]
    end = None if r["ended_s"] is None else base + r["ended_s"]
    shown.update(
        pool=r["pool"], worker=f"{r['pool']}-{r['host']}" if r["pool"] and r["host"] is not None else None,
        machine=r["machine"], segment=r["segment"], started_at=_iso(start), ended_at=_iso(end),
        duration_s=None if start is None or end is None else max(0.0, end - start),
        runtime_s=r["runtime_s"], stdout_tail=r["stdout_tail"] or "", stderr_tail=r["stderr_tail"] or "",
        result=r["result"])
    return shown


def _find(store: Any, out: str | Path, ref: str) -> tuple[int, dict[str, Any]]:
    """The task ``ref`` names: its id and spec; else one line saying what a task is named by."""
    text = ref.strip()
    n = int(store.query("SELECT COUNT(*) AS n FROM tasks")[0]["n"])
    ids = f"ids 0 to {n - 1}" if n else "no tasks yet"
    if text.lower().startswith(LINE_PREFIX):
        number = _int(text[len(LINE_PREFIX):])
        if number is not None:
            for row in store.query("SELECT id, spec FROM tasks ORDER BY id"):
                spec = json.loads(row["spec"])
                if spec.get("source_line") == number:
                    return int(row["id"]), spec
        raise UserError(f"no task on line {text[len(LINE_PREFIX):]!r} of the job file; "
                        f"name a task by its id ({ids}) or line:N", file=out, field="TASK")
    tid = _int(text)
    rows = store.query("SELECT spec FROM tasks WHERE id = ?", (tid,)) if tid is not None else []
    if not rows:
        raise UserError(f"no task {ref!r} in this run: name it by its id ({ids}, the id column of "
                        "`skylease export`) or line:N (its job-file line)", file=out, field="TASK")
    return int(tid), json.loads(rows[0]["spec"])  # type: ignore[arg-type]


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    when = dt.datetime.fromtimestamp(float(t), dt.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def failed_job(out: str | Path, *, failed_only: bool = False) -> dict[str, Any]:
    """``skylease failed OUT``: the text of a job of the run's failed tasks and those with no result
    (``failed_only``: failed ones alone), with their counts and the job's kind."""
    store = open_run(out)
    try:
        meta = store.meta()
        tasks = unfinished_tasks(store, failed_only=failed_only)
        total = int(store.query("SELECT COUNT(*) AS n FROM tasks")[0]["n"])
    finally:
        store.close()
    failed = sum(1 for t in tasks if t["state"] == "failed")
    not_run = len(tasks) - failed
    header = (f"{failed} failed and {not_run} not run of the {total} tasks of {meta.get('job')} "
              f"(run {out}); fix the commands, then: skylease run THIS_FILE --out NEW_DIR")
    text, kind = job_text(tasks, header=header) if tasks else ("", "shell")
    target = next((t["spec"].get("target") for t in tasks if t["spec"].get("kind") == "python"), None)
    return {"text": text, "kind": kind, "target": target, "failed": failed, "not_run": not_run,
            "tasks": total, "job": meta.get("job")}
