"""Generated and derived availability traces cached on disk, so each is built once per machine.

The SETI-like trace takes seconds and hundreds of MB to generate (30,300 renewal processes), and
a short simulation on it would otherwise pay that at every call. An entry is a folder of ``.npy``
files (no pickles; mapped read-only when read), the trace's node-major flat arrays
(:meth:`AvailabilityTrace.flat_intervals`: ``starts``, ``ends``, ``bounds``), and ``head.json``:
the key it was stored under, the trace's name, window, origin and meta, and each array's CRC-32C
(the ``crc32c`` package: the CPU's CRC instruction, 10x zlib's CRC-32 on the 58 MB of ``seti``).

* Folder: ``$SKYLEASE_CACHE_DIR``, else ``$XDG_CACHE_HOME/skylease``, else ``~/.cache/skylease``
  (the same rules as the data folder of :mod:`skylease.traces.datasets`); ``traces/`` under it.
  ``SKYLEASE_NO_CACHE=1`` turns the cache off (every trace is built, nothing is written).
* Key: the SHA-256 of the generator's name, its parameters (seed included; for a trace derived
  from a file, the file's SHA-256), skylease's version and :data:`FORMAT`. Bump :data:`FORMAT`
  when a generator's output changes without a version change.
* Written atomically: the entry is made in a temporary folder beside it, then renamed into place,
  so a reader finds a whole entry or none.
* Never trusted: an entry that cannot be read whole, whose arrays do not match their CRC-32C, that
  was stored under another key, or whose intervals break the rules of
  :class:`~skylease.model.availability.Availability`, is built again and replaced. A cache folder
  that cannot be written is not an error: the trace is then built at every call, as without a cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import crc32c
import numpy as np

from skylease.model.availability import AvailabilityTrace

__all__ = ["DIR_ENV", "FORMAT", "OFF_ENV", "cache_dir", "cached_trace", "entry_key", "entry_path",
           "file_digest"]

DIR_ENV = "SKYLEASE_CACHE_DIR"
OFF_ENV = "SKYLEASE_NO_CACHE"
#: Layout of an entry and of the keys; part of every key (2: CRC-32C instead of CRC-32).
FORMAT = 2


def cache_dir() -> Path | None:
    """The cache folder, or None when ``$SKYLEASE_NO_CACHE`` is set (to anything but ``0``)."""
    if os.environ.get(OFF_ENV, "").strip() not in ("", "0"):
        return None
    env = os.environ.get(DIR_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore a relative value
        return Path(xdg) / "skylease"
    return Path.home() / ".cache" / "skylease"


def entry_key(kind: str, params: Mapping[str, Any]) -> str:
    """The key of generator ``kind`` run with ``params`` by this skylease (JSON-able values)."""
    from skylease import __version__

    doc = {"kind": kind, "params": dict(params), "version": __version__, "format": FORMAT}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def entry_path(root: Path, kind: str, key: str) -> Path:
    return root / "traces" / f"{kind}-{key[:32]}"


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes: the part of a derived trace's key that names its source."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cached_trace(
    kind: str, params: Mapping[str, Any], build: Callable[[], AvailabilityTrace]
) -> AvailabilityTrace:
    """The trace ``build()`` returns, read from the cache when an intact entry for
    ``(kind, params)`` is there, else built and stored."""
    root = cache_dir()
    if root is None:
        return build()
    key = entry_key(kind, params)
    path = entry_path(root, kind, key)
    trace = _read(path, key)
    if trace is None:
        trace = build()
        _write(path, key, trace)
    return trace


#: The arrays of an entry, each ``NAME.npy`` in its folder.
_ARRAYS = ("starts", "ends", "bounds")


def _crc(a: np.ndarray) -> int:
    return crc32c.crc32c(memoryview(np.ascontiguousarray(a)).cast("B"))


def _read(path: Path, key: str) -> AvailabilityTrace | None:
    """The entry at ``path``, or None when it is missing or not a whole, valid entry for ``key``."""
    try:
        head = json.loads((path / "head.json").read_text(encoding="utf-8"))
        if head["key"] != key:
            return None
        arrays = {}
        for name in _ARRAYS:
            # .npy files mapped read-only, not copied (an .npz member is copied in 256 KB chunks:
            # three times slower; a copy of seti's 58 MB costs 0.02 s); each checked against the
            # CRC-32C stored beside it. Safe to map: no writer changes a file in place (an entry is
            # made in a new folder and renamed; a replaced one is unlinked, its pages stay mapped).
            a = np.load(path / f"{name}.npy", allow_pickle=False, mmap_mode="r")
            if _crc(a) != head["crc32c"][name]:
                return None
            arrays[name] = a
        origin = head["origin"]
        return AvailabilityTrace.from_flat(
            head["name"], arrays["starts"], arrays["ends"], arrays["bounds"], float(head["start"]),
            float(head["end"]), None if origin is None else float(origin), head["meta"],
        )
    except FileNotFoundError:
        return None
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        return None  # torn, truncated, foreign or tampered: rebuilt and replaced


def _write(path: Path, key: str, trace: AvailabilityTrace) -> None:
    arrays = dict(zip(_ARRAYS, trace.flat_intervals(), strict=True))
    try:
        head = json.dumps({"key": key, "name": trace.name, "start": trace.start, "end": trace.end,
                           "origin": trace.origin, "meta": dict(trace.meta),
                           "crc32c": {k: _crc(a) for k, a in arrays.items()}})
    except (TypeError, ValueError):
        return  # a meta that JSON cannot hold: not cached rather than stored changed
    tmp = old = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        for name, a in arrays.items():
            with open(tmp / f"{name}.npy", "wb") as f:
                np.save(f, a, allow_pickle=False)
                os.fsync(f.fileno())
        with open(tmp / "head.json", "w", encoding="utf-8") as f:
            f.write(head)
            os.fsync(f.fileno())
        if path.exists():  # an entry found unusable: moved aside first (a folder replaces no folder)
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
            os.replace(path, old / "entry")
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass  # read-only, full or raced cache folder: the trace is simply not cached this time
    finally:
        for leftover in (tmp, old):
            if leftover is not None:
                shutil.rmtree(leftover, ignore_errors=True)
