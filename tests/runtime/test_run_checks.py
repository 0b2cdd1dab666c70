"""Every `skylease run` option is checked before anything starts: one line, exit 2, no folder, no
store; `simulate replay` of a run that did not finish says how to finish it, and `export` lists
its tasks not run."""

from __future__ import annotations

import csv
import io
import json
import time

import pytest

from skylease.cli import main
from skylease.experiments.run_next import resume_command
from skylease.experiments.run_options import RunOptions, check_options
from skylease.model.errors import UserError
from skylease.runtime.jobs import load_job
from skylease.runtime.store import ResultStore

BAD = [
    (["--policy", "dask-adaptive:0"], "--policy"),
    (["--policy", "adaptive:-3"], "--policy"),
    (["--policy", "a2ha", "--budget", "-1"], "--budget"),
    (["--policy", "a2ha", "--budget", "nan"], "--budget"),
    (["--policy", "a2ha", "--budget", "inf"], "--budget"),
    (["--policy", "a2ha", "--seed", "-1"], "--seed"),
    (["--seed", "-5"], "--seed"),
    (["--billing-unit", "0"], "--billing-unit"),
    (["--billing-unit", "nan"], "--billing-unit"),
    (["--timeout", "-5"], "--timeout"),
    (["--timeout", "inf"], "--timeout"),
    (["--retries", "1000"], "--retries"),
    (["--trace-scale", "0", "--volatility", "nd"], "--trace-scale"),
    (["--trace-start", "-1", "--volatility", "nd"], "--trace-start"),
    (["--trace-start", "5"], "--trace-start"),
    (["--tail-credits", "5"], "--tail-credits"),
    (["--tail-qos", "9A-C-D", "--reliable-pool", "local", "--tail-credits", "-1"], "--tail-credits"),
    (["--tail-qos", "bogus", "--reliable-pool", "local"], "--tail-qos"),
    (["--tail-qos", "9A-C-D"], "--reliable-pool"),
    (["--reliable-pool", "local"], "--reliable-pool"),
    (["--retry-failed"], "--retry-failed"),
    (["--policy", "a2ha", "--billing-unit", "2"], "--billing-unit"),  # not longer than the 2 s boot
]


@pytest.mark.parametrize(("argv", "field"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_option_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, argv, field):
    (tmp_path / "jobs.txt").write_text("true\n")
    out = tmp_path / "new" / "X"
    t0 = time.monotonic()
    assert main(["run", str(tmp_path / "jobs.txt"), "--out", str(out), *argv]) == 2
    assert time.monotonic() - t0 < 10
    cap = capsys.readouterr()
    assert cap.err.count("\n") == 1 and "Traceback" not in cap.err, cap.err
    assert f"{field}:" in cap.err, cap.err
    assert "exit status" not in cap.err  # not "the run ended without an exit status" of a run never started
    assert not (tmp_path / "new").exists()  # no folder, so no store to --resume


def test_the_checks_are_the_library_s(tmp_path):
    """The HTTP service of a later issue gets the same checks by calling the library."""
    with pytest.raises(UserError) as e:
        check_options(RunOptions(out=tmp_path, policy="a2ha", seed=-1))
    assert e.value.field == "--seed"
    check_options(RunOptions(out=tmp_path, policy="a2ha", budget=2.0, seed=3))  # fine


def test_a_pools_mistake_leaves_no_folder(tmp_path, capsys):
    (tmp_path / "jobs.txt").write_text("true\n")
    (tmp_path / "pools.toml").write_text("[pools.a]\nmax_count = 2\n")
    out = tmp_path / "X"
    assert main(["run", str(tmp_path / "jobs.txt"), "--out", str(out), "--pools",
                 str(tmp_path / "pools.toml"), "--pool", "b"]) == 2
    assert "--pool" in capsys.readouterr().err
    assert not out.exists()


def test_an_out_that_is_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "jobs.txt").write_text("true\n")
    (tmp_path / "f").write_text("x")
    assert main(["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "f" / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and "not a folder" in err


def test_the_resume_command_repeats_the_options_that_differ(tmp_path):
    opts = RunOptions(out=tmp_path / "my out", policy="a2ha:aggressive", price=0.5, budget=3.0, seed=0,
                      retries=2)
    cmd = resume_command("jobs dir/j.txt", opts, retry_failed=True)
    assert cmd == (f"skylease run 'jobs dir/j.txt' --out '{tmp_path / 'my out'}' --policy a2ha:aggressive "
                   "--price 0.5 --budget 3.0 --retries 2 --resume --retry-failed")


def _interrupted_run(folder, job) -> None:
    """A run stopped by Ctrl-C and never resumed: 1 of its 3 tasks has a result."""
    store = ResultStore(folder / "results.sqlite")
    j = load_job(str(job))
    store.set_meta({"job": j.source, "fingerprint": j.fingerprint(), "tasks": len(j.tasks),
                    "options": {"out": str(folder), "policy": "fixed:1", "price": 0.5}})
    store.add_tasks((t.id, t.to_json(), t.label) for t in j.tasks)
    store.start_segment(12345)
    store.record_result(0, "ok", {"exit_code": 0, "runtime_s": 0.1}, attempt=1, host=0, pool="local",
                        worker=None, started_s=0.0, ended_s=0.1)
    store.end_segment(0.5, "interrupted")
    store.close()
    (folder / "summary.json").write_text(json.dumps({"hosts": 1, "cost": 0.5, "elapsed_s": 1.0}))


def test_replay_of_a_run_that_did_not_finish_says_how_to_finish_it(tmp_path, capsys):
    (tmp_path / "j.txt").write_text("true\ntrue\ntrue\n")
    out = tmp_path / "o"
    out.mkdir()
    _interrupted_run(out, tmp_path / "j.txt")
    assert main(["simulate", "replay", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "did not finish (2 of 3 tasks have no result)" in err
    assert f"skylease run {tmp_path / 'j.txt'} --out {out} --policy fixed:1 --price 0.5 --resume" in err


def test_export_lists_the_tasks_not_run(tmp_path, capsys):
    (tmp_path / "j.txt").write_text("true\ntrue\ntrue\n")
    out = tmp_path / "o"
    out.mkdir()
    _interrupted_run(out, tmp_path / "j.txt")
    assert main(["export", str(out), "--output", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["state"] for r in rows] == ["ok", "not run", "not run"]
    assert rows[1]["exit_code"] == "" and rows[1]["attempts"] == "0"


def test_status_of_a_stopped_run_says_how_to_finish_it(tmp_path, capsys):
    (tmp_path / "j.txt").write_text("true\ntrue\ntrue\n")
    out = tmp_path / "o"
    out.mkdir()
    _interrupted_run(out, tmp_path / "j.txt")
    assert main(["status", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "stopped" in printed
    assert f"finish the run (2 task(s) not run): skylease run {tmp_path / 'j.txt'} --out {out}" in printed
