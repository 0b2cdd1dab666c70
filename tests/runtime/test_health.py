"""A server's vital parts (skylease.runtime.health): a thread's death is recorded once, as one line
(which part, when, on what), logged once with its traceback; a clean return is no death."""

from __future__ import annotations

import logging
import re

import pytest

from skylease.runtime.health import MAX_REASON, Unavailable, Vital

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def test_a_thread_that_dies_is_recorded_and_logged_once(caplog):
    vital = Vital("the sweep")
    assert vital.failure() is None
    vital.check()  # (alive: nothing raised)

    def job() -> None:
        raise ValueError("bad row\n  in the table")

    caplog.set_level(logging.ERROR, logger="skylease.health")
    t = vital.thread(job, name="sweep")
    t.start()
    t.join(5)
    assert t.daemon and t.name == "sweep"
    assert re.fullmatch(rf"the sweep stopped at {STAMP}: ValueError: bad row in the table", vital.failure())
    vital.died(RuntimeError("later"))  # only the first death counts, and is logged
    assert vital.failure().endswith("ValueError: bad row in the table")
    assert [r.getMessage() for r in caplog.records] == [vital.failure()]
    assert caplog.records[0].exc_info[0] is ValueError  # (its traceback)
    with pytest.raises(Unavailable, match="the sweep stopped at"):
        vital.check()


def test_a_clean_return_is_not_a_death_and_a_long_message_is_cut():
    vital = Vital("the loop")
    t = vital.thread(lambda: None, name="loop")
    t.start()
    t.join(5)
    assert vital.failure() is None
    vital.died(KeyError())  # no message: the type alone
    assert re.fullmatch(rf"the loop stopped at {STAMP}: KeyError", vital.failure())
    long = Vital("x")
    long.died(OSError("y" * 10_000))
    reason = long.failure()
    assert reason.endswith("y...") and len(reason.split(": ", 2)[2]) == MAX_REASON
