import numpy as np
import pytest

from skylease.model import Availability, Bag, Task


def test_bag_from_runtimes_and_lookup():
    bag = Bag.from_runtimes([10, 20, 30], name="b")
    assert len(bag) == 3
    assert bag[1].work == 20
    assert bag.total_work == 60
    np.testing.assert_array_equal(bag.works, [10, 20, 30])


def test_bag_rejects_duplicate_ids():
    with pytest.raises(ValueError, match="task id 1"):
        Bag((Task(0, 1), Task(1, 1), Task(1, 2)))


@pytest.mark.parametrize("work", [-1.0, float("nan"), float("inf")])
def test_task_rejects_bad_work(work):
    with pytest.raises(ValueError):
        Task(0, work)


def test_availability_queries():
    av = Availability(np.array([0.0, 100.0]), np.array([50.0, np.inf]))
    assert av.is_available(0) and av.is_available(49.9)
    assert not av.is_available(50) and not av.is_available(99)
    assert av.is_available(1e9)
    assert av.next_change(10) == 50
    assert av.next_change(60) == 100
    assert av.next_change(200) == float("inf")
    assert av.available_time(0, 200) == 150


def test_availability_rejects_overlap_and_merges_from_intervals():
    with pytest.raises(ValueError, match="overlapping"):
        Availability(np.array([0.0, 10.0]), np.array([20.0, 30.0]))
    av = Availability.from_intervals([(10, 30), (0, 20), (40, 50), (50, 60)])
    assert av.starts.tolist() == [0, 40]
    assert av.ends.tolist() == [30, 60]
