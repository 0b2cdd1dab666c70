"""Small helpers for reproduction reports: Markdown tables and figure files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from skylease.experiments.store import atomic_write_bytes_via, atomic_write_text


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
    head = list(headers) if headers is not None else cols
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(cols)]
    for row in df[cols].itertuples(index=False):
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
