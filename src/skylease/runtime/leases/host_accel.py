"""KVM or TCG for the guests of an SSH host: the probe of qemu_accel.py, run on the host.

As on this machine (docs/decisions/vm-payloads.md, "KVM only where a probe guest boots"), a
``/dev/kvm`` on the host is not enough: a probe guest is booted there under KVM and must print its
line on its serial console within a few seconds. The probe is one shell script sent over the host's
SSH connection: it starts QEMU in the background in a folder of its own, looks for the line every
0.1 s, and kills QEMU by its PID once it has an answer (a line, QEMU's end, or the time out). It runs
as the SSH user, not confined, as this machine's probe runs as the server's user. The payload user
must also be able to open the device, since the guests run as that user. The answer for each host
and QEMU is kept in the server's data folder (``accel-hosts.json``). A restarted server does not
probe again, because a probe of several seconds would land in the first resumption's window. Delete
the file to probe again.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path

from skylease.runtime.leases.qemu_accel import PROBE_TIMEOUT_S, AccelChoice, keep_choice, kept_choice
from skylease.runtime.leases.qemu_spec import GuestFiles, GuestSpec, command_line
from skylease.runtime.leases.sandbox import PayloadUser

__all__ = ["HostAccel", "kvm_opens", "probe_script", "read_probe"]

log = logging.getLogger(__name__)

KVM_DEVICE = "/dev/kvm"
#: The line the test guest prints once its /init runs (a fixed string: grep -F).
PROBE_LINE = "skylease-guest uptime="


def kvm_opens(mode: int, uid: int, gid: int, user: PayloadUser | None, *, as_caller: bool) -> bool:
    """Whether a payload may open a device of ``mode`` owned by ``uid:gid``: run as ``user`` (who keeps
    no supplementary group: only its own ids and the world's bits count), else as the caller
    (``as_caller``: whether the caller may read and write it)."""
    if user is None:
        return as_caller
    return bool(mode & 0o006 == 0o006 or (uid == user.uid and mode & 0o600 == 0o600)
                or (gid == user.gid and mode & 0o060 == 0o060))


def probe_script(qemu: str, spec: GuestSpec, folder: str, *, timeout: float = PROBE_TIMEOUT_S,
                 line: str = PROBE_LINE) -> str:
    """The shell script that probes KVM on a host with ``spec`` (its files as the host sees them) in
    ``folder`` (made and removed by it). It prints one line: ``missing``, ``denied``, or ``device MODE
    UID GID`` followed by ``booted S``, ``ended WHY`` or ``silent``."""
    files = GuestFiles(Path(folder))
    argv = command_line(qemu, spec, files, "kvm", disk_format=None)
    d, serial = shlex.quote(folder), shlex.quote(str(files.serial))
    rounds = max(1, round(timeout / 0.1))
    return "\n".join([
        f"dev={KVM_DEVICE}",
        'test -e "$dev" || { echo missing; exit 0; }',
        'test -r "$dev" && test -w "$dev" || { echo denied; exit 0; }',
        'echo "device $(stat -L -c \'%a %u %g\' "$dev")"',
        f"rm -rf {d} && mkdir -p -m 0700 {d} || exit 1",
        f"{shlex.join(argv)} </dev/null >{d}/qemu.err 2>&1 & p=$!",
        "i=0",
        f"while [ $i -lt {rounds} ]; do",
        f"  if grep -qF {shlex.quote(line)} {serial} 2>/dev/null; then",
        '    kill -9 $p; wait $p 2>/dev/null; echo "booted $i"; rm -rf ' + d + "; exit 0",
        "  fi",
        '  kill -0 $p 2>/dev/null || { wait $p 2>/dev/null; echo "ended $(tail -n 1 ' + d
        + '/qemu.err)"; rm -rf ' + d + "; exit 0; }",
        "  sleep 0.1; i=$((i+1))",
        "done",
        f"kill -9 $p; wait $p 2>/dev/null; echo silent; rm -rf {d}",
    ])


def read_probe(out: str, label: str, user: PayloadUser | None, timeout: float = PROBE_TIMEOUT_S,
               took: float = 0.0) -> AccelChoice:
    """The choice a probe's output (:func:`probe_script`) means on host ``label``."""
    lines = [x.strip() for x in out.strip().splitlines() if x.strip()]
    if not lines:
        return AccelChoice("tcg", f"the KVM probe on {label} said nothing", took)
    if lines[0] == "missing":
        return AccelChoice("tcg", f"{KVM_DEVICE} is missing on {label}", 0.0)
    if lines[0] == "denied":
        return AccelChoice("tcg", f"{KVM_DEVICE} on {label} is not readable and writable by its SSH user",
                           0.0)
    try:
        _, mode, uid, gid = lines[0].split()
        device = (int(mode, 8), int(uid), int(gid))
    except ValueError:
        return AccelChoice("tcg", f"the KVM probe on {label} said {lines[0]!r}", took)
    answer = lines[1] if len(lines) > 1 else ""
    if answer.startswith("booted"):
        if not kvm_opens(*device, user, as_caller=True):
            return AccelChoice("tcg", f"KVM works on {label} but the payload user cannot open {KVM_DEVICE}",
                               took)
        return AccelChoice("kvm", f"a probe guest booted under KVM on {label} in {took:.1f} s", took)
    if answer.startswith("ended"):
        why = answer[len("ended"):].strip() or "no message"
        return AccelChoice("tcg", f"a probe guest under KVM on {label} ended before printing a line: {why}",
                           took)
    return AccelChoice("tcg", f"a probe guest under KVM on {label} printed nothing in {timeout:g} s", took)


class HostAccel:
    """The acceleration of a host's guests, probed once (:func:`probe_script` through ``run``, a
    seam: ``sh -c SCRIPT`` on the host, returning its exit code and output) and kept in ``store``
    (a JSON file of this machine; None: for this process only), by host and QEMU."""

    def __init__(self, store: Path | None = None, *, timeout: float = PROBE_TIMEOUT_S) -> None:
        self.store, self.timeout = store, timeout
        self._lock = threading.Lock()
        self._choices: dict[str, AccelChoice] = {}

    def choose(self, label: str, qemu: str, spec: GuestSpec | None, folder: str,
               run: Callable[[str, float], tuple[int, str]], user: PayloadUser | None) -> AccelChoice:
        """The choice for ``qemu`` on host ``label``: kept, or probed now with ``spec`` (a kernel image
        as the host sees it; None: not one the probe can boot, TCG without a probe)."""
        key = f"{label} {qemu}"
        with self._lock:
            if key in self._choices:
                return self._choices[key]
            kept = kept_choice(self.store, key)
            if kept is not None:
                choice = kept
            elif spec is None or spec.kernel is None:
                return AccelChoice("tcg", f"no KVM probe on {label}: the probe boots a kernel image", 0.0)
            else:
                t0 = time.monotonic()
                code, out = run(probe_script(qemu, spec, folder, timeout=self.timeout), self.timeout + 30)
                took = time.monotonic() - t0
                choice = (read_probe(out, label, user, self.timeout, took) if code == 0
                          else AccelChoice("tcg", f"the KVM probe on {label} failed: {out.strip() or code}",
                                           took))
                log.info("QEMU %s on %s: %s (%s)", qemu, label, choice.accel, choice.reason)
                keep_choice(self.store, key, choice)
            self._choices[key] = choice
            return choice
