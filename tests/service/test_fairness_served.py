"""Fairness rules served and simulated with the same outcome (issue 40, item 5;
docs/decisions/fairness-rules.md): one workload of several users goes to the real lease manager
(``create_app`` over a :class:`LocalLeaseManager` on a real uvicorn server, the rules in its
scheduler configuration) and to ``skylease leases simulate``'s simulator with the same rules; the
same leases are refused for the same rule, in the same words, and the others get the same
schedule. A restart replays the rules' decisions (the owner is journaled with each request).

Each request goes in at its own lease second (the simulator takes every arrival of one second
before it steps, the server steps after each request), and the simulator is given the lease times
the server took them at; the clock runs at 20 lease seconds a second, so the one best-effort
lease runs (its payload is stopped at the end) and the advance reservations stay in the future."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from tests.test_cli_leases import xml_workload

from skylease.cli import main
from skylease.control.leases.fairness import rule_of
from skylease.experiments.leases import LeaseConfig, load_config, load_workload, simulate_workload

from .served_rules import request_xml, served_rules

pytestmark = pytest.mark.integration

SCALE = 20  # lease seconds per second
H = 3600
B = 20_000  # the advance reservations start here (lease time): 1,000 s away at SCALE

RULES = """[policies.admission]
class = "fairness"
max_duration = "12h"
max_stacked = 2
min_gap = "1h"
node_hours = 30
window = "7d"
"""

#: (user, type, nodes, duration, start): each rule refuses one request; the others are accepted,
#: but carol's first reservation, which has no room (the scheduler's own refusal: not counted)
WORKLOAD = [
    ("alice", "BE", 1, 600, None),  # 1: runs now
    ("alice", "AR", 2, H, B),  # 2: accepted (far from lease 1)
    ("alice", "AR", 1, H, B + 5 * H),  # 3: max_stacked (alice has 2 unfinished)
    ("bob", "AR", 1, 13 * H, B),  # 4: max_duration
    ("bob", "AR", 4, 10 * H, B + 50_000),  # 5: node_hours (40 > 30)
    ("bob", "AR", 2, 3 * H, B),  # 6: accepted: the cluster's 4 nodes are taken on [B, B + 1 h)
    ("bob", "AR", 1, H, B + 3 * H + 600),  # 7: min_gap (600 s after bob's lease 6)
    ("carol", "AR", 1, 600, B + 600),  # 8: no room (the scheduler refuses it)
    ("carol", "AR", 1, 600, B + H),  # 9: accepted: lease 8, refused, holds nothing
]
EXPECTED_RULES = {3: "max_stacked", 4: "max_duration", 5: "node_hours", 7: "min_gap"}


def _xml(path, rows) -> Path:
    return xml_workload(path, [request_xml(i, user, nodes, length, start=None if kind == "BE" else start)
                               for i, (user, kind, nodes, length, start) in enumerate(rows, 1)], 4)


@pytest.fixture
def served(tmp_path, app_server, payload_sandbox):
    """Four one-CPU nodes under the rules; alice, bob and carol."""
    yield from served_rules(tmp_path, app_server, payload_sandbox, RULES, ("alice", "bob", "carol"), nodes=4,
                            scale=SCALE)


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _body(kind: str, nodes: int, duration: int, start: int | None) -> dict:
    if kind == "BE":
        return {"nodes": nodes, "duration": duration}
    return {"type": "advance-reservation", "nodes": nodes, "duration": duration, "start": start}


def _served_plan(v: dict) -> tuple[int, int, tuple[int, ...]]:
    """An accepted lease's VM reservation as the API shows it: planned, or running now."""
    vm = [p for p in v["planned"] if p["kind"] == "vm"]
    if vm:
        return vm[0]["start"], vm[0]["end"], tuple(vm[0]["nodes"])
    nodes = tuple(sorted(int(name.removeprefix("node")) for name in v["running_on"]))
    return v["start"], v["start"] + v["requested_duration"], nodes


