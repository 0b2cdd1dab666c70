"""ETC (expected time to compute) matrices: the Braun file format, solutions, and generators.

An ETC matrix has one row per task and one column per machine: ``etc[t, j]`` is the expected time
task ``t`` takes on machine ``j``. Every entry is finite and strictly positive.

File format (Braun et al. 2001, as distributed with the HCSP benchmark)
-----------------------------------------------------------------------
Line 1 is the header ``tasks machines 0``: exactly three whole numbers, ``tasks >= 1`` and
``machines >= 1``. The third field is always ``0`` in the published files and its meaning is not
documented anywhere we could find, so :func:`read_etc` requires it to be ``0``: anything else
probably means a different format, and reading it as this one would give a wrong matrix silently.
``tasks * machines`` may be at most 8,388,608 (2^23, :func:`check_etc_size`: what 2 GB of memory
holds while a file is read), checked from the header before the values are read.

After the header come exactly ``tasks * machines`` numbers, task-major: values
``machines*t .. machines*t + machines-1`` form row ``t``. Any whitespace separates them (the
published files put one per line; any layout is accepted). Each value must be a plain decimal
number (``12``, ``-1.5``, ``3.2e4``) that is finite and **strictly positive**: a zero would mean a
task that takes no time, which no real machine offers, and the mapping heuristics divide by row
sums; the Braun files contain none. Files whose name ends in ``.gz`` are read and written
gzip-compressed. Every problem is reported as one :class:`~skylease.model.errors.UserError` naming
the file and the line of the offending token, e.g. ``u.0:37: value 'abc' is not a number``.

:func:`write_etc` writes the same format atomically (temporary file, then ``os.replace``) with
``repr`` precision, so ``read_etc(write_etc(x))`` gives back ``x`` bit for bit.

Solution files (``.sol``)
-------------------------
A solution holds one 0-based machine index per task, in task order, separated by any whitespace
(the HCSP ``_MS_`` files put them all on one line, the ``_CPR_`` files one per line). The
best-known solutions of chgogos/hcsp are named ``<instance>_<method>_<makespan>.sol`` with a
decimal comma, e.g. ``u_c_hihi.0_MS_7358942,8.sol``; ``MS`` is their mathematical solver and
``CPR`` their column pricing with restarts; one file has no method part
(``u_s_hilo.0_95553,3.sol``). The number is the solution's makespan, rounded to one decimal, for
both methods, with one wrinkle: ``u_s_hihi.0_MS_4080153,5`` evaluates to 4080153.449, which its
solver held as a float32 before printing, so a name is within 0.1 (not 0.05) of the true makespan.

Generators
----------
Every random function takes ``seed``: an ``int`` (or ``None`` for fresh entropy) or a
``numpy.random.Generator``, which is then used (and advanced) directly.

* :func:`cvb` -- the coefficient-of-variation-based method of Ali, Siegel, Maheswaran and Hensgen
  (2000), used by the thesis (decision A6.1). Gamma distributions: shape ``1/V**2``. Task-based variant:
  task means ``q_i ~ Gamma(mean mu_task, CV V_task)``, then ``etc[i, j] ~ Gamma(mean q_i, CV V_mach)``.
  Machine-based variant: machine means ``p_j ~ Gamma(mean mu_task, CV V_mach)``, then
  ``etc[i, j] ~ Gamma(mean p_j, CV V_task)``. ``variant="auto"`` takes the task-based variant when
  ``V_task >= V_mach``. Entries that underflow to 0 (only possible for V above about 3) are raised
  to the smallest positive float so that every entry stays > 0.
* :func:`range_based` and :func:`braun_class` -- the range-based method of Braun et al. (2001):
  ``tau_i ~ U(1, R_task)``, ``etc[i, j] = tau_i * U(1, R_mach)``; classes ``u_{c,s,i}_{hi,lo}{hi,lo}``
  with R_task = 3000 (hi) / 100 (lo) and R_mach = 1000 (hi) / 10 (lo). Not used by the thesis.
* :func:`make_consistent` -- consistency transforms (decision A6.2): ``fc`` sorts every row (machine 0
  fastest for every task), ``oc`` leaves the matrix as generated, ``pc-even`` sorts the even
  columns of every row (Braun's semi-consistent), ``pc-half`` fully sorts the rows of the first
  ``n // 2`` tasks, ``pc-quarter`` applies ``pc-even`` to the even-indexed rows only.
* :func:`thesis_instance` -- one instance of the thesis's study, reproducibly seeded (see there).
* :func:`etc_stats` -- the sanity statistics of decision A6.3 and a guess of the consistency.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import math
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from skylease.model.errors import UserError
from skylease.model.limits import check_size, max_items
from skylease.traces.textio import read_text as _read_text

__all__ = [
    "CONSISTENCIES",
    "THESIS_SCENARIOS",
    "THESIS_SIZES",
    "braun_class",
    "cvb",
    "etc_stats",
    "make_consistent",
    "range_based",
    "read_etc",
    "read_solution",
    "solution_makespan_from_name",
    "thesis_instance",
    "write_etc",
]

CONSISTENCIES = ("fc", "pc-half", "pc-even", "pc-quarter", "oc")

#: The 16 (V_task, V_mach) pairs of thesis Table 3.5, in the order of decision A5.1.
THESIS_SCENARIOS: tuple[tuple[float, float], ...] = (
    (0.1, 0.1), (0.2, 0.1), (0.3, 0.1), (0.4, 0.1), (0.5, 0.1), (0.6, 0.1),
    (0.6, 0.6), (0.7, 0.6), (0.8, 0.6), (0.9, 0.6), (1.0, 0.6), (1.1, 0.6),
    (0.6, 0.2), (0.6, 0.3), (0.6, 0.4), (0.6, 0.5),
)  # fmt: skip

#: The instance sizes (tasks, machines) of the thesis's main study (A5.1).
THESIS_SIZES = ((512, 16), (1024, 32), (2048, 64))

# Size ids for seeding: the thesis sizes plus the 4096x128 size of the HCSP benchmark. Keep the
# order: changing it changes every thesis instance.
_SIZE_IDS = (*THESIS_SIZES, (4096, 128))
_CONSISTENCY_IDS = {"fc": 0, "pc": 1, "oc": 2}
_PC_KINDS = ("pc-half", "pc-even", "pc-quarter")

_INT_RE = re.compile(r"[+-]?[0-9]+")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEADER_HINT = "header must be 'tasks machines 0'"
_NON_FINITE = frozenset({"nan", "inf", "infinity"})

#: Peak bytes per ETC value when a file is read (its text, the split tokens, the matrix: 230 B
#: measured on a 65536 x 64 file) or generated and written (140 B): the size limit of
#: :func:`check_etc_size`.
ETC_VALUE_BYTES = 256
#: The most characters a value takes in a file (``repr`` of a float is at most 24, plus the
#: separator, with room for padding): larger files are refused before they are read.
_VALUE_CHARS = 40

# --------------------------------------------------------------------------------------------------
# Reading and writing




def check_etc_size(n: int, m: int, *, field: str | None = None, file: str | Path | None = None,
                   line: int | None = None) -> None:
    """Refuse an n x m matrix that would not fit the memory budget (:mod:`skylease.model.limits`)."""
    check_size(n * m, "tasks x machines", ETC_VALUE_BYTES, field=field, file=file, line=line,
               asked=f"{n:,} x {m:,}")


def _check_file_size(path: Path) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        return  # the reader says what is wrong with the path
    most = max_items(ETC_VALUE_BYTES) * _VALUE_CHARS
    if not path.name.lower().endswith(".gz") and size > most:
        raise UserError(f"file of {size / 2**20:,.0f} MB is too large: an ETC file holds at most "
                        f"{max_items(ETC_VALUE_BYTES):,} values (about {most / 2**20:,.0f} MB)", file=path)


def _tokens(lines: list[str], first_line: int) -> Iterator[tuple[int, str]]:
    """(line number, token) for every whitespace-separated token, from 1-based ``first_line``."""
    for number, line in enumerate(lines[first_line - 1 :], start=first_line):
        for token in line.split():
            yield number, token


def _parse_header(path: Path, lines: list[str]) -> tuple[int, int]:
    if not lines or not lines[0].strip():
        what = "empty file" if not any(line.strip() for line in lines) else "line 1 is blank"
        raise UserError(f"{what}; {_HEADER_HINT}", file=path, line=1)
    fields = lines[0].split()
    if len(fields) != 3 or not all(_INT_RE.fullmatch(f) for f in fields):
        raise UserError(f"{_HEADER_HINT}, found {lines[0].strip()[:60]!r}", file=path, line=1)
    n, m, zero = (int(f) for f in fields)
    if n < 1 or m < 1:
        raise UserError(f"{_HEADER_HINT} with tasks >= 1 and machines >= 1, found {n} {m}", file=path, line=1)
    if zero != 0:
        raise UserError(f"{_HEADER_HINT}: the third field must be 0, found {zero}", file=path, line=1)
    return n, m


def _check_value(path: Path, line: int, token: str) -> float:
    """The token as a float, or a UserError saying what is wrong with it."""
    if token.lstrip("+-").lower() in _NON_FINITE:
        raise UserError(f"value {token!r} is not a finite number", file=path, line=line)
    if not _FLOAT_RE.fullmatch(token):
        shown = token if len(token) <= 40 else token[:37] + "..."
        raise UserError(f"value {shown!r} is not a number", file=path, line=line)
    value = float(token)
    if not math.isfinite(value):
        raise UserError(f"value {token!r} is not a finite number", file=path, line=line)
    if value <= 0:
        raise UserError(f"value {token!r} must be > 0 (an expected time to compute)", file=path, line=line)
    return value


def read_etc(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an ETC matrix in the Braun format (see the module docstring); shape (tasks, machines).

    Raises :class:`UserError` naming the file and the line of the first problem: a bad header, a
    value that is not a finite number > 0, or a count of values other than ``tasks * machines``.
    """
    path = Path(path)
    _check_file_size(path)
    lines = _read_text(path).splitlines()
    n, m = _parse_header(path, lines)
    check_etc_size(n, m, file=path, line=1)
    expected = n * m
    body = lines[1:]
    # Fast path: numpy parses all values at once; any doubt falls back to the token-by-token
    # check below, which knows line numbers and says exactly what is wrong.
    text = "\n".join(body)
    if text.isascii() and "_" not in text:
        try:
            values = np.array(text.split(), dtype=np.float64)
        except ValueError:
            values = None
        if values is not None and values.size == expected and np.all(np.isfinite(values) & (values > 0)):
            return values.reshape(n, m)
    count = 0
    last_line = 1
    out = np.empty(expected, dtype=np.float64)
    for line, token in _tokens(lines, 2):
        count += 1
        if count > expected:  # the line of the first value too many
            raise UserError(
                f"expected {expected} values after the header, found {_count_values(lines)}",
                file=path,
                line=line,
            )
        out[count - 1] = _check_value(path, line, token)
        last_line = line
    if count < expected:
        raise UserError(
            f"expected {expected} values after the header, found {count}", file=path, line=last_line
        )
    return out.reshape(n, m)


