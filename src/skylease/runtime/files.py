"""A task's files, the driver's side: ``skylease run --transfer PATTERN --return PATTERN --cleanup``.

The files travel inside the task's spec and its result (base64), so that any pool carries them
with no second channel: :meth:`TaskFiles.spec` adds a task's input files to the spec it is about
to send (read then, not kept: the stored specs stay light), the worker runs the task in a working
folder of its own (:func:`skylease.runtime.execute.run_task`), and :meth:`TaskFiles.returned`
writes the files its final result brings back under ``OUT/files/<task id>/`` and records their
names and sizes in the result store. The rules, and why, are in docs/decisions/bot-files.md:

* a PATTERN is a path with GNU parallel's replacement strings: ``{}`` the task's argument (the
  last word of a text job's line, where parallel puts its argument; the one parameter of a grid
  or CSV job), ``{.}`` the same without its extension, ``{name}`` a parameter of a grid or CSV
  job; ``{{`` and ``}}`` are braces. ``*?[`` make it a glob;
* ``--transfer`` paths are relative to the driver's folder (where ``skylease run`` is started) and
  land at the same relative path in the task's working folder; ``--return`` paths are relative to
  the working folder. Neither may be absolute or climb out with ``..``;
* every input file is found and measured before anything runs (a missing one, or more than
  :data:`MAX_TASK_BYTES` for a task, is one line naming the task's line and ``--transfer``);
  a file that changes afterwards fails its task with the reason.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.runtime.execute import FILES_EXIT, TAIL_BYTES

#: The most bytes of files a task takes with it, and the most it brings back: the files travel in
#: memory (the driver's, the wire's JSON line, the worker's), so a task's share is bounded.
MAX_TASK_BYTES = 16 * 2**20
#: Where a run's returned files are written, inside its output folder: ``files/<task id>/<path>``.
FILES_DIR = "files"

_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_GLOB = re.compile(r"[*?\[]")


def inside(rel: str) -> bool:
    """Whether ``rel`` is a relative path that stays inside the folder it is relative to."""
    if not rel or rel.startswith("/") or "\0" in rel:
        return False
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    return bool(parts) and ".." not in parts


def _where(job: Any, task: Any) -> dict[str, Any]:
    """The ``file``/``line`` of a task's error: its job-file line, else the job and its number (a
    CSV row's line is of the CSV file, which the job does not keep: its task is named by number)."""
    if task.source_line is not None and not str(job.source).lower().endswith(".toml"):
        return {"file": job.source if job.source != "-" else "standard input", "line": task.source_line}
    return {"file": f"{job.source} (task {task.id})"}


def _argument(job: Any, task: Any, option: str, pattern: str) -> str:
    """parallel's ``{}``: a text job's last word (where parallel appends its argument), else the one
    parameter of a grid or CSV task."""
    if task.params:
        if len(task.params) != 1:
            names = ", ".join("{" + n + "}" for n in task.params)
            raise UserError(f"{pattern}: {{}} stands for a job's one parameter; this one has "
                            f"{len(task.params)}: name one ({names})", field=option, **_where(job, task))
        return _text(next(iter(task.params.values())))
    try:
        words = shlex.split(task.command or "")
    except ValueError:  # unbalanced quotes: the shell will say; the last word is still a word
        words = (task.command or "").split()
    return words[-1] if words else ""


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # as in a command template
    return str(value)


def expand(pattern: str, job: Any, task: Any, option: str) -> str:
    """``pattern`` for one task of ``job``: its replacement strings replaced (see the module)."""
    def sub(m: re.Match[str]) -> str:
        token = m.group(0)
        if token in ("{{", "}}"):
            return token[0]
        name = m.group(1)
        if name is None:
            raise UserError(f"{pattern}: a lone brace (write {{{{ or }}}} for a literal one)", field=option)
        if name in ("", "."):
            arg = _argument(job, task, option, pattern)
            if name == ".":
                head, base = posixpath.split(arg)
                stem, dot, _ = base.rpartition(".")
                arg = posixpath.join(head, stem) if dot and stem else arg
            return arg
        if name in task.params:
            return _text(task.params[name])
        known = (f"its parameters are {', '.join('{' + n + '}' for n in task.params)}" if task.params
                 else "a task of a text job has {} and {.} only")
        raise UserError(f"{pattern}: {{{name}}} names no parameter of the task ({known})",
                        field=option, **_where(job, task))
    return _FIELD.sub(sub, pattern)


def _relative(path: str, job: Any, task: Any, option: str, pattern: str) -> str:
    if not inside(path):
        shown = path if path == pattern else f"{path} (from {pattern})"
        raise UserError(f"{shown}: must be a relative path that stays inside its folder (not absolute, "
                        "no ..)", field=option, **_where(job, task))
    return posixpath.normpath(path)


