"""Fairness rules as admission policies (issue 40, item 5; docs/decisions/fairness-rules.md): each
rule refuses what it should with its reason, accepts at its boundary, and counts what it says it
counts (the owner's other leases as the scheduler holds them), on the real scheduler."""

from __future__ import annotations

import pytest

from skylease.control.leases import Lease, LeaseKind, LeaseScheduler, LeaseState, SchedulerConfig
from skylease.control.leases.fairness import Fairness, OwnerHistory, rule_of
from skylease.control.leases.policies import NoARs, PolicyError, load_policy
from skylease.sim.leases import simulate_leases

H = 3600


def _ar(lid: int, owner: str | None, start: int, duration: int = H, nodes: int = 1, submit: int = 0) -> Lease:
    return Lease(lid, LeaseKind.ADVANCE_RESERVATION, submit, nodes, duration, duration, duration, start=start,
                 preemptible=False, owner=owner)


def _be(lid: int, owner: str | None, duration: int = H, nodes: int = 1, submit: int = 0,
        real: int | None = None) -> Lease:
    return Lease(lid, LeaseKind.BEST_EFFORT, submit, nodes, duration, real or duration, real or duration,
                 owner=owner)


def _run(leases: list[Lease], n_nodes: int = 8, **rules) -> dict[int, str | None]:
    """Simulate under the rules; each lease's rejection reason (None: accepted)."""
    simulate_leases(leases, n_nodes, config=SchedulerConfig(admission=Fairness(**rules)), until="all")
    return {le.id: le.reason if le.state is LeaseState.REJECTED else None for le in leases}


def test_max_duration_refuses_longer_and_accepts_exactly_the_limit():
    out = _run([_be(1, "a", 7 * 86400), _be(2, "a", 7 * 86400 + 1, submit=1)], max_duration="7d")
    assert out == {1: None, 2: "max_duration: asks for 7d 00:00:01; at most 7d 00:00:00"}


def test_max_stacked_counts_unfinished_leases_of_the_same_owner_only():
    leases = [_be(1, "bob", H), _be(2, "bob", H, submit=1), _be(3, "bob", H, submit=2),
              _be(4, "ann", H, submit=3),  # another user: not counted against bob
              _be(5, "bob", H, submit=H + 10)]  # bob's first two are over by then
    out = _run(leases, max_stacked=2)
    assert out == {1: None, 2: None, 3: "max_stacked: bob has 2 unfinished leases (at most 2)", 4: None,
                   5: None}


def test_a_rejected_lease_is_not_counted():
    # bob's first request is larger than the cluster: rejected, it holds nothing and is not unfinished
    out = _run([_be(1, "bob", nodes=9), _be(2, "bob", submit=1)], max_stacked=1)
    assert out[1].startswith("asks for 9 nodes") and rule_of(out[1]) is None and out[2] is None


def test_min_gap_after_and_before_a_users_lease_with_its_boundary():
    d, g = 86400, 2 * 86400
    leases = [_ar(1, "c", start=3 * d),  # [3 d, 3 d + 1 h)
              _ar(2, "c", start=3 * d + H + g - 1, submit=1),  # one second too early after it
              _ar(3, "c", start=3 * d + H + g, submit=2),  # exactly the gap after it: accepted
              _ar(4, "c", start=2 * d, submit=3),  # ends 23 h before lease 1 starts: < 2 d
              _ar(5, "d", start=3 * d + H, submit=4)]  # another user, right after lease 1
    out = _run(leases, min_gap="2d")
    assert out[1] is None and out[3] is None and out[5] is None
    assert out[2] == ("min_gap: c's lease 1 ends at 3d 01:00:00; their next lease may start from 5d 01:00:00 "
                      "(2d 00:00:00 between a user's leases)")
    assert out[4] == ("min_gap: c's lease 1 starts at 3d 00:00:00; a lease before it must end by 1d 00:00:00 "
                      "(2d 00:00:00 between a user's leases)")


def test_min_gap_zero_refuses_overlap_only():
    leases = [_ar(1, "e", start=H), _ar(2, "e", start=2 * H, submit=1),
              _ar(3, "e", start=2 * H - 1, submit=2), _ar(4, "e", start=10, duration=H - 9, submit=3)]
    out = _run(leases, min_gap=0)
    assert out[1] is None and out[2] is None  # back to back: no overlap
    assert out[3] == ("min_gap: e's lease 1 ends at 02:00:00; their next lease may start from 02:00:00 "
                      "(a user's leases may not overlap)")
    assert out[4] == ("min_gap: e's lease 1 starts at 01:00:00; a lease before it must end by 01:00:00 "
                      "(a user's leases may not overlap)")


def test_node_hours_in_the_rolling_window_ending_with_the_new_lease():
    # 10 node-hours allowed per day: 4 nodes x 2 h = 8 node-hours, then 2 nodes x 1 h = 2 (10: at most)
    leases = [_ar(1, "f", start=H, duration=2 * H, nodes=4), _ar(2, "f", start=5 * H, nodes=2, submit=1),
              _ar(3, "f", start=7 * H, nodes=1, submit=2),  # an 11th node-hour in [8 h - 1 d, 8 h)
              _ar(4, "f", start=H + 86400 + 2 * H, nodes=1, submit=3)]  # a day later: lease 1 is out
    out = _run(leases, node_hours=10, window="1d")
    assert out[1] is None and out[2] is None and out[4] is None
    assert out[3] == "node_hours: f would hold 11 node-hours in the 1d 00:00:00 up to 08:00:00 (at most 10)"


