"""Part 9 of `skylease demo`: a real server on a free port, a best-effort lease preempted by an
advance reservation of both nodes, suspended (its payload really stopped) and resumed, each lease's
timeline printed, the server stopped and nothing of the demo left running."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so these skip)
# integration: the demo's service part, end to end (pytest -m integration)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the lease service needs Linux"),
    pytest.mark.usefixtures("payload_sandbox")]


def test_the_service_part_of_the_demo_tells_the_suspension_story(capsys, monkeypatch):
    from skylease.cli.demo import _demo_serve

    monkeypatch.setenv("COLUMNS", "250")
    _demo_serve()
    out = capsys.readouterr().out
    assert "9. The lease manager as a service" in out
    assert re.search(r"server at http://127\.0\.0\.1:\d+; times from the first request", out), out
    # the simulator's story (docs/howto/demo.md part 6), now on a real clock: the AR asked for at
    # 00:00:0x preempts lease 1, which suspends before 00:10:00 and resumes when the AR ends
    assert re.search(r"lease 1 \(best-effort, 1 node\): runs 00:00:00-00:09:39 on node 0, "
                     r"preempted 00:0\d:\d\d, "
                     r"suspends 00:09:39, resumes 00:40:00, runs 00:40:21-01:30:42 on node 0\n", out), out
    assert "lease 2 (advance-reservation, 2 nodes): runs 00:10:00-00:40:00 on nodes 0,1\n" in out
    m = re.search(r"Lease 1's payload \(pid (\d+)\) in /proc: stopped \(T\) while the reservation ran, "
                  r"running \([SR]", out)
    assert m, out
    # the lease is over and the server stopped: its payload is gone (a stopped server would leave it)
    pid = int(m.group(1))
    environ = Path(f"/proc/{pid}/environ")
    assert not environ.exists() or b"SKYLEASE_LEASE=1\0" not in environ.read_bytes()
    assert re.search(r"\d+\.\d s from the server's start to its stop", out)
    # the same user's dashboard, logged in with the token as a browser does: the leases on its chart
    assert "drew these leases on its Gantt chart as 1 resume, 1 suspend, 3 vm bars." in out, out
