"""The ``idle_reclaim`` fairness rule served and simulated with the same outcome (issue 40, item 5;
docs/decisions/fairness-rules.md): on a one-node site, alice's lease works for 40 lease seconds
(a real busy loop) and then holds its node idle (its payload sleeps); bob's lease waits behind it.
Under ``idle_reclaim = 60 s`` the real lease manager (measuring its payload's CPU) ends alice's
lease when it has been idle that long and starts bob's on the node it frees; ``skylease leases
simulate`` on the same workload (alice's ``idle-after``) does the same at the same lease times, up
to the server's sampling interval (a reclaim is at most one interval late). A restart keeps the
reclaim (journaled with its reason), and a lease that keeps working is not reclaimed."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from tests.test_cli_leases import xml_workload

from skylease.experiments.leases import LeaseConfig, load_config, load_workload, simulate_workload
from skylease.runtime.leases.idling import sampling_interval

from ..waits import waited
from .served_rules import hms, request_xml, served_rules

pytestmark = pytest.mark.integration

SCALE = 10  # lease seconds per second
WORK = 40  # lease seconds alice's payload works before it idles
IDLE = 60  # the rule's idle time (lease seconds)
RULES = f"""[policies.admission]
class = "fairness"
idle_reclaim = {IDLE}
"""


def _xml(path, submits: dict[int, int]) -> Path:
    idle = f' idle-after="{hms(WORK)}"'
    return xml_workload(path, [request_xml(1, "alice", 1, 600, arrival=submits[1], extra=idle),
                               request_xml(2, "bob", 1, 600, arrival=submits[2])], 1)


@pytest.fixture
def served(tmp_path, app_server, payload_sandbox):
    yield from served_rules(tmp_path, app_server, payload_sandbox, RULES, ("alice", "bob"), nodes=1,
                            scale=SCALE)


def _post(url: str, token: str, body: dict) -> int:
    r = httpx.post(f"{url}/leases", json=body, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_an_idle_lease_is_reclaimed_when_served_as_when_simulated(served):
    url, tokens, manager, restart, tmp = served
    busy = f"timeout {WORK / SCALE:g} sh -c 'while :; do :; done'; sleep 1000"  # works, then idles
    a = _post(url, tokens["alice"], {"nodes": 1, "duration": 600, "command": busy})
    b = _post(url, tokens["bob"], {"nodes": 1, "duration": 600, "command": "while :; do :; done"})
    view = waited("alice's lease reclaimed", lambda: (v := manager.lease(None, a)).state == "done" and v, 40)
    assert view.reclaimed is not None and view.reclaimed.startswith("idle_reclaim: idle from "), view
    bob = waited("bob's lease running", lambda: (v := manager.lease(None, b)).state == "active" and v, 10)
    # the simulator, on the same workload at the lease times the server took the requests
    _xml(tmp / "w.xml", {a: view.submit, b: bob.submit})
    rules = LeaseConfig("rules", load_config(tmp / "rules.toml").scheduler)
    sim = simulate_workload(load_workload(tmp / "w.xml"), config=rules)
    simulated = {le.id: le for le in sim.workload.leases}
    assert simulated[a].reclaimed is not None and simulated[a].reclaimed.startswith("idle_reclaim: ")
    late = sampling_interval(manager._idle_rule, SCALE) * SCALE + 3  # one sampling interval, and the loop's
    assert simulated[a].end <= view.end <= simulated[a].end + late, (simulated[a].end, view.end, late)
    assert view.start == simulated[a].first_start
    assert bob.start == view.end and simulated[b].first_start == simulated[a].end  # the freed node, at once
    # alice's payload was ended at the reclaim (killed: it was sleeping), bob's is not reclaimed
    assert [p["state"] for p in view.ended_payloads] == ["killed"], view.ended_payloads
    time.sleep((IDLE + 20) / SCALE)
    assert manager.lease(None, b).state == "active"
    # a restart replays the reclaim: the same end, the same reason
    manager.close(stop_payloads=True)
    again = restart()
    try:
        assert again.replayed_events_match is True
        replayed = again.lease(None, a)
        assert (replayed.state, replayed.end, replayed.reclaimed) == ("done", view.end, view.reclaimed)
    finally:
        again.close(stop_payloads=True)
