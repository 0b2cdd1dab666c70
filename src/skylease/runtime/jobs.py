"""Jobs: the bags of tasks ``skylease run`` executes, read from a text file, a TOML file or a callable.

A job is one of:

* a text file, one shell command per line (blank lines and ``#`` comments skipped), as the input
  of GNU parallel;
* a ``.toml`` file with a ``command`` template (shell) or a ``callable`` (Python) and the
  parameter sets: a ``[grid]`` (cartesian product, last key fastest) or a ``csv`` file (one set
  per row), and the run's options ``retries`` and ``timeout`` (kept in :attr:`Job.options`; the
  command line's ``--retries`` and ``--timeout`` win over them). Any other key is an error that
  names the nearest known key;
* ``"package.module:function"`` with a JSON file of arguments (a list, one item per task).

In a command template each ``{name}`` is replaced by the shell-quoted value, so a value is always
one argument of the command whatever it holds; ``{{`` and ``}}`` are literal braces.

Decisions of ours (the issue is silent):

* A label longer than 60 characters is cut in the middle (``head…tail``), so that the values at
  the end of templated commands still tell the tasks apart.
* A placeholder may carry a format spec, formatted before quoting: ``{frame:04d}``.
* A TOML job with neither ``[grid]`` nor ``csv`` is one task (one call, or the command as is).
* In a shell template a boolean is written ``true``/``false`` (as in the TOML file); grid values
  must be strings, numbers or booleans for a command, any TOML value but a date for a callable.
  CSV values are strings (``skipinitialspace``: ``a, b`` is ``a`` and ``b``).
* Every CSV column must be used by the command, as every grid key (a misspelt name is caught).
* A callable spec is imported when the job is loaded (an import error is found before any host
  is rented) and each parameter set is checked against its signature, where Python can tell it.
  The current directory is not added to ``sys.path``: a module of one's own needs ``PYTHONPATH``.
* The fingerprint covers what the tasks do (id, kind, command, target, arguments), not their
  labels or line numbers, so editing comments in a job file does not prevent resuming it.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import inspect
import io
import itertools
import json
import math
import re
import shlex
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.model.files import KeyLines, shown
from skylease.model.limits import check_size, count
from skylease.runtime.execute import resolve_target
from skylease.traces.textio import read_json, read_text

LABEL_CHARS = 60
_TARGET_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class JobTask:
    """One task of a job: a shell command or a Python call."""

    id: int
    kind: str
    command: str | None = None
    target: str | None = None
    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    source_line: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # its [grid] or CSV row's values

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "command": self.command,
            "target": self.target,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "label": self.label,
            "source_line": self.source_line,
            "params": dict(self.params),
        }

    @classmethod
    def from_json(cls, d: dict) -> JobTask:
        return cls(
            id=int(d["id"]),
            kind=str(d["kind"]),
            command=d.get("command"),
            target=d.get("target"),
            args=tuple(d.get("args") or ()),
            kwargs=dict(d.get("kwargs") or {}),
            label=d.get("label") or "",
            source_line=d.get("source_line"),
            params=dict(d.get("params") or {}),
        )


@dataclass(frozen=True)
class Job:
    """A named bag of tasks and the run options its file gave (``retries``, ``timeout``)."""

    name: str
    source: str
    tasks: tuple[JobTask, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    text: str | None = field(default=None, repr=False, compare=False)  # a job read from stdin: its text

    def fingerprint(self) -> str:
        """sha256 of what the tasks do, in order: a resumed run must be the same job."""
        keep = ("id", "kind", "command", "target", "args", "kwargs")
        body = [{k: j[k] for k in keep} for j in map(JobTask.to_json, self.tasks)]
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_job(spec: str, *, args: str | None = None) -> Job:
    """Read a job: a text file of commands, a ``.toml`` job file, or ``module:function`` with ``args``.

    ``args`` is a JSON file holding a list; each item is a list (positional arguments), a dict
    (keyword arguments) or a scalar (one argument). Every mistake raises :class:`UserError`.
    """
    path = Path(spec)
    if not path.exists() and _TARGET_RE.match(spec):
        if args is None:
            raise UserError("a callable job needs an args file (a JSON list, one item per task)",
                            field="--args")
        return _callable_job(spec, Path(args))
    if args is not None:
        raise UserError(f"only a callable job (module:function) takes an args file, not {spec}",
                        field="--args")
    if path.suffix.lower() == ".toml":
        return _toml_job(path)
    return _text_job(path)


# -- text files -----------------------------------------------------------------------------------


def _text_job(path: Path) -> Job:
    return text_job(read_text(path), str(path), _stem(path))


#: How a job read from standard input is named (``skylease run -``): its source and its name.
STDIN = "-"


def text_job(text: str, source: str, name: str) -> Job:
    """A job of shell commands, one a line (blank lines and ``#`` comments skipped), from ``text``:
    a text file's, or standard input's (``source`` names it in errors and in the run's records)."""
    tasks = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tasks.append(JobTask(len(tasks), "shell", command=line, label=_short(line), source_line=lineno))
    where = "standard input" if source == STDIN else source
    if not tasks:
        raise UserError("no commands (every line is blank or a # comment)", file=where, line=1)
    check_size(len(tasks), "tasks", TASK_BYTES, file=where)
    return Job(name, source, tuple(tasks))


# -- callables ------------------------------------------------------------------------------------


def _callable_job(spec: str, args_path: Path) -> Job:
    fn = _import_callable(spec, field=spec)
    items = read_json(args_path)
    if not isinstance(items, list):
        raise UserError(f"expected a JSON list (one item per task), found a {_json_type(items)}",
                        file=args_path, line=1)
    if not items:
        raise UserError("empty list: no tasks", file=args_path, line=1)
    tasks = []
    for i, item in enumerate(items):
        if isinstance(item, list):
            a, kw = tuple(item), {}
        elif isinstance(item, dict):
            a, kw = (), item
        else:
            a, kw = (item,), {}
        _check_call(fn, spec, a, kw, file=args_path, field=f"[{i}]")
        tasks.append(_python_task(i, spec, a, kw, None))
    return Job(spec.rpartition(":")[2], spec, tuple(tasks))


def _import_callable(spec: str, *, field: str, file: Path | None = None, line: int | None = None) -> Any:
    try:
        return resolve_target(spec)
    except ModuleNotFoundError as exc:
        hint = " (a module of your own must be on PYTHONPATH, e.g. PYTHONPATH=.)"
        raise UserError(f"cannot import {exc.name or spec}{hint}", file=file, line=line,
                        field=field) from None
    except AttributeError as exc:
        raise UserError(f"cannot find {spec}: {exc}", file=file, line=line, field=field) from None
    except TypeError as exc:
        raise UserError(str(exc), file=file, line=line, field=field) from None
    except Exception as exc:  # importing user code may raise anything (SyntaxError, ...)
        raise UserError(f"cannot import {spec.partition(':')[0]}: {type(exc).__name__}: {exc}",
                        file=file, line=line, field=field) from None


def _check_call(fn: Any, spec: str, a: tuple, kw: Mapping[str, Any], *, file: Path,
                field: str, line: int | None = None) -> None:
    """A UserError if the arguments cannot bind to the callable's signature (when it has one)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # some builtins have none: the worker will tell
    try:
        sig.bind(*a, **kw)
    except TypeError as exc:
        raise UserError(f"does not fit {spec}: {exc}", file=file, line=line, field=field) from None


def _python_task(tid: int, target: str, a: tuple, kw: Mapping[str, Any], line: int | None) -> JobTask:
    shown = [repr(x) for x in a] + [f"{k}={v!r}" for k, v in kw.items()]
    label = _short(f"{target}({', '.join(shown)})")
    return JobTask(tid, "python", target=target, args=a, kwargs=dict(kw), label=label, source_line=line)


# -- TOML job files -------------------------------------------------------------------------------


#: Bytes one task of a job costs a run (its description, its rows in the result store, the
#: driver's bookkeeping; a generous bound): the memory budget of :mod:`skylease.model.limits`
#: allows about a million tasks per job.
TASK_BYTES = 2048

#: The job file's keys that are options of the run, not of the tasks.
RUN_OPTIONS = ("retries", "timeout")


def _toml_job(path: Path) -> Job:
    from skylease.model.schema import load_toml  # (pydantic: only for a TOML job)
    from skylease.runtime.job_toml import JobFile

    spec, lines = load_toml(path, JobFile)
    command, target = spec.command, spec.callable
    if (command is None) == (target is None):
        what = "both" if command is not None else "neither"
        raise UserError(f"{what} of 'command' and 'callable' given: a job needs exactly one",
                        file=path, line=lines.line("command") or lines.line("callable") or 1)
    key = "command" if command is not None else "callable"
    value = command if command is not None else target
    if not value or not value.strip():
        raise lines.error("must be a non-empty string", key)
    if spec.grid is not None and spec.csv is not None:
        raise lines.error("give either [grid] or csv, not both", "csv")
    # the parameter sets, the file their rows come from, and where each parameter is named
    rows_file = path
    if spec.grid is not None:
        names, rows = _grid_rows(spec.grid, lines, shell=command is not None)
        row_lines: list[int | None] = [None] * len(rows)
        where = {n: (path, lines.line("grid", n)) for n in names}
    elif spec.csv is not None:
        rows_file, names, rows, row_lines = _csv_rows(spec.csv, path, lines)
        where = {n: (rows_file, 1) for n in names}
    else:
        names, rows, row_lines, where = [], [{}], [None], {}
    options = spec.model_dump(include=set(RUN_OPTIONS), exclude_none=True)

    tasks: list[JobTask] = []
    if command is not None:
        cmd_line = lines.line("command")
        parts = _parse_template(command, path, cmd_line)
        used = {name for _, name, _ in parts if name is not None}
        missing = [n for _, n, _ in parts if n is not None and n not in names]
        if missing:
            raise UserError(f"placeholder {{{missing[0]}}} has no parameter (in neither [grid] nor csv)",
                            file=path, line=cmd_line, field="command")
        for name in names:
            if name not in used:
                file, line = where[name]
                raise UserError("parameter is never used in the command", file=file, line=line,
                                field=name)
        for i, (row, line) in enumerate(zip(rows, row_lines, strict=True)):
            at = (path, cmd_line) if line is None else (rows_file, line)
            cmd = _render(parts, row, *at)
            tasks.append(JobTask(i, "shell", command=cmd, label=_short(cmd), source_line=line,
                                 params=row))
    else:
        assert target is not None
        target = target.strip()
        tline = lines.line("callable")
        if not _TARGET_RE.match(target):
            raise UserError(f"expected 'package.module:function', got {target!r}", file=path,
                            line=tline, field="callable")
        fn = _import_callable(target, field="callable", file=path, line=tline)
        for i, (row, line) in enumerate(zip(rows, row_lines, strict=True)):
            at = (path, tline) if line is None else (rows_file, line)
            _check_call(fn, target, (), row, file=at[0], line=at[1], field="callable")
            tasks.append(replace(_python_task(i, target, (), row, line), params=row))
    return Job(_stem(path), str(path), tuple(tasks), options)


def _grid_rows(grid: Mapping[str, list[Any]], lines: KeyLines, *, shell: bool
               ) -> tuple[list[str], list[dict]]:
    if not grid:
        raise lines.error("empty: no parameters", "grid")
    names = list(grid)
    for name, values in grid.items():
        if not values:
            raise lines.error("empty list: the grid would have no tasks", "grid", name)
        for v in values:
            bad = isinstance(v, dt.date | dt.time) or (shell and isinstance(v, list | dict))
            if bad:
                kinds = "strings, numbers or booleans" if shell else "anything but dates"
                raise lines.error(f"values must be {kinds}, found {shown(v)}", "grid", name)
    n = math.prod(len(v) for v in grid.values())
    check_size(n, "tasks", TASK_BYTES, file=lines.file, line=lines.line("grid"), field="grid",
               asked=" x ".join(f"{len(v):,}" for v in grid.values()) + f" = {count(n)}")
    rows = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*grid.values())]
    return names, rows


def _csv_rows(
    value: str, path: Path, lines: KeyLines
) -> tuple[Path, list[str], list[dict], list[int | None]]:
    """The CSV file named by ``csv``, its column names, one dict per row and each row's line."""
    if not value:
        raise lines.error("must be the path of a CSV file (relative to this file)", "csv")
    csv_path = path.parent / value
    if not csv_path.is_file():
        raise lines.error(f"CSV file not found: {csv_path}", "csv")
    text = read_text(csv_path)
    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    names: list[str] | None = None
    rows: list[dict] = []
    row_lines: list[int | None] = []
    start = 1
    try:
        for record in reader:
            row_line, start = start, reader.line_num + 1
            if not record or all(not c.strip() for c in record):
                continue  # blank line
            if names is None:
                names = [c.strip() for c in record]
                for i, n in enumerate(names):
                    if not n:
                        raise UserError(f"column {i + 1} has no name", file=csv_path, line=row_line)
                    if names.index(n) != i:
                        raise UserError("column name given twice", file=csv_path, line=row_line,
                                        field=n)
                continue
            if len(record) != len(names):
                raise UserError(f"expected {len(names)} values (as the header), found {len(record)}",
                                file=csv_path, line=row_line)
            rows.append(dict(zip(names, record, strict=True)))
            row_lines.append(row_line)
    except csv.Error as exc:
        raise UserError(f"not valid CSV: {exc}", file=csv_path, line=reader.line_num) from None
    if names is None:
        raise UserError("empty: expected a header row of parameter names", file=csv_path, line=1)
    if not rows:
        raise UserError("no rows after the header: no tasks", file=csv_path, line=1)
    return csv_path, names, rows, row_lines


# -- command templates ----------------------------------------------------------------------------


def _parse_template(template: str, path: Path, line: int | None) -> list[tuple[str, str | None, str]]:
    """The template as (literal text, placeholder name or None, format spec) parts."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise UserError(f"malformed template: {exc} (write {{{{ and }}}} for literal braces)",
                        file=path, line=line, field="command") from None
    parts = []
    for literal, name, spec, conversion in parsed:
        if name is not None:
            bad = (not name.isidentifier() or conversion is not None or "{" in (spec or "")
                   or "}" in (spec or ""))
            if bad:
                shown = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
                shown = "{" + shown + "}"
                raise UserError(f"malformed placeholder {shown}: expected {{name}} or {{name:format}}",
                                file=path, line=line, field="command")
        parts.append((literal, name, spec or ""))
    return parts


def _render(parts: Sequence[tuple[str, str | None, str]], row: Mapping[str, Any], file: Path,
            line: int | None) -> str:
    """The command for one parameter set, every value shell-quoted."""
    out = []
    for literal, name, spec in parts:
        out.append(literal)
        if name is None:
            continue
        value = row[name]
        if isinstance(value, bool):
            text = "true" if value else "false"
        else:
            try:
                text = format(value, spec)
            except (ValueError, TypeError) as exc:
                raise UserError(f"cannot format {value!r} as {{{name}:{spec}}}: {exc}", file=file,
                                line=line, field=name) from None
        out.append(shlex.quote(text))
    return "".join(out)


def substitute(template: str, values: Mapping[str, Any]) -> str:
    """The template with each ``{name}`` replaced by its shell-quoted value (for tests and tools)."""
    return _render(_parse_template(template, Path("<template>"), None), values, Path("<template>"), None)


# -- small helpers --------------------------------------------------------------------------------


def _short(text: str) -> str:
    """At most LABEL_CHARS, cut in the middle: the tail (a template's values) tells tasks apart."""
    text = " ".join(text.split())
    if len(text) <= LABEL_CHARS:
        return text
    head = (LABEL_CHARS - 1) // 2
    return text[:head] + "…" + text[len(text) - (LABEL_CHARS - 1 - head):]


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".txt", ".toml"):
        name = name.removesuffix(suffix)
    return name or path.name


def _json_type(v: Any) -> str:
    return {dict: "object", str: "string", bool: "boolean", type(None): "null"}.get(type(v), "number")
