"""QEMU guests on this machine, driven over QMP (issue 38's VM payloads, as a library).

A guest is a QEMU process of its own process group with a folder of files (qemu_spec.GuestFiles).
Operations (docs/howto/vm-leases.md, docs/decisions/vm-payloads.md):

* :func:`start_guest`: QEMU started, returns once QMP answers ``running``.
* :meth:`Guest.suspend`: ``stop``, ``migrate`` to ``exec:cat > state.bin`` (QEMU 7.2 has no ``file:``
  URI), wait for it to complete, ``quit``: the process ends, its memory is freed, the state file stays.
* :func:`resume_guest`: a new QEMU with ``-incoming defer -S``, ``migrate-incoming`` from the state file,
  wait for it to load, ``cont``. A guest moved to another folder (or host) resumes from the copy.
* :meth:`Guest.shutdown`: ``system_powerdown`` (ACPI), wait up to a grace for QEMU to exit, then SIGKILL.
* :func:`adopt_guest`: a guest started by an earlier process of ours, found again through its folder's
  guest.json and QMP socket.
* :meth:`Guest.status`: running, paused, ... or ended (the guest powered itself off: QEMU exited).

Every wait is bounded; QEMU's process is signalled only while /proc says it is still the one started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qemu.qmp import QMPClient
from qemu.qmp.error import QMPError

from skylease.model.errors import UserError
from skylease.runtime.leases.procfs import proc_stat
from skylease.runtime.leases.qemu_spec import (
    NO_OVERLAY,
    QEMU,
    GuestError,
    GuestFiles,
    GuestSpec,
    check_state_file,
    command_line,
    exec_uri,
    find_qemu,
    prepare_disk,
)

__all__ = ["Ended", "Guest", "GuestError", "GuestSpec", "GuestStatus", "Monitor", "Suspended", "adopt_guest",
           "load_state", "resume_guest", "save_state", "start_guest"]

log = logging.getLogger(__name__)

#: Seconds for QEMU to answer on its QMP socket after it starts (a loaded machine: QEMU's own start
#: takes ~0.1 s).
START_TIMEOUT_S = 20.0
#: Seconds for one QMP command's answer.
COMMAND_TIMEOUT_S = 10.0
#: The migration bandwidth while saving to a file (bytes/s): QEMU's default (32 MiB/s) is meant for
#: a live migration over a network beside a running guest; a stopped guest written to a local file
#: should go as fast as the disk takes it.
SAVE_BANDWIDTH = 1 << 40
_POLL_S = 0.05
#: The first pause of a poll for a save's or a load's end (doubling to _POLL_S).
_FIRST_POLL_S = 0.005
#: Seconds a QEMU whose monitor stopped answering has to exit before that counts as a QMP failure.
EXIT_AFTER_QMP_S = 3.0


class Monitor:
    """A QMP connection (qemu.qmp's QMPClient) on a private event loop, every call bounded in time:
    to the QMP socket at ``address``, or over ``address`` when it is a connected socket (a guest on
    a host: ssh_bridge.RemoteSocket)."""

    def __init__(self, address: Path | socket.socket, timeout: float = COMMAND_TIMEOUT_S) -> None:
        self._loop = asyncio.new_event_loop()
        self._client = QMPClient("skylease")
        try:
            self._run(self._client.connect(address if isinstance(address, socket.socket) else str(address)),
                      timeout)
        except BaseException:
            self.close()
            raise

    def _run(self, coro: Any, timeout: float) -> Any:
        return self._loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def cmd(self, name: str, arguments: dict[str, Any] | None = None,
            timeout: float = COMMAND_TIMEOUT_S) -> Any:
        return self._run(self._client.execute(name, arguments), timeout)

    def shutdown_reason(self, wait: float = 0.2) -> str | None:
        """The reason of the last SHUTDOWN event QEMU sent: ``guest-shutdown`` (the guest powered
        off), ``guest-reset`` (it reset: under -no-reboot that ends QEMU too), ``host-qmp-quit`` (our
        ``quit``), ``host-signal``, ...; None without one (SIGKILL sends none). What QEMU wrote before
        it ended is still on the socket: the loop runs ``wait`` seconds for the reader to take it."""
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(asyncio.sleep(wait))
        reason = None
        for event in self._client.events.clear():
            if event.get("event") == "SHUTDOWN":
                reason = event.get("data", {}).get("reason")
        return reason

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            self._run(self._client.disconnect(), 5.0)
        self._loop.close()


@dataclass(frozen=True)
class GuestStatus:
    state: str  # QEMU's run state (running, paused, inmigrate, postmigrate, ...) or "ended"
    exit_code: int | None = None  # QEMU's exit code once ended, when it was our child
    detail: str = ""
    reason: str | None = None  # once ended: QEMU's SHUTDOWN reason (Monitor.shutdown_reason)


@dataclass(frozen=True)
class Suspended:
    state_file: Path
    size_bytes: int
    seconds: float  # from stop to QEMU's exit


@dataclass(frozen=True)
class Ended:
    how: str  # "powered off" (ACPI, within the grace), "killed" (SIGKILL after the grace), "ended before"
    exit_code: int | None
    seconds: float


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


class Guest:
    """A running (or ended) guest: its folder, spec, acceleration, QEMU's PID and /proc start time."""

    def __init__(self, files: GuestFiles, spec: GuestSpec, accel: str, pid: int, start_ticks: int,
                 proc: subprocess.Popen | None, monitor: Monitor | None) -> None:
        self.files, self.spec, self.accel, self.pid, self.start_ticks = files, spec, accel, pid, start_ticks
        self._proc = proc
        self._monitor = monitor
        self._exit_code: int | None = None
        self._end_reason: str | None = None

    @property
    def folder(self) -> Path:
        return self.files.folder

    # -- the process ------------------------------------------------------------------------------
    def alive(self) -> bool:
        """Whether QEMU still runs (our child: not reaped; an adopted one: /proc has the same process)."""
        if self._proc is not None:
            if self._proc.poll() is None:
                return True
            self._exit_code = self._proc.returncode
            return False
        st = proc_stat(self.pid)
        return st is not None and st.state != "Z" and st.start_ticks == self.start_ticks

    def _signal(self, sig: int) -> None:
        if self.alive():  # checked right before: never a signal to a process that is not ours
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)  # its own group: QEMU and any exec: helper it runs

    def _wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True

    def kill(self) -> None:
        """SIGKILL to QEMU's process group, then wait (bounded) for it to be gone."""
        self._signal(signal.SIGKILL)
        self._wait_exit(10.0)
        self.disconnect()

    # -- QMP --------------------------------------------------------------------------------------
    def monitor(self) -> Monitor:
        if self._monitor is None:
            self._monitor = Monitor(self.files.qmp)
        return self._monitor

    def disconnect(self) -> None:
        """Drop our QMP connection (QEMU keeps running; adopt_guest connects again). Of a guest that
        has ended, QEMU's last word (its SHUTDOWN event's reason) is kept first."""
        if self._monitor is not None:
            if not self.alive():
                self._end_reason = self._monitor.shutdown_reason() or self._end_reason
            self._monitor.close()
            self._monitor = None

    def _cmd(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        try:
            return self.monitor().cmd(name, arguments)
        except (QMPError, OSError, TimeoutError) as e:
            if not self.alive():
                raise GuestError(f"guest {self.folder.name}: QEMU ended ({self.status().detail})") from None
            why = str(e) or type(e).__name__
            raise GuestError(f"guest {self.folder.name}: QMP {name} failed: {why}") from None

    def status(self) -> GuestStatus:
        if self.alive():
            try:
                return GuestStatus(str(self._cmd("query-status")["status"]))
            except GuestError:
                # QEMU ending (a guest that powered itself off) closes its monitor first and exits a
                # moment later, a long moment on a loaded machine (CI once saw the command fail with
                # "Disconnected" while the process was still there): give it that moment
                deadline = time.monotonic() + EXIT_AFTER_QMP_S
                while self.alive() and time.monotonic() < deadline:
                    time.sleep(0.05)
                if self.alive():
                    raise  # (else QEMU ended between the look and the command: ended, below)
        self.disconnect()
        code = self._exit_code
        why = f"QEMU exited with code {code}" if code is not None else "QEMU's process is gone"
        if self._end_reason:
            why += f" ({self._end_reason})"
        last = _tail(self.files.log, 1)
        return GuestStatus("ended", code, why + (f": {last}" if last else ""), self._end_reason)

    def serial_text(self) -> str:
        try:
            return self.files.serial.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_serial(self, pattern: str, timeout: float, *, start: int = 0) -> re.Match[str]:
        """The first match of ``pattern`` in the serial log from character ``start``; GuestError after
        ``timeout`` seconds or when QEMU ends first."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.serial_text(), start)
            if m:
                return m
            if not self.alive():
                raise GuestError(f"guest {self.folder.name} ended before its console printed {pattern!r}")
            if time.monotonic() >= deadline:
                raise GuestError(f"guest {self.folder.name}: its console did not print {pattern!r} "
                                 f"within {timeout:g} s")
            time.sleep(0.1)

    # -- operations -------------------------------------------------------------------------------
    def suspend(self, timeout: float = 60.0) -> Suspended:
        """Stop the guest, save its state to the folder's state.bin, end QEMU (its memory freed)."""
        t0 = time.monotonic()
        state = self.files.state
        save_state(self._cmd, state, state, self.folder.name, timeout)
        if not self._wait_exit(COMMAND_TIMEOUT_S):
            self.kill()  # its state is saved: QEMU has nothing left to do
        self.disconnect()
        size = state.stat().st_size
        seconds = time.monotonic() - t0
        log.info("guest %s suspended to %s (%d bytes) in %.2f s", self.folder.name, state, size, seconds)
        return Suspended(state, size, seconds)

    def shutdown(self, grace_s: float = 10.0) -> Ended:
        """ACPI power-down; SIGKILL if QEMU has not exited after ``grace_s`` seconds."""
        t0 = time.monotonic()
        if not self.alive():
            return Ended("ended before", self._exit_code, 0.0)
        with contextlib.suppress(GuestError):
            self._cmd("system_powerdown")
        if self._wait_exit(grace_s):
            self.disconnect()
            return Ended("powered off", self._exit_code, time.monotonic() - t0)
        log.warning("guest %s did not power off within %.0f s: killed", self.folder.name, grace_s)
        self.kill()
        return Ended("killed", self._exit_code, time.monotonic() - t0)


Command = Callable[..., Any]


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)


