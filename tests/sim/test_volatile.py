"""The volatile-hosts scenario on SimEnvironment (skylease.sim.volatile): hand-made instances whose
makespans are worked out by hand, the same-instant rules, the instance file, the generator."""

from __future__ import annotations

import numpy as np
import pytest

from skylease.model.availability import AvailabilityTrace
from skylease.sim.volatile import VolatileInstance, make_instance, read_instance, run_volatile, write_instance

from .volatile_cases import CASES, INF, instance


@pytest.mark.parametrize(("name", "inst", "makespan", "interrupted"), CASES, ids=[c[0] for c in CASES])
def test_hand_made_cases(name, inst, makespan, interrupted):
    res = run_volatile(inst)
    assert res.done == inst.tasks
    assert res.makespan == pytest.approx(makespan, abs=1e-12)
    assert res.interrupted == interrupted


def test_a_bag_that_cannot_finish_reports_what_was_done():
    res = run_volatile(instance([1.0], [[(0, 1.5)]], [1, 1]))
    assert (res.done, res.makespan, res.interrupted) == (1, 1.0, 1)


def test_the_instance_file_round_trips(tmp_path):
    inst = CASES[3][1]
    write_instance(tmp_path / "i.bin", inst)
    back = read_instance(tmp_path / "i.bin")
    for k in ("speeds", "starts", "ends", "bounds", "work"):
        assert np.array_equal(getattr(back, k), getattr(inst, k)), k
    (tmp_path / "bad.bin").write_bytes((tmp_path / "i.bin").read_bytes()[:-8])
    with pytest.raises(ValueError, match="truncated"):
        read_instance(tmp_path / "bad.bin")


def test_intervals_must_be_apart():
    with pytest.raises(ValueError, match="apart"):
        instance([1.0], [[(0, 2), (2, 3)]], [1])
    with pytest.raises(ValueError, match="on < off"):
        instance([1.0], [[(2, 2)]], [1])


def test_from_trace_merges_touching_intervals_and_keeps_the_last_state():
    s = np.array([0.0, 5.0, 7.0, 3.0])
    e = np.array([5.0, 6.0, 10.0, 4.0])
    trace = AvailabilityTrace.from_flat("t", s, e, np.array([0, 3, 4]), 0.0, 10.0)
    inst = VolatileInstance.from_trace(trace, np.array([1.0, 1.0]), np.array([1.0]))
    assert inst.starts.tolist() == [0.0, 7.0, 3.0]
    assert inst.ends.tolist() == [6.0, INF, 4.0]  # [7, 10) reached the trace's end
    assert inst.bounds.tolist() == [0, 2, 3]


def test_a_generated_instance_finishes_with_interruptions():
    inst = make_instance(40, 400, seed=3)
    assert inst.hosts == 40 and inst.tasks == 400
    assert inst.speeds.min() >= 1000 / 3 and inst.speeds.max() <= 3000
    res = run_volatile(inst)
    assert res.done == 400 and res.interrupted > 0
    # at least the work over all the speeds, and not absurdly more
    assert inst.work.sum() / inst.speeds.sum() < res.makespan < 20 * inst.work.sum() / inst.speeds.sum()
    assert run_volatile(make_instance(40, 400, seed=3)) == res  # seeded
