"""Small helpers for reproduction reports: Markdown tables and figure files."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skylease.experiments.store import atomic_write_bytes_via, atomic_write_text
from skylease.model.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

#: The figure formats every plot option writes, by file suffix.
FIGURE_FORMATS = ("png", "pdf", "svg")


def check_output(path: str | Path, field: str, *, formats: Sequence[str] | None = FIGURE_FORMATS) -> Path:
    """An output file's path, checked before any work (every plot or output-file option calls
    it): a known suffix (``formats``; None: any), in an existing folder this process can write
    in, and not itself a folder. Returns the path."""
    path = Path(path)
    if formats is not None and path.suffix.lower().lstrip(".") not in formats:
        kinds = ", ".join(f".{f}" for f in formats[:-1]) + f" or .{formats[-1]}"
        raise UserError(f"must be a {kinds} file, not {path.suffix or 'a name without suffix'!r}",
                        file=path, field=field)
    if path.is_dir():
        raise UserError("is a folder, not a file", file=path, field=field)
    folder = path.parent
    if not folder.is_dir():
        what = "not a folder" if folder.exists() else "no such folder"
        raise UserError(what, file=folder, field=field)
    try:  # the one sure test that a file can be made there (permissions, read-only mounts)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
    except OSError as exc:
        raise UserError(f"cannot write in this folder: {exc.strerror or exc}", file=folder,
                        field=field) from None
    os.close(fd)
    os.unlink(probe)
    return path


def fmt(x: Any, digits: int = 2) -> str:
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    if isinstance(x, float):
        if x != x:  # NaN
            return "–"
        return f"{x:,.{digits}f}"
    return str(x)


def md_table(df: pd.DataFrame, columns: Sequence[str] | None = None, digits: int = 2,
             headers: Sequence[str] | None = None) -> str:
    """A GitHub Markdown table of ``df`` (no extra dependency)."""
    cols = list(columns) if columns is not None else list(df.columns)
    return md_rows(df[cols].itertuples(index=False), list(headers) if headers is not None else cols, digits)


def md_rows(rows: Iterable[Sequence[Any]], headers: Sequence[str], digits: int = 2) -> str:
    """A GitHub Markdown table of plain rows (what :func:`md_table` does for a DataFrame)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(fmt(v, digits) for v in row) + " |")
    return "\n".join(lines)


def save_figure(fig: Any, path: Path) -> str:
    """Save a matplotlib figure atomically; returns the file name for the report."""
    fmt = path.suffix.lstrip(".") or "png"
    atomic_write_bytes_via(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight", format=fmt))
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path.name


def write_report(path: Path, text: str) -> None:
    atomic_write_text(path, text)
