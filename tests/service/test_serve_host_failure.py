"""A host fails under ``skylease serve`` (issue 37, "Host failures"): on a test site of four real sshd
hosts (host1 holds two nodes, the others one), host1's sshd and every process of it are killed
while a best-effort lease and an advance reservation run there. Then host1 is marked down within
30 s (``leases hosts``, the API's and the command's: state, reason, last contact); the best-effort
lease is requeued and runs again, whole, on another host; the advance reservation is degraded with
the reason and its VM on host2 runs on; a lease on host3 is undisturbed. Started again, host1 is
marked up and a new lease runs on its nodes.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from tests.cli_helpers import run
from tests.waits import until

from skylease.service.client import Client

from .conftest import ServeProcess

pytestmark = [pytest.mark.usefixtures("payload_sandbox"), pytest.mark.integration]

SCALE = 30  # lease seconds per real second
#: The test site's first address is 127.0.0.(BASE+1): its own (.ci/run runs this file beside others).
BASE = 110
#: Nodes per host: host1-0, host1-1, host2-0, host3-0, host4-0.
NODES_PER_HOST = (2, 1, 1, 1)


def site_file(path, site) -> str:
    text = f'[ssh]\nuser = "root"\nidentity_file = "{site.key}"\nknown_hosts = "{site.known_hosts}"\n'
    for h, n in zip(site.hosts, NODES_PER_HOST, strict=True):
        text += (f'[[hosts]]\naddress = "{h.address}"\nname = "{h.name}"\nnodes = {n}\n'
                 "cpu = 1\nmemory = 1024\n")
    path.write_text(text)
    return str(path)


def running_on(view: dict[str, Any]) -> list[str]:
    return sorted(p["node"] for p in view["payloads"] if p["state"] == "running")


def test_a_failed_host_is_marked_down_its_leases_requeued_or_degraded_and_used_again(ssh_site, tmp_path,
                                                                                     capsys, monkeypatch):
    site = ssh_site(len(NODES_PER_HOST), base=BASE)
    srv = ServeProcess(tmp_path / "serve", time_scale=SCALE, site=site_file(tmp_path / "site.toml", site),
                       grace=2)
    srv.add_users(capsys, (("root", True),))
    srv.start()
    try:
        c = Client(srv.url, srv.tokens["root"])

        def request(body: dict[str, Any]) -> dict[str, Any]:
            return c.request(json.dumps(body).encode(), "application/json")
        be = request({"type": "best-effort", "nodes": 1, "duration": 450})  # -> host1-0
        ar = request({"type": "advance-reservation", "nodes": 2, "duration": 3000, "start_in": 15})
        other = request({"type": "best-effort", "nodes": 1, "duration": 3000})  # -> host2-0 until the AR
        ids = (be["id"], ar["id"], other["id"])
        views = until(lambda: (vs := {i: c.lease(i) for i in ids}) and all(
            running_on(v) for v in vs.values()) and vs, timeout=30, step=0.1)
        assert views, {i: c.lease(i) for i in ids}
        assert running_on(views[be["id"]]) == ["host1-0"], views[be["id"]]
        ar_nodes = running_on(views[ar["id"]])
        assert "host1-1" in ar_nodes and len(ar_nodes) == 2, ar_nodes
        other_pid = views[other["id"]]["payloads"][0]["pid"]
        other_node = running_on(views[other["id"]])
        assert other_node and not other_node[0].startswith("host1"), other_node
        ar_elsewhere = next(p for p in views[ar["id"]]["payloads"] if p["node"] != "host1-1")

        t_kill = time.monotonic()
        site.kill_host("host1")
        down = until(lambda: [h for h in c.hosts() if h["host"] == "host1" and h["state"] == "down"],
                     timeout=30, step=0.1)
        t_down = time.monotonic() - t_kill
        assert len(down) == 2 and t_down < 30, (t_down, c.hosts())
        assert all("host1" in h["reason"] and h["last_contact"] is not None for h in down), down
        print(f"\n[host failure] host1 marked down {t_down:.1f} s after its sshd was killed")
        # as `skylease leases hosts` shows it (wide: one row per node)
        monkeypatch.setenv("SKYLEASE_SERVER", srv.url)
        monkeypatch.setenv("SKYLEASE_TOKEN", srv.tokens["root"])
        monkeypatch.setenv("COLUMNS", "400")
        code, out, _ = run(capsys, "leases", "hosts")
        cells = [[c.strip() for c in line.strip("│ ").split("│")] for line in out.splitlines() if "│" in line]
        rows = {r[0]: r for r in cells if r[0].startswith("host")}  # node -> host, state, last contact, ...
        assert code == 0 and sorted(rows) == ["host1-0", "host1-1", "host2-0", "host3-0", "host4-0"], out
        for n in ("host1-0", "host1-1"):
            assert rows[n][1] == "host1" and rows[n][2].startswith("down: host host1 not answering"), out
            assert rows[n][3].endswith(" s ago"), out
        assert rows["host2-0"][1:3] == ["host2", "up"], out

        # the best-effort lease is requeued, then runs again on a host that answers
        again = until(lambda: (v := c.lease(be["id"])) and running_on(v) and v, timeout=30, step=0.1)
        assert again and not running_on(again)[0].startswith("host1"), again
        names = [e["event"] for e in again["events"]]
        assert "requeue" in names and names.count("start") == 2, names
        assert any(p["state"] == "lost" and "host1" in (p["reason"] or "") for p in again["ended_payloads"])
        # the AR is degraded, with the reason; its VM on the other host goes on
        arv = c.lease(ar["id"])
        assert arv["state"] == "active" and "host1" in (arv["degraded"] or ""), arv
        assert "degraded" in [e["event"] for e in arv["events"]]
        assert [p for p in arv["payloads"] if p["node"] == ar_elsewhere["node"]] == [ar_elsewhere], arv
        # the lease on another host is undisturbed
        ov = c.lease(other["id"])
        assert [p["pid"] for p in ov["payloads"]] == [other_pid] and "requeue" not in str(ov["events"])

        # host1 comes back: marked up, and used again
        site.restart_host("host1", die_with_caller=True)
        up = until(lambda: all(h["state"] == "up" for h in c.hosts()), timeout=30, step=0.1)
        assert up, c.hosts()
        c.cancel(ar["id"])
        c.cancel(other["id"])
        new = request({"type": "best-effort", "nodes": 2, "duration": 300})
        used = until(lambda: (v := c.lease(new["id"])) and len(running_on(v)) == 2 and v, timeout=30,
                     step=0.1)
        assert used, c.lease(new["id"])
        assert any(n.startswith("host1") for n in running_on(used)), used
        done = until(lambda: c.lease(be["id"])["state"] == "done", timeout=60, step=0.2)
        assert done, c.lease(be["id"])
        assert c.lease(be["id"])["events"][-1]["event"] == "end"
    finally:
        code, _, err = srv.stop()
    assert code == 0 and "Traceback" not in err, err[-3000:]
