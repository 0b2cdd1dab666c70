"""QEMU guests over QMP (skylease.runtime.leases.qemu) with the real test guest (skylease.testing.guest):
boot, suspend to a file, resume, adopt, ACPI shutdown, a guest that ends by itself, the acceleration
probe, and bad inputs. The tests that boot guests are marked integration (about 30 s in all on a
loaded machine); they skip without QEMU, busybox or a cloud kernel (fail under SKYLEASE_REQUIRE_QEMU=1:
the ``test_guest`` fixture)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from skylease.model.errors import UserError
from skylease.runtime.leases.procfs import proc_stat
from skylease.runtime.leases.qemu import Guest, GuestError, GuestSpec, adopt_guest, resume_guest, start_guest
from skylease.runtime.leases.qemu_accel import AccelChoices, choose_accel
from skylease.testing.guest import CpioEntry, build_guest, find_busybox, find_kernel, newc_archive

TICK = re.compile(r"skylease-guest uptime=\S+ tick=(\d+)\r?\n")  # a whole line: a cut one is not counted


def ticks(text: str) -> list[int]:
    return [int(n) for n in TICK.findall(text)]


@pytest.fixture
def guests():
    """Guests a test started; any still running at its end is killed (by its PID)."""
    started: list[Guest] = []
    yield started
    for g in started:
        g.kill()


# -- booting guests ------------------------------------------------------------------------------------

@pytest.mark.integration
def test_suspend_resume_move_continue_the_counter_then_adopt_and_acpi_shutdown(test_guest, tmp_path, guests):
    folder = tmp_path / "vm1"
    g = start_guest(test_guest, folder)
    guests.append(g)
    g.wait_serial(r"tick=2\r?\n", 60)
    pid = g.pid

    s = g.suspend()
    before = g.serial_text()
    assert s.state_file == folder / "state.bin" and s.state_file.stat().st_size == s.size_bytes
    # the guest's memory is in the file (zero pages take a few bytes each): far over the kernel alone
    assert s.size_bytes > 10 * 2**20
    assert not g.alive() and proc_stat(pid) is None  # no QEMU process: its memory is free
    assert g.status().state == "ended"
    time.sleep(1.5)
    assert g.serial_text() == before  # nothing runs while suspended

    # a truncated copy of the state cannot be resumed: a clear reason, soon, and nothing left running
    cut = tmp_path / "cut"
    cut.mkdir()
    with s.state_file.open("rb") as fh:
        (cut / "state.bin").write_bytes(fh.read(s.size_bytes // 2))
    t0 = time.monotonic()
    with pytest.raises(GuestError, match=r"could not load|loading .* failed") as err:
        resume_guest(test_guest, cut)
    assert time.monotonic() - t0 < 30, err.value
    assert (cut / "state.bin").exists()  # kept: a failed resume destroys nothing

    g2 = resume_guest(test_guest, folder)
    guests.append(g2)
    assert g2.status().state == "running" and not s.state_file.exists()
    g2.wait_serial(r"tick=\d+\r?\n", 30, start=len(before))
    got = ticks(g2.serial_text())
    # The counter is a shell variable in the guest's memory: after the resume it goes on from the
    # last tick printed before the suspend (+1), and the log as a whole counts 1, 2, 3, ... with no
    # gap, no repeat and no second tick=1 (a reboot would start again at 1).
    last = ticks(before)[-1]
    assert got[len(ticks(before))] == last + 1
    assert got == list(range(1, len(got) + 1)), got

    # moved by file: suspended again, its state copied into another guest folder (another host's,
    # in the enactment to come), resumed there; the new console log goes on from the old one's count
    s2 = g2.suspend()
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copyfile(s2.state_file, moved / "state.bin")
    old = g2.serial_text()
    g2 = resume_guest(test_guest, moved)
    guests.append(g2)
    g2.wait_serial(r"tick=\d+\r?\n", 30)
    # (the two logs joined: a line the suspend cut in two is whole again)
    both = ticks(old + g2.serial_text())
    assert both == list(range(1, len(both) + 1)) and len(both) > len(ticks(old)), both
    folder = moved

    # our process "restarts": the handle is dropped; another process finds the guest through its
    # folder and QMP socket, then this one does again
    g2.disconnect()
    other = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from skylease.runtime.leases.qemu import adopt_guest; g = adopt_guest(Path(sys.argv[1])); "
         "print(g.pid, g.status().state); g.disconnect()", str(folder)],
        capture_output=True, text=True, timeout=60)
    assert other.stdout.split() == [str(g2.pid), "running"], other.stderr[-2000:]
    adopted = adopt_guest(folder)
    guests.append(adopted)
    assert adopted.pid == g2.pid and adopted.status().state == "running"
    n = len(adopted.serial_text())
    adopted.wait_serial(r"tick=\d+\r?\n", 30, start=n)  # still ticking: not restarted

    ended = adopted.shutdown(grace_s=30)
    assert ended.how == "powered off", ended
    assert "power button: powering off" in adopted.serial_text()
    assert adopted.status().state == "ended" and adopted.status().reason == "guest-shutdown"


@pytest.mark.integration
def test_a_guest_that_powers_itself_off_is_reported_ended_and_its_disk_is_an_overlay(test_guest, tmp_path,
                                                                                     guests):
    image = tmp_path / "disk.raw"
    image.write_bytes(b"\0" * 2**20)
    # (96 MB: the cloud kernel needs 51.5 MB to unpack itself beside its 13.5 MB image; 64 MB resets)
    spec = replace(test_guest, memory_mb=96, append="skylease.ticks=2", disk=image)
    g = start_guest(spec, tmp_path / "vm2")
    guests.append(g)
    deadline = time.monotonic() + 60
    while (st := g.status()).state != "ended":
        assert time.monotonic() < deadline, g.serial_text()[-500:]
        time.sleep(0.2)
    assert (st.exit_code, st.reason) == (0, "guest-shutdown"), st
    assert "2 ticks done: powering off" in g.serial_text()
    assert ticks(g.serial_text()) == [1, 2]
    assert image.read_bytes() == b"\0" * 2**20  # the image is never written
    overlay = g.files.overlay
    if shutil.which("qemu-img"):
        info = subprocess.run(["qemu-img", "info", str(overlay)], capture_output=True, text=True).stdout
        assert "file format: qcow2" in info and str(image) in info
    else:
        assert overlay.read_bytes() == image.read_bytes()


@pytest.mark.integration
def test_a_guest_that_resets_is_reported_ended_by_a_reset(test_guest, tmp_path, guests):
    """64 MB is too little for the cloud kernel (it unpacks to 51.5 MB beside its 13.5 MB image): the
    guest resets during its decompression, which ends QEMU under -no-reboot; told from a power-off
    by QEMU's SHUTDOWN event."""
    g = start_guest(replace(test_guest, memory_mb=64), tmp_path / "vm3")
    guests.append(g)
    deadline = time.monotonic() + 60
    while (st := g.status()).state != "ended":
        assert time.monotonic() < deadline, g.serial_text()[-500:]
        time.sleep(0.2)
    assert (st.exit_code, st.reason) == (0, "guest-reset"), st
    assert "(guest-reset)" in st.detail and ticks(g.serial_text()) == []


