"""Both kernels pause Python's cyclic garbage collector while they run, and give it back as they
found it: resumed after a run (finished, stopped, or ended by an error), left paused when it was."""

from __future__ import annotations

import gc

import pytest

from skylease.sim.kernel import CalendarKernel, Kernel

KERNELS = [Kernel, CalendarKernel]


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()  # as it was, whatever the test did


@pytest.mark.parametrize("make", KERNELS, ids=lambda k: k.__name__)
def test_the_collector_is_paused_during_a_run_and_resumed_after(make, collector_on):
    k = make()
    seen = []
    for t in range(5):
        k.schedule(float(t), lambda: seen.append(gc.isenabled()))
    k.run(until=2.0)
    assert seen == [False] * 3 and gc.isenabled()
    k.schedule(3.5, k.stop)
    k.run()
    assert seen == [False] * 4 and gc.isenabled()  # stopped at 3.5: resumed too
    k.run()
    assert seen == [False] * 5 and gc.isenabled()


@pytest.mark.parametrize("make", KERNELS, ids=lambda k: k.__name__)
def test_an_error_in_a_callback_resumes_the_collector(make, collector_on):
    k = make()

    def boom() -> None:
        raise RuntimeError("model error")

    k.schedule(1.0, boom)
    with pytest.raises(RuntimeError, match="model error"):
        k.run()
    assert gc.isenabled()


@pytest.mark.parametrize("make", KERNELS, ids=lambda k: k.__name__)
def test_a_collector_paused_by_the_program_stays_paused(make, collector_on):
    gc.disable()
    k = make()
    k.schedule(1.0, lambda: None)
    k.run()
    assert not gc.isenabled()


def test_a_run_of_the_simgrid_scenario_leaves_no_cycle():
    """The scenario of bench_simgrid.py at 500 hosts: every object of the run dies by reference
    counting, so pausing the collector holds no memory back."""
    from skylease.sim.volatile import make_instance, volatile_env

    env = volatile_env(make_instance(500, 5_000, seed=1))
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        env.kernel.run()
        assert env.result().done == 5_000
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()
