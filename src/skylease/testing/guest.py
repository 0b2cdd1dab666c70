"""The test guest: a Linux kernel and a busybox initramfs that QEMU boots in a few seconds.

Built from Debian packages only (docs/howto/vm-leases.md): the cloud kernel (``linux-image-*-cloud-amd64``,
installed under /boot, or read out of its .deb with ``dpkg-deb -x`` without installing it) and
``busybox-static``. The guest's /init mounts proc, sys and devtmpfs, loads the kernel modules it needs
(the cloud kernel builds the ACPI power button and evdev as modules), then prints every second on the
serial console::

    skylease-guest uptime=<s> tick=<n>

where ``tick`` is a shell variable counting up in the guest's memory: a guest saved to a file and
restored continues from where it stopped, which is how tests tell a resume from a reboot. The guest
powers itself off (``poweroff -f``) when the ACPI power button is pressed (QMP ``system_powerdown``),
and after N ticks when its kernel command line holds ``skylease.ticks=N`` (a guest that ends by
itself: the lease's premature end). ``skylease.fill=MB`` makes it write that many MB of random bytes
into its memory first (a file of its tmpfs root), so that its saved state is a busy guest's size.

Command line::

    python -m skylease.testing.guest build OUT [--kernel PATH]

writes OUT/vmlinuz and OUT/initrd.img. ``--kernel`` is a vmlinuz (its modules are then looked for in
/lib/modules/<version>) or a ``linux-image-*-cloud-amd64`` .deb. Without it: /boot/vmlinuz-*-cloud-amd64
with its /lib/modules/<version>, then a ``linux-image-*-cloud-amd64_*.deb`` in /var/cache/skylease/
(where ``.ci/run`` puts one with ``apt-get download``). Bad input (no kernel found, no busybox) is one
line and exit 2.
"""

from __future__ import annotations

import argparse
import gzip
import io
import lzma
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from skylease.model.errors import UserError

__all__ = ["BUSYBOX_PATHS", "KERNEL_CACHE", "MODULES", "Built", "CpioEntry", "build_guest", "find_kernel",
           "init_script", "main", "newc_archive"]

PROG = "python -m skylease.testing.guest"
#: Where the cloud kernel's .deb is looked for without --kernel (.ci/run downloads it there).
KERNEL_CACHE = Path("/var/cache/skylease")
BUSYBOX_PATHS = (Path("/bin/busybox"), Path("/usr/bin/busybox"))
#: The modules the guest loads, in order (dependencies first): evdev gives the power button an event
#: device, button is the ACPI power button itself (both modules in Debian's cloud kernel).
MODULES = ("drivers/input/evdev.ko", "drivers/acpi/button.ko")
_DEB = re.compile(r"^linux-image-(.+-cloud-amd64)(?:-unsigned)?_.*\.deb$")


@dataclass(frozen=True)
class CpioEntry:
    """One member of an initramfs: a path inside it, its mode (file type and permissions), its
    contents (a regular file's bytes, a symlink's target) and, for a device node, its numbers."""

    path: str
    mode: int
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)


def _pad4(n: int) -> bytes:
    return b"\0" * (-n % 4)


def newc_archive(entries: Iterable[CpioEntry]) -> bytes:
    """The entries as a cpio archive in the "newc" format the kernel unpacks as an initramfs (its
    header is 13 eight-digit hex fields; names and data are padded to 4 bytes; a TRAILER!!! entry ends
    it). Written here so that building the guest needs no cpio tool."""
    out = io.BytesIO()
    for ino, e in enumerate([*entries, CpioEntry("TRAILER!!!", 0)], start=1):
        name = e.path.lstrip("/").encode() + b"\0"
        fields = (ino, e.mode, 0, 0, 2 if stat.S_ISDIR(e.mode) else 1, 0, len(e.data), 0, 0,
                  e.rdev[0], e.rdev[1], len(name), 0)
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        out.write(header + name + _pad4(len(header) + len(name)))
        out.write(e.data + _pad4(len(e.data)))
    return out.getvalue()


