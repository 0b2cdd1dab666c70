"""Bags of tasks: the A2HA paper's workloads and readers of real task-runtime traces.

Paper workloads (W1-W4 and decisions A11-A13 in ``docs/decisions/a2ha.md``)
---------------------------------------------------------------------------
:func:`a2ha_workload` builds the four evaluation workloads as :class:`~skylease.model.task.Bag`:

========== ==== ===================================================================== ========
name       N    durations                                                             kind
========== ==== ===================================================================== ========
image      256  W1: gamma (shape (220/125)^2), standardized to mean 220 s and          fixed
                (population) sd 125 s exactly, clipped at >= 5 s; internal seed 7
synthetic  256  W2: N(150 s, 30 s), clipped below at 1 s (the paper: > 0)                redrawn
outsystems 1480 W3: lognormal, median 30 s, sigma = sqrt(2 ln(63.5/30)) = 1.225,       fixed
                scaled to mean 63.5 s exactly; internal seed 11
long       256  W4: N(5400 s, 1200 s), clipped below at 1 s                            redrawn
========== ==== ===================================================================== ========

*Fixed* traces (decision A11) give the same durations on every call whatever ``seed`` is: the paper's W1
and W3 are measured traces of which only the order changes between runs. *Redrawn* workloads draw
new durations from ``seed`` (an ``int``, ``None`` for fresh entropy, or a ``numpy`` Generator).
With the internal seeds the fixed traces are the reference prototype's (decision PROTO): W1 has max 691 s
(nothing is clipped), W3 has median 30.8 s, max 42.2 min and 3 tasks over 15 min. The paper's
optimum host counts ceil(N * mean / 3300 s) are 18 (image), 12 (synthetic, nominal mean) and 29
(outsystems).

Real traces
-----------
* :func:`read_wfcommons` -- WfCommons workflow instances (JSON, optionally gzipped). The measured
  runtime of a task is ``runtimeInSeconds`` (schema 1.4: ``workflow.tasks``; schema 1.5:
  ``workflow.execution.tasks``) or ``runtime`` (schemas 1.0-1.3: ``workflow.jobs`` or
  ``workflow.tasks``). A workflow is not a bag: by default the bag is its largest stage, the tasks
  of the most frequent category (e.g. the 40/300/100 ``blastall`` tasks of the BLAST instances, the
  1000 ``bwa`` tasks of BWA), without the split and merge steps around it.
* :func:`read_runtimes_csv` -- a CSV of task runtimes in seconds.

:func:`load_workload` resolves the CLI's ``--workload SPEC|FILE`` to a bag. Every user mistake
raises one :class:`~skylease.model.errors.UserError` naming the file, line and field.
"""

from __future__ import annotations

import csv
import functools
import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from skylease.model.errors import UserError
from skylease.model.limits import check_size
from skylease.model.task import Bag
from skylease.traces.synthetic import gamma_bag, is_synthetic, lognormal_bag, normal_bag, synthetic_runtimes
from skylease.traces.textio import parse_number, read_json
from skylease.traces.textio import read_text as _read_text

__all__ = [
    "A2HA_WORKLOADS",
    "WORKLOAD_FORMS",
    "a2ha_workload",
    "is_fixed",
    "load_workload",
    "read_runtimes_csv",
    "read_wfcommons",
]

Seed = int | np.random.Generator | None

#: Peak bytes per task of a bag being simulated (about 740 measured with 100,000 tasks): the size
#: limit of the synthetic workloads, checked before any task is drawn.
TASK_BYTES = 1024

#: The paper's workloads: name -> short description.
A2HA_WORKLOADS: dict[str, str] = {
    "image": "W1 ray-tracing render: fixed 256-task gamma trace, mean 220 s, sd 125 s",
    "synthetic": "W2 synthetic: 256 tasks ~ N(150 s, 30 s), redrawn per run",
    "outsystems": "W3 OutSystems testing: fixed 1480-task lognormal trace, median 30 s, mean 63.5 s",
    "long": "W4 long-running: 256 tasks ~ N(5400 s, 1200 s), redrawn per run",
}

