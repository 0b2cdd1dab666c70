"""Reading trace files: plain or gzipped, with one-line errors that name the file (and line)."""

from __future__ import annotations

from pathlib import Path

from skylease.model.errors import UserError

# The readers of whole files live in model/, the lowest layer, so that catalogs use them too; the
# trace readers import them from here.
from skylease.model.files import read_bytes, read_json, read_text, read_toml

__all__ = ["parse_number", "read_bytes", "read_csv_records", "read_json", "read_text", "read_toml"]

_NON_FINITE = frozenset({"nan", "inf", "infinity"})


def parse_number(path: Path, line: int, field: str, cell: str, *, integer: bool = False,
                 minimum: float | None = None, above: float | None = None,
                 maximum: float | None = None) -> float:
    """One CSV cell as a finite number (whole if ``integer``), >= ``minimum`` or > ``above``, and
    <= ``maximum``.

    A CSV number is plain: ``1_000`` and ``0x10`` are not numbers, ``nan`` and ``inf`` not finite.
    """
    import math

    s = cell.strip()
    if not s:
        raise UserError("missing value", file=path, line=line, field=field)
    shown = repr(s if len(s) <= 40 else s[:37] + "...")
    if s.lstrip("+-").lower() in _NON_FINITE:
        raise UserError(f"value {shown} is not a finite number", file=path, line=line, field=field)
    try:
        if "_" in s:  # float() accepts 1_000; a CSV number does not
            raise ValueError(s)
        value = float(s)
    except ValueError:
        raise UserError(f"value {shown} is not a number", file=path, line=line, field=field) from None
    if not math.isfinite(value):
        raise UserError(f"value {shown} is not a finite number", file=path, line=line, field=field)
    if integer and value != int(value):
        raise UserError(f"value {shown} is not a whole number", file=path, line=line, field=field)
    if minimum is not None and value < minimum:
        raise UserError(f"value {shown} is below the minimum {minimum:g}", file=path, line=line, field=field)
    if above is not None and value <= above:
        raise UserError(f"value {shown} must be > {above:g}", file=path, line=line, field=field)
    if maximum is not None and value > maximum:
        raise UserError(f"value {shown} is above the maximum {maximum:g}", file=path, line=line, field=field)
    return value


def read_csv_records(path: Path, required: tuple[str, ...], optional: tuple[str, ...] = ()
                     ) -> list[tuple[int, dict[str, str]]]:
    """Data rows of a CSV file with a header, as (line number, {column: cell}).

    Blank lines and lines starting with ``#`` are skipped. Column names are matched
    case-insensitively; a missing required column, an unknown column (a typo would otherwise be
    ignored silently) or a row of the wrong width is a UserError naming file, line and field.
    """
    import csv

    rows = [(n, line) for n, line in enumerate(read_text(path).splitlines(), start=1)
            if line.strip() and not line.lstrip().startswith("#")]
    if not rows:
        raise UserError(f"empty file: expected a header line with {', '.join(required)}", file=path, line=1)
    head_line, head = rows[0]
    header = [c.strip().lower() for c in next(csv.reader([head]))]
    known = set(required) | set(optional)
    for name in header:
        if name not in known:
            raise UserError(f"unknown column; columns are {', '.join((*required, *optional))}",
                            file=path, line=head_line, field=name or "(empty)")
    for name in required:
        if name not in header:
            raise UserError("missing column in the header", file=path, line=head_line, field=name)
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise UserError("column given twice", file=path, line=head_line, field=dup)
    if len(rows) == 1:
        raise UserError("no data rows after the header", file=path, line=head_line)
    out = []
    for number, line in rows[1:]:
        cells = next(csv.reader([line]))
        if len(cells) != len(header):
            raise UserError(f"row has {len(cells)} field(s), the header has {len(header)}", file=path,
                            line=number)
        out.append((number, dict(zip(header, (c.strip() for c in cells), strict=True))))
    return out
