"""`skylease demo` computes its later parts in a background process while it shows the earlier
ones (src/skylease/experiments/demo.py): what a part shows must not depend on where it was computed."""

from __future__ import annotations

import pandas as pd
import pytest

from skylease.experiments import demo


@pytest.fixture
def no_background():
    yield
    if demo._BACKGROUND is not None:
        demo._BACKGROUND.shutdown(wait=True, cancel_futures=True)
        demo._BACKGROUND = None
    demo._PREFETCHED.clear()


def test_a_part_computed_in_the_background_is_the_part_computed_here(no_background):
    demo._prefetch(("provisioning", ()))
    assert demo._BACKGROUND is not None and ("provisioning", ()) in demo._PREFETCHED
    there = demo.provisioning_demo()  # taken from the background process
    assert ("provisioning", ()) not in demo._PREFETCHED
    here = demo.provisioning_demo()  # nothing prefetched any more: computed in this process
    cols = ["plan", "minutes", "cost", "sim_minutes", "sim_cost"]  # (solve times differ run to run)
    pd.testing.assert_frame_equal(there[cols], here[cols])
    assert there["plan"].iloc[0].startswith("ILP, deadline 61 min")


def test_an_error_in_the_background_is_raised_by_the_part(no_background):
    demo._prefetch(("placement", (130, 0.5, 0, "no-such-argument")))  # the wrong arity: a TypeError there
    with pytest.raises(TypeError):
        demo._take("placement", (130, 0.5, 0, "no-such-argument"))


def test_inline_asks_for_no_background_process(no_background, tmp_path):
    demo.run_fixed_pool_demo(tmp_path, seeds=1, mode="inline", progress=False)
    assert demo._BACKGROUND is None and not demo._PREFETCHED
