"""What a QEMU guest is made of (GuestSpec), the files of a guest's folder, and QEMU's command line.

A guest lives in a folder of its own on its node (docs/howto/vm-leases.md): ``serial.log`` (its serial
console), ``qmp.sock`` (its QMP socket), ``qemu.log`` (QEMU's own messages), ``guest.json`` (its spec,
its acceleration, its QEMU process), ``state.bin`` (its saved state while suspended) and, for a disk
guest, ``overlay.qcow2`` (a copy-on-write overlay of the image: the image itself is never written).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError

__all__ = ["NO_OVERLAY", "QEMU", "QEMU_IMG", "GuestError", "GuestFiles", "GuestSpec", "command_line",
           "find_qemu", "image_format", "image_info_argv", "last_line", "overlay_argv", "prepare_disk",
           "virtual_size"]

QEMU = "qemu-system-x86_64"
#: QEMU's disk image tool (Debian's qemu-utils): it makes a disk guest's overlay.
QEMU_IMG = "qemu-img"
#: The longest path of a Unix socket (sun_path holds 108 bytes with its NUL).
_SOCKET_PATH_MAX = 107
#: The first four bytes of a QEMU migration stream ("QEVM").
STATE_MAGIC = b"QEVM"
#: The first four bytes of a qcow2 disk image.
QCOW2_MAGIC = b"QFI\xfb"
#: Why a saved disk guest does not resume without its overlay: a fresh one would resume the guest's
#: memory over a disk it never wrote.
NO_OVERLAY = "no overlay.qcow2 beside the state file: a moved disk guest needs both"


class GuestError(Exception):
    """A guest operation failed at run time (QEMU refused, a state file did not load, a wait ran
    out): one line saying what and why, never a user's mistake (those are UserError)."""


