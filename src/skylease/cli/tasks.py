"""`skylease show` and `skylease failed`: one task of a run, and the run's failed tasks as a job
file to fix and run again (the work is in skylease.experiments.run_show)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import app
from skylease.cli.common import err, out


@app.command("show")
def show_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a run.")],
    task: Annotated[str, typer.Argument(help="The task: its id (the id column of `skylease export`, "
                                        "0-based) or line:N (the task of line N of the job file).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Show one task of a run: its command, parameters, state and exit code, attempts, worker,
    times, returned files, stdout and stderr tails, and a callable's result (read-only)."""
    from skylease.experiments.run_show import show_task

    t = show_task(out_dir, task)
    if as_json:
        print(json.dumps(t))
        return
    line = f", line {t['line']}" if t["line"] is not None else ""
    table = fmt.table("", "value", title=f"{t['out']}: task {t['id']}{line}")
    table.add_row("command" if t["kind"] == "shell" else "call", t["command"])
    for name, value in t["params"].items():
        table.add_row(f"parameter {name}", str(value))
    exit_code = "" if t["exit_code"] is None else f", exit code {t['exit_code']}"
    table.add_row("state", f"{t['state']}{exit_code}")
    table.add_row("attempts", str(t["attempts"]))
    if t["worker"] is not None:
        table.add_row("worker", f"{t['worker']} on {t['machine']}")
    if t["started_at"] is not None:
        table.add_row("started / ended (UTC)", f"{t['started_at']} / {t['ended_at']}")
        took, ran = fmt.duration(t["duration_s"]), fmt.duration(t["runtime_s"])
        table.add_row("duration (runtime)", f"{took} ({ran})")
    if t.get("result") is not None:
        table.add_row("result", t["result"])
    for f in t.get("files") or ():  # --return's files, --transfer's kept working folder
        if f["kind"] == "returned":
            table.add_row("returned file", f"{f['path']} ({fmt.number(f['size'])} bytes)")
        elif f["kind"] == "missing":
            table.add_row("returned file", f"{f['name']}: not brought back (see stderr)")
        else:
            table.add_row("working folder (kept)", f["name"])
    for a in t["earlier_attempts"]:
        code = "" if a["exit_code"] is None else f", exit code {a['exit_code']}"
        where = f" on {a['machine']}" if a.get("machine") else ""
        table.add_row(f"attempt {a['attempt']}", f"{a['outcome']}{code}{where} at {a['at']}")
    out.print(table)
    for stream in ("stdout", "stderr"):
        tail = t[f"{stream}_tail"]
        out.print(f"--- {stream} (last 2 KiB)" + ("" if tail else ": empty") + " ---", markup=False)
        if tail:
            out.line(tail.rstrip("\n"))


@app.command("failed")
def failed_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a run.")],
    failed_only: Annotated[bool, typer.Option("--failed-only", help="Leave out the tasks with no result "
                                              "(not run, or running when the run stopped).")] = False,
) -> None:
    """Print the run's failed tasks, and those with no result, as a job file `skylease run` takes
    back (one shell command a line, a comment before each saying why; a callable's: the JSON list
    of --args). Fix the commands, then run the file."""
    from skylease.experiments.run_show import failed_job

    f = failed_job(out_dir, failed_only=failed_only)
    sys.stdout.write(f["text"])
    sys.stdout.flush()
    if not f["text"]:
        what = "failed" if failed_only else "failed or without a result"
        err.line(f"skylease failed: no task of {out_dir} is {what}")
        return
    how = f"skylease run {f['target']} --args FILE" if f["kind"] == "python" else "skylease run FILE"
    err.print(f"skylease failed: {f['failed']} failed and {f['not_run']} not run of {f['tasks']} task(s); "
              f"saved to FILE and fixed, run them with `{how} --out NEW_DIR`", markup=False,
              highlight=False, soft_wrap=True)
