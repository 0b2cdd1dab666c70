"""KVM or TCG for QEMU guests: KVM only where a probe guest really boots under it.

/dev/kvm being there is not enough: on some machines (this one's CI among them) QEMU starts under KVM
and the guest never prints a line. So the probe boots a guest (the test guest, or any kernel that
prints a known line on its serial console) under KVM and waits a few seconds for that line; TCG
otherwise (docs/decisions/vm-payloads.md). The choice and its reason are logged and kept per QEMU
binary for the life of the process. The probe guest is killed by its PID once the probe is done.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skylease.runtime.leases.qemu import GuestError, start_guest
from skylease.runtime.leases.qemu_spec import QEMU, GuestSpec, find_qemu

__all__ = ["PROBE_TIMEOUT_S", "AccelChoice", "AccelChoices", "choose_accel", "keep_choice", "kept_choice"]

log = logging.getLogger(__name__)

#: Seconds a probe guest has to print its line under KVM (it prints in about 1 s when KVM works; TCG
#: takes ~3 s, so a KVM slower than that is no gain).
PROBE_TIMEOUT_S = 6.0
#: The line the test guest prints once its /init runs (skylease.testing.guest).
PROBE_MARK = r"skylease-guest uptime="

@dataclass(frozen=True)
class AccelChoice:
    accel: str  # "kvm" or "tcg"
    reason: str
    probe_s: float  # seconds the probe took (0 when no guest was booted)


def _kvm_usable(dev: Path) -> str | None:
    """Why KVM cannot be used at all (no device, no access), or None."""
    if not dev.exists():
        return f"{dev} is missing"
    if not os.access(dev, os.R_OK | os.W_OK):
        return f"{dev} is not readable and writable by this user"
    return None


def _probe(qemu: str, probe: GuestSpec, mark: str, timeout: float, dev: Path) -> AccelChoice:
    why_not = _kvm_usable(dev)
    if why_not is not None:
        return AccelChoice("tcg", why_not, 0.0)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="skylease-kvm-probe-") as tmp:
        try:
            guest = start_guest(replace(probe, memory_mb=min(probe.memory_mb, 128)), Path(tmp) / "probe",
                                accel="kvm", qemu=qemu)
        except GuestError as e:
            return AccelChoice("tcg", f"QEMU did not start a guest under KVM: {e}", time.monotonic() - t0)
        try:
            guest.wait_serial(mark, timeout)
            took = time.monotonic() - t0
            return AccelChoice("kvm", f"a probe guest booted under KVM in {took:.1f} s", took)
        except GuestError as e:
            took = time.monotonic() - t0
            st = guest.status()
            why = (f"it ended before printing a line: {st.detail}" if st.state == "ended"
                   else f"it printed nothing in {timeout:g} s")
            log.debug("KVM probe: %s", e)
            return AccelChoice("tcg", f"a probe guest under KVM did not boot: {why}", took)
        finally:
            guest.kill()


def choose_accel(probe: GuestSpec, *, qemu: str = QEMU, mark: str = PROBE_MARK,
                 timeout: float = PROBE_TIMEOUT_S, kvm_device: Path = Path("/dev/kvm")) -> AccelChoice:
    """KVM if ``probe`` boots under it and prints ``mark`` (a regular expression) on its serial console
    within ``timeout`` seconds, TCG otherwise (a probe each call: :class:`AccelChoices` keeps the
    answers). GuestError if QEMU is missing."""
    binary = find_qemu(qemu)
    choice = _probe(binary, probe, mark, timeout, kvm_device)
    log.info("QEMU %s: %s (%s)", binary, choice.accel, choice.reason)
    return choice


def _stored(store: Path | None) -> dict[str, Any]:
    if store is None:
        return {}
    try:
        data = json.loads(store.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def kept_choice(store: Path | None, key: str) -> AccelChoice | None:
    """The choice kept under ``key`` in the JSON file ``store`` (None: none, or no file)."""
    kept = _stored(store).get(key)
    if isinstance(kept, dict) and kept.get("accel") in ("kvm", "tcg"):
        return AccelChoice(kept["accel"], str(kept.get("reason", "")), float(kept.get("probe_s", 0.0)))
    return None


def keep_choice(store: Path | None, key: str, choice: AccelChoice) -> None:
    """Keep ``choice`` under ``key`` in ``store`` (written whole: a ``.part`` file renamed). A file
    that cannot be written is no error: the next process probes again (slower, not wrong)."""
    if store is None:
        return
    data = _stored(store)
    data[key] = {"accel": choice.accel, "reason": choice.reason, "probe_s": choice.probe_s}
    part = store.with_name(store.name + ".part")
    try:
        part.write_text(json.dumps(data, indent=1))
        part.replace(store)
    except OSError as exc:
        log.warning("the KVM probe's answer could not be kept in %s: %s", store, exc)


class AccelChoices:
    """The acceleration of each QEMU binary, probed once (:func:`choose_accel`) and kept by its
    owner (an enactment keeps one for its life; :meth:`forget` after KVM was fixed, say). With a
    ``store`` file the answers outlive the process (a server's data folder: a restarted server does
    not probe again, which would add the probe's seconds to the first guest it resumes); an answer
    is kept for the binary as it is (a QEMU upgraded since, or a KVM device that came or went,
    is probed again)."""

    def __init__(self, *, mark: str = PROBE_MARK, timeout: float = PROBE_TIMEOUT_S,
                 kvm_device: Path = Path("/dev/kvm"), store: Path | None = None) -> None:
        self.mark, self.timeout, self.kvm_device, self.store = mark, timeout, kvm_device, store
        self._lock = threading.Lock()
        self._choices: dict[str, AccelChoice] = {}

    def _key(self, binary: str) -> str:
        st = os.stat(binary)
        return f"{binary}:{st.st_mtime_ns}:{st.st_size}:{int(self.kvm_device.exists())}"

    def choose(self, probe: GuestSpec, qemu: str = QEMU) -> AccelChoice:
        binary = find_qemu(qemu)
        key = self._key(binary)
        with self._lock:  # one probe at a time: two at once would both boot a guest for nothing
            if key not in self._choices:
                kept = kept_choice(self.store, key)
                if kept is not None:
                    self._choices[key] = kept
                else:
                    self._choices[key] = choose_accel(probe, qemu=binary, mark=self.mark,
                                                      timeout=self.timeout, kvm_device=self.kvm_device)
                    keep_choice(self.store, key, self._choices[key])
            return self._choices[key]

    def forget(self) -> None:
        """The next :meth:`choose` probes again."""
        with self._lock:
            self._choices.clear()
            if self.store is not None:
                self.store.unlink(missing_ok=True)
