"""A saved VM's state file (and a disk guest's overlay) carried from one SSH host to another (issue
38's cold migration; docs/decisions/vm-payloads.md, "Migration of VM leases between hosts").

The files go through this machine over the two hosts' SSH connections (hosts need not reach each
other, nor trust each other's keys): ``cat`` of each file on the source host, written by ``cat`` into
a ``.part`` file on the destination host; only when every byte of every file has come and the sizes
agree are they renamed there (the state file last: its presence says a guest is saved there), then
the source's files removed (the guest has moved). Any failure or a cancel removes the ``.part``
files (and what was renamed of the set): the destination has all the files or none, and the source
keeps its own. The writes are paced to fill the window the schedule reserved for the migration
(never faster), all files' bytes together, as image transfers are
(:mod:`~skylease.runtime.leases.copies`).
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence

from skylease.runtime.leases.ssh import SshConnection

__all__ = ["StateCarry"]

_CHUNK = 1 << 20


class StateCarry:
    """``src_path`` on ``src``'s host to ``dst_path`` on ``dst``'s, in a thread, paced to take
    ``seconds`` (from now), with the files of ``also`` (source path, destination path) that the
    source has (a disk guest's overlay: carried when it is there). ``owner``: ``[uid, gid]`` the
    destination's folders and files are given (the payload user's), or None. :attr:`done` once all
    are in place, :attr:`error` why not; :attr:`carried`, the source paths it carries."""

    def __init__(self, src: SshConnection, src_path: str, dst: SshConnection, dst_path: str, seconds: float,
                 *, owner: list[int] | None = None, also: Sequence[tuple[str, str]] = (),
                 timeout_s: float = 120.0) -> None:
        self.src, self.dst, self.src_path, self.dst_path = src, dst, src_path, dst_path
        self.seconds, self.owner, self.timeout_s = max(0.0, seconds), owner, timeout_s
        self.also = [(str(a), str(b)) for a, b in also]
        self.carried: list[str] = []
        self.done = False
        self.error: str | None = None
        self.size = 0  # (bytes carried, all files)
        self.took_s = 0.0
        self.started_at = time.time()  # (Unix time: the carry is recorded beside its window)
        self.to_node = -1  # (the node it carries to: its owner's note)
        self._cancel = threading.Event()
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._run, name="skylease-state-carry", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it has ended (done or failed) within ``timeout`` seconds."""
        return self._ended.wait(timeout)

    def cancel(self) -> None:
        self._cancel.set()
        self._ended.wait()

    def _run(self) -> None:
        t0 = time.monotonic()
        try:
            self.error = self._carry(t0)
            self.done = self.error is None
        except Exception as exc:  # (reported as the carry's failure, not a crash of its thread)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.took_s = time.monotonic() - t0
            if not self.done:
                with contextlib.suppress(Exception):
                    self.dst.run(["rm", "-f", *(d + ".part" for _, d in [*self.also, (None, self.dst_path)])],
                                 timeout=10)
            self._ended.set()

    def _sizes(self) -> tuple[list[tuple[str, str, int]], str | None]:
        """The files to carry with their sizes (``also`` ones the source has, the state file last), or
        why not."""
        others = " ".join(shlex.quote(a) for a, _ in self.also)
        script = (f"stat -c %s -- {shlex.quote(self.src_path)} || exit 1; for f in {others}; do "
                  'if test -e "$f"; then stat -c %s -- "$f"; else echo -; fi; done')
        code, out, err = self.src.run(["sh", "-c", script], timeout=10)
        if code != 0:
            return [], f"{self.src.target.label}: {self.src_path}: {err.decode(errors='replace').strip()}"
        first, *rest = out.decode().split()
        files = [(a, b, int(n)) for (a, b), n in zip(self.also, rest, strict=True) if n != "-"]
        return [*files, (self.src_path, self.dst_path, int(first))], None

    def _carry(self, t0: float) -> str | None:
        files, why = self._sizes()
        if why is not None:
            return why
        total = sum(n for _, _, n in files)
        for src_path, dst_path, size in files:
            if (why := self._send(src_path, dst_path, size, total, t0)) is not None:
                return why
        # (all here: renamed in order, the state file last; a failure takes back what was renamed)
        moves = " && ".join(f"mv -f {shlex.quote(d + '.part')} {shlex.quote(d)}" for _, d, _ in files)
        undo = " ".join(shlex.quote(d) for _, d, _ in files[:-1])
        code, _, err = self.dst.run(["sh", "-c", f"{moves} || {{ rm -f {undo} ; exit 1; }}"], timeout=10)
        if code != 0:
            why = err.decode(errors="replace").strip()
            return f"{self.dst.target.label}: renaming {self.dst_path} failed: {why}"
        self.carried = [s for s, _, _ in files]
        # (moved, not copied: the guest resumes from the destination's files only)
        self.src.run(["rm", "-f", *self.carried], timeout=10)
        return None

    def _send(self, src_path: str, dst_path: str, size: int, total: int, t0: float) -> str | None:
        """One file into ``dst_path.part``, its writes paced as the ``size`` bytes after the
        :attr:`size` carried before it of ``total``; why it failed, or None."""
        folder = dst_path.rsplit("/", 1)[0]
        part = shlex.quote(dst_path + ".part")
        own = "" if self.owner is None else (
            f"chown {int(self.owner[0])}:{int(self.owner[1])} {shlex.quote(folder)} "
            f"{shlex.quote(folder.rsplit('/', 1)[0])} {part} && ")
        write = (f"mkdir -p -m 0700 {shlex.quote(folder)} && cat > {part} && {own}"
                 f"test $(stat -c %s {part}) = {size}")
        reader = subprocess.Popen(self.src.argv(["cat", src_path]), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        writer = subprocess.Popen(self.dst.argv(["sh", "-c", write]), stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert reader.stdout is not None and writer.stdin is not None
            while chunk := reader.stdout.read(_CHUNK):
                if self._cancel.is_set():
                    return "cancelled"
                writer.stdin.write(chunk)
                self.size += len(chunk)
                # (paced: byte ``size`` of all is due at its share of the window, never before)
                due = t0 + self.seconds * self.size / max(1, total)
                while (wait := due - time.monotonic()) > 0:
                    if self._cancel.wait(min(wait, 0.2)):
                        return "cancelled"
            writer.stdin.close()
            if reader.wait(self.timeout_s) != 0:
                return f"{self.src.target.label}: reading {src_path} failed"
            if writer.wait(self.timeout_s) != 0:
                why = writer.stderr.read().decode(errors="replace").strip() if writer.stderr else ""
                return f"{self.dst.target.label}: writing {dst_path} failed: {why or 'short'}"
            return None
        finally:
            for proc in (reader, writer):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                for stream in (proc.stdout, proc.stdin, proc.stderr):
                    if stream is not None:
                        with contextlib.suppress(OSError):
                            stream.close()
