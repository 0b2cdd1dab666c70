"""Tests of skylease.traces.avail: the trace type, its statistics, .tr directories, load_trace."""

from __future__ import annotations

import math

import pytest

from skylease.model.availability import Availability, AvailabilityTrace
from skylease.model.errors import UserError
from skylease.traces.avail import (
    PAPER_TABLES,
    format_stats_table,
    load_trace,
    read_tr_dir,
    trace_stats,
)


def _trace() -> AvailabilityTrace:
    a = Availability.from_intervals([(0, 10), (20, 30)])
    b = Availability.from_intervals([(5, 25)])
    return AvailabilityTrace("t", (a, b), 0.0, 40.0)


def test_window_clips_and_rebases():
    w = _trace().window(8, 22)
    assert w.n_nodes == 2 and (w.start, w.end) == (8, 22)
    assert list(w.nodes[0].starts) == [8, 20] and list(w.nodes[0].ends) == [10, 22]
    r = _trace().window(8, 22, rebase=True)
    assert (r.start, r.end) == (0, 14) and list(r.nodes[1].starts) == [0] and list(r.nodes[1].ends) == [14]


def test_count_series_and_stats_by_hand():
    tr = _trace()
    times, counts = tr.count_series()
    assert list(times) == [0, 5, 10, 20, 25, 30]
    assert list(counts) == [1, 2, 1, 2, 1, 0]
    st = trace_stats(tr)
    assert st["mean"] == pytest.approx((5 + 10 + 10 + 10 + 5) / 40)
    assert (st["min"], st["max"], st["n_nodes"], st["n_active"]) == (0, 2, 2, 2)
    assert st["av_n"] == 3 and st["av_q50"] == 10  # durations 10, 10, 20
    assert st["unav_n"] == 1 and st["unav_q50"] == 10  # only the gap between two intervals counts
    assert st["frac_available"] == pytest.approx(40 / 80)
    assert st["churn_per_node_day"] == pytest.approx(5 / (2 * 40 / 86400))  # t=0 is no change


def test_stats_of_empty_node_and_format():
    tr = AvailabilityTrace("e", (Availability.from_intervals([]),), 0.0, 100.0)
    st = trace_stats(tr)
    assert st["mean"] == 0 and math.isnan(st["av_q50"]) and st["n_active"] == 0
    text = format_stats_table([st, {"name": "seti (paper)", **PAPER_TABLES["seti"]}])
    lines = text.splitlines()
    assert len(lines) == 4 and lines[0].startswith("trace") and "24391.0" in lines[3]


def test_read_tr_dir(tmp_path):
    (tmp_path / "b.tr").write_text("# node b\n0 100 1\n100 150 0\n150 300 1\n")
    (tmp_path / "a.tr").write_text("50 60 1\n\n70 80 2\n")
    tr = read_tr_dir(tmp_path, end=200)
    assert tr.meta["node_names"] == ("a", "b") and (tr.start, tr.end) == (0, 200)
    assert list(tr.nodes[0].starts) == [50] and list(tr.nodes[1].ends) == [100, 200]
    assert load_trace(str(tmp_path)).n_nodes == 2


@pytest.mark.parametrize(
    ("content", "where"),
    [("0 10 1\n5 x 1\n", "a.tr:2: end: 'x' is not a number"),
     ("0 10\n", "a.tr:1: expected 3 fields"),
     ("10 5 1\n", "a.tr:1: end: end 5 is before start 10")],
)
def test_read_tr_dir_errors(tmp_path, content, where):
    (tmp_path / "a.tr").write_text(content)
    with pytest.raises(UserError) as exc:
        read_tr_dir(tmp_path)
    msg = str(exc.value)
    assert "\n" not in msg and where in msg


def test_load_trace_errors(tmp_path):
    with pytest.raises(UserError, match="unknown trace 'nope'"):
        load_trace("nope")
    (tmp_path / "x.txt").write_text("1")
    with pytest.raises(UserError, match="unknown trace format"):
        load_trace(str(tmp_path / "x.txt"))
    with pytest.raises(UserError, match="not in"):
        load_trace("lanl", data_dir=tmp_path)


def test_load_generated_is_seeded():
    a = load_trace("nd", seed=5, n_nodes=20, duration_s=5 * 86400)
    b = load_trace("nd", seed=5, n_nodes=20, duration_s=5 * 86400)
    assert a == b
    assert a != load_trace("nd", seed=6, n_nodes=20, duration_s=5 * 86400)
    assert a.n_nodes == 20 and a.end == 5 * 86400


def test_load_all_named_real_traces(shared_data):
    for name in ("spot10", "spot100", "g5klyo", "g5kgre", "lanl"):
        tr = load_trace(name, data_dir=shared_data)
        st = trace_stats(tr)
        assert tr.n_nodes > 0 and st["mean"] > 0, name
    assert load_trace("g5kgre", data_dir=shared_data, duration_s=86400).end == 86400