def init_script() -> str:
    """The guest's /init (run by busybox sh as PID 1)."""
    return r"""#!/bin/sh
# The skylease test guest (src/skylease/testing/guest.py).
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in /lib/modules/*.ko; do insmod "$m" 2>/dev/null; done
ticks=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^skylease\.ticks=//p')
# skylease.fill=MB: that many MB of random bytes in a file of the root file system (a tmpfs: guest
# memory), so that a saved guest's state is as large as a busy guest's, not mostly pages of zeroes.
fill=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^skylease\.fill=//p')
if [ -n "$fill" ]; then
    dd if=/dev/urandom of=/fill bs=1048576 count="$fill" 2>/dev/null
    echo "skylease-guest filled $(($(wc -c < /fill) / 1048576)) MB"
fi
# The ACPI power button: its event device (found by name) gives one event on a press; any read
# of it ends the guest at once.
watch_button() {
    for i in 1 2 3 4 5 6 7 8 9 10; do
        for d in /sys/class/input/event*; do
            if [ "$(cat "$d/device/name" 2>/dev/null)" = "Power Button" ]; then
                dd if="/dev/${d##*/sys/class/}" of=/dev/null bs=24 count=1 2>/dev/null
                echo "skylease-guest power button: powering off"
                poweroff -f
            fi
        done
        sleep 1
    done
    echo "skylease-guest no power button found"
}
watch_button &
n=0
while :; do
    n=$((n + 1))
    read up _ < /proc/uptime
    echo "skylease-guest uptime=$up tick=$n"
    if [ -n "$ticks" ] && [ "$n" -ge "$ticks" ]; then
        echo "skylease-guest $n ticks done: powering off"
        poweroff -f
    fi
    sleep 1
done
"""


@dataclass(frozen=True)
class Built:
    kernel: Path
    initrd: Path
    version: str  # the kernel's version (6.1.0-57-cloud-amd64)
    modules: tuple[str, ...]  # the module files put in the initramfs


def _version_of(vmlinuz: Path) -> str:
    name = vmlinuz.name
    return name[len("vmlinuz-"):] if name.startswith("vmlinuz-") else ""


def find_kernel(kernel: Path | None = None, *, boot: Path = Path("/boot"),
                cache: Path = KERNEL_CACHE) -> Path:
    """The kernel to build the guest from: ``kernel`` if given (it must exist), else the newest
    /boot/vmlinuz-*-cloud-amd64 that has its modules, else the newest cloud kernel .deb in ``cache``."""
    if kernel is not None:
        if not kernel.is_file():
            raise UserError("no such file", field="--kernel", file=kernel)
        return kernel
    for v in sorted(boot.glob("vmlinuz-*-cloud-amd64"), reverse=True):
        if (Path("/lib/modules") / _version_of(v)).is_dir():
            return v
    debs = sorted(p for p in cache.glob("linux-image-*-cloud-amd64*.deb") if _DEB.match(p.name)) \
        if cache.is_dir() else []
    if debs:
        return debs[-1]
    raise UserError(f"no cloud kernel found: no {boot}/vmlinuz-*-cloud-amd64 with its /lib/modules, no "
                    f"linux-image-*-cloud-amd64_*.deb in {cache} (apt-get download linux-image-cloud-amd64 "
                    f"there, or give --kernel)")


def find_busybox(paths: Iterable[Path] = BUSYBOX_PATHS) -> Path:
    for p in paths:
        if p.is_file():
            return p
    raise UserError("no busybox found at " + " or ".join(map(str, paths))
                    + " (apt-get install busybox-static)")


def _module_bytes(path: Path) -> bytes:
    """A module file's contents, uncompressed (busybox's insmod loads plain .ko files)."""
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        return lzma.decompress(data)
    if path.name.endswith(".ko.gz"):
        return gzip.decompress(data)
    if path.name.endswith(".ko.zst"):
        zstd = shutil.which("zstd")
        if zstd is None:
            raise UserError("is compressed with zstd and there is no zstd tool to read it", file=path)
        return subprocess.run([zstd, "-dc", str(path)], capture_output=True, check=True).stdout
    return data


def _find_modules(root: Path) -> list[Path]:
    """The guest's modules under a /lib/modules/<version> folder, each maybe compressed."""
    found = []
    for rel in MODULES:
        hits = [p for p in (root / "kernel" / rel).parent.glob(Path(rel).name + "*")
                if re.fullmatch(re.escape(Path(rel).name) + r"(\.xz|\.gz|\.zst)?", p.name)]
        if hits:
            found.append(hits[0])
    return found


def _static(busybox: Path) -> bool:
    """Whether busybox runs without a dynamic loader (the initramfs has no libc)."""
    with busybox.open("rb") as fh:
        head = fh.read(1 << 20)
    return b"ld-linux" not in head


