"""The one exception type for user mistakes: the CLI prints it as one line and exits 2."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """A mistake in the user's input (file, option, request), never a bug in skylease.

    Rendered as ``file:line: field: message`` with the parts that are known.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = self.file if self.line is None else f"{self.file}:{self.line}"
            where += ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"
