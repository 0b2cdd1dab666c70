"""How the CLI reads and prints times and money, and the tables it prints (docs/cli.md says the
rules; every command module uses these, so that one number reads the same everywhere). The pure
functions live in :mod:`skylease.model.units`, where the reports use them too."""

from __future__ import annotations

from typing import Any

from skylease.model.units import (
    CURRENCY,
    DURATION_FORMS,
    clock,
    duration,
    money,
    number,
    parse_duration,
)

__all__ = ["CURRENCY", "DURATION_FORMS", "clock", "duration", "duration_option", "money", "number",
           "parse_duration", "table"]


def duration_option(*, positive: bool = False, most: float | None = None):
    """A typer ``parser=`` for a duration option (:func:`parse_duration`), with its bounds; a wrong
    value is a usage error naming the option (one line, exit 2)."""

    def parse(text: str | float) -> float:
        import typer

        try:
            seconds = parse_duration(text)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
        if positive and seconds <= 0:
            raise typer.BadParameter(f"must be a duration > 0, got {text!r}")
        if most is not None and seconds > most:
            raise typer.BadParameter(f"at most {duration(most)}, got {text!r}")
        return seconds

    return parse


def table(*columns: str, title: str | None = None, **kwargs: Any):
    """A rich table whose cells never lose text: the first column (names) is kept whole while the
    others can wrap, and a cell still too long folds onto the next line instead of being cut to
    ``batch-ac…`` on a narrow terminal."""
    from rich.table import Table

    t = Table(title=title, **kwargs)
    for i, c in enumerate(columns):
        t.add_column(c, overflow="fold", no_wrap=i == 0)
    return t
