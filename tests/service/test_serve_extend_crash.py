"""An accepted extension survives a crash (issue 40, item 2; docs/decisions/lease-extensions.md): a
real ``python -m skylease serve`` (2 nodes of this machine, --time-scale 20) runs two immediate
leases, one whose payload is a command (it runs until its lease's end shuts it down) and one with
the default payload (it times its own work); both are extended, and the server is killed with
SIGKILL right after the answers. After the restart each lease still has its new end (the replay of
the journal's ``extend`` input), the command's process is the same one (adopted) and runs to the
new end, and neither lease ends at its old end (the default payload is re-timed to the new one)."""

from __future__ import annotations

import pytest
from tests.waits import waited

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so these skip)
# kill -9 and a restart of a real server, waiting on its lease clock: CI's integration level
pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration, pytest.mark.timeout(180)]

SCALE = 20  # lease seconds per real second
DURATION = 100  # each lease's, lease seconds (5 real seconds)...
BY = 100  # ...and its extension's


def test_kill_9_right_after_an_accepted_extension_keeps_it(serve_process, tmp_path, capsys):
    (tmp_path / "site.toml").write_text("[[nodes]]\ncount = 2\n")  # two nodes of this machine
    srv = serve_process(site=tmp_path / "site.toml", time_scale=SCALE, grace=1)
    srv.add_users(capsys)
    srv.start()
    ids = {}
    for name, extra in (("command", {"command": "sleep 1000"}), ("default", {})):
        r = srv.call("POST", "/leases", "alice", json={"type": "immediate", "duration": DURATION, **extra})
        assert r.status_code == 201, r.text
        ids[name] = r.json()["id"]
    views = {k: waited(f"lease {lid}'s payload", lambda lid=lid: (v := srv.call(
        "GET", f"/leases/{lid}", "alice").json())["payloads"] and v) for k, lid in ids.items()}
    pid = views["command"]["payloads"][0]["pid"]
    ends = {}
    for name, lid in ids.items():
        r = srv.call("PATCH", f"/leases/{lid}", "alice", json={"by": BY})
        assert r.status_code == 200, r.text
        x = r.json()["extensions"][0]
        assert x["new_end"] == x["old_end"] + BY
        ends[name] = (x["old_end"], x["new_end"])
    srv.restart()  # kill -9 right after the answers, then the same data and database
    for name, lid in ids.items():
        v = srv.call("GET", f"/leases/{lid}", "alice").json()
        x = v["extensions"]
        assert [(e["old_end"], e["new_end"]) for e in x] == [ends[name]], (name, v)
        assert v["state"] != "done" or v["end"] == ends[name][1], (name, v)
    if srv.now() < ends["command"][1] - 10:  # (a slow restart may have taken the rest of its time)
        v = srv.call("GET", f"/leases/{ids['command']}", "alice").json()
        assert [p["pid"] for p in v["payloads"]] == [pid], v  # adopted, not started again
    for name, lid in ids.items():
        v = waited(f"lease {lid}'s end", lambda lid=lid: (v := srv.call(
            "GET", f"/leases/{lid}", "alice").json())["state"] == "done" and v, timeout=60)
        assert v["end"] == ends[name][1], (name, v)  # its new end, not its old one: no premature end
        assert v["ended_payloads"][-1]["state"] == "killed", (name, v)  # shut down by its end
    v = srv.call("GET", f"/leases/{ids['command']}", "alice").json()
    assert [p["pid"] for p in v["ended_payloads"]] == [pid], v  # one process, from start to new end
    srv.assert_quiet()
