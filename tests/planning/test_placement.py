"""VM placement on desktops (thesis ch. 6, decisions B1-B6 in docs/decisions/thesis.md): the worked
example, each heuristic's
rule and tie-breaks, power models, and the three energy readings against hand computations."""

import math

import numpy as np
import pytest

from skylease.model.desktop import Desktops, VMs
from skylease.model.power import THESIS_POWER, PowerCurve, PowerTable
from skylease.planning.placement import ALGORITHMS, energy, place, run_minutes

F = THESIS_POWER.watts


def f(x):
    return float(F(np.array([x]))[0])


def example():
    return VMs(cores=[4, 4, 4], minutes=[600, 60, 630]), Desktops(cores=[8, 8])


# -- the golden test: Alg. 12 worked example (thesis §6.1.2.4) ---------------------------------------
def test_worked_example_alg11_1784_wh_and_alg12_1100_wh():
    vms, lab = example()
    alg11 = place("sorting", vms, lab, secondary="none")  # the reading that gives the text's placement
    alg12 = place("similar", vms, lab)
    assert alg11.desktop.tolist() == [0, 0, 1]  # {VM1, VM2 | VM3}
    assert alg12.desktop.tolist() == [0, 1, 0]  # {VM1, VM3 | VM2}
    assert abs(energy(alg11, vms, lab, "c").total_wh - 1784) <= 1
    assert abs(energy(alg12, vms, lab, "c").total_wh - 1100) <= 1
    # Alg. 11 with the text's key (cores, then time descending) already pairs VM3 with VM1 (decision B4)
    assert place("sorting", vms, lab, secondary="time_desc").desktop.tolist() == [0, 1, 0]


def test_worked_example_energy_by_hand():
    vms, lab = example()
    e = energy(np.array([0, 0, 1]), vms, lab, "c")
    assert e.per_desktop_wh[0] == pytest.approx(f(100) * 1 + f(50) * 9)
    assert e.per_desktop_wh[1] == pytest.approx(f(50) * 10.5)
    assert e.desktops_used == 2


def test_power_curve_values():
    assert f(100) == pytest.approx(96.98, abs=0.01)
    assert f(50) == pytest.approx(86.50, abs=0.01)
    assert f(1) == pytest.approx(45.341)
    assert math.log10(97 / 45.341) / 2 == pytest.approx(THESIS_POWER.b, abs=1e-4)
    assert f(0) == 47.0  # idle but on (Table 6.2), not the regression's 0
    assert PowerCurve(a=2.0, b=1.0).watts(np.array([3.0]))[0] == 6.0


def test_power_table_interpolates_between_steps():
    t = PowerTable(tuple(float(10 * k) for k in range(11)), name="lin")
    assert t.watts(np.array([0.0, 15.0, 100.0])).tolist() == [0.0, 15.0, 100.0]
    assert t.idle_w == 0.0
    with pytest.raises(ValueError):
        PowerTable((1.0, 2.0))


# -- each heuristic's rule -------------------------------------------------------------------------
def test_first_fit_takes_lowest_index_and_round_robin_is_first_fit():
    vms = VMs(cores=[2, 4, 2, 1], minutes=[10, 20, 30, 40])
    lab = Desktops(cores=[4, 4, 8])
    ff = place("ff", vms, lab)
    assert ff.desktop.tolist() == [0, 1, 0, 2]
    assert place("rr", vms, lab).desktop.tolist() == ff.desktop.tolist()


def test_ffd_orders_by_cores_then_duration_descending():
    vms = VMs(cores=[1, 4, 4, 2], minutes=[10, 20, 30, 40])
    lab = Desktops(cores=[4, 8])
    p = place("ffd", vms, lab)
    assert p.order.tolist() == [2, 1, 3, 0]
    assert p.desktop.tolist() == [1, 1, 0, 1]


def test_best_fit_leaves_fewest_free_cores_ties_to_lowest_index():
    vms = VMs(cores=[3], minutes=[10])
    lab = Desktops(cores=[8, 4, 4])
    assert place("bf", vms, lab).desktop.tolist() == [1]
    assert place("ff", vms, lab).desktop.tolist() == [0]
    # decreasing order vs request order
    vms = VMs(cores=[1, 4], minutes=[10, 10])
    lab = Desktops(cores=[4, 1])
    assert place("bf", vms, lab).desktop.tolist() == [1, 0]
    assert place("bf-trace", vms, lab).desktop.tolist() == [1, 0]
    lab = Desktops(cores=[4, 5])
    assert place("bf-trace", vms, lab).desktop.tolist() == [0, 1]  # 1 core first, into the 4 (3 left < 4)
    assert place("bf", vms, lab).desktop.tolist() == [1, 0]  # 4 cores first, into the 4


def test_sorting_prefers_a_desktop_with_a_vm_then_a_user_then_the_freest():
    lab = Desktops(cores=[8, 4, 8, 4], user_minutes=[0, 100, 0, 100])
    vms = VMs(cores=[2], minutes=[10])
    assert place("sorting", vms, lab).desktop.tolist() == [1]  # a user beats more free cores
    # a desktop already running a VM beats a user
    assert place("sorting", vms, lab, free=[6, 4, 8, 4], has_vm=[1, 0, 0, 0]).desktop.tolist() == [0]
    # among equals, the freest, then the lowest index
    lab = Desktops(cores=[4, 8, 8])
    assert place("sorting", vms, lab).desktop.tolist() == [1]
    # the order is re-evaluated after each placement: the second VM joins the first
    vms = VMs(cores=[4, 2], minutes=[10, 5])
    lab = Desktops(cores=[4, 8, 8])
    assert place("sorting", vms, lab).desktop.tolist() == [1, 1]
    assert place("ff", vms, lab).desktop.tolist() == [0, 1]


