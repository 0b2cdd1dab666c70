"""The scheduler reacting to an overrun (issue 38: "a run that overran its reservation is flagged
and the scheduler reacts as it does to a late event"; docs/decisions/vm-overruns.md), on a real
``skylease serve`` with QEMU guests on this machine's nodes: a schedule that reserves one lease second
for a resumption that really takes several. The guest began working late; the scheduler gives the
lease that time back (its reservation ends later by as much), says so in the lease's view, and a
restarted server replays it from its journal."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from skylease.cli import main

from .payloads import payload_processes
from .vm_site import VmServer, add_users, build_repository
from .web import HTML, login

pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration]

#: Lease seconds a second: a resumption of 0.1-0.5 s takes 4-20 lease seconds, against the 1 reserved.
SCALE = 40
DURATION = 800


@dataclass
class TightServer(VmServer):
    """The VM server, its schedule reserving 1 lease second for each resumption."""

    def options(self) -> dict[str, Any]:
        scheduler = self.data.parent / "tight.toml"
        scheduler.write_text('base = "NOVM-SR"\noverride_resume_s = 1\n')
        return super().options() | {"time_scale": SCALE, "scheduler": str(scheduler)}


def _vm_runs(srv: VmServer, lease: int) -> list[tuple[int, int]]:
    """The lease's VM reservations carried out (start, end: lease time), from its events."""
    events = srv.call("GET", f"/leases/{lease}").json()["events"]
    return [(e["time"], e["until"]) for e in events
            if e["event"] in ("start", "vm") and e.get("until") is not None]


def test_a_resumption_that_overran_is_given_back_and_a_restart_keeps_it(tmp_path, capsys):
    build_repository(tmp_path / "repo")
    srv = TightServer(tmp_path / "serve", None)
    add_users(srv)
    srv.start()
    try:
        lid = srv.call("POST", "/leases", "alice", json={"duration": DURATION, "memory": 128, "vm": True,
                                                         "image": "guest"}).json()["id"]
        srv.wait_ticks(lid, 2)
        ar = srv.call("POST", "/leases", "alice", json={"type": "advance-reservation", "nodes": 2,
                                                        "start_in": 3 * SCALE, "duration": 3 * SCALE,
                                                        "memory": 128})
        assert ar.status_code == 201, ar.text
        deadline = time.monotonic() + 60
        while not (view := srv.call("GET", f"/leases/{lid}").json())["late_starts"]:
            assert time.monotonic() < deadline, view
            time.sleep(0.2)
        resume = [o for o in view["overheads"] if o["kind"] == "resume"]
        assert len(resume) == 1 and resume[0]["reserved_s"] == 1 and resume[0]["overran"], view["overheads"]
        [late] = view["late_starts"]
        # the time it lost: from its VM reservation's start (the window's end) to its resumption's end
        lost = resume[0]["ended"] - resume[0]["reserved_end"]
        assert late["given_back"] and lost <= late["seconds"] <= lost + 1, (late, resume)
        planned = [p for p in view["planned"] if p["kind"] == "vm"] or [{"end": None}]
        # shown where people look: `leases show` and the lease's dashboard page
        capsys.readouterr()
        assert main(["leases", "show", str(lid), "--server", srv.url, "--token", srv.tokens["alice"]]) == 0
        assert "work begun late after an overrun" in " ".join(capsys.readouterr().out.split())
        with httpx.Client(base_url=srv.url) as web:
            assert login(web, srv.tokens["alice"]).status_code == 303
            html = web.get(f"/leases/{lid}", headers=HTML).text
        assert f"Work of lease {lid} begun late after an overrun" in html and "given back" in html, html
        # kill -9: the restarted server replays the late start from its journal
        srv.kill9()
        srv.start()
        again = srv.call("GET", f"/leases/{lid}").json()
        assert again["late_starts"] == view["late_starts"], (again["late_starts"], view["late_starts"])
        deadline = time.monotonic() + 60
        while (done := srv.call("GET", f"/leases/{lid}").json())["state"] != "done":
            assert time.monotonic() < deadline, done
            time.sleep(0.2)
        runs = _vm_runs(srv, lid)
        # it ran what it asked for plus what it was given back (the lost time is inside its runs)
        assert sum(b - a for a, b in runs) == DURATION + late["seconds"], (runs, late, planned)
        srv.assert_quiet()
        print(f"\n[overrun] resume: {resume[0]['measured_s']} of 1 lease s reserved; {late['seconds']} given "
              f"back; VM runs {runs}")
    finally:
        srv.stop()
        with contextlib.suppress(Exception):
            for pid, _ticks in payload_processes(srv.serve_id()):
                with contextlib.suppress(OSError):
                    os.killpg(pid, 9)
