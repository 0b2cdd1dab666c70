"""A VM lease's log is its guest's serial console (issue 40, item 3): a real ``skylease serve`` on the
VM site of vm_site.py (real QEMU guests); the test guest, told to tick twice and power off, ends its
lease early. ``GET /leases/{id}/vms/0/log`` answers its end (``exited``, its exit code as the lease's
``ended_payloads`` has it) and the end of ``serial.log`` (its two ticks, the power-off), as the file
in its folder holds it; `skylease leases logs` prints the same."""

from __future__ import annotations

import contextlib
import io
import os
import time

import pytest

from skylease.cli import main

from .payloads import payload_processes
from .vm_site import TICK_RE, VmServer, build_repository

pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def vm_server(tmp_path, payload_sandbox):
    build_repository(tmp_path / "repo")
    srv = VmServer(tmp_path / "serve", None)
    for name in ("alice", "bob"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["serve", "user", "add", name, "--data-dir", str(srv.data)]) == 0
        srv.tokens[name] = out.getvalue().splitlines()[0].strip()
    srv.start()
    yield srv
    srv.stop()
    with contextlib.suppress(Exception):
        for pid, _ticks in payload_processes(srv.serve_id()):
            with contextlib.suppress(OSError):
                os.killpg(pid, 9)


def test_a_vm_leases_log_is_its_serial_console(vm_server, capsys, monkeypatch):
    srv = vm_server
    repo = srv.data.parent / "repo"
    (repo / "short").mkdir()
    for name in ("vmlinuz", "initrd.img"):
        (repo / "short" / name).write_bytes((repo / "guest" / name).read_bytes())
    (repo / "short" / "cmdline").write_text("skylease.ticks=2\n")  # (the test guest's own switch)
    body = {"duration": 600, "memory": 128, "vm": True, "image": "short"}
    r = srv.call("POST", "/leases", "alice", json=body)
    assert r.status_code == 201, r.text
    lid = r.json()["id"]
    deadline = time.monotonic() + 120
    while (view := srv.call("GET", f"/leases/{lid}", "alice").json())["state"] != "done":
        assert time.monotonic() < deadline, view
        time.sleep(0.2)
    ended = view["ended_payloads"][0]
    got = srv.call("GET", f"/leases/{lid}/vms/0/log", "alice", params={"bytes": 131072}).json()
    assert (got["log"], got["state"], got["exit_code"], got["reason"], got["node"], got["log_error"]) == (
        "serial", ended["state"], ended["exit_code"], ended["reason"], ended["node"], None), got
    console = (srv.vm_dir(lid) / "serial.log").read_bytes()
    assert got["text"] == console[-131072:].decode(errors="replace"), got
    assert [int(m.group(1)) for m in TICK_RE.finditer(got["text"])] == [1, 2], got["text"][-2000:]
    assert "powering off" in got["text"], got["text"][-2000:]
    assert srv.call("GET", f"/leases/{lid}/vms/0/log", "bob").status_code == 404

    monkeypatch.setenv("SKYLEASE_SERVER", srv.url)
    monkeypatch.setenv("SKYLEASE_TOKEN", srv.tokens["alice"])
    capsys.readouterr()
    assert main(["leases", "logs", str(lid), "--bytes", "2000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"== lease {lid} VM 0 on {ended['node']}: exited"), out
    assert "; serial log:\n" in out and "powering off" in out, out