@dataclass
class TaskFiles:
    """The files of a run's tasks (:func:`plan_files`): what each sends, what it brings back."""

    base: Path  # the driver's folder: --transfer paths are relative to it
    out: Path  # the run's output folder: returned files go to out/files/<task id>/
    inputs: dict[int, list[str]] = field(default_factory=dict)
    returns: dict[int, list[str]] = field(default_factory=dict)
    cleanup: bool = False
    max_bytes: int = MAX_TASK_BYTES

    def spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The spec to send for one attempt: a copy of ``spec`` with its ``files``, the inputs read
        now. A file that cannot be read any more, or grew past the limit, is the task's failure
        (``error``), said by the worker without running it."""
        import base64

        tid = int(spec["id"])
        files: dict[str, Any] = {"transfer": {}, "return": self.returns.get(tid, []),
                                 "cleanup": self.cleanup, "max_bytes": self.max_bytes}
        total = 0
        for rel in self.inputs.get(tid, ()):
            try:
                path = self.base / rel
                data = path.read_bytes()
                mode = path.stat().st_mode
            except OSError as e:
                files["error"] = f"--transfer {rel}: cannot read it: {e.strerror or e}"
                break
            total += len(data)
            if total > self.max_bytes:
                files["error"] = (f"--transfer {rel}: the task's files now hold over "
                                  f"{self.max_bytes:,} bytes, the most a task takes")
                break
            files["transfer"][rel] = [mode & 0o777, base64.b64encode(data).decode("ascii")]
        if "error" in files:
            files["transfer"] = {}
        return {**spec, "files": files}

    def returned(self, tid: int, outcome: Mapping[str, Any], store: Any) -> dict[str, Any]:
        """A task's final outcome, its returned files written under ``out/files/<tid>/`` (each whole
        or absent: a temporary name, then a rename) and listed in the store; the outcome without
        their contents. A file the driver cannot write fails the task with the reason."""
        import base64

        out = dict(outcome)
        staged = out.pop("files", None) or {}
        rows: list[tuple[str, str, int | None]] = []
        notes: list[str] = []
        folder = self.out / FILES_DIR / str(tid)
        for rel, data in (staged.get("returned") or {}).items():
            if not inside(rel):  # the worker is ours, but a path is checked where it is used
                notes.append(f"--return {rel}: not a relative path inside the task's folder; not written")
                rows.append(("missing", rel, None))
                continue
            dest = folder / posixpath.normpath(rel)
            try:
                body = base64.b64decode(data)
                _write_whole(dest, body)
            except (OSError, ValueError) as e:
                notes.append(f"--return {rel}: cannot write {dest}: {getattr(e, 'strerror', None) or e}")
                rows.append(("missing", rel, None))
                continue
            rows.append(("returned", rel, len(body)))
        rows += [("missing", rel, None) for rel in staged.get("missing") or ()]
        if staged.get("folder"):
            rows.append(("workdir", f"{out.get('host') or '?'}:{staged['folder']}", None))
        if notes:
            if out.get("exit_code") == 0:
                out["exit_code"] = FILES_EXIT
            err = out.get("stderr_tail") or ""
            err = err if not err or err.endswith("\n") else err + "\n"
            out["stderr_tail"] = (err + "".join(f"[skylease] {n}\n" for n in notes))[-TAIL_BYTES:]
        if rows or staged:
            store.record_files(tid, rows)
        return out


def _write_whole(dest: Path, body: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    try:
        with open(tmp, "wb") as f:
            f.write(body)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def plan_files(job: Any, transfer: Sequence[str], returns: Sequence[str], *, cleanup: bool,
               base: Path, out: Path, max_bytes: int = MAX_TASK_BYTES) -> TaskFiles:
    """Every task's files, found and measured before anything runs: a :class:`UserError` naming
    the task's line and the option for a pattern that names no file, a path out of its folder, a
    folder, or more than ``max_bytes`` for one task."""
    if any(t.kind != "shell" for t in job.tasks):
        raise UserError("goes with shell tasks (a Python call runs inside the worker, in no folder "
                        "of its own)", field="--transfer" if transfer else "--return")
    base = base.absolute()
    plan = TaskFiles(base=base, out=Path(out), cleanup=cleanup, max_bytes=max_bytes)
    for task in job.tasks:
        if transfer:
            plan.inputs[task.id] = _inputs(job, task, transfer, base, max_bytes)
        if returns:
            names = [_relative(expand(p, job, task, "--return"), job, task, "--return", p) for p in returns]
            plan.returns[task.id] = list(dict.fromkeys(names))
    return plan


def _inputs(job: Any, task: Any, patterns: Sequence[str], base: Path, max_bytes: int) -> list[str]:
    found: dict[str, None] = {}
    total = 0
    for pattern in patterns:
        rel = _relative(expand(pattern, job, task, "--transfer"), job, task, "--transfer", pattern)
        if _GLOB.search(rel):
            names = sorted(str(p.relative_to(base)) for p in base.glob(rel) if p.is_file())
            if not names:
                raise UserError(f"{rel}: matches no file in {base}", field="--transfer", **_where(job, task))
        else:
            path = base / rel
            if not path.exists():
                raise UserError(f"{rel}: no such file in {base}", field="--transfer", **_where(job, task))
            if not path.is_file():
                raise UserError(f"{rel}: not a file (name the files of a folder with a glob: {rel}/*)",
                                field="--transfer", **_where(job, task))
            names = [rel]
        for name in names:
            if name in found:
                continue
            found[name] = None
            total += (base / name).stat().st_size
            if total > max_bytes:
                raise UserError(f"{name}: the task's files would hold {total:,} bytes, over the "
                                f"{max_bytes:,} a task may take", field="--transfer", **_where(job, task))
    return list(found)
