"""Tests of the FTA event-trace reader."""

from __future__ import annotations

import time

import pytest

from skylease.model.errors import UserError
from skylease.traces.avail import trace_stats
from skylease.traces.fta import read_fta_events

HEAD = "event_id component_id node_id platform_id node_name event_type event_start_time event_stop_time " \
       "event_end_reason\n"


@pytest.fixture
def _write(write_file):
    def write(tmp_path, rows, name="ev.tab.gz"):
        return write_file(name, HEAD + "".join("\t".join(str(x) for x in r) + "\n" for r in rows))
    return write


def test_basic_up_intervals_relative_to_first_event(tmp_path, _write):
    rows = [(0, 0, 7, 3, "1.0", 0, 1000, 1100, 8000), (1, 0, 7, 3, "1.0", 1, 1100, 1500, 0),
            (0, 0, 9, 3, "2.0", 1, 1200, 1300, 0), (1, 0, 9, 3, "2.0", 0, 1300, 1400, 8000)]
    tr = read_fta_events(_write(tmp_path, rows))
    assert tr.n_nodes == 2 and tr.origin == 1000 and (tr.start, tr.end) == (0, 500)
    assert list(tr.nodes[0].starts) == [100] and list(tr.nodes[0].ends) == [500]
    assert list(tr.nodes[1].starts) == [200] and list(tr.nodes[1].ends) == [300]
    w = read_fta_events(_write(tmp_path, rows), start=150, end=400)
    assert w.origin == 1150 and w.end == 250 and list(w.nodes[1].starts) == [50]


def test_overlap_down_wins_and_unterminated(tmp_path, _write):
    rows = [(0, 0, 1, 3, "n", 1, 0, 100, 0), (1, 0, 1, 3, "n", 0, 40, 60, 8000),
            (0, 0, 2, 3, "m", 1, 50, -1, 0), (0, 0, 3, 3, "k", 0, 0, 200, 0)]
    tr = read_fta_events(_write(tmp_path, rows, "ev.tab"))
    assert list(tr.nodes[0].starts) == [0, 60] and list(tr.nodes[0].ends) == [40, 100]
    assert list(tr.nodes[1].starts) == [50] and list(tr.nodes[1].ends) == [200]  # until the trace end
    assert len(tr.nodes[2]) == 0
    assert tr.meta["unterminated_events"] == 1 and tr.meta["nodes_with_overlapping_events"] == 1


def test_platform_filter(tmp_path, _write):
    rows = [(0, 0, 1, 3, "n", 1, 0, 100, 0), (0, 0, 2, 4, "m", 1, 10, 20, 0)]
    tr = read_fta_events(_write(tmp_path, rows), platform=4)
    assert tr.n_nodes == 1 and tr.end == 10
    with pytest.raises(UserError, match="platform_id: no event has platform_id 5"):
        read_fta_events(_write(tmp_path, rows), platform=5)


@pytest.mark.parametrize(
    ("bad", "where"),
    [((0, 0, 1, 3, "n", 2, 0, 10, 0), ":3: event_type: must be 0"),
     ((0, 0, 1, 3, "n", 1, "abc", 10, 0), ":3: event_start_time: 'abc' is not a number"),
     ((0, 0, 1, 3, "n", 1, 50, 10, 0), ":3: event_stop_time: 10 is before"),
     ((0, 0, 1, 3), ":3: expected 9 fields, found 4")],
)
def test_malformed_lines(tmp_path, bad, where, _write):
    path = _write(tmp_path, [(0, 0, 1, 3, "n", 1, 0, 10, 0), bad])
    with pytest.raises(UserError) as exc:
        read_fta_events(path)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(str(path)) and where in msg


def test_bad_header_and_missing_file(tmp_path):
    path = tmp_path / "x.tab"
    path.write_text("a b c\n1 2 3\n")
    with pytest.raises(UserError, match=r"x.tab:1: header lacks column"):
        read_fta_events(path)
    with pytest.raises(UserError, match="file not found"):
        read_fta_events(tmp_path / "missing.tab")


def test_real_lanl_trace(shared_data):
    t = time.perf_counter()
    tr = read_fta_events(shared_data / "fta" / "lanl_event_trace.tab.gz")
    elapsed = time.perf_counter() - t
    assert elapsed < 5.0
    assert tr.n_nodes == 3577 and tr.meta["time_scale"] == "s"
    assert 3765 < tr.length / 86400 < 3766  # 1995-05-19 .. 2005-09-09
    st = trace_stats(tr)
    assert st["max"] == 1670 and 0.10 < st["frac_available"] < 0.12
