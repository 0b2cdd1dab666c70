"""A saved VM's state file carried from one SSH host to another (issue 38's cold migration;
docs/decisions/vm-payloads.md, "Migration of VM leases between hosts").

The file goes through this machine over the two hosts' SSH connections (hosts need not reach each
other, nor trust each other's keys): ``cat`` of the file on the source host, written by ``cat`` into
a ``.part`` file on the destination host, renamed there only when every byte has come and the sizes
agree (then the source's file is removed: the state has moved); any failure or a cancel removes the
``.part`` file: the destination has the whole file or none, and the source keeps its own. The
writes are paced to fill the window the schedule reserved for the migration (never faster), as
image transfers are (:mod:`~skylease.runtime.leases.copies`).
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import threading
import time

from skylease.runtime.leases.ssh import SshConnection

__all__ = ["StateCarry"]

_CHUNK = 1 << 20


class StateCarry:
    """``src_path`` on ``src``'s host to ``dst_path`` on ``dst``'s, in a thread, paced to take
    ``seconds`` (from now). ``owner``: ``[uid, gid]`` the destination's folder and file are given
    (the payload user's), or None. :attr:`done` once the file is in place, :attr:`error` why not."""

    def __init__(self, src: SshConnection, src_path: str, dst: SshConnection, dst_path: str, seconds: float,
                 *, owner: list[int] | None = None, timeout_s: float = 120.0) -> None:
        self.src, self.dst, self.src_path, self.dst_path = src, dst, src_path, dst_path
        self.seconds, self.owner, self.timeout_s = max(0.0, seconds), owner, timeout_s
        self.done = False
        self.error: str | None = None
        self.size = 0
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
                    self.dst.run(["rm", "-f", self.dst_path + ".part"], timeout=10)
            self._ended.set()

    def _carry(self, t0: float) -> str | None:
        code, out, err = self.src.run(["stat", "-c", "%s", self.src_path], timeout=10)
        if code != 0:
            return f"{self.src.target.label}: {self.src_path}: {err.decode(errors='replace').strip()}"
        total = int(out)
        folder = self.dst_path.rsplit("/", 1)[0]
        part = shlex.quote(self.dst_path + ".part")
        own = "" if self.owner is None else (
            f"chown {int(self.owner[0])}:{int(self.owner[1])} {shlex.quote(folder)} "
            f"{shlex.quote(folder.rsplit('/', 1)[0])} {part} && ")
        write = (f"mkdir -p -m 0700 {shlex.quote(folder)} && cat > {part} && {own}"
                 f"test $(stat -c %s {part}) = {total} && mv -f {part} {shlex.quote(self.dst_path)}")
        reader = subprocess.Popen(self.src.argv(["cat", self.src_path]), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        writer = subprocess.Popen(self.dst.argv(["sh", "-c", write]), stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert reader.stdout is not None and writer.stdin is not None
            sent = 0
            while chunk := reader.stdout.read(_CHUNK):
                if self._cancel.is_set():
                    return "cancelled"
                writer.stdin.write(chunk)
                sent += len(chunk)
                # (paced: byte ``sent`` is due at its share of the window, never before)
                due = t0 + self.seconds * sent / max(1, total)
                while (wait := due - time.monotonic()) > 0:
                    if self._cancel.wait(min(wait, 0.2)):
                        return "cancelled"
            writer.stdin.close()
            self.size = sent
            if reader.wait(self.timeout_s) != 0:
                return f"{self.src.target.label}: reading {self.src_path} failed"
            if writer.wait(self.timeout_s) != 0:
                why = writer.stderr.read().decode(errors="replace").strip() if writer.stderr else ""
                return f"{self.dst.target.label}: writing {self.dst_path} failed: {why or 'short'}"
            # (moved, not copied: the guest resumes from the destination's file only)
            self.src.run(["rm", "-f", self.src_path], timeout=10)
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
