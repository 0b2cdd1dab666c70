"""Fixtures of the lease runtime's tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skylease.runtime.leases.qemu_spec import GuestSpec


def _no_guest(why: str) -> None:
    why = f"no QEMU test guest here: {why}"
    pytest.fail(why) if os.environ.get("SKYLEASE_REQUIRE_QEMU") == "1" else pytest.skip(why)


@pytest.fixture(scope="session")
def test_guest(tmp_path_factory: pytest.TempPathFactory) -> GuestSpec:
    """The test guest (skylease.testing.guest), built once by its own command line into a temporary
    folder: a 128 MB GuestSpec of its kernel and initrd. Skips without qemu-system-x86_64, busybox or
    a cloud kernel; fails instead when ``SKYLEASE_REQUIRE_QEMU=1`` (CI, which installs them)."""
    if shutil.which("qemu-system-x86_64") is None:
        _no_guest("qemu-system-x86_64 is missing (apt-get install qemu-system-x86)")
    out = tmp_path_factory.mktemp("guest")
    r = subprocess.run([sys.executable, "-m", "skylease.testing.guest", "build", str(out)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        _no_guest(r.stderr.strip())
    return GuestSpec(kernel=Path(out, "vmlinuz"), initrd=Path(out, "initrd.img"), memory_mb=128)
