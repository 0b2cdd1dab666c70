"""Placement over time (issue 9, beyond the thesis): VMs and users come and go on the event kernel."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.model.desktop import Desktops, VMs
from skylease.model.power import THESIS_POWER
from skylease.planning.placement import energy, place
from skylease.sim.desktops import simulate_online
from skylease.traces.lab import user_sessions

NO_USERS = (np.array([], np.int64), np.array([]), np.array([]))


def f(x):
    return float(THESIS_POWER.watts(np.array([x]))[0])


def sessions(*triples):
    d, s, e = zip(*triples, strict=True)
    return np.array(d), np.array(s, float), np.array(e, float)


def test_a_user_slows_the_vm_and_makes_its_power_incremental():
    vms = VMs(cores=[4], minutes=[600])
    lab = Desktops(cores=[8])
    r = simulate_online(vms, np.array([0.0]), lab, sessions((0, 100, 200)), "ff")
    assert r.end[0] == pytest.approx(610)  # 100 minutes at 90 % speed: 0.1 x 100 minutes lost
    assert r.minutes_with_user[0] == pytest.approx(100)
    want = (f(50) * 100 + max(0.0, f(50) + 20 - 87) * 100 + f(50) * 410) / 60
    assert r.energy_wh == pytest.approx(want)
    assert r.summary()["share_with_user"] == pytest.approx(100 / 610)


def test_vms_wait_for_free_cores_and_rounds_run_on_the_period():
    vms = VMs(cores=[4, 4], minutes=[600, 60])
    lab = Desktops(cores=[4])
    r = simulate_online(vms, np.array([0.0, 10.0]), lab, NO_USERS, "sorting")
    assert r.start.tolist() == [0.0, 600.0] and r.end.tolist() == [600.0, 660.0]
    assert r.mean_wait == pytest.approx(295.0)
    assert r.energy_wh == pytest.approx(f(100) * 660 / 60)
    r = simulate_online(vms, np.array([10.0, 30.0]), Desktops(cores=[8]), NO_USERS, "ff", period=60)
    assert r.start.tolist() == [60.0, 60.0] and r.rounds == 1


def test_a_vm_bigger_than_every_desktop_is_reported_not_dropped():
    vms = VMs(cores=[16, 2], minutes=[60, 60])
    r = simulate_online(vms, np.array([0.0, 5.0]), Desktops(cores=[4, 8]), NO_USERS, "bf")
    assert r.unplaced == {0: "needs 16 cores; the largest desktop has 8"}
    assert r.desktop.tolist() == [-1, 0] and r.placed == 1


@pytest.mark.parametrize("policy", ["ff", "ffd", "bf", "sorting", "similar"])
def test_one_round_at_time_zero_is_the_batch_placement(policy):
    """All VMs at t = 0, one hourly round, no users: exactly the batch planner and its energy."""
    g = np.random.default_rng(4)
    vms = VMs(cores=g.choice([1, 2, 4, 8], 30), minutes=g.uniform(45, 3000, 30))
    lab = Desktops(cores=g.choice([4, 8], 30))
    r = simulate_online(vms, np.zeros(30), lab, NO_USERS, policy, period=60)
    p = place(policy, vms, lab)
    assert not p.unplaced
    assert r.desktop.tolist() == p.desktop.tolist()
    assert r.energy_wh == pytest.approx(energy(p, vms, lab, "c").total_wh)


def test_generated_sessions_and_bad_arguments():
    d, s, e = user_sessions(20, 3, 0.5, 1)
    assert ((e > s) | (e == s)).all() and (np.diff(d) >= 0).all()
    hours = (s % 1440) / 60
    assert (hours >= 8).all() and (((e - 1e-9) % 1440) / 60 <= 20).all()
    assert len(user_sessions(20, 3, 0.0, 1)[0]) == 0
    vms = VMs(cores=[1], minutes=[10])
    with pytest.raises(ValueError, match="arrivals"):
        simulate_online(vms, np.array([-1.0]), Desktops(cores=[4]), NO_USERS, "ff")
    with pytest.raises(ValueError, match="sessions"):
        simulate_online(vms, np.array([0.0]), Desktops(cores=[4]), sessions((3, 0, 1)), "ff")
    with pytest.raises(ValueError, match="period"):
        simulate_online(vms, np.array([0.0]), Desktops(cores=[4]), NO_USERS, "ff", period=-1)


@st.composite
def scenarios(draw):
    n_d = draw(st.integers(1, 5))
    lab = Desktops(cores=draw(st.lists(st.sampled_from([2, 4, 8]), min_size=n_d, max_size=n_d)))
    n = draw(st.integers(1, 12))
    vms = VMs(cores=draw(st.lists(st.integers(1, 10), min_size=n, max_size=n)),
              minutes=draw(st.lists(st.sampled_from([30.0, 60.0, 200.0]), min_size=n, max_size=n)))
    arrivals = np.array(draw(st.lists(st.sampled_from([0.0, 15.0, 50.0, 120.0]), min_size=n, max_size=n)))
    k = draw(st.integers(0, 6))
    users = [(draw(st.integers(0, n_d - 1)), t, t + draw(st.sampled_from([0.0, 40.0, 90.0])))
             for t in draw(st.lists(st.sampled_from([0.0, 20.0, 60.0, 100.0]), min_size=k, max_size=k))]
    sess = sessions(*users) if users else NO_USERS
    return vms, arrivals, lab, sess, draw(st.sampled_from(["ff", "ffd", "bf", "sorting", "similar"])), \
        draw(st.sampled_from([0.0, 30.0]))


@settings(max_examples=80, deadline=None)
@given(scenarios())
def test_online_invariants(sc):
    vms, arrivals, lab, sess, policy, period = sc
    r = simulate_online(vms, arrivals, lab, sess, policy, period=period)
    ok = r.desktop >= 0
    assert ok.sum() + len(r.unplaced) == len(vms)  # every VM placed or reported
    assert all(vms.cores[v] > lab.cores.max() and r.unplaced[v] for v in r.unplaced)
    assert (r.start[ok] >= arrivals[ok]).all()
    run = r.end[ok] - r.start[ok]
    assert (run >= vms.minutes[ok] - 1e-9).all() and (run <= vms.minutes[ok] / 0.9 + 1e-9).all()
    for j in range(len(lab)):  # at no instant does a desktop run more cores than it has
        on = np.flatnonzero(r.desktop == j)
        for t in r.start[on]:
            live = on[(r.start[on] <= t) & (r.end[on] > t)]
            assert vms.cores[live].sum() <= lab.cores[j]
    assert r.energy_wh >= 0 and (r.per_desktop_wh[np.setdiff1d(np.arange(len(lab)), r.desktop)] == 0).all()