def initramfs_entries(busybox: Path, modules: list[Path]) -> list[CpioEntry]:
    listing = subprocess.run([str(busybox), "--list-full"], capture_output=True, text=True, timeout=30)
    if listing.returncode != 0:
        raise UserError(f"`{busybox} --list-full` failed: {listing.stderr.strip()[:200]}", file=busybox)
    d, f, x = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o644, stat.S_IFREG | 0o755
    dirs = ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "lib", "lib/modules"]
    entries = [CpioEntry(p, d) for p in dirs]
    entries.append(CpioEntry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1)))
    entries.append(CpioEntry("bin/busybox", x, busybox.read_bytes()))
    for applet in sorted(set(listing.stdout.split())):
        if applet != "bin/busybox" and applet.count("/") >= 1:
            target = "/".join([".."] * applet.count("/")) + "/bin/busybox"
            entries.append(CpioEntry(applet, stat.S_IFLNK | 0o777, target.encode()))
    for i, m in enumerate(modules):  # numbered: /init loads them in this order
        name = re.sub(r"\.ko(\.\w+)?$", ".ko", m.name)
        entries.append(CpioEntry(f"lib/modules/{i:02d}-{name}", f, _module_bytes(m)))
    entries.append(CpioEntry("init", x, init_script().encode()))
    return entries


def build_guest(out: Path, kernel: Path | None = None, *, busybox: Path | None = None,
                boot: Path = Path("/boot"), cache: Path = KERNEL_CACHE) -> Built:
    """Write ``out``/vmlinuz and ``out``/initrd.img (see the module's doc); nothing is left half-written:
    both are written under temporary names and renamed at the end."""
    bb = busybox or find_busybox()
    if not bb.is_file():
        raise UserError("no such file", file=bb)
    if not _static(bb):
        raise UserError("is not a static busybox (the guest has no libc): apt-get install busybox-static",
                        file=bb)
    source = find_kernel(kernel, boot=boot, cache=cache)
    with tempfile.TemporaryDirectory(prefix="skylease-guest-") as tmp:
        if source.name.endswith(".deb"):
            r = subprocess.run(["dpkg-deb", "-x", str(source), tmp], capture_output=True, text=True,
                               timeout=120) if shutil.which("dpkg-deb") else None
            if r is None or r.returncode != 0:
                why = "dpkg-deb is missing" if r is None else r.stderr.strip().splitlines()[-1:]
                raise UserError(f"cannot read the package: {why}", file=source)
            kernels = sorted(Path(tmp, "boot").glob("vmlinuz-*"))
            if not kernels:
                raise UserError("holds no boot/vmlinuz-*: not a kernel image package", file=source)
            vmlinuz = kernels[-1]
            mod_root = Path(tmp, "lib", "modules", _version_of(vmlinuz))
        else:
            vmlinuz = source
            mod_root = Path("/lib/modules") / _version_of(vmlinuz)
        modules = _find_modules(mod_root) if mod_root.is_dir() else []
        archive = gzip.compress(newc_archive(initramfs_entries(bb, modules)), compresslevel=6, mtime=0)
        out.mkdir(parents=True, exist_ok=True)
        kernel_out, initrd_out = out / "vmlinuz", out / "initrd.img"
        shutil.copyfile(vmlinuz, out / ".vmlinuz.part")
        (out / ".initrd.img.part").write_bytes(archive)
        os.replace(out / ".vmlinuz.part", kernel_out)
        os.replace(out / ".initrd.img.part", initrd_out)
        return Built(kernel_out, initrd_out, _version_of(vmlinuz), tuple(m.name for m in modules))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the usage too)
        raise UserError(message)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog=PROG, description="Build the skylease test guest (vmlinuz + initrd.img).")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write OUT/vmlinuz and OUT/initrd.img")
    b.add_argument("out", type=Path, metavar="OUT")
    b.add_argument("--kernel", type=Path, help="a vmlinuz, or a linux-image-*-cloud-amd64 .deb")
    b.add_argument("--busybox", type=Path, help="a static busybox (default: /bin/busybox, /usr/bin/busybox)")
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
        built = build_guest(args.out, args.kernel, busybox=args.busybox)
    except UserError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    mods = ", ".join(built.modules) or "none (no modules folder: no ACPI power button)"
    print(f"wrote {built.kernel} (kernel {built.version or 'of unknown version'}) and {built.initrd} "
          f"({built.initrd.stat().st_size // 1024} KiB; modules: {mods})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