@pytest.mark.integration
def test_the_acceleration_probe_boots_a_guest_and_keeps_its_answer(test_guest):
    choices = AccelChoices()
    c = choices.choose(test_guest)
    assert c.accel in ("kvm", "tcg") and c.reason
    if c.accel == "kvm":
        assert "booted under KVM" in c.reason
    elif Path("/dev/kvm").exists():
        assert "under KVM" in c.reason and c.probe_s > 0  # a guest was really tried
    t0 = time.monotonic()
    assert choices.choose(test_guest) is c and time.monotonic() - t0 < 0.5  # kept, not probed again


# -- bad input (no guest boots) ---------------------------------------------------------------------------

def _files(tmp_path: Path) -> GuestSpec:
    (tmp_path / "vmlinuz").write_bytes(b"not a kernel")
    (tmp_path / "initrd.img").write_bytes(b"not an initrd")
    return GuestSpec(kernel=tmp_path / "vmlinuz", initrd=tmp_path / "initrd.img", memory_mb=64)


def test_bad_specs_are_one_clear_line(tmp_path):
    spec = _files(tmp_path)
    with pytest.raises(UserError, match=r"nope: kernel: no such file"):
        start_guest(replace(spec, kernel=tmp_path / "nope"), tmp_path / "g")
    with pytest.raises(UserError, match=r"memory_mb: 512 MB is beyond the limit of 256 MB"):
        start_guest(replace(spec, memory_mb=512), tmp_path / "g", memory_limit_mb=256)
    with pytest.raises(UserError, match=r"a kernel \(with its initrd\) or a disk"):
        start_guest(GuestSpec(), tmp_path / "g")
    with pytest.raises(UserError, match=r"accel: must be kvm or tcg"):
        start_guest(spec, tmp_path / "g", accel="xen")
    with pytest.raises(GuestError, match=r"^qemu-system-nonesuch not found: apt-get install"):
        start_guest(spec, tmp_path / "g", qemu="qemu-system-nonesuch")
    with pytest.raises(UserError, match=r"too long a path for a QMP socket"):
        start_guest(spec, tmp_path / ("x" * 120))
    assert not (tmp_path / "g").exists()  # nothing half-made