def test_sorting_secondary_keys():
    vms = VMs(cores=[2, 2, 2], minutes=[30, 10, 20])
    lab = Desktops(cores=[8])
    assert place("sorting", vms, lab, secondary="time_desc").order.tolist() == [0, 2, 1]
    assert place("sorting", vms, lab, secondary="time_asc").order.tolist() == [1, 2, 0]
    assert place("sorting", vms, lab, secondary="none").order.tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="secondary"):
        place("sorting", vms, lab, secondary="random")


def test_similar_fills_a_desktop_with_the_closest_durations():
    # order: (4 cores, 500), (2, 900), (2, 480), (2, 100); desktop 8 takes 500, then 480, then 900
    vms = VMs(cores=[2, 4, 2, 2], minutes=[100, 500, 480, 900])
    lab = Desktops(cores=[4, 8])
    p = place("similar", vms, lab)
    assert p.desktop.tolist() == [0, 1, 1, 1]
    # the desktop with a user comes first: the 4-core VM fills it; the 8-core one then packs 900, 480, 100
    lab = Desktops(cores=[4, 8], user_minutes=[60, 0])
    assert place("similar", vms, lab).desktop.tolist() == [1, 0, 1, 1]


# -- infeasible requests are reported, never dropped ---------------------------------------------
@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_unplaced_vms_are_reported_with_a_reason(algorithm):
    vms = VMs(cores=[16, 4, 4, 4], minutes=[10, 10, 10, 10])
    lab = Desktops(cores=[4, 8])
    p = place(algorithm, vms, lab)
    assert set(p.unplaced) == set(np.flatnonzero(p.desktop < 0).tolist())
    assert 0 in p.unplaced and "largest desktop has 8" in p.unplaced[0]
    assert p.placed.sum() == 3 and len(p.unplaced) == 1
    vms = VMs(cores=[4, 4, 4, 4], minutes=[10, 10, 10, 10])
    p = place(algorithm, vms, Desktops(cores=[4, 8]))
    assert len(p.unplaced) == 1
    reason = next(iter(p.unplaced.values()))
    assert reason == "needs 4 cores; no desktop had 4 free when it was placed (at most 0)"


def test_bad_arguments_raise():
    vms, lab = example()
    with pytest.raises(ValueError, match="unknown algorithm"):
        place("worst-fit", vms, lab)
    with pytest.raises(ValueError, match="free"):
        place("ff", vms, lab, free=[9, 8])
    with pytest.raises(ValueError):
        VMs(cores=[0], minutes=[1])
    with pytest.raises(ValueError):
        VMs(cores=[1.5], minutes=[1])
    with pytest.raises(ValueError):
        VMs(cores=[1], minutes=[float("nan")])
    with pytest.raises(ValueError):
        Desktops(cores=[4], user_minutes=[-1])
    with pytest.raises(ValueError, match="energy model"):
        energy(np.array([0, 0, 1]), vms, lab, "d")
    with pytest.raises(ValueError, match="desktop index"):
        energy(np.array([0, 0, 2]), vms, lab)


# -- energy readings ---------------------------------------------------------------------------
def test_user_slows_vms_and_the_three_models_differ_as_specified():
    # one desktop, 8 cores, user for 120 min; VMs of 4 cores x 600 min and 4 cores x 60 min
    vms = VMs(cores=[4, 4], minutes=[600, 60])
    lab = Desktops(cores=[8], user_minutes=[120])
    desk = np.array([0, 0])
    runs = run_minutes(desk, vms, lab)
    assert runs.tolist() == pytest.approx([600 + 12, 60 + 6])
    f100, f50 = f(100), f(50)

    def inc(p):
        return max(0.0, p + 20 - 87)

    c = (inc(f100) * 66 + inc(f50) * (612 - 66)) / 60
    b = (inc(f100) * 66 + inc(f50) * (120 - 66) + f50 * (612 - 120)) / 60
    a = (1.1 * f100 * 66 + 1.1 * f50 * (120 - 66) + f50 * (612 - 120)) / 60
    assert energy(desk, vms, lab, "c").total_wh == pytest.approx(c)
    assert energy(desk, vms, lab, "b").total_wh == pytest.approx(b)
    assert energy(desk, vms, lab, "a").total_wh == pytest.approx(a)
    # without a user the three readings agree
    free = Desktops(cores=[8])
    assert len({round(energy(desk, vms, free, m).total_wh, 9) for m in "abc"}) == 1


def test_user_leaving_after_the_last_vm_and_unplaced_vms():
    vms = VMs(cores=[2, 16], minutes=[30, 30])
    lab = Desktops(cores=[8, 4], user_minutes=[240, 0])
    e = energy(np.array([0, -1]), vms, lab, "b")
    assert e.total_wh == pytest.approx(max(0.0, f(25) + 20 - 87) * 33 / 60)
    assert math.isnan(e.run_minutes[1]) and e.desktops_used == 1
    assert e.per_desktop_wh[1] == 0.0
    assert energy(np.array([-1, -1]), vms, lab).total_wh == 0.0


def test_mixed_power_models_per_desktop():
    table = PowerTable(tuple(50.0 + 5 * k for k in range(11)), name="spec")
    lab = Desktops(cores=[4, 4], power_index=[0, 1], power_models=(THESIS_POWER, table))
    vms = VMs(cores=[2, 2], minutes=[60, 60])
    e = energy(np.array([0, 1]), vms, lab)
    assert e.per_desktop_wh.tolist() == pytest.approx([f(50), 75.0])
