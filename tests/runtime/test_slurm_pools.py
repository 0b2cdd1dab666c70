"""Slurm pools, for real: a one-node Slurm (slurmctld, slurmd, munged) started here, and pools of
``dask_jobqueue.SLURMCluster`` on it. A rented host is one Slurm job running one Dask worker,
released by ``scancel`` and billed by Slurm's own start and end times."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.runtime import slurm_local

from skylease.cli import main
from skylease.experiments.run import run_job
from skylease.experiments.run_options import RunOptions
from skylease.experiments.run_replay import replay
from skylease.model.billing import Billing
from skylease.runtime import slurm

# integration: a real one-node Slurm, started by the tests (pytest -m integration)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = slurm_local.start(tmp_path_factory.mktemp("slurm"))
    yield c
    slurm_local.stop(c)


def _pools(folder: Path, cluster, *, price: float = 0.0, unit: float = 60, boot: float = 0,
           walltime: str = "00:05:00", max_count: int = 4) -> Path:
    p = folder / "pools.toml"
    p.write_text(f"""[pools.hpc]
cluster = "dask_jobqueue.SLURMCluster"
price = {price}
billing_unit = {unit}
boot_time = {boot}
max_count = {max_count}
[pools.hpc.kwargs]
cores = 1
memory = "1GB"
processes = 1
queue = "{cluster.partition}"
walltime = "{walltime}"
""")
    return p


def _results(out: Path) -> list[tuple]:
    with sqlite3.connect(out / "results.sqlite") as db:
        return db.execute("SELECT task, status, segment FROM results ORDER BY task").fetchall()


def _attempts(out: Path, outcome: str) -> int:
    with sqlite3.connect(out / "results.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM attempts WHERE outcome = ?", (outcome,)).fetchone()[0]


def _run_jobs(out: Path) -> list[slurm.SlurmJob]:
    """The Slurm jobs of the run in ``out`` (by the token in their names), as Slurm reports them."""
    prefix = f"{slurm.JOB_PREFIX}{slurm.run_token(out)}-"
    return [j for j in slurm.jobs() if j.name.startswith(prefix)]


def _wait_for(cond, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _n_results(out: Path) -> int:
    with contextlib.suppress(sqlite3.Error):
        if (out / "results.sqlite").exists():
            return len(_results(out))
    return 0


def test_forty_shell_tasks_on_two_slurm_jobs_finish_once_each(tmp_path, cluster):
    job = tmp_path / "jobs.txt"
    job.write_text("".join(f"echo {i} $SKYLEASE_WORKER\n" for i in range(40)))
    out = tmp_path / "o"
    s = run_job(str(job), RunOptions(out=out, policy="fixed:2", pools_file=_pools(tmp_path, cluster)))
    assert (s["ok"], s["failed"], s["left"]) == (40, 0, 0)
    assert [t for t, _, _ in _results(out)] == list(range(40))  # exactly one result each
    # two hosts, each one Slurm job, cancelled at the end: none left running
    jobs = _run_jobs(out)
    assert s["hosts"] == 2 and len(jobs) == 2, jobs
    assert all(not j.live and j.start is not None for j in jobs), jobs
    with sqlite3.connect(out / "results.sqlite") as db:
        workers = {w for (w,) in db.execute("SELECT DISTINCT pool FROM results")}
    assert workers == {"hpc"}


def _a2ha(folder: Path, cluster, tasks: int, budget: float) -> tuple[Path, dict]:
    job = folder / "jobs.txt"
    job.write_text("sleep 0.5\n" * tasks)
    out = folder / "o"
    # as many hosts as the node has cores: a third job would wait in Slurm's queue
    s = run_job(str(job), RunOptions(out=out, policy="a2ha:aggressive", budget=budget,
                                     pools_file=_pools(folder, cluster, price=1.0, unit=8, boot=3,
                                                       max_count=os.cpu_count() or 1)))
    return out, s


def test_a2ha_on_slurm_never_charges_more_than_the_budget_by_slurms_own_clock(tmp_path, cluster):
    # 2 units buy less than the bag needs: A2HA keeps its hosts to their unit boundaries and
    # releases them there, where a release that reached Slurm late would cost a third unit
    out, s = _a2ha(tmp_path, cluster, 16, budget=2.0)
    jobs = _run_jobs(out)
    assert jobs and all(not j.live for j in jobs), jobs
    # the charge recomputed from Slurm's start and end of every job, per started 8 s unit
    bill = Billing(8.0, 1.0)
    by_slurm = sum(bill.cost(j.end - j.start) for j in jobs if j.start is not None)
    assert by_slurm <= 2.0, (by_slurm, jobs)
    # and it is what the run charged: its hosts' rent periods are Slurm's
    assert s["cost"] == pytest.approx(by_slurm), (s["cost"], by_slurm)
    assert s["ok"] + s["failed"] + s["left"] == 16 and s["failed"] == 0 and s["ok"] > 0


def test_replay_of_a_slurm_run_agrees_with_it(tmp_path, cluster):
    """The tolerance of tests/runtime/test_run.py: hosts within 1, cost within 2 units."""
    out, s = _a2ha(tmp_path, cluster, 20, budget=6.0)
    assert s["left"] == 0, s  # the budget is enough for this bag; it bounds the hosts A2HA rents
    rep = replay(out, seeds=[0])
    sim = rep["simulated"][0]
    assert abs(sim["hosts"] - s["hosts"]) <= 1, (sim, rep["boot_s"], s["hosts"], s["cost"], s["elapsed_s"])
    assert abs(sim["cost"] - s["cost"]) <= 2.0, (sim, s)


def test_a_slurm_job_cancelled_mid_task_is_a_lost_host_and_its_task_runs_once(tmp_path, cluster):
    job = tmp_path / "jobs.txt"
    job.write_text("sleep 0.6\n" * 12)
    out = tmp_path / "o"
    cancelled: list[str] = []

    def cancel_one() -> None:
        _wait_for(lambda: _n_results(out) >= 2, what="2 results")
        running = [j for j in _run_jobs(out) if j.state == "RUNNING"]
        subprocess.run(["scancel", running[0].id], check=True)
        cancelled.append(running[0].id)

    t = threading.Thread(target=cancel_one, daemon=True)
    t.start()
    s = run_job(str(job), RunOptions(out=out, policy="fixed:2", pools_file=_pools(tmp_path, cluster)))
    t.join(5)
    assert cancelled
    assert _results(out) == [(i, "ok", 0) for i in range(12)]  # every task exactly once, none failed
    assert _attempts(out, "lost") == 1 and s["lost"] == 1
    # the host went on with a new job; nothing of the run is left running
    jobs = _run_jobs(out)
    assert len(jobs) == 3 and all(not j.live for j in jobs), jobs


def test_kill_9_of_the_driver_then_resume_cancels_its_jobs_and_runs_nothing_twice(tmp_path, cluster):
    marks = tmp_path / "marks"
    marks.mkdir()
    job = tmp_path / "jobs.txt"
    job.write_text("".join(f"touch {marks}/{i}.$(date +%s%N); sleep 0.3\n" for i in range(20)))
    out = tmp_path / "o"
    pools = _pools(tmp_path, cluster)
    cmd = [sys.executable, "-c", "from skylease.cli import console_main; console_main()", "run", str(job),
           "--out", str(out), "--policy", "fixed:2", "--pools", str(pools)]
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        _wait_for(lambda: _n_results(out) >= 6 or driver.poll() is not None, what="6 results")
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    old = [j for j in _run_jobs(out) if j.live]
    assert old, "the killed driver left no job running (nothing to test)"
    before = {t for t, _, _ in _results(out)}
    assert 0 < len(before) < 20
    resumed_at = time.time_ns()
    res = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, cwd=tmp_path, timeout=90)
    assert res.returncode == 0, res.stderr
    rows = _results(out)
    assert [t for t, _, _ in rows] == list(range(20)) and all(st == "ok" for _, st, _ in rows)
    assert {t for t, _, seg in rows if seg == 0} == before
    # no task recorded before the crash ran again after the resume
    rerun = {int(f.name.split(".")[0]) for f in marks.iterdir() if int(f.name.split(".")[1]) > resumed_at}
    assert not (rerun & before)
    # the old driver's jobs were cancelled by the resume; nothing of the run is left running
    now = {j.id: j for j in _run_jobs(out)}
    assert all(now[j.id].state == "CANCELLED" for j in old), [now[j.id] for j in old]
    assert not any(j.live for j in now.values())


@pytest.mark.parametrize("case", ["partition", "walltime", "sbatch"])
def test_a_wrong_slurm_pool_is_one_line_naming_the_field_and_leaves_nothing(tmp_path, cluster, capsys,
                                                                            monkeypatch, case):
    (tmp_path / "jobs.txt").write_text("true\n")
    if case == "partition":
        pools = _pools(tmp_path, cluster).read_text().replace(f'"{cluster.partition}"', '"nosuch"')
        field = "pools.hpc.kwargs.queue"
    elif case == "walltime":
        pools = _pools(tmp_path, cluster, walltime="00:00:30", unit=60).read_text()
        field = "pools.hpc.kwargs.walltime"
    else:
        pools = _pools(tmp_path, cluster).read_text()
        jobs_before = len(cluster.squeue())
        bare = tmp_path / "bin"
        bare.mkdir()
        monkeypatch.setenv("PATH", str(bare))
        field = "pools.hpc.cluster"
    (tmp_path / "pools.toml").write_text(pools)
    if case != "sbatch":
        jobs_before = len(cluster.squeue())
    t0 = time.monotonic()
    rc = main(["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "o"), "--pools",
               str(tmp_path / "pools.toml"), "--policy", "fixed:1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(rf"pools\.toml:\d+: {re.escape(field)}:", err), err
    assert time.monotonic() - t0 < 10
    assert not (tmp_path / "o").exists()
    monkeypatch.undo()
    assert len(cluster.squeue()) == jobs_before  # no job submitted


def test_without_dask_jobqueue_a_slurm_pool_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # as if it were not installed
    (tmp_path / "pools.toml").write_text('[pools.hpc]\ncluster = "dask_jobqueue.SLURMCluster"\n'
                                         'kwargs = { cores = 1, memory = "1GB" }\n')
    (tmp_path / "jobs.txt").write_text("true\n")
    rc = main(["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "o"), "--pools",
               str(tmp_path / "pools.toml"), "--policy", "fixed:1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "pools.hpc.cluster" in err and "pip install 'skylease[slurm]'" in err, err


def test_walltime_formats():
    assert slurm.walltime_s("00:30:00") == 1800
    assert slurm.walltime_s("30") == 1800
    assert slurm.walltime_s("1:30") == 90
    assert slurm.walltime_s("1-02") == 93600
    assert slurm.walltime_s("1-00:00:10") == 86410
    with pytest.raises(ValueError):
        slurm.walltime_s("an hour")


def test_squeue_lines_are_read_with_slurms_whole_seconds():
    jobs = slurm.parse_squeue("7|skylease-a-hpc-0|CANCELLED|2026-01-01T10:00:00|2026-01-01T10:00:09|vm\n"
                              "8|skylease-a-hpc-1|PENDING|2026-01-01T10:05:00|N/A|\n"
                              "9|x|CANCELLED|2026-01-01T10:00:03|2026-01-01T10:00:03|\n")
    assert jobs[0].end - jobs[0].start == 9 and not jobs[0].live
    assert jobs[1].live and jobs[1].start is None  # an expected start is not a start
    assert jobs[2].start is None  # cancelled while pending: it never ran
