"""The helper's ``watch`` on one host (:mod:`skylease.runtime.leases.host_agent`): one long-lived SSH
session that reports payload ends and heartbeats, and carries every other command as a JSON line
answered by one line (a session of its own per command would cost the host's session set-up, the
SSH user's login shell and a Python start each: docs/performance.md).

:class:`WatchSession` starts it and speaks its protocol; it has no thread: its owner
(:class:`~skylease.runtime.leases.host_nodes.HostNodes`) reads it when :meth:`WatchSession.fileno`
is readable, and other threads :meth:`WatchSession.call` commands meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skylease.runtime.leases.ssh import SshConnection, SshError

__all__ = ["HostState", "WatchSession"]


@dataclass(frozen=True)
class HostState:
    """Whether a host answers (its watch's heartbeats arrive), when it last did (Unix time, None:
    never), and why it does not."""

    up: bool
    last_contact: float | None
    reason: str | None = None


class WatchSession:
    """The watch started on ``conn``'s host with the command line ``argv``. ``heard``: when its
    last line came (monotonic; its start at first)."""

    def __init__(self, conn: SshConnection, argv: Sequence[str]) -> None:
        self.conn = conn
        self.proc = conn.stream(argv)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.heard = time.monotonic()
        self._buf = b""
        self._lock = threading.Lock()
        self._rid = 0
        self._waiting: dict[int, tuple[threading.Event, dict[str, Any] | None]] = {}  # id -> (done, answer)
        self._closed = False

    def fileno(self) -> int:
        return self.proc.stdout.fileno()  # type: ignore[union-attr]

    def read(self) -> list[dict[str, Any]] | None:
        """What the watch printed since the last call, answers aside (they go to their callers):
        beats, ends, errors; a line that is not JSON (a login script's noise, say) as an error. None
        when the session has ended."""
        try:
            chunk = self.proc.stdout.read(65536)  # type: ignore[union-attr]
        except BlockingIOError:
            return []
        if chunk is None:  # (an unbuffered pipe in non-blocking mode: nothing to read yet)
            return []
        if not chunk:
            return None
        self.heard = time.monotonic()
        self._buf += chunk
        out = []
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"error": line[:200].decode(errors="replace")}
            if not isinstance(msg, dict):
                msg = {"error": msg}
            if "id" in msg:
                with self._lock:
                    waiting = self._waiting.get(msg["id"])
                    if waiting is not None:
                        self._waiting[msg["id"]] = (waiting[0], msg)
                if waiting is not None:
                    waiting[0].set()
            else:
                out.append(msg)
        return out

    def watch(self, pid: int, ticks: int) -> None:
        """Ask the watch to report the end of the payload whose leader is ``pid`` (a session that has
        ended is told nothing: its successor is told every payload again)."""
        with self._lock, contextlib.suppress(OSError, ValueError):
            self.proc.stdin.write(json.dumps({"watch": [pid, ticks]}).encode() + b"\n")  # type: ignore[union-attr]

    def send(self, op: str, fields: dict[str, Any], done: threading.Event | None = None) -> int:
        """Send command ``op``; its request id. Its answer is kept for :meth:`answer` only when
        ``done`` is given, which is set when it comes or the session ends."""
        with self._lock:
            if self._closed:
                raise SshError("the watch session has ended", field=self.conn.target.label)
            self._rid += 1
            rid = self._rid
            if done is not None:
                self._waiting[rid] = (done, None)
            try:
                self.proc.stdin.write(json.dumps({"id": rid, "do": op, **fields}).encode() + b"\n")  # type: ignore[union-attr]
            except (OSError, ValueError):
                self._waiting.pop(rid, None)
                raise SshError("the watch session has ended", field=self.conn.target.label) from None
        return rid

    def call(self, op: str, timeout: float, **fields: Any) -> dict[str, Any]:
        """Run command ``op`` on the host and wait for its answer (never from the thread that reads
        the session). :class:`SshError` when it fails, the session ends or no answer comes in time."""
        done = threading.Event()
        rid = self.send(op, fields, done)
        done.wait(timeout)
        with self._lock:
            answer = self._waiting.pop(rid, (None, None))[1]
        label = self.conn.target.label
        if answer is None:
            why = "the watch session has ended" if self._closed else f"no answer within {timeout:g} s"
            raise SshError(f"{op}: {why}", field=label)
        if "error" in answer:
            raise SshError(f"the helper's {op} failed: {answer['error']}", field=label)
        return answer["answer"]

    def close(self, kill: bool = False) -> str:
        """End the session (closing its input ends the watch; ``kill``: its ssh at once, the host
        not answering) and fail the calls waiting for an answer; ssh's last word."""
        with self._lock:
            self._closed = True
            for done, _ in self._waiting.values():
                done.set()
        proc = self.proc
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()  # type: ignore[union-attr]
        if kill and proc.poll() is None:
            proc.kill()
        try:
            proc.wait(2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = b""
        with contextlib.suppress(OSError, ValueError):
            err = proc.stderr.read() or b""  # type: ignore[union-attr]
        for fh in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                fh.close()  # type: ignore[union-attr]
        return self.conn.error(err, "the session ended").message
