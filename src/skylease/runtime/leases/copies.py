"""Image transfers of the local enactment: a cached image is whole or absent.

:class:`ImageCopy` copies an image file (or writes a sparse stand-in of its size) into one or more
node caches at the pace that fills the window the schedule reserved (never faster), under
temporary names renamed when the window is over. An image may be a folder (a VM's kernel and
initrd: docs/decisions/vm-payloads.md): its files are copied into a temporary folder, paced as one
stream of their sizes, and the folder is renamed at the end: a cached folder image too is whole or
absent.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import BinaryIO

__all__ = ["ImageCopy", "PacedCopy", "image_files", "image_size"]

_MB = 2**20


def image_files(source: Path) -> list[Path]:
    """The files an image is made of: itself, or a folder image's regular files (by name)."""
    if source.is_dir():
        return sorted(p for p in source.iterdir() if p.is_file() and not p.name.startswith("."))
    return [source]


def image_size(source: Path) -> int:
    """An image's size in bytes (a folder image's: the sum of its files')."""
    return sum(p.stat().st_size for p in image_files(source))


class _Stamped(threading.Event):
    """An event that keeps the Unix time it was set at."""

    at: float | None = None

    def set(self) -> None:
        if self.at is None:
            self.at = time.time()
        super().set()


class PacedCopy:
    """What every image transfer under way has (here, and to a host: host_images.HostImageCopy): the
    image, its ``source`` (None: a stand-in of zeros), its size, the destination ``paths``, the
    window of ``seconds`` it is paced to fill (from now), and whether it is ``done``, or why not
    (``error``). A subclass starts its own thread, which sets ``_done`` and then ``_ended``."""

    def __init__(self, image: str, source: Path | None, size_bytes: int, paths: list, seconds: float) -> None:
        self.image = image
        self.source = source  # None: a stand-in of zeros
        self.size_bytes = size_bytes
        self.paths = paths
        self.seconds = seconds
        self.error: str | None = None  # why it did not complete
        self._t0 = time.monotonic()
        self._done = False
        self._cancel = threading.Event()
        self._ended = _Stamped()
        self.started_at = time.time()

    @property
    def ended_at(self) -> float | None:
        """The Unix time it ended (completed, failed or cancelled), None while it runs."""
        return self._ended.at

    @property
    def done(self) -> bool:
        """The image is in place, whole, on every destination node."""
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the copy has ended (completed, failed or cancelled) within ``timeout`` seconds."""
        return self._ended.wait(timeout)

    def cancel(self) -> None:
        """Stop it; no destination gets the image unless it was being renamed into place already."""
        self._cancel.set()
        self._ended.wait()

    def _pace(self, written: int) -> None:
        """Wait until ``written`` bytes are due (the copy never runs ahead of its window)."""
        due = self._t0 + self.seconds * (written / self.size_bytes if self.size_bytes else 1.0)
        if self._cancel.wait(max(0.0, due - time.monotonic())):
            raise InterruptedError


class ImageCopy(PacedCopy):
    """An image transfer under way (:meth:`LocalNodes.copy_image`). Each copy is mode 0600, or 0640
    with group ``group`` (the payload user's, so that a confined payload can read it, not change it)."""

    def __init__(self, image: str, source: Path | None, size_bytes: int, dests: list[Path],
                 seconds: float, group: int | None = None) -> None:
        super().__init__(image, source, size_bytes, dests, seconds)
        self.group = group
        self._thread = threading.Thread(target=self._run, name=f"skylease-copy-{image}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self.source is not None and self.source.is_dir():
            self._run_folder(self.source)
            return
        tmps = [p.with_name(f".{p.name}.{secrets.token_hex(4)}.part") for p in self.paths]
        files = []
        try:
            for t in tmps:
                t.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                files.append(self._open(t))
            if self.source is not None:
                chunk = min(4 * _MB, max(64 * 1024, self.size_bytes // 64))
                written = 0
                with open(self.source, "rb") as src:
                    while data := src.read(chunk):
                        self._pace(written)
                        for f in files:
                            f.write(data)
                        written += len(data)
            else:  # a stand-in: sparse, no disk blocks spent on zeros
                for f in files:
                    f.truncate(self.size_bytes)
            self._pace(self.size_bytes)
            for f in files:
                f.close()
            for t, p in zip(tmps, self.paths, strict=True):
                os.replace(t, p)
            self._done = True
        except OSError as exc:  # (InterruptedError among them: a cancel)
            self.error = _failure(exc)
        finally:
            for f in files:
                f.close()
            for t in tmps:
                with contextlib.suppress(FileNotFoundError):
                    t.unlink()
            self._ended.set()

    def _open(self, path: Path) -> BinaryIO:
        mode = 0o600 if self.group is None else 0o640
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        if self.group is not None:
            os.fchown(fd, -1, self.group)
        os.fchmod(fd, mode)  # (whatever the umask)
        return os.fdopen(fd, "wb")

    def _run_folder(self, source: Path) -> None:
        """A folder image: its files into a ``.part`` folder per destination, paced as one stream,
        each folder renamed into place at the end (one already there is replaced)."""
        tmps = [p.with_name(f".{p.name}.{secrets.token_hex(4)}.part") for p in self.paths]
        try:
            for t in tmps:
                t.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                t.mkdir(mode=0o700)
                if self.group is not None:
                    os.chown(t, -1, self.group)
                os.chmod(t, 0o700 if self.group is None else 0o750)
            chunk = min(4 * _MB, max(64 * 1024, self.size_bytes // 64))
            written = 0
            for item in image_files(source):
                files = [self._open(t / item.name) for t in tmps]
                try:
                    with open(item, "rb") as src:
                        while data := src.read(chunk):
                            self._pace(written)
                            for f in files:
                                f.write(data)
                            written += len(data)
                finally:
                    for f in files:
                        f.close()
            self._pace(self.size_bytes)
            for t, p in zip(tmps, self.paths, strict=True):
                if p.is_dir():
                    shutil.rmtree(p)
                os.replace(t, p)
            self._done = True
        except OSError as exc:  # (InterruptedError among them: a cancel)
            self.error = _failure(exc)
        finally:
            for t in tmps:
                shutil.rmtree(t, ignore_errors=True)
            self._ended.set()


def _failure(exc: OSError) -> str:
    """What a copy that failed says: ``cancelled``, or the system's reason and the file."""
    if isinstance(exc, InterruptedError):
        return "cancelled"
    return f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc)