_FIXED = {"image": True, "synthetic": False, "outsystems": True, "long": False}

IMAGE_SEED = 7
OUTSYSTEMS_SEED = 11

#: The forms :func:`load_workload` accepts (shown in its error message).
WORKLOAD_FORMS = (
    f"a paper workload ({', '.join(A2HA_WORKLOADS)})",
    "wfcommons:PATH or a *.json / *.json.gz WfCommons file",
    "a *.csv file of runtimes in seconds",
    "normal:N:MEAN:SD",
    "gamma:N:MEAN:SD",
    "lognormal:N:MEAN:SD",
    "constant:N:SECONDS",
)

# --------------------------------------------------------------------------------------------------
# The paper's workloads


def is_fixed(name: str) -> bool:
    """True for the fixed traces (image, outsystems), False for the redrawn ones (synthetic, long).

    Raises ``KeyError`` for a name that is not a paper workload.
    """
    return _FIXED[name]


@functools.cache
def _image() -> Bag:
    x = gamma_bag(256, 220.0, 125.0, seed=IMAGE_SEED).works
    x = (x - x.mean()) / x.std() * 125.0 + 220.0
    # With seed 7 the minimum is 18.2 s, so the clip changes nothing and the moments stay exact.
    return Bag.from_runtimes(np.maximum(x, 5.0), name="image")


@functools.cache
def _outsystems() -> Bag:
    mean, median = 63.5, 30.0
    sigma2 = 2.0 * math.log(mean / median)
    sd = mean * math.sqrt(math.expm1(sigma2))  # lognormal_bag takes mean and sd: mu = ln(median)
    x = lognormal_bag(1480, mean, sd, seed=OUTSYSTEMS_SEED).works
    return Bag.from_runtimes(x * (mean / x.mean()), name="outsystems")


def a2ha_workload(name: str, seed: Seed = None) -> Bag:
    """One of the paper's workloads as a bag (see the module docstring).

    ``seed`` draws the durations of the redrawn workloads and is ignored by the fixed traces.
    """
    if name == "image":
        return _image()
    if name == "outsystems":
        return _outsystems()
    if name == "synthetic":
        return normal_bag(256, 150.0, 30.0, seed, name="synthetic")
    if name == "long":
        return normal_bag(256, 5400.0, 1200.0, seed, name="long")
    raise UserError(f"unknown paper workload {name!r}; choose one of {', '.join(A2HA_WORKLOADS)}",
                    field="workload")


# --------------------------------------------------------------------------------------------------
# Reading files


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".csv"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name or path.name






_ID_SUFFIX = re.compile(r"_(?:ID)?[0-9]+$")


def _category(task: dict[str, Any]) -> str:
    cat = task.get("category")
    if isinstance(cat, str) and cat:
        return cat
    name = str(task.get("name", task.get("id", "")))
    return _ID_SUFFIX.sub("", name)


def _wf_tasks(path: Path, doc: Any) -> tuple[list[dict[str, Any]], str]:
    """The task records (in file order, with a ``category``) and the JSON path they came from."""
    wf = doc.get("workflow") if isinstance(doc, dict) else None
    if not isinstance(wf, dict):
        raise UserError("not a WfCommons instance: no 'workflow' object", file=path, field="workflow")
    execution = wf.get("execution")
    if isinstance(execution, dict) and isinstance(execution.get("tasks"), list):  # schema 1.5
        spec = wf.get("specification", {})
        spec_tasks = spec.get("tasks", []) if isinstance(spec, dict) else []
        by_id = {t.get("id"): t for t in spec_tasks if isinstance(t, dict)}
        tasks = []
        for t in execution["tasks"]:
            if not isinstance(t, dict):
                tasks.append(t)
                continue
            merged = {**by_id.get(t.get("id"), {}), **t}
            tasks.append(merged)
        return tasks, "workflow.execution.tasks"
    for key in ("tasks", "jobs"):  # schema 1.2-1.4, schema 1.0-1.1
        if isinstance(wf.get(key), list):
            return wf[key], f"workflow.{key}"
    raise UserError("not a WfCommons instance: no task list (workflow.tasks, workflow.jobs or "
                    "workflow.execution.tasks)", file=path, field="workflow")


