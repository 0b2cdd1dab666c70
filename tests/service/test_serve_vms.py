"""VM leases end to end (issue 38, this machine's nodes): a real ``skylease serve`` on a two-node site
whose repository holds the test guest; real QEMU guests (TCG where KVM does not boot), 128 MB each.

* Preemption: two best-effort VM leases run (their consoles tick); an advance reservation needing
  both nodes arrives; at the suspension each guest's QEMU process is gone and its state file is
  there; after the AR one guest resumes and its first tick is its last before + 1. The other's
  state file was corrupted meanwhile: its lease ends with the reason, the server still answers.
* A kill -9 of the server while the guests are saved: they stay saved, and resume after the AR.
* A kill -9 of the server: the restarted one adopts the running guest (same QEMU process, its count
  goes on) and powers it off over its QMP socket when the lease is cancelled.
* A guest that powers itself off: its lease's premature end.
* A disk image: the VM runs on a qcow2 overlay backed by the image (as QEMU sees it), never written.
* Bad inputs: ``vm`` without an image or with a command (422), an image not in the repository or
  not a VM's (409 with the reason).
"""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import httpx
import pytest

from skylease.cli import main

from .vm_site import VM_SCALE, VmServer, build_repository, stop_vm_server
from .web import HTML, login

pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration]


@pytest.fixture(scope="module")
def vm_server(tmp_path_factory, payload_sandbox):
    root = tmp_path_factory.mktemp("vms")
    build_repository(root / "repo")
    srv = VmServer(root / "serve", None)
    yield srv
    stop_vm_server(srv)


