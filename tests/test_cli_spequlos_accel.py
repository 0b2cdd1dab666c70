"""`skylease simulate spequlos --strategy batch-accel`: BOINC's own batch acceleration (issue 23)."""

import json

import numpy as np
import pytest

from skylease.cli import main
from skylease.experiments.spequlos import run_once


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.parametrize("trace", ["seti", "nd"])
@pytest.mark.parametrize("bot", ["small", "big", "random"])
def test_batch_accel_runs_on_both_boinc_traces_without_credits(trace, bot):
    row = run_once("boinc", trace, bot, "batch-accel", 1)
    assert row["strategy"] == "batch-accel" and row["completed"] == row["n_tasks"]
    assert row["credits_used"] == 0 and row["cws"] == 0 and row["cloud_work_share"] == 0
    assert row["accel_at_s"] is not None and row["extra_results"] >= 0
    assert run_once("boinc", trace, bot, "none", 1)["extra_results"] == 0


def test_batch_accel_beats_no_qos_on_seti_small_over_ten_seeds():
    none = [run_once("boinc", "seti", "small", "none", s)["completion_s"] for s in range(10)]
    rows = [run_once("boinc", "seti", "small", "batch-accel", s) for s in range(10)]
    assert np.mean([r["completion_s"] for r in rows]) < np.mean(none)
    assert all(r["extra_results"] > 0 for r in rows)


def test_batch_accel_combines_with_spequlos_within_the_order(capsys):
    code, out, err = run(capsys, "simulate", "spequlos", "--middleware", "boinc", "--trace", "nd",
                         "--bot", "small", "--strategy", "batch-accel+9C-C-R", "--seed", "2", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["strategy"] == "batch-accel+9C-C-R" and res["completed"] == 1000
    assert 0 < res["credits_used"] <= res["credits_ordered"] and res["cws"] > 0
    assert res["extra_results"] >= 0 and res["baseline"]["completion_s"] > 0


def test_batch_accel_options_reach_the_server(capsys):
    argv = ["simulate", "spequlos", "--middleware", "boinc", "--trace", "nd", "--bot", "small",
            "--strategy", "batch-accel", "--seed", "2", "--json"]
    code, out, _ = run(capsys, *argv)
    default = json.loads(out)
    code, out, err = run(capsys, *argv, "--accel-min-frac-done", "0.5", "--accel-period", "600")
    assert code == 0, err
    early = json.loads(out)
    assert early["accel_at_s"] < default["accel_at_s"] and early["accel_at_s"] % 600 == 0


@pytest.mark.parametrize(("args", "needle"), [
    (["--middleware", "xwhep", "--strategy", "batch-accel"], "--strategy: batch-accel is the BOINC"),
    (["--middleware", "xwhep", "--strategy", "batch-accel+9C-C-R"], "XWHEP has none"),
    (["--middleware", "boinc", "--strategy", "batch-accel+none"], "batch-accel+STRATEGY"),
    (["--middleware", "boinc", "--strategy", "9C-C-R", "--accel-period", "60"], "need --strategy"),
    (["--middleware", "boinc", "--strategy", "batch-accel", "--accel-min-frac-done", "2"],
     "--accel-min-frac-done"),
    (["--middleware", "boinc", "--strategy", "batch-accel", "--accel-max-not-done", "-1"],
     "--accel-max-not-done"),
    (["--middleware", "boinc", "--strategy", "batch-accel", "--accel-period", "0"], "--accel-period"),
])
def test_bad_batch_accel_input_is_one_line_and_exit_2(capsys, args, needle):
    code, out, err = run(capsys, "simulate", "spequlos", "--trace", "nd", "--bot", "small", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_the_demo_shows_batch_acceleration_on_boinc_only_with_no_credits():
    from skylease.experiments.demo import spequlos_demo

    t = spequlos_demo(seeds=2)
    accel = t[t.strategy == "batch-accel"]
    assert list(accel.middleware) == ["boinc"]  # XWHEP has no batch acceleration
    assert float(accel.credits_share.iloc[0]) == 0.0 and float(accel.cloud_tasks.iloc[0]) == 0.0