def test_a_missing_or_foreign_state_file_is_refused_before_qemu_starts(tmp_path):
    spec = _files(tmp_path)
    with pytest.raises(UserError, match=r"state.bin: no such state file"):
        resume_guest(spec, tmp_path / "g")
    (tmp_path / "junk.bin").write_bytes(b"\x7fELF and more")
    with pytest.raises(UserError, match=r"junk.bin: is not a saved QEMU guest"):
        resume_guest(spec, tmp_path / "g", state_file=tmp_path / "junk.bin")
    with pytest.raises(UserError, match=r"is not a guest's folder"):
        adopt_guest(tmp_path)
    (tmp_path / "moved").mkdir()
    (tmp_path / "moved" / "state.bin").write_bytes(b"QEVM" + bytes(100))
    (tmp_path / "disk.raw").write_bytes(bytes(4096))
    with pytest.raises(UserError, match=r"moved: no overlay.qcow2 beside the state file"):
        resume_guest(replace(spec, disk=tmp_path / "disk.raw"), tmp_path / "moved")
    assert not (tmp_path / "moved" / "overlay.qcow2").exists()


def test_adopting_a_guest_whose_qemu_is_gone_says_so(tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    spec = _files(tmp_path)
    done = subprocess.Popen(["true"])
    done.wait()  # reaped: its PID names no process now
    meta = {"spec": spec.to_json(), "accel": "tcg", "pid": done.pid, "start_ticks": 1}
    (folder / "guest.json").write_text(json.dumps(meta))
    with pytest.raises(GuestError, match=r"its QEMU \(pid \d+\) is gone"):
        adopt_guest(folder)


def test_the_probe_takes_tcg_without_kvm_and_says_why(tmp_path):
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is missing")
    c = choose_accel(_files(tmp_path), kvm_device=tmp_path / "kvm")
    assert (c.accel, c.probe_s) == ("tcg", 0.0) and c.reason == f"{tmp_path / 'kvm'} is missing"


# -- the guest's build ---------------------------------------------------------------------------------

def test_newc_archive_is_what_the_kernel_unpacks():
    data = newc_archive([CpioEntry("init", 0o100755, b"#!/bin/sh\n"), CpioEntry("dev/console", 0o20600,
                                                                                 rdev=(5, 1))])
    assert data.startswith(b"070701") and len(data) % 4 == 0
    head = data[6:6 + 13 * 8]
    fields = [int(head[i:i + 8], 16) for i in range(0, len(head), 8)]
    assert fields[1] == 0o100755 and fields[6] == len(b"#!/bin/sh\n") and fields[11] == len(b"init\0")
    assert data[110:115] == b"init\0" and b"#!/bin/sh\n" in data
    i = data.index(b"dev/console\0")
    con = [int(data[i - 104 + k:i - 96 + k], 16) for k in range(0, 104, 8)]
    assert (con[9], con[10]) == (5, 1)  # the device numbers of /dev/console
    assert b"TRAILER!!!\0" in data


def test_the_build_says_what_is_missing_in_one_line(tmp_path):
    with pytest.raises(UserError, match=r"no cloud kernel found: no .*vmlinuz-\*-cloud-amd64.*--kernel"):
        find_kernel(boot=tmp_path, cache=tmp_path)
    with pytest.raises(UserError, match=r"no busybox found at .*bb \(apt-get install busybox-static\)"):
        find_busybox([tmp_path / "bb"])
    with pytest.raises(UserError, match=r"true: is not a static busybox"):
        build_guest(tmp_path / "out", busybox=Path(shutil.which("true")), boot=tmp_path, cache=tmp_path)
    for args, want in ((["--kernel", str(tmp_path / "nope")], "nope: --kernel: no such file"),
                       (["--busybox", str(tmp_path / "bb")], "bb: no such file")):
        cmd = [sys.executable, "-m", "skylease.testing.guest", "build", str(tmp_path / "o"), *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and want in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.integration
def test_the_built_initrd_holds_busybox_the_init_and_the_button_module(test_guest):
    data = gzip.decompress(test_guest.initrd.read_bytes())
    for name in (b"bin/busybox\0", b"init\0", b"sbin/poweroff\0", b"button.ko\0"):
        assert name in data, name


def test_a_kept_acceleration_outlives_the_process_until_qemu_or_kvm_changes(tmp_path):
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is missing")
    store, kvm = tmp_path / "accel.json", tmp_path / "kvm"
    first = AccelChoices(store=store, kvm_device=kvm).choose(_files(tmp_path))
    assert (first.accel, first.reason) == ("tcg", f"{kvm} is missing")
    kept = json.loads(store.read_text())
    [key] = kept
    kept[key]["reason"] = "as kept"  # (a later process reads what an earlier one found)
    store.write_text(json.dumps(kept))
    assert AccelChoices(store=store, kvm_device=kvm).choose(_files(tmp_path)).reason == "as kept"
    kvm.write_text("")  # a KVM device that came since: probed again, not the kept answer
    again = AccelChoices(store=store, kvm_device=kvm).choose(_files(tmp_path))
    assert again.reason != "as kept" and len(json.loads(store.read_text())) == 2