def save_state(cmd: Command, seen: Path, real: Path, name: str, timeout: float = 60.0, *,
               unlink: Callable[[Path], None] = _unlink,
               rename: Callable[[Path, Path], None] = Path.replace) -> int:
    """Save a guest's state over QMP (``cmd(name, arguments)``): ``stop``, ``migrate`` to
    ``seen.part`` (the path as QEMU sees it: a sandboxed QEMU sees another file system), renamed to
    ``real`` (the same file where ``unlink`` and ``rename`` act: this machine's, or a host's) once
    complete, then ``quit``; the bytes of memory written (QEMU's count). GuestError (the guest going
    on where it was) when the save fails or takes over ``timeout`` seconds."""
    t0 = time.monotonic()
    part = real.with_name(real.name + ".part")
    unlink(part)
    cmd("stop")
    cmd("migrate-set-parameters", {"max-bandwidth": SAVE_BANDWIDTH})
    cmd("migrate", {"uri": exec_uri("cat >", seen.with_name(seen.name + ".part"))})
    deadline = t0 + timeout
    pause = _FIRST_POLL_S
    while True:
        info = cmd("query-migrate")
        status = info.get("status")
        if status == "completed":
            break
        if status in ("failed", "cancelled"):
            unlink(part)
            cmd("cont")  # the guest goes on where it was
            raise GuestError(f"guest {name}: saving its state failed: {info.get('error-desc', status)}")
        if time.monotonic() >= deadline:
            with contextlib.suppress(GuestError):
                cmd("migrate_cancel")
                cmd("cont")
            unlink(part)
            raise GuestError(f"guest {name}: saving its state took over {timeout:g} s")
        time.sleep(pause)
        pause = min(_POLL_S, 2 * pause)
    rename(part, real)
    with contextlib.suppress(GuestError):
        cmd("quit")
    return int((info.get("ram") or {}).get("transferred") or 0)


