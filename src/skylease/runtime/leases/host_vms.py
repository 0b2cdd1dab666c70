"""VM payloads on a host reached over SSH (issue 38; docs/decisions/vm-payloads.md, "VM leases on SSH
hosts"): :class:`~skylease.runtime.leases.local_vms.LocalVms`'s start, save, resume and power-down,
with each step carried out on the host.

* QEMU is the payload, spawned through the helper agent (:meth:`HostNodes.spawn
  <skylease.runtime.leases.host_nodes.HostNodes.spawn>`): confined by bubblewrap on the host and
  pinned to the node's CPUs as any host payload, marked for a restarted server to find. Inside its
  sandbox it sees the lease's folder at ``/lease`` (``<remote_dir>/leases/<lease>`` on the host) and
  the image read-only at ``/images/<image>`` (the node's cache on the host); its files are in
  ``/lease/vm-<vnode>/``, which it makes itself before QEMU starts (as the payload user);
* QMP goes to the host's path of ``/lease/vm-<vnode>/qmp.sock`` through a bridge session on the
  host's SSH connection (:class:`~skylease.runtime.leases.host_qmp.HostMonitor`): an adopted VM's
  monitor is made again the same way;
* the state file is written by QEMU on the host; its checks, renames and deletions run there over
  the SSH connection; a suspended VM resumes on the host that holds its state file;
* the image: one staged by a transfer is in the node's cache on the host; one that is not (a site
  without image transfers: Haizea's "predeployed" images) is carried there from the repository at
  its first VM start, whole or absent: a folder image (``vmlinuz``, ``initrd.img``) unpacked beside
  it, then renamed; a disk image (``.qcow2``, ``.raw``) by an image transfer of no window
  (:meth:`HostNodes.copy_image <skylease.runtime.leases.host_nodes.HostNodes.copy_image>`);
* a disk image's overlay is made on the host, once, before QEMU starts (LocalVms's procedure, its
  steps run over the SSH connection as the SSH user): ``qemu-img create -f qcow2 -u -b
  /images/<image>`` (the image as QEMU sees it) of the size ``qemu-img info`` reads from the cached
  image, into ``overlay.qcow2.part`` in the VM's folder (made first, the payload user's), given to
  the payload user and renamed. No qemu-img on the host, or an image it cannot read: VmFailed in
  one line naming the host. A saved disk guest resumes only beside its overlay; a migration carries
  both (:class:`~skylease.runtime.leases.host_moves.StateCarry`);
* acceleration: KVM only where a probe guest boots under it on the host (host_accel.py: the probe
  of this machine, run there over SSH, its answer kept in the data folder), TCG otherwise; a guest
  under KVM gets the host's /dev/kvm in its sandbox. The choice is logged once, as on this machine.
"""

from __future__ import annotations

import io
import logging
import shlex
import tarfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.runtime.leases.host_accel import KVM_DEVICE, HostAccel
from skylease.runtime.leases.host_qmp import HostMonitor
from skylease.runtime.leases.host_sandbox import HostSandbox
from skylease.runtime.leases.local_vms import LocalVms, VmFailed, vm_image_problem
from skylease.runtime.leases.qemu_accel import AccelChoices
from skylease.runtime.leases.qemu_spec import QEMU, QEMU_IMG, STATE_MAGIC, GuestError, GuestFiles, GuestSpec
from skylease.runtime.leases.sandbox import LEASE_DIR
from skylease.runtime.leases.ssh import SshError

__all__ = ["HostVms"]

log = logging.getLogger(__name__)

#: Seconds a staging of an image onto a host may take.
STAGE_TIMEOUT_S = 120.0


