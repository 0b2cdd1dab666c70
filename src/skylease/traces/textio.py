"""Reading trace files: plain or gzipped, with one-line errors that name the file (and line)."""

from __future__ import annotations

import gzip
from pathlib import Path

from skylease.model.errors import UserError


def read_bytes(path: Path) -> bytes:
    """The whole file (gunzipped if the name ends in .gz), or a UserError naming it."""
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError("file not found", file=path) from None
    except IsADirectoryError:
        raise UserError("is a directory, not a file", file=path) from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"cannot read file: {' '.join(reason.split())}", file=path) from None


def read_text(path: Path) -> str:
    """The whole file as UTF-8 text (a leading byte-order mark dropped), or a UserError naming it."""
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UserError("not a text file (invalid UTF-8)", file=path, line=line) from None


def read_json(path: Path) -> object:
    """The parsed JSON document of a (possibly gzipped) file, or a UserError naming file and line."""
    import json

    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON: {exc.msg}", file=path, line=exc.lineno) from None