def test_each_rule_served_and_simulated_with_the_same_outcome(served):
    url, tokens, manager, restart, tmp = served
    _xml(tmp / "w.xml", WORKLOAD)
    answers = {}
    last = -1
    for i, (user, kind, nodes, duration, start) in enumerate(WORKLOAD, 1):
        deadline = time.monotonic() + 5
        while manager.now() <= last and time.monotonic() < deadline:  # its own lease second
            time.sleep(0.005)
        r = httpx.post(f"{url}/leases", json=_body(kind, nodes, duration, start), headers=_h(tokens[user]))
        answers[i] = r
        last = manager.now()
    views = {v.id: v.model_dump() for v in manager.leases(None)}
    assert sorted(views) == list(range(1, len(WORKLOAD) + 1))
    assert len({v["submit"] for v in views.values()}) == len(WORKLOAD)  # one lease second each
    # the server: a rule's refusal is a 409 saying the rule (and no earliest start: room is not what it lacks)
    for i, r in answers.items():
        if i in EXPECTED_RULES:
            assert r.status_code == 409, (i, r.text)
            detail = r.json()["detail"]
            assert detail.startswith(f"lease {i} refused: {EXPECTED_RULES[i]}: "), detail
            assert "earliest_start" not in r.json(), r.text
        elif i == 8:
            assert r.status_code == 409 and rule_of(views[8]["reason"]) is None, r.text
        else:
            assert r.status_code == 201, (i, r.text)
    assert views[3]["reason"] == "max_stacked: alice has 2 unfinished leases (at most 2)"
    # the simulator: the same workload, at the lease times the server took each request
    w = load_workload(tmp / "w.xml")
    for le in w.leases:
        le.submit = views[le.id]["submit"]
    sim = simulate_workload(w, config=LeaseConfig("rules", load_config(tmp / "rules.toml").scheduler))
    simulated = {le.id: le for le in sim.workload.leases}
    for lid, v in views.items():
        le = simulated[lid]
        assert (le.state.value == "rejected") == (v["state"] == "rejected"), (lid, le.state, v["state"])
        if v["state"] == "rejected":
            assert le.reason == v["reason"], (lid, le.reason, v["reason"])
            continue
        first = next(r for r in sim.run.runs if r.lease == lid and r.kind == "vm")
        assert (first.start, first.stop, tuple(first.nodes)) == _served_plan(v), lid
    # a restart replays the rules' decisions (the owners are in the journal): the same refusals
    submitted = {i.lease: i.body["owner"] for i in manager.journal.inputs() if i.kind.value == "submit"}
    assert submitted == {i: WORKLOAD[i - 1][0] for i in range(1, len(WORKLOAD) + 1)}
    manager.close(stop_payloads=True)
    again = restart()
    try:
        assert again.replayed_events_match is True
        replayed = {v.id: (v.state, v.reason) for v in again.leases(None) if v.state == "rejected"}
        refused = {lid: ("rejected", v["reason"]) for lid, v in views.items() if v["state"] == "rejected"}
        assert replayed == refused
    finally:
        again.close(stop_payloads=True)


def test_the_cli_says_a_rules_refusal_in_one_line(served, capsys, monkeypatch):
    url, tokens, _, _, _ = served
    monkeypatch.setenv("SKYLEASE_SERVER", url)
    monkeypatch.setenv("SKYLEASE_TOKEN", tokens["bob"])
    code = main(["leases", "request", "--nodes", "1", "--duration", "13h", "--start", str(B)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "lease 1 refused: max_duration: asks for 13:00:00; at most 12:00:00" in lines[0], err
    assert "earliest start" not in lines[0]
    code = main(["leases", "list", "--json"])
    listed = json.loads(capsys.readouterr().out)
    rows = listed["leases"] if isinstance(listed, dict) else listed
    assert [(r["id"], r["state"]) for r in rows] == [(1, "rejected")]