def load_state(cmd: Command, alive: Callable[[], bool], seen: Path, name: str, why_dead: Callable[[], str],
               timeout: float = 60.0) -> None:
    """Load a saved state into a QEMU started with ``-incoming defer -S`` (``migrate-incoming`` from
    ``seen``, the state file as QEMU sees it), then ``cont``. GuestError with QEMU's reason
    (``why_dead()`` once it has ended) when it cannot, or after ``timeout`` seconds."""
    cmd("migrate-incoming", {"uri": exec_uri("cat", seen)})
    deadline = time.monotonic() + timeout
    pause = _FIRST_POLL_S
    while True:
        if not alive():
            raise GuestError(f"guest {name}: QEMU could not load {seen}: {why_dead()}")
        try:  # (one command a round while it loads: over a host's SSH bridge each is a round trip)
            info = cmd("query-migrate")
            status = info.get("status")
            done = status == "completed" and cmd("query-status")["status"] != "inmigrate"
        except GuestError:  # QEMU ended between our check and the command: the check above says why
            continue
        if status == "failed":
            why = info.get("error-desc", "no reason given")
            raise GuestError(f"guest {name}: loading {seen} failed: {why}")
        if done:
            break
        if time.monotonic() >= deadline:
            raise GuestError(f"guest {name}: loading {seen} took over {timeout:g} s")
        time.sleep(pause)  # (a load takes a tenth of a second or so: polled finely at first)
        pause = min(_POLL_S, 2 * pause)
    cmd("cont")


def _write_meta(files: GuestFiles, spec: GuestSpec, accel: str, pid: int, start_ticks: int) -> None:
    part = files.meta.with_name(files.meta.name + ".part")
    part.write_text(json.dumps({"spec": spec.to_json(), "accel": accel, "pid": pid,
                                "start_ticks": start_ticks}, indent=1))
    part.replace(files.meta)


