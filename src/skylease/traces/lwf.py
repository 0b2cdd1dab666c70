"""Lease workload files (LWF) of Haizea's experiments (spec 001 §8.2).

The plain-text format of ``lwf/injected/``: one advance reservation per line,
``reqTime startTime duration realDuration numNodes CPU mem disk vmImage vmImageSize`` (seconds,
MB; the image name may be quoted). :func:`read_plain_lwf` returns the rows as a DataFrame, or a
one-line error naming the file, line and field.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from skylease.model.errors import UserError
from skylease.traces.textio import read_text

__all__ = ["LWF_FIELDS", "read_plain_lwf"]

LWF_FIELDS = ("submit", "start", "duration", "real_duration", "nodes", "cpu", "memory", "disk", "image",
              "image_size")
_INT_FIELDS = tuple(f for f in LWF_FIELDS if f != "image")


def read_plain_lwf(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a plain-text LWF file (``#`` starts a comment)."""
    path = Path(path)
    rows = []
    for no, raw in enumerate(read_text(path).splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != len(LWF_FIELDS):
            raise UserError(f"expected {len(LWF_FIELDS)} fields ({' '.join(LWF_FIELDS)}), got {len(parts)}",
                            file=path, line=no)
        row: dict[str, object] = {}
        for name, text in zip(LWF_FIELDS, parts, strict=True):
            if name == "image":
                row[name] = text.strip("'\"")
                continue
            try:
                row[name] = int(text)
            except ValueError:
                raise UserError(f"{text!r} is not a whole number", file=path, line=no, field=name) from None
        if row["nodes"] < 1 or row["duration"] < 1:  # type: ignore[operator]
            bad = "nodes" if row["nodes"] < 1 else "duration"  # type: ignore[operator]
            raise UserError(f"must be >= 1, got {row[bad]}", file=path, line=no, field=bad)
        if not 0 < row["real_duration"] <= row["duration"]:  # type: ignore[operator]
            raise UserError(f"must be in 1..duration, got {row['real_duration']}", file=path, line=no,
                            field="real_duration")
        rows.append(row)
    return pd.DataFrame(rows, columns=list(LWF_FIELDS)).astype({f: "int64" for f in _INT_FIELDS})