def read_wfcommons(path: str | os.PathLike[str], category: str | None = None) -> Bag:
    """The measured task runtimes of a WfCommons instance as a bag named after the file.

    ``category=None`` keeps the workflow's largest stage (the most frequent task category, the
    first in file order on a tie); a category name keeps that stage; ``"*"`` keeps every task.
    Task ids are ``0..n-1`` in file order. The category of a task is its ``category`` field, or
    its name without the ``_ID000123`` suffix.
    """
    path = Path(path)
    doc = read_json(path)
    tasks, where = _wf_tasks(path, doc)
    records: list[tuple[int, str, dict[str, Any]]] = []
    for i, t in enumerate(tasks):
        if not isinstance(t, dict):
            raise UserError("task is not a JSON object", file=path, field=f"{where}[{i}]")
        records.append((i, _category(t), t))
    if not records:
        raise UserError("the workflow has no tasks", file=path, field=where)
    check_size(len(records), "tasks", TASK_BYTES, file=path, field=where)
    counts = Counter(cat for _, cat, _ in records)
    if category is None:
        top = max(counts.values())
        category = next(cat for _, cat, _ in records if counts[cat] == top)
    elif category != "*" and category not in counts:
        raise UserError(f"no task of category {category!r}; categories: {', '.join(counts)}",
                        file=path, field="category")
    runtimes: list[float] = []
    for i, cat, t in records:
        if category != "*" and cat != category:
            continue
        key = "runtimeInSeconds" if "runtimeInSeconds" in t else "runtime"
        value = t.get(key)
        field = f"{where}[{i}].{key}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            what = "missing" if value is None else f"not a number: {value!r}"
            raise UserError(f"runtime {what} (expected runtimeInSeconds or runtime)", file=path,
                            field=field)
        if not math.isfinite(value) or value < 0:
            raise UserError(f"runtime {value!r} must be a finite number >= 0", file=path, field=field)
        runtimes.append(float(value))
    return Bag.from_runtimes(runtimes, name=_stem(path))


_RUNTIME_COLUMNS = ("runtime", "runtime_s", "duration", "seconds")


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _parse_runtime(path: Path, line: int, field: str, cell: str) -> float:
    value = parse_number(path, line, field, cell)
    if value < 0:
        raise UserError(f"value {cell.strip()!r} is negative; a runtime is >= 0 seconds", file=path,
                        line=line, field=field)
    return value


