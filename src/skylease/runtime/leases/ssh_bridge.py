"""A UNIX socket on a host, reached from this machine through the host's SSH connection.

A QEMU guest on a host listens for QMP on a UNIX socket there (docs/decisions/vm-payloads.md). The
server reaches it without OpenSSH's socket forwarding (``-L local:remote``), which sites often turn
off (``AllowStreamLocalForwarding no``; the test site does): one SSH session on the host's master
connection runs a small bridge with the host's ``python3`` (the standard library only), which copies
its standard input to the socket and the socket to its standard output; this side of the session is
one end of a local socket pair, whose other end QMP's client library uses as its connection. The
bridge is no protocol of its own: bytes in, bytes out, until either side closes.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess

from skylease.runtime.leases.ssh import SshConnection, SshError

__all__ = ["BRIDGE", "RemoteSocket"]

#: The bridge, run on the host as ``python3 -I -S -c BRIDGE PATH WAIT_S``: exit code 2 and one line
#: on its standard error when the socket cannot be reached within ``WAIT_S`` seconds (a QEMU that is
#: starting makes its socket a moment after its start: waited for there, not by a new SSH session
#: per try, which costs a round trip and a process start each, and more on a loaded host).
BRIDGE = r"""
import os, selectors, socket, sys, time
path, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        break
    except OSError as e:
        s.close()
        if time.monotonic() >= deadline or not isinstance(e, (FileNotFoundError, ConnectionRefusedError)):
            sys.stderr.write("cannot connect to %s: %s\n" % (path, e.strerror or e))
            sys.exit(2)
        time.sleep(0.01)
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ, "in")
sel.register(s, selectors.EVENT_READ, "sock")
while True:
    for key, _ in sel.select():
        if key.data == "in":
            data = os.read(0, 65536)
            if not data:
                s.close()
                sys.exit(0)
            s.sendall(data)
        else:
            data = s.recv(65536)
            if not data:
                sys.exit(0)
            view = memoryview(data)
            while view:
                view = view[os.write(1, view):]
"""


class RemoteSocket:
    """The UNIX socket ``path`` on ``conn``'s host, as a connected local socket (:attr:`sock`),
    through a bridge session on the host's master connection (which waits up to ``wait_s`` seconds
    there for a socket that is not there yet, or refuses). :meth:`close` ends the session (the
    bridge sees its input end, and exits)."""

    def __init__(self, conn: SshConnection, path: str, *, python: str = "python3",
                 wait_s: float = 0.0) -> None:
        self.conn, self.path = conn, path
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            argv = [python, "-I", "-S", "-c", BRIDGE, path, f"{wait_s:g}"]
            self.proc = subprocess.Popen(conn.argv(argv), stdin=theirs,
                                         stdout=theirs, stderr=subprocess.PIPE)
        except OSError as e:
            self.sock.close()
            raise SshError(f"cannot start ssh: {e}", field=conn.target.label) from None
        finally:
            theirs.close()

    def failure(self, wait_s: float = 5.0) -> str | None:
        """Why the bridge ended (its last line, or ssh's), waiting up to ``wait_s`` seconds for its
        end; None while it runs."""
        try:
            code = self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None
        err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.stderr else ""
        last = err.splitlines()[-1] if err else ""
        return last or f"the bridge to {self.path} exited with {code}"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def __enter__(self) -> RemoteSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
