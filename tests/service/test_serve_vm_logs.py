"""A VM lease's log is its guest's serial console (issue 40, item 3): a real ``skylease serve`` on the
VM site of vm_site.py (real QEMU guests); the test guest, told to tick twice and power off, ends its
lease early. ``GET /leases/{id}/vms/0/log`` answers its end (``exited``, its exit code as the lease's
``ended_payloads`` has it) and the end of ``serial.log`` (its two ticks, the power-off), as the file
in its folder holds it; `skylease leases logs` prints the same."""

from __future__ import annotations

import contextlib
import io

import pytest

from skylease.cli import main

from .vm_site import TICK_RE, VmServer, build_repository, stop_vm_server

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
    stop_vm_server(srv)


def test_a_vm_leases_log_is_its_serial_console(vm_server, capsys, monkeypatch):
    srv = vm_server
    lid, view = srv.short_lease_done(timeout=120)
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
