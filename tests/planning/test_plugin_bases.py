"""The bases of a mapping heuristic and a placement algorithm of one's own, from Python: the built-ins
behind them give what their functions give, a plug-in's answer is evaluated as an assignment is, and
a wrong answer is a BadAnswer saying what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from skylease.model.desktop import Desktops, VMs
from skylease.planning.mapping import HEURISTICS, evaluate, low2
from skylease.planning.mapping import plugin as mapping_plugin
from skylease.planning.placement import ALGORITHMS, place
from skylease.planning.placement import plugin as placement_plugin
from skylease.traces.etc import cvb

ETC = cvb(40, 5, 0.6, 0.3, 1000.0, 7)


@pytest.mark.parametrize("name", sorted(HEURISTICS))
def test_a_builtin_heuristic_is_its_function(name):
    want = HEURISTICS[name](ETC)
    got = mapping_plugin.Builtin(name).schedule(ETC)
    assert np.array_equal(got.assignment, want.assignment) and np.array_equal(got.order, want.order)
    assert (got.makespan, got.flowtime, got.lam, got.heuristic) == (want.makespan, want.flowtime, want.lam,
                                                                    want.heuristic)


def test_a_builtin_low_heuristic_keeps_its_lambda_and_energy():
    volts = np.array([[1.95, 0.8]] * 5)
    want = low2(ETC, 0.3, voltages=volts)
    got = mapping_plugin.Builtin("low2", 0.3).schedule(ETC, voltages=volts)
    assert (got.makespan, got.energy, got.lam) == (want.makespan, want.energy, 0.3)
    with pytest.raises(ValueError, match="lambda applies to"):
        mapping_plugin.Builtin("min-min", 0.3)


class Fixed(mapping_plugin.MappingHeuristic):
    def __init__(self, answer):
        self.answer = answer

    def assign(self, etc):
        return self.answer


def test_a_heuristic_of_ones_own_is_evaluated_like_an_assignment():
    answer = [i % 5 for i in range(40)]
    got = Fixed(answer).schedule(ETC)
    want = evaluate(ETC, answer)
    assert got.assignment.tolist() == answer and got.makespan == want.makespan
    assert got.flowtime == want.flowtime and got.heuristic == "Fixed"


@pytest.mark.parametrize(("answer", "says"), [
    (None, "returned None"), ([0] * 39, "returned 39 values"), ([[0] * 40], "shape (1, 40)"),
    ([5] * 40, "machine indices in [0, 5)"), ([-1] * 40, "machine indices"), ([0.5] * 40, "integers"),
    ([True] * 40, "bool"), (["a"] * 40, "expected machine indices"), ([[0], [1, 2]] * 20, "not a list"),
])
def test_a_wrong_assignment_is_a_bad_answer(answer, says):
    with pytest.raises(mapping_plugin.BadAnswer) as e:
        Fixed(answer).schedule(ETC)
    assert says in str(e.value)


LAB = Desktops(cores=np.array([4, 8, 2]), names=("d0", "d1", "d2"))
REQUESTS = VMs(cores=np.array([2, 4, 3, 1, 16]), minutes=np.full(5, 60.0),
               names=tuple(f"v{i}" for i in range(5)))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_a_builtin_placement_is_place(name):
    want = place(name, REQUESTS, LAB)
    got = placement_plugin.Builtin(name).placement(REQUESTS, LAB)
    assert np.array_equal(got.desktop, want.desktop) and np.array_equal(got.order, want.order)
    assert got.unplaced == want.unplaced and got.algorithm == want.algorithm


class Given(placement_plugin.PlacementAlgorithm):
    def __init__(self, answer):
        self.answer = answer

    def assign(self, vms, desktops, free, has_vm):
        free[:] = 0  # (its own copy: what skylease checks against is not changed)
        return self.answer


def test_a_placement_of_ones_own_is_checked_and_explained():
    p = Given([1, 1, 0, -1, -1]).placement(REQUESTS, LAB)
    assert p.desktop.tolist() == [1, 1, 0, -1, -1] and p.algorithm == "Given"
    assert p.unplaced == {3: "needs 1 cores; Given left it unplaced (at most 2 free afterwards)",
                          4: "needs 16 cores; the largest desktop has 8"}
    # a lab already running VMs: its free cores are what the answer must fit
    with pytest.raises(placement_plugin.BadAnswer, match=r"put 4 cores on desktop 1 \(d1\), which has 3 "):
        Given([-1, 1, -1, -1, -1]).placement(REQUESTS, LAB, free=np.array([4, 3, 2]))


@pytest.mark.parametrize(("answer", "says"), [
    (None, "returned None"), ([0] * 4, "returned 4 values"), ([3] * 5, "put VM 0 on desktop 3"),
    ([-2] * 5, "put VM 0 on desktop -2"), ([0.5] * 5, "integers"),
    ([0, 0, -1, -1, -1], "6 cores on desktop 0"),
    (["d0"] * 5, "expected desktop indices"),
])
def test_a_wrong_placement_is_a_bad_answer(answer, says):
    with pytest.raises(placement_plugin.BadAnswer) as e:
        Given(answer).placement(REQUESTS, LAB)
    assert says in str(e.value)