def test_node_hours_counts_what_a_lease_held_when_it_ended_early():
    # lease 1 asks for 4 node-hours but its work ends after 30 min: it held 1 node-hour, and lease 2
    # (2 node-hours) fits in 4
    leases = [_be(1, "g", 2 * H, nodes=2, real=H // 2), _be(2, "g", 2 * H, nodes=1, submit=H)]
    out = _run(leases, node_hours=4)
    assert out == {1: None, 2: None}
    leases = [_be(1, "g", 2 * H, nodes=2), _be(2, "g", 2 * H, nodes=1, submit=H)]  # it holds 4
    assert _run(leases, node_hours=4)[2] == (
        "node_hours: g would hold 6 node-hours in the 30d 00:00:00 up to 03:00:00 (at most 4)")


def test_a_cancelled_lease_counts_what_it_held():
    s = LeaseScheduler(4, config=SchedulerConfig(admission=Fairness(max_stacked=1, min_gap="1h")))
    s.submit(_ar(1, "h", start=H))
    s.step(0)
    s.cancel(1, 10)  # before it started: it held nothing
    s.submit(_ar(2, "h", start=H, submit=10))
    s.step(10)
    assert s.lease(2).state is LeaseState.SCHEDULED


def test_the_first_broken_rule_refuses_and_leases_without_owner_are_one_user():
    out = _run([_be(1, None), _be(2, None, 2 * 86400, submit=1)], max_duration="1d", max_stacked=1)
    assert out[2] == "max_duration: asks for 2d 00:00:00; at most 1d 00:00:00"  # (max_stacked too)
    out = _run([_be(1, None), _be(2, None, submit=1)], max_stacked=1)
    assert out[2] == "max_stacked: anonymous has 1 unfinished lease (at most 1)"


def test_without_history_a_rule_sees_the_lease_alone_and_plain_policies_still_work():
    f = Fairness(max_stacked=1, node_hours=1)
    assert f.admit(_be(1, "x"), 0) is None
    assert rule_of(f.admit(_be(2, "x", nodes=2), 0)) == "node_hours"
    assert f.admit_owner(_be(3, "x"), 0, OwnerHistory("x", [_be(4, "x")], {}, 0)).startswith("max_stacked")
    leases = [_be(1, "a"), _ar(2, "a", start=H)]
    simulate_leases(leases, 4, config=SchedulerConfig(admission=NoARs()), until="all")
    out = {le.id: le.state for le in leases}
    assert out == {1: LeaseState.DONE, 2: LeaseState.REJECTED}


def test_the_policy_is_built_in_and_its_parameters_are_checked():
    p = load_policy("admission", "fairness", {"max_duration": "7d", "min_gap": 3600, "window": "30d"})
    assert (p.max_duration, p.min_gap, p.window, p.max_stacked) == (7 * 86400, 3600, 30 * 86400, None)
    assert p.rules() == ["max_duration", "min_gap"]
    for params, param in (({"max_stacked": 0}, "max_stacked"), ({"max_duration": "soon"}, "max_duration"),
                          ({"node_hours": -1}, "node_hours"), ({"window": 0}, "window"),
                          ({"colour": "red"}, "colour")):
        with pytest.raises(PolicyError) as e:
            load_policy("admission", "fairness", params)
        assert e.value.param == param, (params, str(e.value))


def test_rule_of_reads_the_rule_back():
    assert rule_of("max_stacked: bob has 2 unfinished leases (at most 2)") == "max_stacked"
    assert rule_of("only 1 of 2 nodes can be free on [0, 10)") is None
    assert rule_of(None) is None and rule_of("max_stacked") is None


def test_forgetting_what_the_rules_no_longer_see_changes_no_decision(monkeypatch):
    """Leases over that ended before the rules' horizon are dropped from the owner's history (a
    request costs what the window holds, not the user's whole past): the same decisions."""
    import random

    from skylease.control.leases import fairness

    def workload() -> list[Lease]:
        rng = random.Random(5)
        return [_be(i, f"u{i % 3}", rng.choice((600, 1800, 3600)), nodes=rng.choice((1, 2, 3)),
                    submit=i * 400, real=None) for i in range(1, 241)]

    rules = {"max_stacked": 2, "min_gap": 300, "node_hours": 6, "window": "6h"}
    made: list[LeaseScheduler] = []

    def keep(*args, **kwargs):
        made.append(LeaseScheduler(*args, **kwargs))
        return made[-1]

    leases = workload()
    config = SchedulerConfig(admission=Fairness(**rules))
    simulate_leases(leases, 4, config=config, until="all", scheduler=keep)
    kept = max(len(v) for v in made[0]._owned.values())
    monkeypatch.setattr(fairness.OwnerHistory, "forget", lambda self, before: None)
    again = workload()
    simulate_leases(again, 4, config=SchedulerConfig(admission=Fairness(**rules)), until="all")
    decided = [(le.id, le.state, le.reason, le.first_start) for le in leases]
    assert decided == [(le.id, le.state, le.reason, le.first_start) for le in again]
    assert {rule_of(le.reason) for le in leases} >= {"max_stacked", "min_gap", "node_hours"}
    assert kept < 20  # of each user's 80 leases: those of the last 6 hours at most