def _count_values(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines[1:])


def _atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UserError(f"cannot write file: {exc.strerror or exc}", file=path) from None
    try:
        with os.fdopen(fd, "wb") as raw:
            data = text.encode("ascii")
            if path.name.endswith(".gz"):
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                    gz.write(data)
            else:
                raw.write(data)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp_name, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise UserError(f"cannot write file: {exc.strerror or exc}", file=path) from None
        raise


def write_etc(path: str | os.PathLike[str], etc: np.ndarray) -> None:
    """Write ``etc`` (2-D, finite, > 0) in the Braun format, atomically, with repr precision.

    Raises ``ValueError`` for a matrix that :func:`read_etc` would refuse (writing it would only
    move the error to the next reader) and :class:`UserError` if the file cannot be written.
    """
    arr = np.asarray(etc, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(
            f"an ETC matrix must be 2-D with at least one task and machine, got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValueError("every ETC entry must be finite and > 0")
    n, m = arr.shape
    buf = io.StringIO()
    buf.write(f"{n} {m} 0\n")
    buf.write("\n".join(map(repr, arr.ravel().tolist())))
    buf.write("\n")
    _atomic_write_text(Path(path), buf.getvalue())


def read_solution(
    path: str | os.PathLike[str], n_tasks: int | None = None, n_machines: int | None = None
) -> np.ndarray:
    """Read a ``.sol`` file: one 0-based machine index per task, any whitespace layout.

    With ``n_tasks`` the count must match; with ``n_machines`` every index must be in
    ``0 .. n_machines-1``. Returns an int64 array. Problems raise :class:`UserError` with the line.
    """
    path = Path(path)
    lines = _read_text(path).splitlines()
    values: list[int] = []
    last_line = 1
    for line, token in _tokens(lines, 1):
        if not _INT_RE.fullmatch(token):
            shown = token if len(token) <= 40 else token[:37] + "..."
            raise UserError(f"machine index {shown!r} is not a whole number", file=path, line=line)
        j = int(token)
        if j < 0 or (n_machines is not None and j >= n_machines):
            allowed = f"0..{n_machines - 1}" if n_machines is not None else ">= 0"
            raise UserError(f"machine index {j} is out of range ({allowed})", file=path, line=line)
        if n_tasks is not None and len(values) == n_tasks:
            found = sum(len(x.split()) for x in lines)
            raise UserError(f"expected {n_tasks} machine indices, found {found}", file=path, line=line)
        values.append(j)
        last_line = line
    if not values:
        raise UserError("empty solution: expected one machine index per task", file=path, line=1)
    if n_tasks is not None and len(values) != n_tasks:
        raise UserError(f"expected {n_tasks} machine indices, found {len(values)}", file=path, line=last_line)
    return np.array(values, dtype=np.int64)


_SOL_NAME_RE = re.compile(r"(?P<int>[0-9]+)(?:,(?P<frac>[0-9]+))?")


def solution_makespan_from_name(path: str | os.PathLike[str]) -> float:
    """The makespan in a best-known solution's file name: ``u_c_hihi.0_MS_7381783,4.sol`` -> 7381783.4.

    The number is the last ``_``-separated part of the name before ``.sol``, with a decimal comma
    (a decimal point is accepted too). Raises :class:`UserError` if the name has none.
    """
    path = Path(path)
    name = path.name
    stem = name[: -len(".sol")] if name.endswith(".sol") else name
    last = stem.rsplit("_", 1)[-1].replace(".", ",") if "_" in stem else ""
    match = _SOL_NAME_RE.fullmatch(last)
    if match is None:
        raise UserError(
            "file name has no makespan: expected '<instance>_[<method>_]<makespan>.sol', "
            "e.g. 'u_c_hihi.0_MS_7381783,4.sol'",
            file=path,
        )
    return float(f"{match['int']}.{match['frac'] or '0'}")


# --------------------------------------------------------------------------------------------------
# Generators


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _check_size(n: int, m: int) -> None:
    for name, value in (("n", n), ("m", m)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise UserError(f"must be a whole number >= 1, got {value!r}", field=name)


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float | np.number) and math.isfinite(value) and value > 0):
        raise UserError(f"must be a finite number > 0, got {value!r}", field=name)


def _positive(etc: np.ndarray) -> np.ndarray:
    """Raise entries that underflowed to 0 to the smallest positive float (keeps every entry > 0)."""
    tiny = np.finfo(np.float64).tiny
    if np.any(etc < tiny):
        np.maximum(etc, tiny, out=etc)
    return etc


def cvb(
    n: int,
    m: int,
    v_task: float,
    v_mach: float,
    mu_task: float = 1000.0,
    seed: int | np.random.Generator | None = None,
    *,
    variant: str = "auto",
) -> np.ndarray:
    """A CVB (Ali et al. 2000) ETC matrix, shape (n, m), inconsistent ("oc"), mean about ``mu_task``.

    ``variant``: ``"task"`` (row means vary with CV ``v_task``, each row varies with CV ``v_mach``),
    ``"machine"`` (column means vary with CV ``v_mach`` around ``mu_task``, each column varies with
    CV ``v_task``), or ``"auto"``: task-based when ``v_task >= v_mach``, else machine-based.
    """
    _check_size(n, m)
    _check_positive("v_task", v_task)
    _check_positive("v_mach", v_mach)
    _check_positive("mu_task", mu_task)
    if variant == "auto":
        variant = "task" if v_task >= v_mach else "machine"
    rng = _rng(seed)
    a_task = 1.0 / v_task**2
    a_mach = 1.0 / v_mach**2
    if variant == "task":
        q = rng.gamma(a_task, mu_task / a_task, size=n)
        etc = rng.gamma(a_mach, (q / a_mach)[:, None], size=(n, m))
    elif variant == "machine":
        p = rng.gamma(a_mach, mu_task / a_mach, size=m)
        etc = rng.gamma(a_task, (p / a_task)[None, :], size=(n, m))
    else:
        raise UserError(f"must be 'task', 'machine' or 'auto', got {variant!r}", field="variant")
    return _positive(etc)


def range_based(
    n: int, m: int, r_task: float, r_mach: float, seed: int | np.random.Generator | None = None
) -> np.ndarray:
    """A range-based (Braun et al. 2001) ETC matrix: ``tau_i ~ U(1, r_task)``, ``etc = tau_i * U(1, r_mach)``.

    Inconsistent ("oc"); every entry is in ``[1, r_task * r_mach)``. Needs ``r_task, r_mach >= 1``.
    """
    _check_size(n, m)
    for name, value in (("r_task", r_task), ("r_mach", r_mach)):
        _check_positive(name, value)
        if value < 1:
            raise UserError(f"must be >= 1 (the range is U(1, R)), got {value!r}", field=name)
    rng = _rng(seed)
    tau = rng.uniform(1.0, r_task, size=n)
    return tau[:, None] * rng.uniform(1.0, r_mach, size=(n, m))


_BRAUN_RE = re.compile(r"u_(?P<c>[csi])_(?P<t>hi|lo)(?P<m>hi|lo)(?:\.[0-9]+)?")
_BRAUN_R_TASK = {"hi": 3000.0, "lo": 100.0}
_BRAUN_R_MACH = {"hi": 1000.0, "lo": 10.0}
_BRAUN_CONSISTENCY = {"c": "fc", "s": "pc-even", "i": "oc"}


def braun_class(
    name: str, n: int = 512, m: int = 16, seed: int | np.random.Generator | None = None
) -> np.ndarray:
    """A fresh instance of Braun class ``name`` (``'u_c_hihi'``; a suffix like ``'.0'`` is ignored).

    Consistency: ``c`` -> ``fc``, ``s`` -> ``pc-even`` (semi-consistent), ``i`` -> ``oc``.
    Task heterogeneity hi/lo: R_task = 3000/100; machine heterogeneity hi/lo: R_mach = 1000/10.
    """
    match = _BRAUN_RE.fullmatch(name)
    if match is None:
        raise UserError(
            f"not a Braun class name: {name!r} (expected u_<c|s|i>_<hi|lo><hi|lo>, e.g. 'u_c_hihi')",
            field="name",
        )
    etc = range_based(n, m, _BRAUN_R_TASK[match["t"]], _BRAUN_R_MACH[match["m"]], seed)
    return make_consistent(etc, _BRAUN_CONSISTENCY[match["c"]])


def make_consistent(etc: np.ndarray, kind: str, seed: int | np.random.Generator | None = None) -> np.ndarray:
    """A new matrix with the consistency ``kind`` (one of :data:`CONSISTENCIES`); ``etc`` is not changed.

    ``seed`` is accepted for symmetry with the generators and ignored: the five procedures are
    deterministic.
    """
    del seed
    arr = np.array(etc, dtype=np.float64, copy=True)
    if arr.ndim != 2:
        raise ValueError(f"an ETC matrix must be 2-D, got shape {arr.shape}")
    if kind == "fc":
        arr.sort(axis=1)
    elif kind == "oc":
        pass
    elif kind == "pc-even":
        arr[:, 0::2] = np.sort(arr[:, 0::2], axis=1)
    elif kind == "pc-half":
        half = arr.shape[0] // 2
        arr[:half].sort(axis=1)
    elif kind == "pc-quarter":
        arr[0::2, 0::2] = np.sort(arr[0::2, 0::2], axis=1)
    else:
        raise UserError(f"must be one of {', '.join(CONSISTENCIES)}, got {kind!r}", field="consistency")
    return arr


def _cantor(a: int, b: int) -> int:
    """Cantor pairing: an injective map of two non-negative ints to one."""
    return (a + b) * (a + b + 1) // 2 + b


def _size_id(n: int, m: int) -> int:
    """0..3 for 512x16, 1024x32, 2048x64, 4096x128; any other size gets ``4 + cantor(n, m)``."""
    try:
        return _SIZE_IDS.index((n, m))
    except ValueError:
        return 4 + _cantor(n, m)


def _milli(v: float) -> int:
    return round(v * 1000)


_SCENARIO_IDS = {(_milli(vt), _milli(vm)): i for i, (vt, vm) in enumerate(THESIS_SCENARIOS)}


def _scenario_id(v_task: float, v_mach: float) -> int:
    """0..15 for the Table 3.5 pairs (in THESIS_SCENARIOS order); else ``16 + cantor`` of the V's in
    thousandths, so V values are told apart to 0.001."""
    key = (_milli(v_task), _milli(v_mach))
    if key in _SCENARIO_IDS:
        return _SCENARIO_IDS[key]
    return 16 + _cantor(*key)


def thesis_instance(
    n: int,
    m: int,
    v_task: float,
    v_mach: float,
    consistency: str,
    rep: int,
    mu_task: float = 1000.0,
    pc: str = "pc-half",
) -> np.ndarray:
    """Replicate ``rep`` of the thesis's CVB instance class (size, scenario, consistency); reproducible.

    Seed: ``np.random.default_rng([size_id, scen_id, cons_id, rep])`` (decision A6.1) with

    * ``size_id``: 0, 1, 2, 3 for 512x16, 1024x32, 2048x64, 4096x128; any other size
      ``4 + cantor(n, m)`` (Cantor pairing, so distinct sizes never share an id);
    * ``scen_id``: the index 0..15 of ``(v_task, v_mach)`` in :data:`THESIS_SCENARIOS`; any other
      pair ``16 + cantor(round(1000*v_task), round(1000*v_mach))`` (V values matter to 0.001);
    * ``cons_id``: 0 for ``"fc"``, 1 for ``"pc"``, 2 for ``"oc"``.

    ``consistency`` is ``"fc"``, ``"pc"`` or ``"oc"``; ``"pc"`` uses procedure ``pc`` (default
    ``"pc-half"``, the one closest to the thesis's numbers, decision A6.2). A ``pc-*`` name is also
    accepted as ``consistency`` and overrides ``pc``. The pc procedure is not part of the seed, so
    replicate ``rep`` of ``pc-half`` and ``pc-even`` start from the same generated matrix.
    The CVB variant is ``"auto"`` (machine-based only when ``v_task < v_mach``).
    """
    if consistency in _PC_KINDS:
        pc, consistency = consistency, "pc"
    if consistency not in _CONSISTENCY_IDS:
        raise UserError(
            f"must be 'fc', 'pc' or 'oc' (or one of {', '.join(_PC_KINDS)}), got {consistency!r}",
            field="consistency",
        )
    if pc not in _PC_KINDS:
        raise UserError(f"must be one of {', '.join(_PC_KINDS)}, got {pc!r}", field="pc")
    if isinstance(rep, bool) or not isinstance(rep, int | np.integer) or rep < 0:
        raise UserError(f"must be a whole number >= 0, got {rep!r}", field="rep")
    _check_size(n, m)
    _check_positive("v_task", v_task)
    _check_positive("v_mach", v_mach)
    seed = [_size_id(int(n), int(m)), _scenario_id(v_task, v_mach), _CONSISTENCY_IDS[consistency], int(rep)]
    etc = cvb(n, m, v_task, v_mach, mu_task, np.random.default_rng(seed))
    kind = {"fc": "fc", "oc": "oc", "pc": pc}[consistency]
    return make_consistent(etc, kind)


# --------------------------------------------------------------------------------------------------
# Statistics


def _is_consistent(block: np.ndarray) -> bool:
    """True if one machine order sorts every row of ``block`` ascending (ties allowed)."""
    if block.shape[0] == 0 or block.shape[1] < 2:
        return True
    order = np.argsort(block.sum(axis=0), kind="stable")
    return bool(np.all(np.diff(block[:, order], axis=1) >= 0))


def _cv(x: np.ndarray, axis: int | None) -> np.ndarray:
    """Coefficient of variation with the sample standard deviation (ddof=1); 0 for one value."""
    size = x.size if axis is None else x.shape[axis]
    if size < 2:
        return np.zeros(()) if axis is None else np.zeros(x.shape[1 - axis])
    return np.std(x, axis=axis, ddof=1) / np.mean(x, axis=axis)


def _guess_consistency(etc: np.ndarray) -> str:
    n, m = etc.shape
    if _is_consistent(etc):
        return "fc"
    if m >= 4 and _is_consistent(etc[:, 0::2]):
        return "pc-even"
    if n >= 4 and _is_consistent(etc[: n // 2]):
        return "pc-half"
    if n >= 4 and m >= 4 and _is_consistent(etc[0::2, 0::2]):
        return "pc-quarter"
    return "oc"


def etc_stats(etc: np.ndarray) -> dict:
    """Sanity statistics of an ETC matrix (decision A6.3). CVs use the sample std (ddof=1).

    Keys: ``n_tasks``, ``n_machines``, ``mean`` (≈ mu_task), ``min``, ``max``,
    ``row_cv_mean`` (mean CV within a row: machine heterogeneity, ≈ V_mach for task-based CVB),
    ``task_cv`` (CV of the row means: task heterogeneity, ≈ V_task for task-based CVB),
    ``col_cv_mean`` (mean CV within a column; ≈ sqrt((1+V_task²)(1+V_mach²)-1) for task-based CVB,
    ≈ V_task for machine-based), ``mach_cv`` (CV of the column means, ≈ V_mach for machine-based),
    and ``consistency``: a guess, the first of ``fc``, ``pc-even``, ``pc-half``, ``pc-quarter``
    whose sorted pattern the matrix shows (one machine order sorting every row of the relevant
    submatrix), else ``oc``. A random inconsistent matrix passes none of these tests except with
    negligible probability; tiny matrices (n < 4 or m < 4) are only told apart as ``fc``/``oc``.
    """
    arr = np.asarray(etc, dtype=np.float64)
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"an ETC matrix must be 2-D and non-empty, got shape {arr.shape}")
    return {
        "n_tasks": int(arr.shape[0]),
        "n_machines": int(arr.shape[1]),
        "mean": float(arr.mean()),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "row_cv_mean": float(np.mean(_cv(arr, axis=1))),
        "task_cv": float(_cv(arr.mean(axis=1), axis=None)),
        "col_cv_mean": float(np.mean(_cv(arr, axis=0))),
        "mach_cv": float(_cv(arr.mean(axis=0), axis=None)),
        "consistency": _guess_consistency(arr),
    }