@dataclass(frozen=True)
class GuestSpec:
    """A guest to run: a kernel + initrd pair, or a qcow2/raw disk (or both: the kernel boots, the
    disk is attached), its memory (MB), its CPUs and extra kernel arguments."""

    kernel: Path | None = None
    initrd: Path | None = None
    disk: Path | None = None
    memory_mb: int = 128
    cpus: int = 1
    append: str = ""  # kernel arguments beside console=ttyS0

    def check(self, memory_limit_mb: int | None = None) -> None:
        """UserError naming the field of the first thing wrong."""
        if self.kernel is None and self.disk is None:
            raise UserError("a guest needs a kernel (with its initrd) or a disk image", field="kernel")
        for name in ("kernel", "initrd", "disk"):
            p = getattr(self, name)
            if p is not None and not Path(p).is_file():
                raise UserError("no such file", file=p, field=name)
        if self.initrd is not None and self.kernel is None:
            raise UserError("an initrd needs a kernel", field="initrd")
        if not isinstance(self.memory_mb, int) or self.memory_mb < 16:
            raise UserError(f"must be a whole number of MB from 16, got {self.memory_mb!r}",
                            field="memory_mb")
        if memory_limit_mb is not None and self.memory_mb > memory_limit_mb:
            raise UserError(f"{self.memory_mb} MB is beyond the limit of {memory_limit_mb} MB",
                            field="memory_mb")
        if not isinstance(self.cpus, int) or not 1 <= self.cpus <= 64:
            raise UserError(f"must be a whole number from 1 to 64, got {self.cpus!r}", field="cpus")
        if self.append and self.kernel is None:
            raise UserError("kernel arguments need a kernel", field="append")

    def to_json(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GuestSpec:
        paths = {k: Path(d[k]) if d.get(k) else None for k in ("kernel", "initrd", "disk")}
        return cls(**paths, memory_mb=int(d["memory_mb"]), cpus=int(d["cpus"]),
                   append=str(d.get("append", "")))


@dataclass(frozen=True)
class GuestFiles:
    """The files of a guest's folder."""

    folder: Path

    @property
    def serial(self) -> Path:
        return self.folder / "serial.log"

    @property
    def qmp(self) -> Path:
        return self.folder / "qmp.sock"

    @property
    def log(self) -> Path:
        return self.folder / "qemu.log"

    @property
    def meta(self) -> Path:
        return self.folder / "guest.json"

    @property
    def state(self) -> Path:
        return self.folder / "state.bin"

    @property
    def overlay(self) -> Path:
        return self.folder / "overlay.qcow2"

    def check(self) -> None:
        if len(str(self.qmp.absolute())) > _SOCKET_PATH_MAX:
            raise UserError(f"is too long a path for a QMP socket (at most {_SOCKET_PATH_MAX - 9} "
                            "characters)", file=self.folder)


def find_qemu(qemu: str = QEMU) -> str:
    """The QEMU binary's path, or GuestError (one line) when it is not installed."""
    path = shutil.which(qemu)
    if path is None:
        raise GuestError(f"{qemu} not found: apt-get install qemu-system-x86")
    return os.path.realpath(path)  # (QEMU runs in a sandbox: a link outside it would not be there)


def image_format(head: bytes) -> str:
    """A disk image's format from its first bytes: qcow2 (its magic) or raw (anything else)."""
    return "qcow2" if head[:4] == QCOW2_MAGIC else "raw"


def _format(image: Path) -> str:
    with image.open("rb") as fh:
        return image_format(fh.read(4))


def image_info_argv(qemu_img: str, fmt: str, image: Path | str) -> list[str]:
    """qemu-img's command line that describes ``image`` (read as ``fmt``) in JSON: see
    :func:`virtual_size`."""
    return [qemu_img, "info", "--output=json", "-f", fmt, str(image)]


def virtual_size(info: str) -> int | None:
    """The guest-visible size in bytes from ``qemu-img info --output=json``, or None if it says none."""
    try:
        size = json.loads(info)["virtual-size"]
    except (ValueError, KeyError, TypeError):
        return None
    return size if isinstance(size, int) and size > 0 else None


def overlay_argv(qemu_img: str, backing: Path | str, fmt: str, overlay: Path | str, size: int) -> list[str]:
    """qemu-img's command line that makes ``overlay``: qcow2, ``size`` bytes, backed by ``backing``
    (of format ``fmt``) as QEMU will open it: ``-u``, the backing is not opened now (it is a path
    inside the guest's sandbox, ``/images/<image>``), hence the size given."""
    return [qemu_img, "create", "-q", "-f", "qcow2", "-u", "-b", str(backing), "-F", fmt, str(overlay),
            str(size)]


def prepare_disk(spec: GuestSpec, files: GuestFiles) -> str | None:
    """The disk the guest runs on, made once in its folder: a qcow2 overlay backed by the image
    (``qemu-img create -b``), or, without qemu-img, a copy of the image (same format). Returns the
    format of files.overlay (None for a guest without a disk)."""
    if spec.disk is None:
        return None
    base = spec.disk.absolute()
    fmt = _format(base)
    if files.overlay.exists():
        return _format(files.overlay)
    part = files.overlay.with_name(files.overlay.name + ".part")
    img = shutil.which(QEMU_IMG)
    if img is not None:
        r = subprocess.run([img, "create", "-q", "-f", "qcow2", "-b", str(base), "-F", fmt, str(part)],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            part.unlink(missing_ok=True)
            raise UserError(f"qemu-img cannot make an overlay of it: {last_line(r.stderr)}", file=spec.disk)
        fmt = "qcow2"
    else:
        shutil.copyfile(base, part)  # (no copy-on-write without qemu-img: a private copy)
    part.replace(files.overlay)
    return fmt


def last_line(text: str) -> str:
    """The last non-blank line of a tool's error output (one line for a message)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def command_line(qemu: str, spec: GuestSpec, files: GuestFiles, accel: str, *, disk_format: str | None,
                 incoming: bool = False) -> list[str]:
    """QEMU's arguments for the guest: no display, no network (-nic none), no default devices, the
    serial console appended to serial.log, QMP on qmp.sock, no reboot (a guest's reboot or power-off
    ends QEMU). A resumed guest starts with ``-incoming defer -S``: its state comes over QMP
    (migrate-incoming) and it runs only on ``cont``. The command line must be the same for a guest and
    its resume (QEMU's migration rule)."""
    args = [qemu, "-name", f"skylease-guest,process=skylease-guest:{files.folder.name}",
            "-nodefaults", "-no-user-config", "-display", "none", "-nic", "none", "-no-reboot",
            "-accel", accel, "-m", str(spec.memory_mb), "-smp", str(spec.cpus),
            # appended to, not truncated: a resumed guest's console goes on in the same log
            "-chardev", f"file,id=serial0,path={files.serial},append=on", "-serial", "chardev:serial0",
            "-qmp", f"unix:{files.qmp},server=on,wait=off"]
    if spec.kernel is not None:
        args += ["-kernel", str(spec.kernel), "-append", " ".join(["console=ttyS0", spec.append]).strip()]
        if spec.initrd is not None:
            args += ["-initrd", str(spec.initrd)]
    if disk_format is not None:
        args += ["-drive", f"file={files.overlay},format={disk_format},if=virtio"]
    if incoming:
        args += ["-incoming", "defer", "-S"]
    return args


def check_state_file(path: Path) -> int:
    """The state file's size; UserError if it is missing, empty or not a QEMU migration stream."""
    if not path.is_file():
        raise UserError("no such state file", file=path)
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(4)
    if head != STATE_MAGIC:
        raise UserError(f"is not a saved QEMU guest (starts with {head!r}, not {STATE_MAGIC!r})", file=path)
    return size


def exec_uri(command: str, path: Path) -> str:
    """A migration URI that runs a shell command on the file: QEMU 7.2 has no file: URI (8.2 has)."""
    return f"exec:{command} {shlex.quote(str(path.absolute()))}"