def _launch(spec: GuestSpec, folder: Path, accel: str, qemu: str, memory_limit_mb: int | None,
            incoming: bool) -> Guest:
    spec.check(memory_limit_mb)
    if accel not in ("kvm", "tcg"):
        raise UserError(f"must be kvm or tcg, got {accel!r}", field="accel")
    files = GuestFiles(folder)
    files.check()
    binary = find_qemu(qemu)
    if spec.disk is not None and incoming and not files.overlay.exists():
        # (a fresh overlay would resume the guest's memory over a disk it never wrote)
        raise UserError(NO_OVERLAY, file=folder)
    folder.mkdir(parents=True, exist_ok=True)
    disk_format = prepare_disk(spec, files)
    files.qmp.unlink(missing_ok=True)
    args = command_line(binary, spec, files, accel, disk_format=disk_format, incoming=incoming)
    with files.log.open("ab") as err:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                start_new_session=True)
    st = proc_stat(proc.pid)
    guest = Guest(files, spec, accel, proc.pid, st.start_ticks if st else 0, proc, None)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:  # QMP answers once QEMU has set the machine up
        if not guest.alive():
            raise GuestError(f"QEMU did not start (exit {proc.returncode}): {_tail(files.log)}")
        if files.qmp.exists():
            try:
                guest._monitor = Monitor(files.qmp)
                break
            except (QMPError, OSError, TimeoutError):
                pass
        if time.monotonic() >= deadline:
            guest.kill()
            raise GuestError(f"QEMU did not answer on {files.qmp} within {START_TIMEOUT_S:g} s")
        time.sleep(_POLL_S)
    _write_meta(files, spec, accel, guest.pid, guest.start_ticks)
    return guest


def start_guest(spec: GuestSpec, folder: Path, *, accel: str = "tcg", qemu: str = QEMU,
                memory_limit_mb: int | None = None) -> Guest:
    """Boot a guest in ``folder``; returns once QEMU runs it (the guest's own boot goes on: see
    Guest.wait_serial). UserError for a bad spec, GuestError when QEMU fails."""
    guest = _launch(spec, folder, accel, qemu, memory_limit_mb, incoming=False)
    status = guest.status()
    if status.state != "running":
        guest.kill()
        raise GuestError(f"guest {folder.name} is {status.state} after its start, not running")
    log.info("guest %s started (pid %d, %s, %d MB)", folder.name, guest.pid, accel, spec.memory_mb)
    return guest


def resume_guest(spec: GuestSpec, folder: Path, *, state_file: Path | None = None, accel: str = "tcg",
                 qemu: str = QEMU, memory_limit_mb: int | None = None, timeout: float = 60.0) -> Guest:
    """A new QEMU in ``folder`` from the saved state (default: the folder's state.bin), running once
    this returns. A missing, foreign or truncated state file is a clear error (UserError before QEMU
    starts, GuestError with QEMU's reason when it cannot load it), never a hang. The state file is
    removed once the guest runs again."""
    files = GuestFiles(folder)
    state = state_file or files.state
    check_state_file(state)
    t0 = time.monotonic()
    guest = _launch(spec, folder, accel, qemu, memory_limit_mb, incoming=True)
    try:
        load_state(guest._cmd, guest.alive, state, folder.name, lambda: _tail(files.log, 2), timeout)
    except BaseException:
        guest.kill()
        raise
    if state == files.state:
        state.unlink(missing_ok=True)
    log.info("guest %s resumed from %s in %.2f s (pid %d)", folder.name, state, time.monotonic() - t0,
             guest.pid)
    return guest


def adopt_guest(folder: Path) -> Guest:
    """The guest of ``folder`` started by an earlier process (its guest.json), connected again through
    its QMP socket; GuestError if its QEMU is gone or does not answer."""
    files = GuestFiles(folder)
    try:
        meta = json.loads(files.meta.read_text())
        spec, accel = GuestSpec.from_json(meta["spec"]), str(meta["accel"])
        pid, start_ticks = int(meta["pid"]), int(meta["start_ticks"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"is not a guest's folder (guest.json: {e})", file=folder) from None
    guest = Guest(files, spec, accel, pid, start_ticks, None, None)
    if not guest.alive():
        raise GuestError(f"guest {folder.name}: its QEMU (pid {pid}) is gone")
    try:
        guest.monitor()
    except (QMPError, OSError, TimeoutError) as e:
        raise GuestError(f"guest {folder.name}: QMP socket {files.qmp} does not answer: {e}") from None
    log.info("guest %s adopted (pid %d, %s)", folder.name, pid, guest.status().state)
    return guest