def read_runtimes_csv(path: str | os.PathLike[str], column: str | int | None = None) -> Bag:
    """Task runtimes in seconds from a CSV file (``.csv.gz`` too), one task per data row.

    The first row is a header when any of its cells is not a number. ``column`` picks a column by
    header name (case-insensitive) or 0-based index; by default the column named ``runtime``,
    ``runtime_s``, ``duration`` or ``seconds``, else the only column, else the only column whose
    every value is a number. Every row has the header's (or the first row's) number of fields.
    Delimiters ``,``, ``;`` and tab are recognised; blank lines and lines starting with ``#`` are
    skipped. Values must be finite and >= 0. The bag is named after the file.
    """
    path = Path(path)
    text = _read_text(path)
    lines = text.splitlines()
    rows: list[tuple[int, list[str]]] = []
    sample = "\n".join(lines[:50])
    try:
        dialect: Any = csv.Sniffer().sniff(sample, delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        rows.append((number, next(csv.reader([line], dialect))))
    if not rows:
        raise UserError("empty file: expected one runtime (seconds) per line", file=path, line=1)
    header: list[str] | None = None
    header_line = rows[0][0]
    if any(not _is_number(c) for c in rows[0][1]):
        header = [c.strip() for c in rows[0][1]]
        rows = rows[1:]
        if not rows:
            raise UserError("no runtimes after the header", file=path, line=header_line)
    check_size(len(rows), "tasks", TASK_BYTES, file=path, asked=f"{len(rows):,} runtimes")
    width = len(header) if header is not None else len(rows[0][1])
    names = header if header is not None else [f"column {k + 1}" for k in range(width)]
    listed = ", ".join(repr(n) for n in names)
    for number, row in rows:  # a ragged row: a column's cells would not line up (nor pick the column)
        if len(row) < width:
            raise UserError(f"row has {len(row)} field(s), not {width}: no {names[len(row)]!r}", file=path,
                            line=number, field=names[len(row)])
        if len(row) > width:
            raise UserError(f"row has {len(row)} fields, not {width}: field {width + 1} has no column",
                            file=path, line=number, field=f"field {width + 1}")

    if isinstance(column, int):
        if not 0 <= column < width:
            raise UserError(f"column index {column} out of range: the file has {width} column(s)",
                            file=path, line=header_line, field=str(column))
        index = column
    elif column is not None:
        lowered = [n.lower() for n in names]
        if column.lower() not in lowered:
            raise UserError(f"unknown column {column!r}; columns: {listed}", file=path, line=header_line,
                            field=column)
        index = lowered.index(column.lower())
    else:
        lowered = [n.lower() for n in names] if header is not None else []
        preferred = [lowered.index(c) for c in _RUNTIME_COLUMNS if c in lowered]
        if preferred:
            index = preferred[0]
        elif width == 1:
            index = 0
        else:
            numeric = [k for k in range(width)
                       if all(k < len(r) and _is_number(r[k]) for _, r in rows)]
            if len(numeric) != 1:
                what = "no numeric column" if not numeric else "several numeric columns"
                raise UserError(f"{what}; name the runtime column ({listed}) or call it one of "
                                f"{', '.join(_RUNTIME_COLUMNS)}", file=path, line=header_line)
            index = numeric[0]
    field = names[index]
    runtimes = []
    for number, row in rows:
        runtimes.append(_parse_runtime(path, number, field, row[index]))
    return Bag.from_runtimes(runtimes, name=_stem(path))


# --------------------------------------------------------------------------------------------------
# The CLI's --workload resolver


def _bad_spec(spec: str, why: str) -> UserError:
    return UserError(f"{why} (got {spec!r}); valid forms: {'; '.join(WORKLOAD_FORMS)}", field="workload")


def _synthetic(spec: str, seed: Seed) -> Bag:
    runtimes = synthetic_runtimes(spec, seed, field="workload", forms=WORKLOAD_FORMS, task_bytes=TASK_BYTES)
    return Bag.from_runtimes(runtimes, name=spec.strip())


def load_workload(spec: str, seed: Seed = None) -> Bag:
    """A bag from a ``--workload`` value: a paper workload, a file, or a synthetic spec.

    Paper names go to :func:`a2ha_workload` (``seed`` draws the redrawn ones); ``wfcommons:PATH``
    and ``*.json[.gz]`` to :func:`read_wfcommons`; ``*.csv[.gz]`` to :func:`read_runtimes_csv`;
    ``normal:N:MEAN:SD``, ``gamma:N:MEAN:SD``, ``lognormal:N:MEAN:SD`` (drawn from ``seed``) and
    ``constant:N:SECONDS`` to :mod:`skylease.traces.synthetic`. Anything else raises
    :class:`UserError` on the field ``workload`` listing the valid forms.
    """
    spec = spec.strip()
    if spec in A2HA_WORKLOADS:
        return a2ha_workload(spec, seed)
    if spec.startswith("wfcommons:"):
        return read_wfcommons(spec[len("wfcommons:"):])
    lower = spec.lower()
    if lower.endswith((".json", ".json.gz")):
        return read_wfcommons(spec)
    if lower.endswith((".csv", ".csv.gz")):
        return read_runtimes_csv(spec)
    if is_synthetic(spec):
        return _synthetic(spec, seed)
    raise _bad_spec(spec, "unknown workload")
