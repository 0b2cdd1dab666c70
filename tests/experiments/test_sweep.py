import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from skylease.experiments.sweep import cell_seed, grid_cells, run_campaign, summarize
from skylease.model.errors import UserError


def square(x, seed):
    return {"y": x * x, "seed_mod": seed % 1000}


def two_rows(x, seed):
    return [{"k": 0, "v": x}, {"k": 1, "v": -x}]


def flaky(x, seed, *, fail=(2,)):
    if x in fail:
        raise RuntimeError(f"boom {x}")
    return {"y": x}


def test_grid_cells_and_seeds_are_deterministic():
    a = grid_cells({"x": [1, 2], "y": ["a"]}, seeds=3, base_seed=5)
    b = grid_cells({"y": ["a"], "x": [1, 2]}, seeds=3, base_seed=5)
    assert len(a) == 6
    assert {(c.key, c.seed) for c in a} == {(c.key, c.seed) for c in b}  # order-independent
    assert len({c.seed for c in a}) == 6
    assert cell_seed(5, a[0].key) != cell_seed(6, a[0].key)


@pytest.mark.parametrize("grid", [{"seed": [1]}, {"x": []}, {"x": "abc"}, {"x": [object()]}])
def test_bad_grids_are_user_errors(grid):
    with pytest.raises(UserError):
        grid_cells(grid)


def test_inline_campaign_table_and_skip_on_rerun(tmp_path):
    r = run_campaign(square, {"x": [1, 2, 3]}, seeds=2, out=tmp_path, mode="inline", progress=False)
    assert (r.cells, r.ran, r.skipped) == (6, 6, 0)
    assert r.table["y"].tolist() == [1, 1, 4, 4, 9, 9]
    assert list(r.table.columns[:3]) == ["x", "rep", "seed"]
    csv = pd.read_csv(tmp_path / "results.csv")
    assert len(csv) == 6
    again = run_campaign(square, {"x": [1, 2, 3, 4]}, seeds=2, out=tmp_path, mode="inline",
                         progress=False)
    assert (again.ran, again.skipped) == (2, 6)
    assert again.table.equals(
        run_campaign(square, {"x": [1, 2, 3, 4]}, seeds=2, mode="inline", progress=False).table
    )


def test_multi_row_cells_and_summary():
    r = run_campaign(two_rows, {"x": [1, 2]}, seeds=2, mode="inline", progress=False)
    assert len(r.table) == 8
    s = summarize(r.table, ["x", "k"], ["v"])
    assert s.loc[(s.x == 2) & (s.k == 1), "v_mean"].item() == -2


def test_failures_are_reported_and_retried(tmp_path):
    r = run_campaign(flaky, {"x": [1, 2, 3]}, out=tmp_path, mode="inline", progress=False)
    assert len(r.table) == 2
    assert [f["params"]["x"] for f in r.failed] == [2]
    assert "boom 2" in r.failed[0]["error"]
    # fixed code, same campaign: only the failed cell runs again
    import functools

    fixed = functools.wraps(flaky)(functools.partial(flaky, fail=()))
    r2 = run_campaign(fixed, {"x": [1, 2, 3]}, out=tmp_path, mode="inline", progress=False)
    assert (r2.ran, r2.failed, len(r2.table)) == (1, [], 3)


def test_other_campaign_in_same_folder_is_refused(tmp_path):
    run_campaign(square, {"x": [1]}, out=tmp_path, mode="inline", progress=False)
    with pytest.raises(UserError, match="choose another output folder"):
        run_campaign(two_rows, {"x": [1]}, out=tmp_path, mode="inline", progress=False)


def test_torn_last_line_is_cut_and_cell_rerun(tmp_path):
    run_campaign(square, {"x": [1, 2]}, out=tmp_path, mode="inline", progress=False)
    cells = tmp_path / "cells.jsonl"
    lines = cells.read_bytes().splitlines(keepends=True)
    cells.write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])  # crash mid-write
    r = run_campaign(square, {"x": [1, 2]}, out=tmp_path, mode="inline", progress=False)
    assert (r.ran, r.skipped, len(r.table)) == (1, 1, 2)
    assert all(json.loads(s) for s in cells.read_text().splitlines())


def test_dask_processes_campaign(tmp_path, monkeypatch):
    for name in ("PYTHONHASHSEED", "OMP_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_", "__DASK_PARENT_PID"):
        monkeypatch.delenv(name, raising=False)  # as a fresh process has it
    before = dict(os.environ)
    r = run_campaign(square, {"x": list(range(12))}, out=tmp_path, workers=2, progress=False)
    assert dict(os.environ) == before  # the cluster's worker settings do not leak into the caller
    assert sorted(r.table["y"]) == [x * x for x in range(12)]
    inline = run_campaign(square, {"x": list(range(12))}, mode="inline", progress=False)
    assert r.table.equals(inline.table)  # same seeds, same rows, whatever ran them


SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from skylease.experiments.sweep import run_campaign

    def slow_cell(x, seed):
        time.sleep(0.25)
        with open(os.environ["EXEC_LOG"], "a") as f:
            f.write(f"{os.environ['RUN_TAG']} {x}\\n")
        return {"y": 2 * x}

    if __name__ == "__main__":
        r = run_campaign(slow_cell, {"x": list(range(24))}, out=sys.argv[1], workers=2,
                         progress=False)
        print("ran", r.ran, "skipped", r.skipped, "rows", len(r.table))
    """
)


def test_killed_campaign_resumes_with_only_missing_cells(tmp_path):
    script = tmp_path / "camp.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out"
    log = tmp_path / "exec.log"
    env = {**os.environ, "EXEC_LOG": str(log), "RUN_TAG": "first"}
    proc = subprocess.Popen([sys.executable, str(script), str(out)], env=env,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    cells = out / "cells.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if cells.exists() and len(cells.read_text().splitlines()) >= 6:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("first run never recorded 6 cells")
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Dask workers die at once
    proc.wait(timeout=10)
    recorded = {json.loads(s)["params"]["x"] for s in cells.read_text().splitlines() if s.endswith("}")}
    assert 6 <= len(recorded) < 24

    env["RUN_TAG"] = "second"
    done = subprocess.run([sys.executable, str(script), str(out)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    second = {int(s.split()[1]) for s in log.read_text().splitlines() if s.startswith("second")}
    assert second == set(range(24)) - recorded  # exactly the missing cells, nothing more
    table = pd.read_csv(out / "results.csv")
    assert sorted(table["x"]) == list(range(24))  # every cell exactly once
    assert (table["y"] == 2 * table["x"]).all()


def test_existing_scheduler_address(tmp_path):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        r = run_campaign(square, {"x": [1, 2, 3]}, scheduler=cluster.scheduler_address,
                         out=tmp_path, progress=False)
    assert r.table["y"].tolist() == [1, 4, 9]


def test_unreachable_scheduler_is_a_user_error():
    with pytest.raises(UserError, match="cannot reach Dask scheduler"):
        run_campaign(square, {"x": [1]}, scheduler="tcp://127.0.0.1:9", progress=False,
                     connect_timeout=1)


def numbered(x, seed, rep):
    return {"y": x + rep}


def test_functions_taking_rep_get_the_repetition_number():
    r = run_campaign(numbered, {"x": [10]}, seeds=[0, 3], mode="inline", progress=False)
    assert r.table["y"].tolist() == [10, 13]
