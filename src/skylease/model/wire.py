"""What clients send the services (JSON bodies, request files): text without control characters,
whole numbers as JSON Schema has them.

A NUL cannot be stored by PostgreSQL (SQLite can), cannot be passed to a process, and the other
control characters (C0, DEL and C1) have no place in a name or a note; refusing them all, the
same way on every database, is the rule of docs/decisions/serve-request-bodies.md. Two kinds:

- a **line** (names, notes, states, hosts): no control character at all;
- a **text** (a command, a task's label, a stderr tail): tab, line feed and carriage return are
  allowed (a shell command may span lines), every other control character is refused.

Both also refuse a lone surrogate (``"\\ud800"`` in JSON): it is not Unicode text, and no database
stores it. :func:`line` and :func:`text` are pydantic string types that do this, with the same rule
in their JSON schema (a ``pattern``, so the OpenAPI document says it); :func:`clean` replaces what
would be refused, for a client that must send text it did not write (a task's stderr).

Numbers are strict (a string or a boolean is not a number: the models using these are validated in
pydantic's strict mode), and :func:`whole` is a whole number as JSON Schema reads one: ``2`` or
``2.0``, never ``2.5``, ``"2"`` or ``true``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

__all__ = ["LINE_PATTERN", "TEXT_PATTERN", "clean", "control_problem", "line", "text", "whole"]

#: JSON-schema (ECMA-262) and Python patterns of a line and of a text.
LINE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
TEXT_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*$"
_IN_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def control_problem(value: str, *, lines: bool = False) -> str | None:
    """What is wrong with ``value`` (``lines``: a text, where tab, LF and CR are allowed), or None."""
    m = (_IN_TEXT if lines else _IN_LINE).search(value)
    if m is None:
        return None
    ch = m.group()
    if "\ud800" <= ch <= "\udfff":
        return f"must be Unicode text: a lone surrogate U+{ord(ch):04X} at character {m.start() + 1}"
    allowed = " (tab, line feed and carriage return are the ones allowed)" if lines else ""
    return f"must not contain control characters: U+{ord(ch):04X} at character {m.start() + 1}{allowed}"


def clean(value: str, *, lines: bool = False) -> str:
    """``value`` with every character :func:`control_problem` would refuse replaced by U+FFFD."""
    return (_IN_TEXT if lines else _IN_LINE).sub("\ufffd", value)


def _check(lines: bool) -> AfterValidator:
    def check(value: str) -> str:
        if (problem := control_problem(value, lines=lines)) is not None:
            raise ValueError(problem)
        return value
    return AfterValidator(check)


def line(most: int, least: int = 0) -> Any:
    """A string of ``least`` to ``most`` characters without control characters."""
    schema = {"pattern": LINE_PATTERN}
    return Annotated[str, Field(min_length=least, max_length=most, json_schema_extra=schema), _check(False)]


def text(most: int, least: int = 0) -> Any:
    """A string of ``least`` to ``most`` characters whose only control characters are tab, LF, CR."""
    schema = {"pattern": TEXT_PATTERN}
    return Annotated[str, Field(min_length=least, max_length=most, json_schema_extra=schema), _check(True)]


def _integral(value: Any) -> Any:
    # JSON Schema's integer is a number without a fractional part: 2.0 is one (strict int is not)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def whole(ge: int | None = None, le: int | None = None, *, gt: int | None = None) -> Any:
    """A whole number within the bounds: an int, or a float without fractional part (``2.0``)."""
    return Annotated[int, Field(ge=ge, le=le, gt=gt), BeforeValidator(_integral)]
