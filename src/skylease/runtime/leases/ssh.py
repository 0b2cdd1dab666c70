"""Commands on another machine through OpenSSH itself (the ``ssh`` client), one multiplexed
connection per host (docs/decisions/ssh-enactment.md).

:class:`SshConnection` opens a *master* connection (``ssh -M -N -f`` with ``ControlPersist``): the
host is authenticated once, and every later command (:meth:`SshConnection.run`,
:meth:`SshConnection.stream`) is a new session on that connection through its control socket, which
costs milliseconds instead of a TCP and key exchange each. Every ``ssh`` is run with

* ``BatchMode=yes``: never a question or a password prompt; a key that is refused fails at once;
* ``StrictHostKeyChecking=yes`` against the target's ``known_hosts`` file only (and no global one):
  a host whose key is not listed, or has changed, is refused; nothing is ever added to that file;
* the target's identity file only (``IdentitiesOnly``), no agent, no forwarding;
* ``-F /dev/null``: the user's and the system's ssh configuration are not read, so that what a
  host is reached with is what its :class:`SshTarget` says, nothing else;
* ``ConnectTimeout`` and ``ServerAliveInterval``: a host that stops answering is given up within a
  bounded time.

The control socket lies in a private folder (mode 0700, checked) given by the caller, a folder of
the server's data folder; a UNIX socket's path is limited to about 108 bytes (and ssh adds a
17-character suffix while it creates one), so when that folder's path is too long a private
``/tmp/skylease-ssh-<uid>-<hash>`` folder stands in for it (the same one each time for the same
folder, so that a restarted server finds its former master).

The master backgrounds itself (``-f``) once the host is authenticated, and stays while a command
uses it and ``ControlPersist`` seconds after the last one: a server killed with ``kill -9`` leaves no
master behind for longer than that, and a restarted server ends a master left at its socket before
it opens its own. :meth:`SshConnection.close` asks the master to exit (``ssh -O exit``) and ends it
by its process id when it does not (checked by its command line: a reused process id is not ours).

Failures of ssh itself (exit code 255: unreachable host, refused key, unknown host key, a dropped
connection) raise :class:`SshError`: one line naming the host and ssh's last line on its standard
error. A remote command that itself exits with 255 cannot be told apart (ssh gives no other sign):
the commands this package runs never do.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import signal
import stat
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from skylease.model.errors import UserError

__all__ = ["SSH_FAILED", "SshConnection", "SshError", "SshTarget"]

#: ssh's exit code when ssh itself failed (not the remote command).
SSH_FAILED = 255
#: The longest control socket path accepted (108 bytes for sun_path, minus ssh's temporary suffix).
_MAX_SOCKET_PATH = 90
_MASTER_PID = re.compile(rb"Master running \(pid=(\d+)\)")


class SshError(UserError):
    """ssh could not reach the host or run the command there: one line naming the host (``field``)
    and what ssh said."""


@dataclass(frozen=True)
class SshTarget:
    """How a host is reached: ``user@address:port`` with the key ``identity_file``, its host key
    checked against ``known_hosts`` (both None: ssh's defaults for the user running the server),
    giving up on a connection after ``connect_timeout`` seconds."""

    address: str
    port: int = 22
    user: str = "root"
    identity_file: Path | None = None
    known_hosts: Path | None = None
    connect_timeout: float = 10.0

    @property
    def label(self) -> str:
        """``user@address:port``: how errors name the host."""
        return f"{self.user}@{self.address}:{self.port}"

    def options(self) -> list[str]:
        """The ssh options every command to this host is run with (see the module's docstring)."""
        opts = ["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", "UpdateHostKeys=no", "-o", "LogLevel=ERROR",
                "-o", f"ConnectTimeout={max(1, round(self.connect_timeout))}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", "ForwardAgent=no", "-o", "ForwardX11=no", "-o", "ClearAllForwardings=yes",
                "-p", str(int(self.port)), "-l", self.user]
        if self.known_hosts is not None:
            opts += ["-o", f"UserKnownHostsFile={_opt_path(self.known_hosts)}",
                     "-o", "GlobalKnownHostsFile=/dev/null"]
        if self.identity_file is not None:
            opts += ["-o", f"IdentityFile={_opt_path(self.identity_file)}", "-o", "IdentitiesOnly=yes",
                     "-o", "IdentityAgent=none"]
        return opts


def _opt_path(path: Path) -> str:
    """A path as an ssh option's value (ssh splits values at white space unless quoted)."""
    text = str(Path(path).resolve())
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _private_dir(path: Path) -> Path:
    """``path`` created mode 0700 where missing, and checked: ours and nobody else's."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise UserError(f"{path} is not a folder of this user: ssh control sockets must lie in a private "
                        "folder", field="ssh")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


#: Seconds a master started by :meth:`SshConnection.open` has to answer on its control socket.
MASTER_START_S = 10.0


class SshConnection:
    """Commands on ``target`` through one master connection whose control socket lies in
    ``control_dir`` (created private, mode 0700). :meth:`open` connects (or raises
    :class:`SshError`); commands run before that, or after the master is gone, open a connection of
    their own (slower, but they work). ``persist_s``: how long the master outlives its last command
    (its owner's commands, or a dead owner's). One connection per host and folder: opening one ends
    the master found at its socket (a former server's)."""

    def __init__(self, target: SshTarget, control_dir: Path, *, persist_s: float = 60.0,
                 ssh: str = "ssh") -> None:
        self.target = target
        self.ssh = ssh
        self.persist_s = persist_s
        key = hashlib.sha256(target.label.encode()).hexdigest()[:10]
        folder = Path(control_dir).absolute()
        if len(str(folder / key)) + 2 > _MAX_SOCKET_PATH:
            short = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
            folder = Path("/tmp") / f"skylease-ssh-{os.getuid()}-{short}"
        self.control_dir = _private_dir(folder)
        self.control_path = self.control_dir / f"{key}.s"
        self._errors = self.control_dir / f"{key}.err"  # the master's standard error
        self.pid: int | None = None  # the master's process id, once open

    # -- the master ---------------------------------------------------------------------------------
    def open(self) -> SshConnection:
        """Connect: authenticate the host and start the master (ending one a former server left at
        the socket). :class:`SshError` when ssh cannot (unreachable, refused, unknown host key)."""
        if self.check():
            self._exit_master()
        with contextlib.suppress(FileNotFoundError):
            self.control_path.unlink()  # a socket left by a master that died
        argv = [self.ssh, *self.target.options(), "-M", "-N", "-f", "-o", f"ControlPath={self.control_path}",
                "-o", f"ControlPersist={max(1, round(self.persist_s))}s", self.target.address]
        fd = os.open(self._errors, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            # the master keeps this file as its standard error (a pipe would be held open by it)
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd,
                                  timeout=self.target.connect_timeout + 10, check=False)
        except subprocess.TimeoutExpired:
            raise SshError(f"no connection within {self.target.connect_timeout + 10:g} s",
                           field=self.target.label) from None
        finally:
            os.close(fd)
        if done.returncode != 0:
            raise SshError(_last_line(self._errors.read_bytes()) or f"ssh exited with {done.returncode}",
                           field=self.target.label)
        # (ssh -f returns once authenticated; the backgrounded master may answer on its socket a moment
        # later on a busy machine: a check right away failed 1 in a few runs under CI's load)
        deadline = time.monotonic() + MASTER_START_S
        while not self.check():
            if time.monotonic() > deadline:
                raise SshError(f"the master connection did not answer within {MASTER_START_S:g} s",
                               field=self.target.label)
            time.sleep(0.05)
        return self

    def check(self) -> bool:
        """Whether the master runs (and answers on its socket); records its process id."""
        if not self.control_path.exists():
            self.pid = None
            return False
        done = self._control("check", timeout=10.0)
        found = _MASTER_PID.search(done.stderr) if done is not None and done.returncode == 0 else None
        self.pid = int(found.group(1)) if found else None
        return self.pid is not None

    def close(self, *, force: bool = False) -> None:
        """End the master (``ssh -O exit``, then SIGTERM by its process id if it is still there);
        ``force``: SIGTERM at once (a master whose host hangs may not answer ``ssh -O``)."""
        if self.pid is None and not self.check():
            return
        self._exit_master(ask=not force)

    def _exit_master(self, ask: bool = True) -> None:
        pid = self.pid
        if ask or pid is None:
            self._control("exit", timeout=5.0)
        deadline = time.monotonic() + (2.0 if ask else 0.0)
        while pid is not None and self._is_master(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        if pid is not None and self._is_master(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(FileNotFoundError):
            self.control_path.unlink()
        self.pid = None

    def _is_master(self, pid: int) -> bool:
        """Whether process ``pid`` is still this connection's master (its command line names our
        control socket), not a process that got the number since."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                return str(self.control_path).encode() in fh.read()
        except OSError:
            return False

    def _control(self, command: str, timeout: float) -> subprocess.CompletedProcess | None:
        argv = [self.ssh, *self.target.options(), "-o", f"ControlPath={self.control_path}", "-O", command,
                self.target.address]
        try:
            return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired:
            return None

    # -- commands -----------------------------------------------------------------------------------
    def argv(self, command: str | Sequence[str]) -> list[str]:
        """The local ssh command line that runs ``command`` on the host through the master: a string
        is a shell command line for the remote user's shell, a sequence an argv (quoted for it)."""
        remote = command if isinstance(command, str) else shlex.join(command)
        return [self.ssh, *self.target.options(), "-T", "-o", "ControlMaster=no",
                "-o", f"ControlPath={self.control_path}", self.target.address, "--", remote]

    def run(self, command: str | Sequence[str], *, stdin: bytes | str = b"",
            timeout: float = 30.0) -> tuple[int, bytes, bytes]:
        """Run ``command`` on the host (see :meth:`argv`) with ``stdin`` as its input: its exit code,
        standard output and error. :class:`SshError` when ssh itself failed or the command did not
        end within ``timeout`` seconds (then the local ssh is killed; the remote command gets a
        SIGHUP only if it reads or writes its channel)."""
        data = stdin.encode() if isinstance(stdin, str) else stdin
        try:
            done = subprocess.run(self.argv(command), input=data, capture_output=True, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise SshError(f"the command did not end within {timeout:g} s", field=self.target.label) from None
        if done.returncode == SSH_FAILED:
            raise SshError(_last_line(done.stderr) or "ssh failed", field=self.target.label)
        return done.returncode, done.stdout, done.stderr

    def stream(self, command: str | Sequence[str]) -> subprocess.Popen:
        """Start a long-lived ``command`` on the host: the local ssh process, unbuffered, its
        ``stdin`` and ``stdout`` pipes the command's (each line the command prints and flushes
        arrives at once), its ``stderr`` a pipe too (read it when ``stdout`` ends: ssh's last line
        says why the connection ended). The caller owns it: close its stdin and wait for it."""
        return subprocess.Popen(self.argv(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, bufsize=0)

    def error(self, stderr: bytes, what: str = "ssh failed") -> SshError:
        """An :class:`SshError` naming this host with the last line of ``stderr`` (or ``what``)."""
        return SshError(_last_line(stderr) or what, field=self.target.label)

    def __enter__(self) -> SshConnection:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _last_line(data: bytes) -> str:
    """The last non-empty line of what ssh printed (white space folded), at most 300 characters."""
    lines = [" ".join(line.split()) for line in data.decode(errors="replace").splitlines()]
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else ""
