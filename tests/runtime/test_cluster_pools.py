"""Pools on other Dask clusters, for real: a cluster class named in the pools file, and a running
scheduler given by its address (here a `dask scheduler` and `dask worker` processes of this
machine, as a lab cluster would be)."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from skylease.cli import main
from skylease.experiments.run import run_job
from skylease.experiments.run_options import RunOptions
from skylease.model.catalog import InstanceType
from skylease.runtime import env as env_mod
from skylease.runtime import pools as pools_mod
from skylease.runtime.pools import ClusterPool

# a real run that hangs fails here instead of stalling the suite
pytestmark = pytest.mark.timeout(240)


def _results(out: Path) -> list[tuple]:
    with sqlite3.connect(out / "results.sqlite") as db:
        return db.execute("SELECT task, status FROM results ORDER BY task").fetchall()


class _ExternalCluster:
    """A scheduler and worker processes started outside skylease."""

    def __init__(self, folder: Path, workers: int) -> None:
        self.folder = folder
        self.file = folder / f"scheduler-{time.monotonic_ns()}.json"
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
             "--dashboard-address", ":0", "--scheduler-file", str(self.file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not self.file.exists():
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written before it is complete
        self.address = json.loads(self.file.read_text())["address"]
        self.workers = [self.add_worker(f"ext-{i}") for i in range(workers)]
        from distributed import Client

        with Client(self.address, timeout=30) as c:
            c.wait_for_workers(workers, timeout=60)

    def add_worker(self, name: str) -> subprocess.Popen:
        # no nanny: a killed worker stays dead, as a machine that went away
        return subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--nthreads", "1",
             "--no-nanny", "--name", name, "--no-dashboard"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def close(self) -> None:
        for p in [*self.workers, self.scheduler]:
            with contextlib.suppress(OSError):
                p.kill()
            p.wait()


@pytest.fixture
def external(tmp_path):
    made: list[_ExternalCluster] = []

    def start(workers: int = 2) -> _ExternalCluster:
        made.append(_ExternalCluster(tmp_path, workers))
        return made[-1]

    yield start
    for c in made:
        c.close()


def _pools_file(path: Path, address: str) -> Path:
    path.write_text(f'[pools.lab]\naddress = "{address}"\nprice = 0.5\nbilling_unit = 60\nmax_count = 2\n')
    return path


def _wait_for_results(out: Path, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(sqlite3.Error):
            if (out / "results.sqlite").exists() and len(_results(out)) >= n:
                return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} results after {timeout} s")


def test_a_cluster_class_pool_is_scaled_by_skylease_alone(tmp_path):
    # LocalCluster starts workers of its own; skylease scales it to the hosts it rents
    pool = ClusterPool(InstanceType("lc"), cluster="distributed.LocalCluster",
                       kwargs={"n_workers": 2, "processes": False, "threads_per_worker": 1,
                               "dashboard_address": ":0"})
    pool.connect()
    try:
        deadline = time.monotonic() + 20
        while pool.workers():
            assert time.monotonic() < deadline, "the cluster's own workers were not scaled away"
            time.sleep(0.1)
    finally:
        pool.close()
    job = tmp_path / "jobs.txt"
    job.write_text("echo $SKYLEASE_TASK\n" * 12)
    (tmp_path / "pools.toml").write_text(
        '[pools.lc]\ncluster = "distributed.LocalCluster"\n'
        'kwargs = { processes = false, threads_per_worker = 1, dashboard_address = ":0" }\n'
        'price = 0.01\nbilling_unit = 10\nmax_count = 2\n')
    s = run_job(str(job), RunOptions(out=tmp_path / "o", policy="fixed:2",
                                     pools_file=tmp_path / "pools.toml"))
    assert (s["ok"], s["failed"], s["left"]) == (12, 0, 0)
    assert s["hosts"] == 2 and s["peak_hosts"] == 2


@pytest.mark.integration  # a real Dask scheduler and workers, one killed
def test_a_worker_of_an_existing_scheduler_killed_mid_task_loses_only_that_attempt(tmp_path, external):
    lab = external(2)
    pools = _pools_file(tmp_path / "pools.toml", lab.address)
    job = tmp_path / "jobs.txt"
    job.write_text("sleep 0.5\n" * 12)
    out = tmp_path / "o"
    killed = threading.Event()

    def kill_one() -> None:
        _wait_for_results(out, 2)
        lab.workers[0].send_signal(signal.SIGKILL)
        killed.set()

    threading.Thread(target=kill_one, daemon=True).start()
    t0 = time.monotonic()
    run_job(str(job), RunOptions(out=out, policy="fixed:2", pools_file=pools))
    wall = time.monotonic() - t0
    assert killed.is_set()
    # every task exactly once, none failed: the killed worker's task ran again on the other one
    assert _results(out) == [(t, "ok") for t in range(12)]
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM attempts WHERE outcome = 'lost'").fetchone()[0] == 1
    assert wall < 30, f"the run waited {wall:.0f} s for a dead worker"
    # skylease neither starts nor stops the workers of a scheduler it was given
    assert lab.workers[1].poll() is None and lab.scheduler.poll() is None


@pytest.mark.integration  # a real Dask scheduler, killed
def test_a_lost_scheduler_ends_the_run_and_resume_finishes_it_elsewhere(tmp_path, external, monkeypatch,
                                                                         capsys):
    monkeypatch.setattr(env_mod, "POOL_LOST_S", 2.0)
    lab = external(2)
    pools = _pools_file(tmp_path / "pools.toml", lab.address)
    job = tmp_path / "jobs.txt"
    job.write_text("sleep 0.5\n" * 20)
    out = tmp_path / "o"

    def kill_cluster() -> None:
        _wait_for_results(out, 3)
        lab.close()

    threading.Thread(target=kill_cluster, daemon=True).start()
    s = run_job(str(job), RunOptions(out=out, policy="fixed:2", pools_file=pools))
    assert s["outcome"] == "lost pool lab"
    assert s["failed"] == 0 and 3 <= s["ok"] < 20 and s["ok"] + s["left"] == 20  # nothing failed or lost
    # the cluster comes back elsewhere: the run finishes there without running a task twice
    lab2 = external(2)
    _pools_file(pools, lab2.address)
    before = dict(_results(out))
    assert main(["run", str(job), "--out", str(out), "--policy", "fixed:2", "--pools", str(pools),
                 "--resume"]) == 0
    capsys.readouterr()
    after = _results(out)
    assert [t for t, _ in after] == list(range(20)) and all(st == "ok" for _, st in after)
    with sqlite3.connect(out / "results.sqlite") as db:
        assert {t for (t,) in db.execute("SELECT task FROM results WHERE segment = 0")} == set(before)


def test_an_unreachable_scheduler_is_one_line_and_leaves_no_run(tmp_path, capsys, monkeypatch):
    with contextlib.closing(socket.socket()) as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    pools = _pools_file(tmp_path / "pools.toml", f"tcp://127.0.0.1:{port}")
    (tmp_path / "jobs.txt").write_text("true\n")
    monkeypatch.setattr(pools_mod, "CONNECT_TIMEOUT_S", 2)
    rc = main(["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "o"), "--pools", str(pools),
               "--policy", "fixed:1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "pools.toml" in err and "pools.lab.address" in err and "cannot reach the scheduler" in err
    assert not (tmp_path / "o" / "results.sqlite").exists()  # nothing to --resume by mistake


@pytest.mark.parametrize("body, field", [
    ('cluster = "no_such_module.Cluster"', "pools.x.cluster"),
    ('cluster = "distributed.LocalCluster"\naddress = "tcp://127.0.0.1:1"', "pools.x"),
    ("cluster = 3", "pools.x.cluster"),
    ('address = "tcp://127.0.0.1:1"\nkwargs = { n = 1 }', "pools.x.kwargs"),
    ('cluster = "distributed.LocalCluster"\nkwargs = { no_such_option = 1, processes = false }',
     "pools.x.kwargs"),
])
def test_a_wrong_cluster_pool_is_one_line_naming_the_field(tmp_path, capsys, body, field):
    (tmp_path / "pools.toml").write_text(f"[pools.x]\n{body}\n")
    (tmp_path / "jobs.txt").write_text("true\n")
    rc = main(["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "o"), "--pools",
               str(tmp_path / "pools.toml"), "--policy", "fixed:1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(rf"pools\.toml(:\d+)?: {re.escape(field)}:", err), err
    assert not (tmp_path / "o" / "results.sqlite").exists()
