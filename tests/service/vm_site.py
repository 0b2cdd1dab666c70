"""Scaffolding of the VM lease tests: a real ``skylease serve`` (test_serve_crash.Server) on a site
of two 256 MB nodes of this machine whose image repository holds the test guest
(skylease.testing.guest) as a folder image, and reading its VMs' serial consoles."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .test_serve_crash import GRACE_S, Server

#: Lease seconds per real second: a guest boots (3-5 s under TCG on a loaded machine, after a first
#: VM start's 6 s KVM probe) well within a lease of 600.
VM_SCALE = 10
TICK_RE = re.compile(r"skylease-guest uptime=\S+ tick=(\d+)")


def _no_guest(why: str) -> None:
    why = f"no QEMU test guest here: {why}"
    pytest.fail(why) if os.environ.get("SKYLEASE_REQUIRE_QEMU") == "1" else pytest.skip(why)


def build_repository(repo: Path) -> None:
    """``repo/guest/`` (the test guest: vmlinuz, initrd.img) and ``repo/broken/`` (no initrd);
    skips (fails under SKYLEASE_REQUIRE_QEMU=1) where QEMU or the guest's parts are missing."""
    if shutil.which("qemu-system-x86_64") is None:
        _no_guest("qemu-system-x86_64 is missing (apt-get install qemu-system-x86)")
    r = subprocess.run([sys.executable, "-m", "skylease.testing.guest", "build", str(repo / "guest")],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        _no_guest(r.stderr.strip())
    (repo / "broken").mkdir()
    shutil.copyfile(repo / "guest" / "vmlinuz", repo / "broken" / "vmlinuz")


@dataclass
class VmServer(Server):
    """The serve test's Server on the VM site (two nodes of 1 CPU and 256 MB, repository ``repo``)."""

    def options(self) -> dict[str, Any]:
        site = self.data.parent / "site.toml"
        site.write_text('repository = "repo"\n[[nodes]]\ncount = 2\ncpu = 1\nmemory = 256\n')
        return {"port": 0, "data_dir": str(self.data), "time_scale": VM_SCALE, "site": str(site),
                "grace": GRACE_S}

    def vm_dir(self, lease: int, vnode: int = 0) -> Path:
        return self.data / "leases" / str(lease) / f"vm-{vnode}"

    def ticks(self, lease: int, vnode: int = 0) -> list[int]:
        """The tick counts the VM's serial console printed so far, in order."""
        try:
            text = (self.vm_dir(lease, vnode) / "serial.log").read_text(errors="replace")
        except FileNotFoundError:
            return []
        return [int(m.group(1)) for m in TICK_RE.finditer(text)]

    def wait_ticks(self, lease: int, n: int, timeout: float = 90) -> list[int]:
        """The ticks once the console printed ``n`` (at most ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while len(ticks := self.ticks(lease)) < n:
            assert time.monotonic() < deadline, f"lease {lease}: {len(ticks)} ticks in {timeout} s"
            time.sleep(0.2)
        return ticks

    def short_lease_done(self, timeout: float) -> tuple[int, dict[str, Any]]:
        """alice's lease of the guest that ticks twice and powers itself off (:func:`short_guest`),
        and its view once it is done (within ``timeout`` seconds)."""
        body = {"duration": 600, "memory": 128, "vm": True, "image": short_guest(self.data.parent / "repo")}
        r = self.call("POST", "/leases", "alice", json=body)
        assert r.status_code == 201, r.text
        lid = r.json()["id"]
        deadline = time.monotonic() + timeout
        while (view := self.call("GET", f"/leases/{lid}", "alice").json())["state"] != "done":
            assert time.monotonic() < deadline, view
            time.sleep(0.2)
        return lid, view

    def payload_pid(self, lease: int) -> int | None:
        view = self.call("GET", f"/leases/{lease}").json()
        return view["payloads"][0]["pid"] if view["payloads"] else None


@dataclass
class HostVmServer(VmServer):
    """The VM server on a site of SSH hosts (``site``: the ``ssh_site`` fixture's), one node of 1 CPU
    and 256 MB per host, the repository ``repo`` beside the site file."""

    site: Any = None

    def options(self) -> dict[str, Any]:
        options = super().options()
        text = (f'repository = "repo"\n[ssh]\nuser = "root"\nidentity_file = "{self.site.key}"\n'
                f'known_hosts = "{self.site.known_hosts}"\n')
        for h in self.site.hosts:
            text += (f'[[hosts]]\naddress = "{h.address}"\nname = "{h.name}"\nnodes = 1\ncpu = 1\n'
                     "memory = 256\n")
        Path(options["site"]).write_text(text)
        return options


def short_guest(repo: Path, ticks: int = 2) -> str:
    """``repo/short``: the test guest that ticks ``ticks`` times and powers itself off; its name."""
    (repo / "short").mkdir(exist_ok=True)
    for name in ("vmlinuz", "initrd.img"):
        (repo / "short" / name).write_bytes((repo / "guest" / name).read_bytes())
    (repo / "short" / "cmdline").write_text(f"skylease.ticks={ticks}\n")  # (the test guest's own switch)
    return "short"


def stop_vm_server(srv: VmServer) -> None:
    """Stop the server, and end any guest of it still running (by its process group)."""
    import contextlib

    from .payloads import payload_processes

    srv.stop()
    with contextlib.suppress(Exception):
        for pid, _ticks in payload_processes(srv.serve_id()):
            with contextlib.suppress(OSError):
                os.killpg(pid, 9)


def add_users(srv: VmServer) -> None:
    """Users alice and root (an administrator) in the server's database, their tokens kept."""
    import contextlib
    import io

    from skylease.cli import main

    for name, admin in (("alice", False), ("root", True)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["serve", "user", "add", name, "--data-dir", str(srv.data),
                         *(["--admin"] if admin else [])]) == 0
        srv.tokens[name] = out.getvalue().splitlines()[0].strip()
