import itertools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from skylease.control.env import Environment, Policy
from skylease.control.fixed import FixedPool
from skylease.model import Bag, HostState, InstanceType, Task
from skylease.sim.env import SimEnvironment, simulate

VM = InstanceType("vm", boot_time=300, billing_unit=3600, price=1.0)


def test_fixed_pool_end_to_end_exact_makespan_and_cost():
    """100 tasks of 60 s on 10 hosts, 300 s boot, 3600 s billing: 900 s and 10 units."""
    r = simulate(FixedPool(10), Bag.from_runtimes([60] * 100), [VM])
    assert r.makespan == 900.0
    assert r.charged_units == 10
    assert r.cost == 10.0
    assert (r.done, r.unfinished, r.interrupted) == (100, (), 0)
    assert r.hosts == r.peak_hosts == 10
    # FIFO dispatch: each host ran 10 tasks back to back after its boot
    starts = sorted(rec.start for rec in r.records)
    assert starts[:10] == [300.0] * 10 and starts[-1] == 840.0


def test_fixed_pool_crossing_a_billing_unit_pays_two():
    it = InstanceType("vm", boot_time=300, billing_unit=3600, price=0.5)
    r = simulate(FixedPool(2), Bag.from_runtimes([1000] * 8), [it])
    assert r.makespan == 300 + 4 * 1000
    assert r.charged_units == 4 and r.cost == 2.0


def test_speed_scales_runtime_and_env_satisfies_protocol():
    fast = InstanceType("fast", speed=2.0)
    env = SimEnvironment([fast], FixedPool(1))
    assert isinstance(env, Environment)
    r = simulate(FixedPool(1), Bag.from_runtimes([100, 100]), [fast])
    assert r.makespan == 100.0


def test_max_count_limits_acquire():
    it = InstanceType("vm", max_count=3)
    env = SimEnvironment([it])
    assert len(env.acquire("vm", 5)) == 3
    assert env.acquire("vm", 1) == []
    with pytest.raises(KeyError, match="no pool"):
        env.acquire("nope")


class ReleaseBusyOnce(Policy):
    """Rents 1 host, releases it mid-task, rents another: the task must rerun, not vanish."""

    def on_start(self, env):
        self.env = env
        self.lost = []
        (self.h,) = env.acquire("vm", 1)
        env.call_at(50, self.swap)

    def swap(self):
        self.env.release(self.h)
        self.env.acquire("vm", 1)

    def on_task_lost(self, task, host):
        self.lost.append(task.id)


def test_released_busy_host_requeues_its_task():
    p = ReleaseBusyOnce()
    it = InstanceType("vm", boot_time=0, billing_unit=3600)
    r = simulate(p, Bag.from_runtimes([100]), [it])
    assert p.lost == [0]
    assert r.done == 1 and r.interrupted == 1 and r.wasted_s == 50
    assert r.makespan == 150 and r.charged_units == 2


class Duplicator(Policy):
    def on_start(self, env):
        self.env = env
        self.done = []
        env.acquire("slow", 1)
        env.call_at(10, lambda: (env.acquire("fast", 1), env.duplicate(0, "fast")))

    def on_task_done(self, task, host, runtime):
        self.done.append((task.id, host.pool))


def test_duplicate_first_result_wins_and_loser_stops():
    slow, fast = InstanceType("slow", speed=1.0), InstanceType("fast", speed=10.0)
    p = Duplicator()
    r = simulate(p, Bag.from_runtimes([1000]), [slow, fast])
    assert p.done == [(0, "fast")]  # reported once, by the winner
    assert r.makespan == 110 and r.done == 1
    assert len(r.records) == 1 and r.wasted_s == 110  # the slow copy ran 110 s for nothing


def test_arrivals_are_queued_at_their_time():
    bag = Bag((Task(0, 10, 0.0), Task(1, 10, 500.0)))
    r = simulate(FixedPool(1), bag, [InstanceType("vm")])
    assert sorted((rec.task, rec.start) for rec in r.records) == [(0, 0.0), (1, 500.0)]
    assert r.makespan == 510


class NeverRents(Policy):
    pass


def test_stall_reports_unfinished_tasks():
    r = simulate(NeverRents(), Bag.from_runtimes([5, 5]), [VM])
    assert r.unfinished == (0, 1) and r.done == 0 and r.cost == 0


def test_horizon_ends_run_and_charges_live_hosts():
    r = simulate(FixedPool(1), Bag.from_runtimes([5000]), [VM], horizon=1000)
    assert r.unfinished == (0,) and r.interrupted == 1 and r.charged_units == 1


def test_random_order_is_seeded():
    bag = Bag.from_runtimes(range(1, 50))
    a = simulate(FixedPool(3), bag, [VM], order="random", seed=7)
    b = simulate(FixedPool(3), bag, [VM], order="random", seed=7)
    c = simulate(FixedPool(3), bag, [VM], order="random", seed=8)
    assert a.records == b.records and a.records != c.records


class Chaos(Policy):
    """Rents and releases hosts at random moments, duplicates and cancels at random."""

    def __init__(self, plan):
        self.plan = plan
        self.done = []

    def on_start(self, env):
        self.env = env
        env.acquire("a", 1)
        for t, action, arg in self.plan:
            env.call_at(t, self.act, action, arg)

    def act(self, action, arg):
        env = self.env
        live = env.hosts()
        if action == "rent":
            env.acquire("a" if arg % 2 else "b", 1 + arg % 3)
        elif action == "release" and live:
            env.release(live[arg % len(live)].id)
        elif action == "dup":
            env.duplicate(arg % 30, "b")
        elif action == "cancel":
            env.cancel(arg % 30)
        if not env.hosts() and env.pending():
            env.acquire("a", 1)  # keep at least one host so the bag can finish

    def on_task_done(self, task, host, runtime):
        self.done.append(task.id)
        assert host.state is HostState.IDLE


@settings(max_examples=60, deadline=None)
# a duplicate queued for a pool with no host must not keep the interrupted original from requeueing
@example(works=[1.0], plan=[(0.0, "dup", 0), (30.0, "release", 0)])
@given(
    works=st.lists(st.floats(1, 500), min_size=1, max_size=30),
    plan=st.lists(
        st.tuples(st.floats(0, 3000), st.sampled_from(["rent", "release", "dup", "cancel"]),
                  st.integers(0, 100)),
        max_size=25,
    ),
)
def test_every_task_completes_once_or_is_cancelled(works, plan):
    a = InstanceType("a", boot_time=30, billing_unit=600, price=1.0)
    b = InstanceType("b", boot_time=60, speed=2.0, billing_unit=60, price=0.2)
    p = Chaos(plan)
    bag = Bag.from_runtimes(works)
    r = simulate(p, bag, [a, b])
    assert len(p.done) == len(set(p.done)) == r.done  # on_task_done once per task
    assert r.done + r.cancelled == len(bag) and r.unfinished == ()
    done_ids = sorted(rec.task for rec in r.records)
    assert done_ids == sorted(p.done)
    # a host never runs two tasks at once
    by_host = {}
    for rec in r.records:
        by_host.setdefault(rec.host, []).append((rec.start, rec.end))
    for spans in by_host.values():
        spans.sort()
        assert all(s2 >= e1 for (_, e1), (s2, _) in itertools.pairwise(spans))
    # the bill is exactly the sum of every host's started units
    assert r.cost == pytest.approx(sum(h.cost(r.end_time) for h in r.host_table))
