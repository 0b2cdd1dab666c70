"""QEMU guests: boot, suspend, resume and migration-by-file times by guest memory, beside the rates the
lease scheduler reserves time with (Haizea's).

The guest is the test guest (skylease.testing.guest: Debian's cloud kernel and a busybox initramfs),
run by skylease.runtime.leases.qemu on this machine under TCG, and under KVM too when the probe
(qemu_accel.choose_accel) says KVM works. For each memory size and round:

* **boot**: from QEMU's start until the guest's first ``tick=`` line on its serial console;
* **suspend**: ``stop`` + ``migrate`` to a file + QEMU's exit (Guest.suspend), with the state file's size;
  the file is then in the page cache: **sync** is the fsync of it that follows (apart: the suspend
  does not wait for it);
* **resume**: a new QEMU from the file until it runs (``cont`` done; resume_guest);
* **migrate**: suspend, copy the state file to another folder (the "destination host": the same disk
  here, so the copy is a local one, not a network transfer), resume there; the copy's time apart;
* **shutdown**: ACPI power-off until QEMU has exited.

Each size runs idle (the guest has touched little of its memory: its saved state is mostly pages
of zeroes, a few bytes each) and busy (``skylease.fill``: the guest first writes random bytes into
``--fill-pct`` % of its memory, as much as its tmpfs root takes; its boot time then includes that).
The table gives medians over the rounds, in seconds, and suspend/resume rates in MB/s of guest memory
(the scheduler's model: a VM's memory over a rate), beside SchedulerConfig's default ``suspend_rate``
(the paper's H_w = H_r, 50 MB/s) and Haizea 1.0's test configuration (32 MB/s), with the ratio
measured / reserved. A size that does not boot (64 MB: the cloud kernel needs 51.5 MB to unpack
itself beside its 13.5 MB image) is a row saying so.

    python benchmarks/bench_vms.py [--rounds 3] [--sizes 64,128,256] [--fill-pct 40] [--guest DIR] [--no-kvm]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from skylease.control.leases.config import HAIZEA10, SchedulerConfig
from skylease.runtime.leases.qemu import GuestError, GuestSpec, resume_guest, start_guest
from skylease.runtime.leases.qemu_accel import choose_accel
from skylease.testing.guest import build_guest

TICK = r"tick=\d+\r?\n"


def one_round(spec: GuestSpec, work: Path, accel: str) -> dict[str, float]:
    shutil.rmtree(work, ignore_errors=True)
    out: dict[str, float] = {}
    t = time.perf_counter()
    g = start_guest(spec, work / "src", accel=accel)
    try:
        g.wait_serial(TICK, 90)
        out["boot"] = time.perf_counter() - t
        filled = re.search(r"filled (\d+) MB", g.serial_text())
        out["filled"] = float(filled.group(1)) if filled else 0.0
        g.wait_serial(r"tick=2\r?\n", 30)  # (a guest at work, not one just booted)
        s = g.suspend()
        out["suspend"], out["file_mb"] = s.seconds, s.size_bytes / 2**20
        t = time.perf_counter()
        fd = os.open(s.state_file, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        out["sync"] = time.perf_counter() - t
        t = time.perf_counter()
        g = resume_guest(spec, work / "src", accel=accel)
        out["resume"] = time.perf_counter() - t
        g.wait_serial(TICK, 30, start=len(g.serial_text()))
        # migration by file: suspend here, copy, resume in the destination's folder
        t = time.perf_counter()
        s = g.suspend()
        t_copy = time.perf_counter()
        (work / "dst").mkdir()
        shutil.copyfile(s.state_file, work / "dst" / "state.bin")
        out["copy"] = time.perf_counter() - t_copy
        g = resume_guest(spec, work / "dst", accel=accel)
        out["migrate"] = time.perf_counter() - t
        g.wait_serial(TICK, 30)
        t = time.perf_counter()
        ended = g.shutdown(grace_s=30)
        out["shutdown"] = time.perf_counter() - t
        if ended.how != "powered off":
            raise GuestError(f"the guest did not power off on ACPI within 30 s ({ended.how})")
        return out
    finally:
        g.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="64,128,256", help="guest memory sizes in MB")
    ap.add_argument("--guest", type=Path, help="a built test guest's folder (default: build one)")
    ap.add_argument("--no-kvm", action="store_true", help="TCG only, without the KVM probe")
    ap.add_argument("--fill-pct", type=int, default=40, help="busy guests: %% of memory filled")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-vms-") as tmp:
        folder = args.guest or build_guest(Path(tmp) / "guest").kernel.parent
        base = GuestSpec(kernel=folder / "vmlinuz", initrd=folder / "initrd.img", memory_mb=128)
        accels = ["tcg"]
        if not args.no_kvm:
            choice = choose_accel(base)
            print(f"acceleration probe: {choice.accel} ({choice.reason})")
            if choice.accel == "kvm":
                accels.append("kvm")
        default, haizea10 = SchedulerConfig().suspend_rate, HAIZEA10.resume_rate or HAIZEA10.suspend_rate
        print(f"\n{args.rounds} rounds, medians; rates in MB/s of guest memory; reserved rates: "
              f"SchedulerConfig.suspend_rate {default:g} MB/s, Haizea 1.0 test config {haizea10:g} MB/s\n")
        cols = ("accel", "MB", "guest", "boot s", "suspend s", "file MB", "sync s", "resume s",
                "copy s", "migrate s", "shutdown s", "suspend MB/s", "resume MB/s",
                f"vs {default:g}", f"vs {haizea10:g}")
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for accel, mb, busy in ((a, mb, busy) for a in accels for mb in sizes for busy in (False, True)):
            fill = mb * args.fill_pct // 100
            spec = GuestSpec(kernel=base.kernel, initrd=base.initrd, memory_mb=mb,
                             append=f"skylease.fill={fill}" if busy else "")
            rows = []
            try:
                for i in range(args.rounds):
                    rows.append(one_round(spec, Path(tmp) / f"{accel}-{mb}-{int(busy)}-{i}", accel))
            except GuestError as e:
                print(f"| {accel} | {mb} | {'busy' if busy else 'idle'} | did not run: {e} |", flush=True)
                continue
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            kind = f"busy ({med['filled']:.0f} MB filled)" if busy else "idle"
            rs, rr = mb / med["suspend"], mb / med["resume"]
            cells = [accel, mb, kind, *(f"{med[k]:.2f}" for k in ("boot", "suspend")),
                     f"{med['file_mb']:.0f}",
                     *(f"{med[k]:.2f}" for k in ("sync", "resume", "copy", "migrate", "shutdown")),
                     f"{rs:.0f}", f"{rr:.0f}", f"{rs / default:.1f}× / {rr / default:.1f}×",
                     f"{rs / haizea10:.1f}× / {rr / haizea10:.1f}×"]
            print("| " + " | ".join(map(str, cells)) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
