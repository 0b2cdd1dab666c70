"""Reschedule's walk of the work units a cloud worker may copy (:class:`CopyOrder`): parking a unit
with nothing to copy changes no choice, only the time the walk takes."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

import skylease.sim.dg.env as dg_env
from skylease.experiments.spequlos import run_once
from skylease.sim.dg.copy_order import CopyOrder

OPS = st.lists(st.tuples(st.sampled_from(["append", "to_back", "remove", "park", "wake"]),
                         st.integers(0, 30)), max_size=200)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_the_walk_is_the_full_order_without_the_parked_units(ops):
    """Against a model: every unit in an ordered dict with a parked flag; a walk is the dict's order
    minus the parked; a woken unit is back where it was, and every unit counts in len()."""
    order, model = CopyOrder(range(5)), OrderedDict((w, False) for w in range(5))
    nxt = 5
    for op, k in ops:
        units = list(model)
        if op == "append":
            order.append(nxt)
            model[nxt] = False
            nxt += 1
        elif not units:
            continue
        else:
            w = units[k % len(units)]
            if op == "remove":
                order.remove(w)
                del model[w]
            elif op == "wake":
                order.wake(w)
                model[w] = False
            elif not model[w]:  # to_back and park take a unit in the walk
                if op == "to_back":
                    order.to_back(w)
                    model.move_to_end(w)
                else:
                    order.park(w)
                    model[w] = True
        assert list(order) == [w for w, parked in model.items() if not parked]
        assert len(order) == len(model)
    order.remove(10_000)  # a unit not there: nothing


class _NeverParks(CopyOrder):
    """The walk before parking existed: every unvalidated unit, skipped one by one."""

    def park(self, w: int) -> None:
        pass


class _Counting(CopyOrder):
    parked = 0

    def park(self, w: int) -> None:
        _Counting.parked += 1
        super().park(w)


def test_a_run_with_parking_takes_the_same_decisions_as_one_without(monkeypatch):
    """BOINC, 20,000 one-hour tasks on 2,000 seti-like nodes, 9C-C-R: hundreds of units are parked,
    and the run is the same to the last event as one whose walk passes every unit."""
    args = ("boinc", "seti", "20000:3600", "9C-C-R", 1)
    kw = {"nodes": 2_000, "days": 14.0}
    monkeypatch.setattr(dg_env, "CopyOrder", _Counting)
    parked = run_once(*args, **kw)
    monkeypatch.setattr(dg_env, "CopyOrder", _NeverParks)
    walked = run_once(*args, **kw)
    assert _Counting.parked > 200, _Counting.parked
    assert parked["cws"] > 100 and parked["cloud_work_share"] > 0
    drop = ("wall_s",)
    assert {k: v for k, v in parked.items() if k not in drop} == \
        {k: v for k, v in walked.items() if k not in drop}
