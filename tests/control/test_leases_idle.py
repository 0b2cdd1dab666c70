"""The ``idle_reclaim`` fairness rule under the simulator's clock (issue 40, item 5;
docs/decisions/fairness-rules.md): a lease that holds its nodes idle is ended the rule's time after
its work stopped (its work before a suspension counted), its nodes go to the leases after it, and
nothing else changes; the rule's parameters are checked. The served side is
tests/service/test_idle_reclaim_served.py."""

from __future__ import annotations

import math

import pytest

from skylease.control.leases import Lease, LeaseKind, LeaseState, SchedulerConfig
from skylease.control.leases.fairness import Fairness, idle_rule
from skylease.control.leases.idle import IdleReclaim, IdleWatch
from skylease.control.leases.policies import PolicyError, load_policy
from skylease.model.units import clock
from skylease.sim.leases import simulate_leases

H = 3600


def _be(lid: int, duration: int, submit: int = 0, idle_after: int | None = None, nodes: int = 1) -> Lease:
    return Lease(lid, LeaseKind.BEST_EFFORT, submit, nodes, duration, duration, duration,
                 idle_after=idle_after)


def _ar(lid: int, start: int, duration: int, submit: int = 0, nodes: int = 1) -> Lease:
    return Lease(lid, LeaseKind.ADVANCE_RESERVATION, submit, nodes, duration, duration, duration, start=start,
                 preemptible=False)


def _run(leases: list[Lease], n_nodes: int = 1, suspension: bool = False, **rules) -> list[Lease]:
    config = SchedulerConfig(suspension=suspension)
    if rules:
        config = config.with_(admission=Fairness(**rules))
    simulate_leases(leases, n_nodes, config=config, until="all")
    return leases


def test_an_idle_lease_ends_the_rules_time_after_its_work_and_frees_its_node():
    a, b = _run([_be(1, 2 * H, idle_after=600), _be(2, H, submit=10)], idle_reclaim="30m")
    assert (a.first_start, a.end, a.state) == (0, 600 + 1800, LeaseState.DONE)
    assert a.reclaimed == "idle_reclaim: idle from 00:10:00 for 00:30:00 (below 5% CPU)"
    assert (b.first_start, b.end, b.reclaimed) == (2400, 2400 + H, None)  # the freed node, at once


def test_without_the_rule_or_without_idleness_nothing_changes():
    a, b = _run([_be(1, 2 * H, idle_after=600), _be(2, H, submit=10)])  # no rule: it holds its node
    assert (a.end, a.reclaimed, b.first_start) == (2 * H, None, 2 * H)
    c, d = _run([_be(1, 2 * H), _be(2, H, submit=10)], idle_reclaim="30m")  # works to its end
    assert (c.end, c.reclaimed, d.first_start) == (2 * H, None, 2 * H)


def test_a_lease_that_ends_before_it_falls_due_is_not_reclaimed():
    (a,) = _run([_be(1, H, idle_after=H - 600)], idle_reclaim="30m")
    assert (a.end, a.reclaimed) == (H, None)
    (b,) = _run([_be(1, H, idle_after=H - 1800)], idle_reclaim="30m")  # due exactly at its end
    assert (b.end, b.reclaimed) == (H, None)
    (c,) = _run([_be(1, H, idle_after=H - 1801)], idle_reclaim="30m")  # one second before it
    assert (c.end, c.reclaimed) == (H - 1, "idle_reclaim: idle from 00:29:59 for 00:30:00 (below 5% CPU)")


def test_work_before_a_suspension_counts_and_the_idle_time_counts_again_after_it():
    # lease 1 works 1,000 s in all; an advance reservation at 600 preempts it (its suspension ends
    # at 600: it has worked until the suspension began); its VM runs again after the resumption and
    # idles when the rest of its 1,000 s is done: reclaimed 30 minutes later
    be, ar = _run([_be(1, 2 * H, idle_after=1000), _ar(2, 600, 1000, submit=1)], suspension=True,
                  idle_reclaim="30m")
    when = dict(be.history)  # (each event's last time)
    assert ar.first_start == 600 and when["suspend"] < 600 and when["resume"] == 1600, be.history
    idle = when["start"] + 1000 - when["suspend"]
    assert be.reclaimed is not None and be.reclaimed.startswith(f"idle_reclaim: idle from {clock(idle)} ")
    assert be.end == idle + 1800
    # idle before its suspension: not reclaimed meanwhile (suspended, it holds nothing), and its idle
    # time counts from its VM's next start again
    be2, _ = _run([_be(1, 3 * H, idle_after=100), _ar(2, 600, 1000, submit=1)], suspension=True,
                  idle_reclaim="30m")
    assert be2.end == dict(be2.history)["start"] + 1800, be2.history
    # without suspension a preempted lease starts again from scratch (its work is lost): so is its work
    be3, _ = _run([_be(1, 2 * H, idle_after=1000), _ar(2, 600, 1000, submit=1)], idle_reclaim="30m")
    assert be3.end == 1600 + 1000 + 1800, be3.history


def test_the_watch_keeps_the_earliest_idle_time_and_a_busy_sample_clears_it():
    w = IdleWatch(IdleReclaim(60))
    w.idle(1, 10)
    w.idle(1, 20)  # (still idle: from 10)
    w.idle(2, 30)
    assert w.due(69) == [] and w.next_due() == 70
    assert w.due(70) == [(1, 10)]
    w.busy(1)
    assert w.due(100) == [(2, 30)] and w.next_due() == 90
    w.forget(2)
    assert w.due(10**9) == [] and w.next_due() == math.inf


def test_the_rules_parameters_are_checked():
    p = load_policy("admission", "fairness", {"idle_reclaim": "2h", "idle_cpu": 0.1})
    assert p.rules() == ["idle_reclaim"] and idle_rule(p) == IdleReclaim(2 * H, 0.1)
    assert p.admit(_be(1, 100 * H), 0) is None  # (not an admission rule)
    assert idle_rule(load_policy("admission", "fairness", {"max_stacked": 1})) is None
    for params, param in (({"idle_reclaim": 0}, "idle_reclaim"), ({"idle_reclaim": "soon"}, "idle_reclaim"),
                          ({"idle_reclaim": 60, "idle_cpu": 1.5}, "idle_cpu"),
                          ({"idle_reclaim": 60, "idle_cpu": 0}, "idle_cpu")):
        with pytest.raises(PolicyError) as e:
            load_policy("admission", "fairness", params)
        assert e.value.param == param, (params, str(e.value))
