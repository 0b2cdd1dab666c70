"""A run's tasks written back as a job ``skylease run`` takes (``skylease failed``, ``skylease
export --format jobs``).

Decisions of ours (the issue is silent):

* The job written back holds, in job order, each failed task and each task with no result yet
  (never run, or running when the run stopped), each after a ``#`` comment saying which it is
  (``skylease run`` skips comments). A shell task is its command line as it ran (a TOML template's
  rendered command, values quoted), so the file is a text job whatever the job file was. A job of
  Python calls cannot be shell lines: it is written as the JSON list ``--args`` takes (one item a
  task: its positional arguments as a list, or its keyword arguments as an object), comment-free.
* A command that spans lines (a template value holding a newline) cannot be one line of a job
  file: it is refused in one line naming the task, and ``--resume --retry-failed`` reruns it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from skylease.model.errors import UserError


def unfinished_tasks(store: Any, *, failed_only: bool = False) -> list[dict[str, Any]]:
    """In job order, each task with a failed result or none: id, spec, and why it is listed
    (``failed`` with its exit code, or ``not run``)."""
    rows = store.query("SELECT t.id, t.spec, r.status, r.exit_code FROM tasks t LEFT JOIN results r "
                       "ON r.task = t.id WHERE r.status IS NULL OR r.status != 'ok' ORDER BY t.id")
    out = []
    for r in rows:
        if failed_only and r["status"] is None:
            continue
        out.append({"id": int(r["id"]), "spec": json.loads(r["spec"]),
                    "state": r["status"] or "not run", "exit_code": r["exit_code"]})
    return out


def job_text(tasks: list[dict[str, Any]], *, header: str = "") -> tuple[str, str]:
    """``tasks`` (:func:`unfinished_tasks`, or every task) as a job ``skylease run`` takes back, and
    its kind: ``"shell"`` (a text job: comment, command line) or ``"python"`` (the JSON list of
    ``--args``). A job of both kinds cannot be one file (never made by skylease: refused)."""
    kinds = {t["spec"].get("kind") for t in tasks}
    if kinds == {"python"}:
        items = [_args_item(t["spec"]) for t in tasks]
        return json.dumps(items, indent=1, ensure_ascii=False) + "\n", "python"
    if kinds - {"shell"}:
        raise UserError("a job of shell commands and Python calls cannot be one job file", field="--format")
    lines = [f"# {header}"] if header else []
    for t in tasks:
        spec = t["spec"]
        command = str(spec.get("command") or "").strip()
        name = f"task {t['id']}" + (f", line {spec['source_line']}" if spec.get("source_line") else "")
        if "\n" in command or "\r" in command:
            raise UserError(f"{name}: its command spans lines, so it cannot be a line of a job file; "
                            "rerun it with `skylease run JOB --out DIR --resume --retry-failed`",
                            field="TASK")
        why = f"failed, exit code {t['exit_code']}" if t.get("state") == "failed" else \
            "not run (no result)" if t.get("state") == "not run" else str(t.get("state") or "")
        lines.append(f"# {name}: {why}" if why else f"# {name}")
        lines.append(command)
    return "\n".join(lines) + "\n", "shell"


def _args_item(spec: Mapping[str, Any]) -> Any:
    """A Python call as an item of an ``--args`` list: its positional arguments, or its keywords."""
    args, kwargs = list(spec.get("args") or ()), dict(spec.get("kwargs") or {})
    if args and kwargs:  # (load_job never makes one: an item is a list or an object)
        raise UserError(f"task {spec.get('id')} has both positional and keyword arguments: an --args "
                        "item holds one kind", field="--format")
    return kwargs if kwargs else args
