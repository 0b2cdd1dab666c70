"""VM payloads on this machine's nodes (issue 38): a lease's VM is a QEMU guest whose QEMU process is
the payload process (docs/decisions/vm-payloads.md, "VM leases on this machine's nodes").

A VM is spawned through :meth:`LocalNodes.spawn <skylease.runtime.leases.local.LocalNodes.spawn>`
like any payload (confined by bubblewrap, pinned to its node's CPUs, its output kept in the payload
log, watched by pidfd, marked for a restarted server to find), with QEMU's command line
(:func:`~skylease.runtime.leases.qemu_spec.command_line`) as its argv. Inside its sandbox QEMU sees
the image read-only at ``/images/<image>`` and the lease's folder at ``/lease``; its files (QMP
socket, serial log, saved state, disk overlay) are in ``/lease/vm-<vnode>/``, which this process
reaches at the lease folder's real path. The server drives it over QMP on that socket:

* start: QEMU boots the image; returns once QMP says ``running``;
* suspend: ``stop``, save to ``state.bin``, ``quit`` (:func:`~skylease.runtime.leases.qemu.save_state`):
  the payload process ends, the node's memory is free;
* resume: a new payload whose QEMU starts with ``-incoming defer -S`` when ``state.bin`` is there,
  loaded over QMP and continued (:func:`~skylease.runtime.leases.qemu.load_state`);
* shutdown: ACPI ``system_powerdown``, SIGKILL to the group after the grace.

An image is a folder holding ``vmlinuz`` and ``initrd.img`` (optional ``cmdline``: extra kernel
arguments), or a ``.qcow2``/``.raw`` disk (the guest runs on a copy-on-write overlay in its folder).
The acceleration is probed once, at the first VM start
(:class:`~skylease.runtime.leases.qemu_accel.AccelChoices`).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qemu.qmp.error import QMPError

from skylease.model.errors import UserError
from skylease.runtime.leases.host_accel import KVM_DEVICE, kvm_opens
from skylease.runtime.leases.procfs import proc_stat
from skylease.runtime.leases.qemu import COMMAND_TIMEOUT_S, START_TIMEOUT_S, Monitor, load_state, save_state
from skylease.runtime.leases.qemu_accel import AccelChoices
from skylease.runtime.leases.qemu_spec import (
    NO_OVERLAY,
    QEMU,
    QEMU_IMG,
    GuestError,
    GuestFiles,
    GuestSpec,
    check_state_file,
    command_line,
    find_qemu,
    image_format,
    image_info_argv,
    last_line,
    overlay_argv,
    virtual_size,
)
from skylease.runtime.leases.sandbox import IMAGES_DIR, LEASE_DIR, PayloadUser

#: (local.py's LocalNodes and Payload: named here, not imported, as LocalNodes imports this module)
LocalNodes = Any
Payload = Any

__all__ = ["CMDLINE", "DISK_SUFFIXES", "INITRD", "KERNEL", "MIN_VM_MEMORY_MB", "LocalVms", "VmFailed",
           "vm_image_problem"]

log = logging.getLogger(__name__)

KERNEL, INITRD, CMDLINE = "vmlinuz", "initrd.img", "cmdline"
DISK_SUFFIXES = (".qcow2", ".raw")
#: The least memory QEMU is given a guest with (GuestSpec.check's bound; a real kernel needs more).
MIN_VM_MEMORY_MB = 16
_POLL_S = 0.05
#: Seconds one try to reach a starting QEMU's QMP socket may wait for it (QEMU's death is checked
#: between tries).
_CONNECT_WAIT_S = 1.0


class VmFailed(GuestError):
    """A VM could not be started or resumed (QEMU missing, a state file it cannot load, ...): the
    reason, and the payload spawned for it if one was (killed already)."""

    def __init__(self, message: str, payload: Payload | None = None) -> None:
        super().__init__(message)
        self.payload = payload


def vm_image_problem(repository: Path | None, image: str) -> str | None:
    """Why ``image`` of the site's ``repository`` cannot boot a VM, or None (a folder holding
    vmlinuz and initrd.img, or a .qcow2/.raw disk file)."""
    if repository is None:
        return "the site has no image repository (repository in its site file): a VM boots from one"
    path = repository / image
    if path.is_dir():
        missing = [n for n in (KERNEL, INITRD) if not (path / n).is_file()]
        if missing:
            return (f"image {image!r} is a folder without {' and '.join(missing)} (a VM's image folder "
                    f"holds {KERNEL} and {INITRD})")
        return None
    if path.is_file():
        if path.suffix in DISK_SUFFIXES:
            return None
        return f"image {image!r} is neither a folder ({KERNEL}, {INITRD}) nor a .qcow2 or .raw disk"
    return f"image {image!r} is not in the site's repository"


def _spec(image: Path, seen: Path, memory_mb: int, cpus: int) -> GuestSpec:
    """The guest of ``image`` (read here) with its files where QEMU sees them (``seen``)."""
    if image.is_dir():
        extra = image / CMDLINE
        append = " ".join(extra.read_text(errors="replace").split()) if extra.is_file() else ""
        return GuestSpec(kernel=seen / KERNEL, initrd=seen / INITRD, memory_mb=memory_mb, cpus=cpus,
                         append=append)
    return GuestSpec(disk=seen, memory_mb=memory_mb, cpus=cpus)


def _kvm_allowed(user: PayloadUser | None) -> bool:
    """Whether a payload (of ``user``, or this process's user in a user namespace) may open /dev/kvm."""
    try:
        st = os.stat(KVM_DEVICE)
    except OSError:
        return False
    return kvm_opens(st.st_mode, st.st_uid, st.st_gid, user,
                     as_caller=user is None and os.access(KVM_DEVICE, os.R_OK | os.W_OK))


class LocalVms:
    """The VM payloads of a :class:`~skylease.runtime.leases.local.LocalNodes` (its ``vms``): QEMU
    spawned as payloads, driven over their QMP sockets. ``accel``: the acceleration choices it keeps
    (probed once, at the first VM start); ``qemu``, ``qemu_img``: the programs it runs."""

    def __init__(self, nodes: LocalNodes, *, accel: AccelChoices | None = None, qemu: str = QEMU,
                 qemu_img: str = QEMU_IMG) -> None:
        self.nodes = nodes
        # (kept in the data folder: a restarted server does not probe again)
        self.accel = accel if accel is not None else AccelChoices(store=nodes.data / "accel.json")
        self.qemu = qemu
        self.qemu_img = qemu_img
        self._lock = threading.Lock()
        self._monitors: dict[tuple[int, int], Monitor] = {}  # (pid, start ticks) -> its QMP connection
        #: How this enactment's guests run, once one has started: "TCG: why" or "KVM: why".
        self.acceleration: str | None = None

    def folder(self, lease: int, vnode: int) -> Path:
        """``<lease folder>/vm-<vnode>``: the VM's files, as this process reaches them."""
        return self.nodes.lease_dir(lease) / f"vm-{vnode}"

    @staticmethod
    def seen(vnode: int) -> GuestFiles:
        """The VM's files as its sandboxed QEMU sees them."""
        return GuestFiles(Path(LEASE_DIR) / f"vm-{vnode}")

    # -- start and resume -------------------------------------------------------------------------
    def spawn(self, lease: int, vnode: int, node: int, *, image: str, memory_mb: int, cpus: int,
              env: Mapping[str, str] | None = None) -> Payload:
        """VM ``vnode`` of ``lease`` on ``node``: booted from ``image``, or resumed from its saved
        state when its folder has one; returns once it runs. :class:`VmFailed` with the reason
        otherwise (nothing of it left running)."""
        site = self.nodes.site
        marks = [("", time.monotonic())]  # (each step's end: the log says where a slow start went)
        real = self._image(node, image)
        marks.append(("image", time.monotonic()))
        try:
            binary = self._binary()
            _spec(real, real, memory_mb, cpus).check(site.nodes[node].capacity.memory)
        except UserError as exc:
            raise VmFailed(str(exc)) from None
        seen_image = Path(IMAGES_DIR) / image
        spec = _spec(real, seen_image, memory_mb, cpus)
        accel = self._accel(_spec(real, real, memory_mb, cpus), binary, node, image)
        marks.append(("accel", time.monotonic()))
        files, seen = GuestFiles(self.folder(lease, vnode)), self.seen(vnode)
        try:
            resume, disk_format = self._prepare(files, real, seen_image, spec, node, image)
        except (UserError, OSError) as exc:
            raise VmFailed(str(exc)) from None
        marks.append(("prepare", time.monotonic()))
        argv = command_line(binary, spec, seen, accel, disk_format=disk_format, incoming=resume)
        p = self._spawn_qemu(lease, vnode, node, argv, env=env, image=image, real=real, accel=accel)
        marks.append(("spawn", time.monotonic()))
        t0 = time.monotonic()
        try:
            monitor = self._connect(p, files)
            marks.append(("QMP", time.monotonic()))
            cmd = self._commands(p, monitor)
            if resume:
                load_state(cmd, lambda: self._alive(p), seen.state, files.folder.name,
                           lambda: self._last_words(p))
                marks.append(("restore", time.monotonic()))
                self._unlink(files.state)
            elif (status := cmd("query-status")["status"]) != "running":
                raise GuestError(f"QEMU is {status} after its start, not running")
        except GuestError as exc:
            self._kill(p, 0.0, term=False)  # (SIGKILL at once: nothing of it to keep)
            self._drop(p)
            raise VmFailed(str(exc), p) from None
        marks.append(("end", time.monotonic()))
        steps = ", ".join(f"{name} {t - marks[i][1]:.2f}" for i, (name, t) in enumerate(marks[1:]))
        log.info("lease %d VM %d: QEMU %s on %s (pid %d, %s, %d MB, %d CPUs) in %.2f s (%s s)", lease, vnode,
                 "resumed" if resume else "started", site.nodes[node].name, p.pid, accel, memory_mb, cpus,
                 time.monotonic() - t0, steps)
        return p

    # -- where the VM runs: this machine (a host's enactment overrides these: host_vms.py) ---------
    def _image(self, node: int, image: str) -> Path:
        """The image's files, read here to make the guest's command line (VmFailed if unusable)."""
        site = self.nodes.site
        cached = self.nodes.node_dir(node) / "cache" / image
        # (an image staged into the node's cache, else the repository's: a site without image
        # transfers has its images on every node already, Haizea's "predeployed" images)
        if cached.exists():
            return cached
        if (problem := vm_image_problem(site.repository, image)) is not None:
            raise VmFailed(problem)
        return site.repository / image

    def _binary(self) -> str:
        return find_qemu(self.qemu)

    def _prepare(self, files: GuestFiles, real: Path, seen_image: Path, spec: GuestSpec, node: int,
                 image: str) -> tuple[bool, str | None]:
        """The VM's folder made ready for its QEMU: (whether it resumes from a saved state, its disk
        overlay's format or None)."""
        files.check()
        files.folder.mkdir(mode=0o700, exist_ok=True)
        self._own(files.folder)
        resume = files.state.exists()
        if resume:
            check_state_file(files.state)
        disk_format = (self._overlay(real, seen_image, files, node, image, resume=resume)
                       if spec.disk is not None else None)
        files.qmp.unlink(missing_ok=True)
        return resume, disk_format

    def _spawn_qemu(self, lease: int, vnode: int, node: int, argv: list[str], *,
                    env: Mapping[str, str] | None,
                    image: str, real: Path, accel: str) -> Payload:
        return self.nodes.spawn(lease, vnode, node, program=argv, env=env, image=image, image_path=real,
                                devices=(KVM_DEVICE,) if accel == "kvm" else ())

    def _open_monitor(self, files: GuestFiles, wait_s: float = 0.0) -> Any:
        """A QMP connection to the VM's socket; None while the socket is not there yet (a host's
        waits up to ``wait_s`` seconds for it there: one SSH session, not one per try)."""
        return Monitor(files.qmp) if files.qmp.exists() else None

    def _kill(self, p: Payload, grace_s: float, *, term: bool) -> bool:
        return self.nodes.shutdown(p, grace_s, term=term)

    def _unlink(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def _rename(self, src: Path, dst: Path) -> None:
        src.replace(dst)

    def _choose_accel(self, probe: GuestSpec, binary: str, node: int, image: str) -> tuple[str, str]:
        """KVM or TCG, and why, for a guest of ``image`` on ``node`` (``probe``: its files read here)."""
        choice = self.accel.choose(probe, binary)  # (probed once: AccelChoices keeps it)
        accel, why = choice.accel, choice.reason
        if accel == "kvm" and not _kvm_allowed(self.nodes.sandbox.user):
            accel, why = "tcg", f"KVM works here but the payload user cannot open {KVM_DEVICE}"
        return accel, why

    def _alive(self, p: Payload) -> bool:
        return self._key_alive(p.pid, p.start_ticks)

    def _key_alive(self, pid: int, ticks: int) -> bool:
        return _alive(pid, ticks)

    def _accel(self, probe: GuestSpec, binary: str, node: int, image: str) -> str:
        accel, why = self._choose_accel(probe, binary, node, image)
        if self.acceleration is None:  # (said once, where the server's log shows it, and on the Hosts
            # page: TCG is an emulation, many times slower)
            self.acceleration = f"{accel.upper()}: {why}"
            say = log.info if accel == "kvm" else log.warning
            say("VM leases run their guests under %s", self.acceleration)
        return accel

    def _own(self, path: Path) -> None:
        """Owned by the payload user (QEMU runs as it), where payloads run as one."""
        user = self.nodes.sandbox.user
        if user is not None:
            os.chown(path, user.uid, user.gid)

    def _overlay(self, real: Path, seen: Path, files: GuestFiles, node: int, image: str, *,
                 resume: bool) -> str:
        """A disk guest's overlay in its folder, made once (where its QEMU runs: the hooks below), its
        format: qcow2 backed by the image as QEMU sees it (``seen``), its size read by qemu-img from
        the node's copy of the image; or, without qemu-img here, a private copy. A saved guest
        resumes on the overlay it wrote only (docs/decisions/vm-payloads.md)."""
        made = self._head(files.overlay)
        if made is not None:
            return image_format(made)
        if resume:
            raise UserError(NO_OVERLAY, file=files.folder)
        with real.open("rb") as fh:  # (the image's bytes are the node's copy's: read here)
            fmt = image_format(fh.read(4))
        part = files.overlay.with_name(files.overlay.name + ".part")
        img = self._qemu_img()
        if img is None:
            shutil.copyfile(real, part)
        else:
            path = self._image_file(real, node, image)
            code, out, err = self._tool(image_info_argv(img, fmt, path))
            if (size := virtual_size(out) if code == 0 else None) is None:
                raise UserError(f"qemu-img cannot read it as a {fmt} image: {last_line(err)}", file=path)
            code, _, err = self._tool(overlay_argv(img, seen, fmt, part, size))
            if code != 0:
                self._unlink(part)
                raise UserError(f"qemu-img cannot make an overlay of it: {last_line(err)}", file=path)
            fmt = "qcow2"
        self._own(part)
        self._rename(part, files.overlay)
        return fmt

    # (the overlay's hooks: this machine's; a host's enactment runs them there, host_vms.py)
    def _head(self, path: Path) -> bytes | None:
        """The first 4 bytes of ``path``, None if it is not there."""
        try:
            with path.open("rb") as fh:
                return fh.read(4)
        except FileNotFoundError:
            return None

    def _qemu_img(self) -> str | None:
        return shutil.which(self.qemu_img)

    def _image_file(self, real: Path, node: int, image: str) -> str:
        """The node's copy of the image, as qemu-img reads it."""
        return str(real)

    def _tool(self, argv: list[str]) -> tuple[int, str, str]:
        """``argv`` run where the VM runs: its exit code, output and error output."""
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout, r.stderr

    def _connect(self, p: Payload, files: GuestFiles) -> Monitor:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # QMP answers once QEMU has set the machine up
            if not self._alive(p):
                raise GuestError(f"QEMU did not start: {self._last_words(p)}")
            try:
                if (monitor := self._open_monitor(files, wait_s=_CONNECT_WAIT_S)) is not None:
                    break
            except (QMPError, OSError, TimeoutError, GuestError):
                pass
            if time.monotonic() >= deadline:
                raise GuestError(f"QEMU did not answer on its QMP socket within {START_TIMEOUT_S:g} s")
            time.sleep(_POLL_S)
        with self._lock:
            self._monitors[(p.pid, p.start_ticks)] = monitor
        return monitor

    # -- suspend and shut down --------------------------------------------------------------------
    def suspend(self, p: Payload, timeout: float = 60.0) -> float:
        """Save the VM's state to its folder's state.bin and end its QEMU (the payload process exits:
        a save, not an end); the seconds it took. GuestError when it cannot (the VM runs on)."""
        t0 = time.monotonic()
        files, seen = GuestFiles(self.folder(p.lease, p.vnode)), self.seen(p.vnode)
        cmd = self._commands(p, self._monitor(p, files))
        try:
            written = save_state(cmd, seen.state, files.state, f"lease {p.lease} VM {p.vnode}", timeout,
                                 unlink=self._unlink, rename=self._rename)
        except OSError as exc:  # (its state file did not come: QEMU's writer failed)
            raise GuestError(f"its state file: {exc.strerror or exc}") from None
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while self._alive(p) and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        if self._alive(p):
            self._kill(p, 0.0, term=False)  # its state is saved: QEMU has nothing left to do
        self._drop(p)
        seconds = time.monotonic() - t0
        log.info("lease %d VM %d: saved to %s (%.1f MB of memory written) in %.2f s", p.lease, p.vnode,
                 files.state, written / 1e6, seconds)
        return seconds

    def shutdown(self, p: Payload, grace_s: float = 5.0) -> bool:
        """ACPI power-down (QMP ``system_powerdown``), SIGKILL to the group after ``grace_s`` seconds
        if QEMU still runs then (the watcher does it: no wait here); SIGTERM instead when QMP does
        not answer (QEMU then quits). False if it has ended already."""
        asked = False
        try:
            self._commands(p, self._monitor(p, GuestFiles(self.folder(p.lease, p.vnode))))("system_powerdown")
            asked = True
        except GuestError as exc:
            log.warning("lease %d VM %d: no ACPI power-down (%s): SIGTERM", p.lease, p.vnode, exc)
        self._drop(p)
        return self._kill(p, grace_s, term=not asked)

    # -- inside -----------------------------------------------------------------------------------
    def _monitor(self, p: Payload, files: GuestFiles) -> Monitor:
        """The VM's QMP connection: kept from its start, or made again (an adopted VM's)."""
        with self._lock:
            monitor = self._monitors.get((p.pid, p.start_ticks))
        if monitor is not None:
            return monitor
        if not self._alive(p):
            raise GuestError("its QEMU has ended")
        try:
            monitor = self._open_monitor(files)
        except (QMPError, OSError, TimeoutError, GuestError) as exc:
            why = str(exc) or type(exc).__name__
            raise GuestError(f"its QMP socket {files.qmp} does not answer: {why}") from None
        if monitor is None:
            raise GuestError(f"its QMP socket {files.qmp} is not there")
        with self._lock:
            self._monitors[(p.pid, p.start_ticks)] = monitor
        return monitor

    def _commands(self, p: Payload, monitor: Monitor) -> Any:
        def cmd(name: str, arguments: dict[str, Any] | None = None) -> Any:
            try:
                return monitor.cmd(name, arguments)
            except (QMPError, OSError, TimeoutError) as exc:
                if not self._alive(p):
                    raise GuestError(f"QEMU ended: {self._last_words(p)}") from None
                raise GuestError(f"QMP {name} failed: {exc or type(exc).__name__}") from None
        return cmd

    def _drop(self, p: Payload) -> None:
        with self._lock:
            monitor = self._monitors.pop((p.pid, p.start_ticks), None)
            # (those of VMs that ended by themselves go too)
            gone = [k for k in self._monitors if not self._key_alive(*k)]
            ended = [self._monitors.pop(k) for k in gone]
        for m in [monitor, *ended]:
            if m is not None:
                m.close()

    def _last_words(self, p: Payload) -> str:
        lines = [line.strip() for line in self.nodes.output(p, 4096).splitlines() if line.strip()]
        return " | ".join(lines[-2:]) or "it wrote nothing"

    def close(self) -> None:
        with self._lock:
            monitors, self._monitors = list(self._monitors.values()), {}
        for m in monitors:
            m.close()


def _alive(pid: int, start_ticks: int) -> bool:
    st = proc_stat(pid)
    return st is not None and st.state != "Z" and st.start_ticks == start_ticks
