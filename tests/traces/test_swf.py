"""Tests of the SWF reader and best-effort availability."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.model.errors import UserError
from skylease.traces.avail import trace_stats
from skylease.traces.swf import SWF_FIELDS, best_effort_availability, read_swf

HEADER = ("; Version: 2.2\n; MaxNodes: 4\n; MaxProcs: 8\n; Partition: 1 a\n; Partition: 2 b\n"
          "; Note: x\n;   y\n")


def _job(n, submit, wait, run, procs):
    return f"{n} {submit} {wait} {run} {procs} 0.5 -1 {procs} 100 -1 1 1 1 -1 1 1 -1 -1\n"


def test_read_with_header(tmp_path):
    path = tmp_path / "w.swf"
    path.write_text(HEADER + _job(1, 0, 5, 10, 2) + "\n" + _job(2, 3, -1, 4, 1))
    df = read_swf(path)
    assert list(df.columns) == list(SWF_FIELDS) and len(df) == 2
    assert df["allocated_processors"].dtype == np.int64 and df["run_time"].dtype == np.float64
    assert df.attrs["max_nodes"] == 4 and df.attrs["max_procs"] == 8
    assert df.attrs["header"]["Partition"] == ["1 a", "2 b"] and df.attrs["header"]["Note"] == "x y"
    assert df["wait_time"].tolist() == [5, -1]


@pytest.mark.parametrize(
    ("line", "where"),
    [("1 2 3\n", ":3: expected 18 fields, found 3"),
     (_job(2, 0, 0, "x", 1), ":3: run_time: 'x' is not a number"),
     (_job(2, 0, 0, 5, 1.5), ":3: allocated_processors: '1.5' is not a whole number")],
)
def test_malformed_lines(tmp_path, line, where):
    path = tmp_path / "w.swf"
    path.write_text("; MaxProcs: 8\n" + _job(1, 0, 0, 1, 1) + line)
    with pytest.raises(UserError) as exc:
        read_swf(path)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(str(path)) and where in msg


def test_best_effort_first_fit():
    df = pd.DataFrame({"submit_time": [0.0, 0, 5], "wait_time": [0.0, 10, 0], "run_time": [20.0, 10, 10],
                       "allocated_processors": [2, 2, 2], "requested_processors": [2, 2, 2]})
    tr = best_effort_availability(df, 3, procs_per_node=2)
    # job0 on node0 [0,20); job2 on node1 [5,15); job1 starts at 10 -> node2 [10,20).
    assert (tr.start, tr.end) == (0, 20)
    assert len(tr.nodes[0]) == 0
    assert list(tr.nodes[1].starts) == [0, 15] and list(tr.nodes[1].ends) == [5, 20]
    assert list(tr.nodes[2].starts) == [0] and list(tr.nodes[2].ends) == [10]
    over = best_effort_availability(df, 1, procs_per_node=2)
    assert over.meta["overcommitted_jobs"] == 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 50), st.integers(1, 4)), min_size=1,
                max_size=30))
def test_best_effort_never_exceeds_capacity(jobs):
    df = pd.DataFrame({"submit_time": [float(j[0]) for j in jobs], "wait_time": 0.0,
                       "run_time": [float(j[1]) for j in jobs], "allocated_processors": [j[2] for j in jobs],
                       "requested_processors": -1})
    tr = best_effort_availability(df, 6, start=0)
    for a in tr.nodes:
        assert (a.ends > a.starts).all() and (a.starts[1:] > a.ends[:-1]).all()
    for x in np.arange(0.5, tr.end, 3.0):
        demand = sum(j[2] for j in jobs if j[0] <= x < j[0] + j[1])
        if tr.meta["overcommitted_jobs"] == 0:
            assert tr.available_count(x) == 6 - demand


def test_real_files(shared_data):
    folder = shared_data / "swf"
    nasa = read_swf(folder / "NASA-iPSC-1993-3.1-cln.swf.gz")
    assert len(nasa) == 18239 and nasa.attrs["max_nodes"] == 128
    lcg = read_swf(folder / "LCG.swf.gz")
    assert len(lcg) == 188041 and lcg.attrs["max_procs"] == 24515 and lcg["partition_number"].nunique() == 170
    blue = read_swf(folder / "blue_30days.swf")
    assert blue.attrs["max_nodes"] is None and blue["allocated_processors"].max() == 1120
    tr = best_effort_availability(blue, 144, procs_per_node=8)
    assert tr.meta["overcommitted_jobs"] == 0 and 0 < trace_stats(tr)["mean"] < 144


PANDAS_FREE = """
import sys
from skylease.traces.swf import best_effort_columns, read_swf_columns
cols, attrs = read_swf_columns(sys.argv[1])
req = best_effort_columns(cols, attrs["source"])
print(sorted(m for m in sys.modules if m.split(".")[0] == "pandas"), len(req["job"]), req["run"].dtype)
"""


def test_columns_without_pandas_equal_the_frame(tmp_path):
    """The lease simulator's path reads SWF without pandas (0.2 s of a 1 s command): same values,
    dtypes and header as :func:`read_swf`'s frame, one-line errors naming file, line and field."""
    import subprocess
    import sys

    from skylease.traces.swf import best_effort_columns, best_effort_requests, read_swf_columns

    path = tmp_path / "w.swf"
    path.write_text(HEADER + _job(1, 0, 5, 10, 2) + "\n" + _job(2, 3, -1, 4, 1) + "; tail comment\n")
    cols, attrs = read_swf_columns(path)
    df = read_swf(path)
    assert list(cols) == list(SWF_FIELDS) and attrs == df.attrs
    for f in SWF_FIELDS:
        assert cols[f].dtype == df[f].dtype and cols[f].tolist() == df[f].tolist()
    req = best_effort_columns(cols, attrs["source"])
    assert pd.DataFrame(req).equals(best_effort_requests(df))
    p = subprocess.run([sys.executable, "-c", PANDAS_FREE, str(path)], capture_output=True, text=True,
                       timeout=60)
    assert p.stdout.split() == ["[]", "2", "int64"], p.stderr
    one = tmp_path / "one.swf"
    one.write_text(_job(7, 0, 0, 3, 1))
    assert read_swf_columns(one)[0]["job_number"].tolist() == [7]
    empty = tmp_path / "empty.swf"
    empty.write_text("; MaxProcs: 8\n")
    assert all(len(v) == 0 for v in read_swf_columns(empty)[0].values()) and len(read_swf(empty)) == 0
    for bad, where in ((_job(2, 0, 0, "inf", 1), ":2: run_time: 'inf' is not a finite number"),
                       (_job(2, 0, 0, "nan", 1), ":2: run_time: 'nan' is not a finite number"),
                       ("1 2 3\n", ":2: expected 18 fields, found 3")):
        path.write_text(_job(1, 0, 0, 1, 1) + bad)
        with pytest.raises(UserError) as exc:
            read_swf_columns(path)
        assert "\n" not in str(exc.value) and where in str(exc.value)