@pytest.fixture(scope="module")
def started(vm_server):
    """The server, started once for the module, with users alice and root (an administrator)."""
    for name, admin in (("alice", False), ("root", True)):
        out = io.StringIO()
        argv = ["serve", "user", "add", name, "--data-dir", str(vm_server.data),
                *(["--admin"] if admin else [])]
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
        vm_server.tokens[name] = out.getvalue().splitlines()[0].strip()
    vm_server.start()
    return vm_server


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def test_bad_vm_requests_are_refused_with_the_reason(started, capsys):
    srv = started
    argv = ["leases", "request", "--server", srv.url, "--token", srv.tokens["alice"], "--duration", "600",
            "--memory", "128", "--vm"]
    assert main(argv) == 2  # (checked before anything is sent)
    err = capsys.readouterr().err.strip()
    assert err.endswith("--vm: a VM lease needs an image (its guest boots from it)") and "\n" not in err, err
    assert main([*argv, "--image", "nothing-here"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("skylease leases request: error: image 'nothing-here' is not in the site's repository "
                   "(409 Conflict)"), err
    vm = {"duration": 600, "memory": 128, "vm": True}
    r = srv.call("POST", "/leases", "alice", json=vm)
    assert r.status_code == 422 and "vm: a VM lease needs an image" in r.json()["detail"], r.text
    r = srv.call("POST", "/leases", "alice", json={**vm, "image": "guest", "command": "true"})
    assert r.status_code == 422 and "takes no command" in r.json()["detail"], r.text
    r = srv.call("POST", "/leases", "alice", json={**vm, "image": "nothing-here"})
    assert r.status_code == 409, r.text
    assert r.json()["detail"] == "image 'nothing-here' is not in the site's repository"
    r = srv.call("POST", "/leases", "alice", json={**vm, "image": "broken"})
    assert r.status_code == 409 and "without initrd.img" in r.json()["detail"], r.text
    r = srv.call("POST", "/leases", "alice", json={**vm, "image": "guest", "memory": 8})
    assert r.status_code == 409 and r.json()["detail"] == "a VM needs 16 MB of memory at least, not 8"
    assert srv.leases() == {}  # nothing was journaled


def test_a_preempted_vm_is_saved_and_resumed_where_it_stopped(started, capsys):
    srv = started
    vm = {"duration": 600, "memory": 128, "vm": True, "image": "guest"}
    a = srv.call("POST", "/leases", "alice", json=vm).json()["id"]
    b = srv.call("POST", "/leases", "alice", json=vm).json()["id"]
    srv.wait_ticks(a, 2)
    srv.wait_ticks(b, 2)
    said = [line for line in srv.stderr().splitlines() if "VM leases run their guests under" in line]
    assert len(said) == 1 and (" TCG: " in said[0] or " KVM: " in said[0]), said  # (probed once, said once)
    pids = {lid: srv.payload_pid(lid) for lid in (a, b)}
    assert all(pids.values()), pids
    hosts = srv.call("GET", "/hosts").json()  # (the acceleration, on the Hosts page's rows too)
    assert all(h["vms"] == said[0].split("under ", 1)[1] for h in hosts), (hosts, said)
    ar = srv.call("POST", "/leases", "alice", json={"type": "advance-reservation", "start_in": 5 * VM_SCALE,
                                                    "duration": 8 * VM_SCALE, "nodes": 2, "memory": 128})
    assert ar.status_code == 201, ar.text
    ar_id = ar.json()["id"]
    # the suspension: each guest saved to its state file, its QEMU gone (the node's memory free)
    deadline = time.monotonic() + 60
    while not all((srv.vm_dir(lid) / "state.bin").exists() and not _alive(pid) for lid, pid in pids.items()):
        assert time.monotonic() < deadline, "the guests were not saved within 60 s"
        time.sleep(0.1)
    before = srv.ticks(a)
    views = srv.leases()
    assert views[a]["payloads"] == [] and views[b]["payloads"] == []
    assert views[ar_id]["state"] in ("scheduled", "active")
    # b's state file spoilt while it is saved: its resumption cannot load it
    state_b = srv.vm_dir(b) / "state.bin"
    data = state_b.read_bytes()
    state_b.write_bytes(data[: len(data) // 3])
    # kill -9 of the server while they are saved: the restarted one leaves them saved (no process to
    # adopt, nothing booted) until their resumption
    srv.kill9()
    srv.start()
    rows = srv.query(f"SELECT lease, state FROM lease_payloads WHERE lease IN ({a}, {b}) ORDER BY id")
    assert [(r["lease"], r["state"]) for r in rows][:2] == [(a, "saved"), (b, "saved")], rows
    # after the AR: a resumes and goes on counting where it stopped; b's lease ends with the reason
    deadline = time.monotonic() + 60
    while len(srv.ticks(a)) <= len(before):
        assert time.monotonic() < deadline, "the guest did not tick within 60 s of its resumption"
        time.sleep(0.2)
    after = srv.ticks(a)
    assert after[len(before)] == before[-1] + 1, (before[-3:], after[len(before) - 2:len(before) + 2])
    assert not (srv.vm_dir(a) / "state.bin").exists()  # (removed once the guest runs again)
    resumed = srv.payload_pid(a)
    assert resumed is not None and resumed != pids[a] and _alive(resumed)
    # the save and the resume, each beside the window the schedule reserved for it (lease time)
    plan = {r["kind"]: r for r in _runs(srv, a)}
    overheads = srv.call("GET", f"/leases/{a}").json()["overheads"]
    assert [o["kind"] for o in overheads] == ["suspend", "resume"], overheads
    for o in overheads:
        assert (o["reserved_start"], o["reserved_end"]) == (plan[o["kind"]]["start"], plan[o["kind"]]["end"])
        assert o["reserved_start"] - 1 <= o["started"] <= o["ended"] and o["measured_s"] > 0, o
        assert o["overran"] == (o["measured_s"] > o["reserved_s"]), o
    resume = overheads[1]
    assert resume["started"] < resume["reserved_end"], resume  # resumed in its window, not after it
    # ... as `skylease leases show` and the lease's dashboard page show them
    shown = _shown(srv, a, capsys)
    assert "suspensions, resumptions and transfers: reserved beside measured" in shown, shown
    with httpx.Client(base_url=srv.url) as web:
        assert login(web, srv.tokens["alice"]).status_code == 303
        html = web.get(f"/leases/{a}", headers=HTML).text
    assert f"Suspensions, resumptions and transfers of lease {a}: reserved beside measured" in html, html
    deadline = time.monotonic() + 30
    while (view := srv.call("GET", f"/leases/{b}").json())["state"] not in ("done", "cancelled"):
        assert time.monotonic() < deadline, view
        time.sleep(0.2)
    failed = [p for p in view["ended_payloads"] if p["state"] == "failed"]
    assert len(failed) == 1, view
    assert failed[0]["reason"].startswith("guest vm-0: QEMU could not load /lease/vm-0/state.bin: "), failed
    assert view["payloads"] == [] and view["failed_payloads"] == 1
    assert srv.call("GET", "/health").json()["ok"]
    # kill -9 of the server: the restarted one adopts the running guest (the same process, not booted
    # again) and drives it through its QMP socket, connected again
    srv.kill9()
    srv.start()
    assert srv.payload_pid(a) == resumed and _alive(resumed)
    assert srv.call("GET", f"/leases/{a}").json()["overheads"] == overheads  # (journaled: kept)
    ticks = len(srv.ticks(a))
    srv.wait_ticks(a, ticks + 1, timeout=30)
    counted = srv.ticks(a)[len(before):]  # one count since the resume: never booted again (it restarts at 1)
    assert counted == list(range(before[-1] + 1, before[-1] + 1 + len(counted))), counted
    # cancelled: the guest is powered off (ACPI), its QEMU ends
    assert srv.call("DELETE", f"/leases/{a}", "alice").status_code == 200
    deadline = time.monotonic() + 30
    while _alive(resumed):
        assert time.monotonic() < deadline, "the cancelled lease's guest still runs"
        time.sleep(0.1)
    assert "powering off" in (srv.vm_dir(a) / "serial.log").read_text(errors="replace")
    srv.assert_quiet()


def test_a_guest_that_powers_itself_off_ends_its_lease_early(started):
    srv = started
    lid, view = srv.short_lease_done(timeout=60)
    assert srv.ticks(lid) == [1, 2]
    assert [(p["state"], p["reason"]) for p in view["ended_payloads"]] == [("exited", "exited by itself")]
    assert view["end"] - view["start"] < 600 - 10 * VM_SCALE  # (well before its planned end)


def test_a_disk_image_runs_on_an_overlay_and_the_image_is_never_written(started):
    srv = started
    disk = srv.data.parent / "repo" / "blank.raw"
    disk.write_bytes(b"\0" * (1 << 20))  # (no bootable system: the firmware waits; QEMU runs it all the same)
    body = {"duration": 600, "memory": 64, "vm": True, "image": "blank.raw"}
    r = srv.call("POST", "/leases", "alice", json=body)
    assert r.status_code == 201, r.text
    lid = r.json()["id"]
    deadline = time.monotonic() + 60
    while (pid := srv.payload_pid(lid)) is None:
        assert time.monotonic() < deadline, srv.call("GET", f"/leases/{lid}").json()
        time.sleep(0.2)
    overlay = srv.vm_dir(lid) / "overlay.qcow2"
    head = overlay.read_bytes()[:4096]
    assert head[:4] == b"QFI\xfb" and b"/images/blank.raw" in head  # backed by the image as QEMU sees it
    assert srv.call("DELETE", f"/leases/{lid}", "alice").status_code == 200
    deadline = time.monotonic() + 30
    while _alive(pid):  # (no ACPI in a guest that never booted: SIGKILL after the grace)
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert disk.read_bytes() == b"\0" * (1 << 20)


def _runs(srv, lease: int) -> list[dict]:
    """The lease's reservations carried out (kind, start, end: lease time), from its events."""
    return [{"kind": e["event"], "start": e["time"], "end": e["until"]}
            for e in srv.call("GET", f"/leases/{lease}").json()["events"] if e.get("until") is not None]


def _shown(srv, lease: int, capsys) -> str:
    """What ``skylease leases show`` prints of the lease."""
    capsys.readouterr()
    assert main(["leases", "show", str(lease), "--server", srv.url, "--token", srv.tokens["alice"]]) == 0
    return " ".join(capsys.readouterr().out.split())