class HostVms(LocalVms):
    """The VM payloads of a :class:`~skylease.runtime.leases.host_nodes.HostNodes` (its ``vms``)."""

    def __init__(self, nodes: Any, *, qemu: str = QEMU, qemu_img: str = QEMU_IMG,
                 accel: HostAccel | None = None) -> None:
        super().__init__(nodes, accel=AccelChoices(), qemu=qemu, qemu_img=qemu_img)
        # (kept in this machine's data folder: a restarted server does not probe the host again)
        self.host_accel = HostAccel(store=Path(nodes.data) / "accel-hosts.json") if accel is None else accel

    @property
    def _box(self) -> HostSandbox:
        return self.nodes.confinement

    def folder(self, lease: int, vnode: int) -> Path:
        """``<lease folder on the host>/vm-<vnode>``: the VM's files, as the host's SSH user reaches
        them (relative to its home when ``remote_dir`` is)."""
        return Path(self._box.lease_dir(lease)) / f"vm-{vnode}"

    def _run(self, script: str, *, stdin: bytes = b"", timeout: float = 30.0) -> tuple[int, str]:
        """``sh -c script`` on the host: its exit code and its last line of error output."""
        try:
            code, _out, err = self.nodes.conn.run(["sh", "-c", script], stdin=stdin, timeout=timeout)
        except SshError as exc:
            raise GuestError(f"{exc.field}: {exc.message}") from None
        lines = err.decode(errors="replace").strip().splitlines()
        return code, lines[-1] if lines else ""

    # -- the hooks of LocalVms ----------------------------------------------------------------------
    def _image(self, node: int, image: str) -> Path:
        repository = self.nodes.site.repository
        if (problem := vm_image_problem(repository, image)) is not None:
            raise VmFailed(problem)
        real = repository / image
        if real.is_dir():
            self._stage(node, image, real)
        else:
            self._stage_disk(node, image)
        return real

    def _stage(self, node: int, image: str, real: Path) -> None:
        """The folder image in ``node``'s cache on the host: carried there now when it is not
        (unpacked beside it, then renamed: whole or absent)."""
        cache = self.nodes.cache_dir(node)
        target, part = f"{cache}/{image}", f"{cache}/.{image}.vm-part"
        code, _ = self._run(f"test -d {shlex.quote(target)}")
        if code == 0:
            return
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for f in sorted(real.iterdir()):
                if f.is_file():
                    tar.add(f, arcname=f.name)
        owner = self._box.owner()
        group = "" if owner is None else f"chgrp -R {int(owner[1])} {shlex.quote(part)} && "
        q, t = shlex.quote(part), shlex.quote(target)
        script = (f"rm -rf {q} && mkdir -p {q} && tar -x -f - -C {q} && {group}chmod -R u=rwX,g=rX,o= {q} "
                  f"&& mv -T {q} {t}")
        code, why = self._run(script, stdin=buf.getvalue(), timeout=STAGE_TIMEOUT_S)
        if code != 0:
            self._run(f"rm -rf {q}")
            raise VmFailed(f"image {image!r} could not be put on {self.nodes.conn.target.label}: {why}")
        self._carried(node, image)

    def _stage_disk(self, node: int, image: str) -> None:
        """The disk image in ``node``'s cache on the host: carried there now when it is not, by an
        image transfer of no window (the site's own: whole or absent, its SHA-256 checked there)."""
        if self._run(f"test -f {shlex.quote(f'{self.nodes.cache_dir(node)}/{image}')}")[0] == 0:
            return
        copy = self.nodes.copy_image(image, 0, [node], 0.0)
        if not copy.wait(STAGE_TIMEOUT_S):
            copy.cancel()
        if not copy.done:
            why = copy.error or f"it took over {STAGE_TIMEOUT_S:g} s"
            raise VmFailed(f"image {image!r} could not be put on {self.nodes.conn.target.label}: {why}")
        self._carried(node, image)

    def _carried(self, node: int, image: str) -> None:
        log.info("image %s carried to %s's cache on %s", image, self.nodes.site.nodes[node].name,
                 self.nodes.conn.target.label)

    def _binary(self) -> str:
        return self.qemu  # (looked up on the host when the payload starts: its log says if it is not there)

    def _choose_accel(self, probe: GuestSpec, binary: str, node: int, image: str) -> tuple[str, str]:
        seen = Path(self.nodes.cache_dir(node)) / image  # (the image as the host's SSH user reaches it)
        spec = None
        if probe.kernel is not None:
            spec = replace(probe, kernel=seen / probe.kernel.name, memory_mb=min(probe.memory_mb, 128),
                           initrd=None if probe.initrd is None else seen / probe.initrd.name)
        choice = self.host_accel.choose(self.nodes.conn.target.label, binary, spec,
                                        f"{self.nodes.remote_dir}/kvm-probe", self._script,
                                        self._box.sandbox.user)
        return choice.accel, choice.reason

    def _script(self, script: str, timeout: float) -> tuple[int, str]:
        """``sh -c script`` on the host: its exit code and its output (or its error's last line)."""
        try:
            code, out, err = self.nodes.conn.run(["sh", "-c", script], timeout=timeout)
        except SshError as exc:
            return 255, f"{exc.field}: {exc.message}"
        return code, out.decode(errors="replace") if code == 0 else err.decode(errors="replace")

    def _prepare(self, files: GuestFiles, real: Path, seen_image: Path, spec: GuestSpec, node: int,
                 image: str) -> tuple[bool, str | None]:
        files.check()
        label = self.nodes.conn.target.label
        state = shlex.quote(str(files.state))
        made = ""
        if spec.disk is not None:  # (its overlay is made before QEMU starts: its folder too, as QEMU's)
            folder, lease_dir = shlex.quote(str(files.folder)), shlex.quote(str(files.folder.parent))
            owner = self._box.owner()
            own = "" if owner is None else f" && chown {int(owner[0])}:{int(owner[1])} {lease_dir} {folder}"
            made = f"(umask 077 && mkdir -p {folder}){own} || exit 4; "
        # (0: no state file; 1: a saved guest; 3: something else)
        code, why = self._run(f"{made}rm -f {shlex.quote(str(files.qmp))}; test -e {state} || exit 0; "
                              f"test \"$(head -c 4 {state})\" = {STATE_MAGIC.decode()} && exit 1; exit 3")
        if code == 3:
            raise GuestError(f"{label}: {files.state}: is not a saved QEMU guest")
        if code not in (0, 1):
            raise GuestError(f"{label}: {files.folder}: {why or 'cannot be read'}")
        if spec.disk is None:
            return code == 1, None
        try:
            return code == 1, self._overlay(real, seen_image, files, node, image, resume=code == 1)
        except (UserError, OSError) as exc:
            raise VmFailed(f"{label}: {exc}") from None

    # (the overlay's hooks: run on the host, as the SSH user; the overlay given to the payload user)
    def _head(self, path: Path) -> bytes | None:
        code, out, _ = self._tool(["sh", "-c", f"test -e {shlex.quote(str(path))} || exit 9; "
                                   f"head -c 4 {shlex.quote(str(path))}"], text=False)
        return out if code == 0 else None

    def _qemu_img(self) -> str | None:
        code, out, _ = self._tool(["sh", "-c", f"command -v {shlex.quote(self.qemu_img)}"])
        if code != 0 or not out.strip():
            raise VmFailed(f"{self.qemu_img} not found on {self.nodes.conn.target.label}: apt-get install "
                           "qemu-utils (a disk image's guest runs on an overlay qemu-img makes)")
        return out.strip()

    def _image_file(self, real: Path, node: int, image: str) -> str:
        return f"{self.nodes.cache_dir(node)}/{image}"

    def _tool(self, argv: list[str], *, text: bool = True) -> tuple[int, Any, Any]:
        try:
            code, out, err = self.nodes.conn.run(argv, timeout=60.0)
        except SshError as exc:
            raise GuestError(f"{exc.field}: {exc.message}") from None
        if not text:
            return code, out, err
        return code, out.decode(errors="replace"), err.decode(errors="replace")

    def _own(self, path: Path) -> None:
        if (owner := self._box.owner()) is not None:
            code, why = self._run(f"chown {int(owner[0])}:{int(owner[1])} {shlex.quote(str(path))}")
            if code != 0:
                raise OSError(why or f"{path} could not be given to the payload user")

    def _spawn_qemu(self, lease: int, vnode: int, node: int, argv: list[str], *,
                    env: Mapping[str, str] | None, image: str, real: Path, accel: str) -> Any:
        folder = shlex.quote(f"{LEASE_DIR}/vm-{vnode}")
        command = f"mkdir -p -m 0700 {folder} && exec {shlex.join(argv)}"
        return self.nodes.spawn(lease, vnode, node, command=command, env=env, image=image,
                                devices=(KVM_DEVICE,) if accel == "kvm" else ())

    def _open_monitor(self, files: GuestFiles, wait_s: float = 0.0) -> Any:
        return HostMonitor(self.nodes.conn, str(files.qmp), python=self.nodes.python, wait_s=wait_s)

    def _kill(self, p: Any, grace_s: float, *, term: bool) -> bool:
        return self.nodes.shutdown(p, grace_s, term=term)

    def _unlink(self, path: Path) -> None:
        self._run(f"rm -f {shlex.quote(str(path))}")

    def _rename(self, src: Path, dst: Path) -> None:
        code, why = self._run(f"mv -f {shlex.quote(str(src))} {shlex.quote(str(dst))}")
        if code != 0:
            raise OSError(why or f"{src} could not be renamed")

    def _key_alive(self, pid: int, ticks: int) -> bool:
        return self.nodes.watched(pid, ticks)
