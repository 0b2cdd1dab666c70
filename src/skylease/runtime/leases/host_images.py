"""Image transfers to a host reached over SSH: a cached image is whole or absent, as on this machine
(:mod:`~skylease.runtime.leases.copies`; docs/decisions/ssh-enactment.md).

:class:`HostImageCopy` sends an image file from the server's repository (or, when the repository has no such
file, a stand-in of zeros of its size, made on the host: no byte crosses, the window still passes)
to one host, once, through a session of its own on the host's multiplexed connection that runs the
helper's ``receive`` (:mod:`~skylease.runtime.leases.host_agent`). The server paces its writes to
fill the window the schedule reserved (never faster); the helper writes what arrives into a
temporary file in each destination node's cache on the host and renames them only when the
server's trailer (sent when the window is over) names the SHA-256 of what came. A cancel, a failure
or a dropped connection ends the stream without that trailer: the helper removes its files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from skylease.runtime.leases.copies import PacedCopy
from skylease.runtime.leases.local import _IMAGE_NAME
from skylease.runtime.leases.site import Site
from skylease.runtime.leases.ssh import SSH_FAILED, SshConnection

__all__ = ["HostImageCopy", "cache_dir", "check_image", "image_source"]

_MB = 2**20


def check_image(image: str) -> None:
    """ValueError unless ``image`` is an image name (the local enactment's rule)."""
    if not _IMAGE_NAME.match(image):
        raise ValueError(f"{image!r} is not an image name (letters, digits, . _ + -; no leading dot)")


def cache_dir(remote_dir: str, node: str) -> str:
    """``<remote_dir>/nodes/<node>/cache``: a node's image cache on its host (as
    ``<data>/nodes/<node>/cache`` on this machine; the helper's ``receive`` and ``cache`` agree)."""
    return f"{remote_dir}/nodes/{node}/cache"


def image_source(repository: Path | None, image: str, size_mb: int) -> tuple[Path | None, int]:
    """What a copy of ``image`` sends: the repository's file and its size in bytes, or (no such file,
    or no repository) None and ``size_mb`` MB of zeros (as the local enactment's stand-in)."""
    source = repository / image if repository is not None and (repository / image).is_file() else None
    return source, source.stat().st_size if source is not None else max(0, size_mb) * _MB


class HostImageCopy(PacedCopy):
    """An image transfer under way to the nodes of one host (:meth:`HostNodes.copy_image`): the same
    meaning and attributes as :class:`~skylease.runtime.leases.copies.ImageCopy` (``done``,
    :meth:`wait`, :meth:`cancel`, ``error``, ``image``, ``paths``: here the files on the host).
    ``argv`` is the helper's ``receive`` command line, run on ``conn``'s host; ``refused``: a reason
    to fail at once (the host is not answering) without trying."""

    def __init__(self, conn: SshConnection, argv: Sequence[str], image: str, source: Path | None,
                 size_bytes: int, paths: list[str], seconds: float, *, timeout_s: float = 30.0,
                 refused: str | None = None) -> None:
        super().__init__(image, source, size_bytes, paths, seconds)
        self.conn = conn
        self.argv = list(argv)
        self.timeout_s = timeout_s
        self.error = refused  # why it did not complete
        self.sha256: str | None = None  # of what was sent, once done
        self._proc: subprocess.Popen | None = None
        if refused is not None:
            self._ended.set()
            return
        self._thread = threading.Thread(target=self._run, name=f"skylease-copy-{image}", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, conn: SshConnection, helper: Callable[..., list[str]], site: Site, remote_dir: str,
              image: str, size_mb: int, nodes: Sequence[int], seconds: float, *, timeout_s: float = 30.0,
              refused: str | None = None, group: int | None = None) -> HostImageCopy:
        """Copy ``<site.repository>/<image>`` (without such a file, or a repository: a stand-in of
        ``size_mb`` MB of zeros, a sparse file made on the host, as locally) into the cache of each
        of the site's ``nodes`` on ``conn``'s host, paced to take ``seconds`` (never less).
        ``helper(*args)`` is the command line that runs the helper with ``args`` on the host. Each
        copy is mode 0600, or 0640 with group ``group`` (the host's payload user's: a confined payload
        reads it, cannot change it), as on this machine."""
        source, size = image_source(site.repository, image, size_mb)
        names = [site.nodes[k].name for k in nodes]
        options = ["--zeros"] if source is None else []
        options += [] if group is None else ["--group", str(int(group))]
        argv = helper("receive", remote_dir, image, str(size), *names, *options)
        return cls(conn, argv, image, source, size, [f"{cache_dir(remote_dir, n)}/{image}" for n in names],
                   max(0.0, seconds),
                   timeout_s=timeout_s, refused=refused)

    def cancel(self) -> None:
        """Stop it and wait until the host has removed its temporary files (a host that does not
        answer within ``timeout_s``: its ssh is killed, and the helper, its channel gone, removes
        them when it notices). No destination gets the image unless the trailer was sent already."""
        self._cancel.set()
        if not self._ended.wait(self.timeout_s):
            proc = self._proc
            if proc is not None:
                with contextlib.suppress(OSError):
                    proc.kill()
            self._ended.wait()

    def _run(self) -> None:
        try:
            if not self.paths:  # no destination (as locally: nothing is written, the window passes)
                self._pace(self.size_bytes)
                self._done = True
                return
            self._proc = proc = self.conn.stream(self.argv)
            try:
                trailer = self._send(proc)
            except InterruptedError:
                self._finish(proc, b"")
                raise
            except BrokenPipeError:  # the helper (or ssh) ended early: its answer says why
                trailer = b""
            self._finish(proc, trailer)
        except InterruptedError:
            self.error = "cancelled"
        except OSError as exc:
            self.error = f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc)
        finally:
            self._ended.set()

    def _send(self, proc: subprocess.Popen) -> bytes:
        """Write the image to the helper at the window's pace; the trailer that commits it."""
        assert proc.stdin is not None
        with contextlib.suppress(OSError):  # fewer, larger writes to ssh (a Linux pipe's 64 KiB: 1 MiB)
            fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, _MB)
        chunk = min(4 * _MB, max(64 * 1024, self.size_bytes // 64))
        digest, sent = hashlib.sha256(), 0
        if self.source is None:  # a stand-in: made on the host, committed when its window is over
            self._pace(self.size_bytes)
            return json.dumps({"commit": "zeros"}).encode()
        with open(self.source, "rb") as src:
            while sent < self.size_bytes:
                self._pace(sent)
                n = min(chunk, self.size_bytes - sent)
                data = src.read(n)
                if not data:
                    raise OSError(f"{self.source} got shorter while it was copied")
                digest.update(data)
                view = memoryview(data)
                while view:
                    view = view[proc.stdin.write(view):]
                sent += len(data)
        self._pace(self.size_bytes)
        self.sha256 = digest.hexdigest()
        return json.dumps({"commit": self.sha256}).encode()

    def _finish(self, proc: subprocess.Popen, trailer: bytes) -> None:
        """Send ``trailer`` (empty: the copy is abandoned), end the stream, read the helper's answer."""
        try:
            out, err = proc.communicate(trailer, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            self.error = f"no answer from {self.conn.target.label} within {self.timeout_s:g} s"
            return
        except BrokenPipeError:
            out, err = proc.communicate()
        if proc.returncode == SSH_FAILED:
            self.error = str(self.conn.error(err))  # (user@address:port: what ssh said)
            return
        try:
            answer = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            answer = {"error": f"the helper's receive said {out[-200:]!r}"}
        if proc.returncode == 0 and trailer and "error" not in answer:
            self._done = True
        else:
            self.error = f"{self.conn.target.label}: {answer.get('error', 'the copy failed')}"
