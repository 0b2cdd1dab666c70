"""Crash-safe, append-only store of finished campaign cells (one JSON line per cell).

Each finished cell is appended with a single ``os.write`` of one line to a file opened with
``O_APPEND``, so a killed driver leaves at most one torn last line; it is cut off before the next
append and ignored when reading. Re-running a campaign skips every cell already in the store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError

CELLS_FILE = "cells.jsonl"
META_FILE = "campaign.json"


def out_folder(path: str | Path, field: str = "--out") -> Path:
    """Create the output folder ``path`` (and its parents); a user error if it cannot be one (a
    file of that name, no permission), never a traceback."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the output folder: {exc.strerror or exc}", file=path,
                        field=field) from None
    return path


class CellStore:
    """The finished cells of one campaign output folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / CELLS_FILE

    def open(self, meta: dict[str, Any]) -> None:
        """Create the folder or check that it holds the same campaign, and repair a torn tail."""
        out_folder(self.folder)
        meta_path = self.folder / META_FILE
        if meta_path.exists():
            try:
                old = json.loads(meta_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise UserError(f"unreadable campaign metadata ({exc.msg})", file=meta_path) from None
            if old.get("function") != meta.get("function"):
                raise UserError(
                    f"folder holds results of campaign {old.get('function')!r}, not "
                    f"{meta.get('function')!r}; choose another output folder",
                    file=self.folder,
                )
        else:
            atomic_write_text(meta_path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
        self._cut_torn_tail()

    def _cut_torn_tail(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every complete record, in the order written (a torn last line is skipped)."""
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue

    def done_keys(self) -> set[str]:
        return {r["key"] for r in self.records() if r.get("ok")}

    def append(self, record: dict[str, Any]) -> None:
        self.append_many([record])

    def append_many(self, records: list[dict[str, Any]]) -> None:
        """Append records in one write (a batch of cells): a kill mid-write tears at most the
        last line, which the next open cuts off."""
        if not records:
            return
        data = b"".join((json.dumps(r, separators=(",", ":"), default=_jsonable) + "\n").encode()
                        for r in records)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while data:  # a write may be short for a large batch
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)


def _jsonable(x: Any) -> Any:
    """numpy scalars and arrays in result rows become plain JSON values."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"cannot store a {type(x).__name__} in a result row")


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file so that readers see the old or the new content, never half of it."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def atomic_write_bytes_via(path: Path, writer: Any) -> None:
    """Call ``writer(tmp_path)`` then rename the result onto ``path``."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        writer(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
