"""`skylease run` on real local Dask workers: the job finishes, money stays within the budget, the
tail is cut, the simulator agrees, and a crashing world loses nothing (chaos test)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import psutil
import pytest

from skylease.cli import main
from skylease.experiments.run import run_job
from skylease.experiments.run_options import RunOptions
from skylease.experiments.run_replay import replay
from skylease.model.billing import Billing

ROOT = Path(__file__).resolve().parents[2]

# a real run that hangs fails here instead of stalling the suite
pytestmark = pytest.mark.timeout(240)


def _results(out: Path) -> list[tuple]:
    with sqlite3.connect(out / "results.sqlite") as db:
        return db.execute("SELECT task, status, segment FROM results ORDER BY task").fetchall()


@pytest.mark.integration  # 10-33 s of the README's test command: run by CI's second level
def test_example_job_finishes_on_the_default_local_pool(tmp_path, capsys):
    job = ROOT / "examples" / "sleep-jobs.txt"
    n = sum(1 for ln in job.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
    code = main(["run", str(job), "--out", str(tmp_path / "out")])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ok"] == n and summary["failed"] == 0 and summary["left"] == 0
    assert [r[0] for r in _results(tmp_path / "out")] == list(range(n))  # one result per task
    report = (tmp_path / "out" / "report.md").read_text()
    assert "run_over_time.svg" in report and (tmp_path / "out" / "run_over_time.svg").exists()
    # status reads the finished run
    assert main(["status", str(tmp_path / "out"), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["state"] == "finished" and st["ok"] == n


def test_failures_are_retried_then_reported_never_dropped(tmp_path, capsys):
    job = tmp_path / "jobs.txt"
    # task 1 fails on its first try only (a marker file), task 2 always fails
    job.write_text(f"true\ntest -e {tmp_path}/m || (touch {tmp_path}/m; exit 3)\nexit 7\necho ok\n")
    code = main(["run", str(job), "--out", str(tmp_path / "o"), "--retries", "1", "--policy", "fixed:1"])
    assert code == 1  # a task failed: the exit code says so
    rows = _results(tmp_path / "o")
    assert [(t, s) for t, s, _ in rows] == [(0, "ok"), (1, "ok"), (2, "failed"), (3, "ok")]
    with sqlite3.connect(tmp_path / "o" / "results.sqlite") as db:
        attempts = db.execute("SELECT task, outcome, exit_code FROM attempts ORDER BY task").fetchall()
        assert attempts == [(1, "failed", 3), (2, "failed", 7)]
        assert db.execute("SELECT attempt, exit_code FROM results WHERE task = 2").fetchone() == (2, 7)


def test_budget_is_never_exceeded(tmp_path):
    job = tmp_path / "jobs.txt"
    job.write_text("sleep 0.4\n" * 30)
    budget = 6.0
    s = run_job(str(job), RunOptions(out=tmp_path / "o", policy="a2ha:aggressive", price=1.0,
                                     billing_unit=3.0, budget=budget))
    assert s["cost"] <= budget
    # the charge, recomputed from the hosts' recorded rent periods by the billing unit
    with sqlite3.connect(tmp_path / "o" / "results.sqlite") as db:
        hosts = db.execute("SELECT requested_s, released_s, cost FROM hosts").fetchall()
    bill = Billing(3.0, 1.0)
    charged = sum(bill.cost(rel - req) for req, rel, _ in hosts)
    assert all(rel is not None for _, rel, _ in hosts)
    assert charged == pytest.approx(sum(c for *_, c in hosts)) and charged <= budget
    # every task finished or is reported as not run: nothing silently dropped
    assert s["ok"] + s["failed"] + s["left"] == 30


@pytest.mark.integration  # a real run with an 18 s task
def test_tail_qos_finishes_sooner_with_one_slow_volatile_worker(tmp_path):
    pools = tmp_path / "pools.toml"
    pools.write_text("[pools.grid]\nmax_count = 2\nboot_time = 2\n"
                     "[pools.cloud]\nmax_count = 2\nboot_time = 2\n")
    job = tmp_path / "jobs.txt"
    # grid-1 is the slow volatile worker: 18 s per task; everyone else 0.2 s
    cmd = ("python3 -c \"import os,time; time.sleep(18 if os.environ.get('SKYLEASE_WORKER') == 'grid-1' "
           "else 0.2)\"\n")
    job.write_text(cmd * 20)
    walls = {}
    for name, extra in (("plain", {}), ("qos", {"tail_qos": "9A-C-D", "reliable_pool": "cloud",
                                                "tail_tick_s": 0.5})):
        s = run_job(str(job), RunOptions(out=tmp_path / name, policy="fixed:2", pools_file=pools,
                                         pool="grid", **extra))
        assert s["ok"] == 20 and s["left"] == 0
        walls[name] = s["elapsed_s"]
        if name == "qos":
            assert s["qos"]["cws"] >= 1 and s["hosts_per_pool"].get("cloud", 0) >= 1
    # without QoS the bag waits for grid-1's 18 s task; with it a cloud copy finishes it early
    assert walls["plain"] >= 18.0 and walls["qos"] < walls["plain"] - 2.0, walls
    with sqlite3.connect(tmp_path / "qos" / "results.sqlite") as db:
        pools = dict(db.execute("SELECT pool, COUNT(*) FROM results GROUP BY pool").fetchall())
        cancelled = db.execute("SELECT COUNT(*) FROM attempts WHERE outcome = 'cancelled'").fetchone()[0]
    assert pools.get("cloud", 0) >= 1 and cancelled >= 1  # a cloud copy won; the slow copy was stopped


def test_simulator_replays_the_real_run_closely(tmp_path):
    """Same policy, measured task times: hosts within 1 and cost within 2 units of the real run.

    Why not exact: real boots vary around their mean (±0.5 s here) and each dispatch takes a few
    milliseconds, so a host released at a unit boundary in one world may be kept one unit more in
    the other; a2ha's random order is drawn the same way in both.
    """
    job = tmp_path / "jobs.txt"
    job.write_text("sleep 0.5\n" * 16)
    s = run_job(str(job), RunOptions(out=tmp_path / "o", policy="a2ha:aggressive", price=1.0,
                                     billing_unit=4.0))
    rep = replay(tmp_path / "o", seeds=[0])
    sim = rep["simulated"][0]
    assert rep["tasks"] == 16
    assert abs(sim["hosts"] - s["hosts"]) <= 1, (sim, s)
    assert abs(sim["cost"] - s["cost"]) <= 2.0, (sim, s)


def _worker_pids(driver: int) -> list[int]:
    """The driver's workers: its children titled ``skylease worker POOL/NAME``."""
    try:
        kids = psutil.Process(driver).children()
    except psutil.NoSuchProcess:
        return []
    pids = []
    for w in kids:
        try:
            if " ".join(w.cmdline()).startswith("skylease worker") and w.status() != psutil.STATUS_ZOMBIE:
                pids.append(w.pid)
        except psutil.Error:  # gone meanwhile
            pass
    return pids


@pytest.mark.integration  # kill -9 of workers and of the driver
def test_chaos_workers_killed_and_driver_killed_and_resumed(tmp_path):
    """300 short tasks on 4 local workers, a random worker killed every ~2 s; then the driver itself
    is killed (kill -9) and the run resumed: every task has exactly one result, none is lost, and
    no task recorded before the crash runs again."""
    marks = tmp_path / "marks"
    marks.mkdir()
    job = tmp_path / "jobs.txt"
    job.write_text("".join(f"touch {marks}/{i}.$$.$(date +%s%N); sleep 0.1\n" for i in range(300)))
    out = tmp_path / "o"
    cmd = [sys.executable, "-c", "from skylease.cli import console_main; console_main()", "run", str(job),
           "--out", str(out), "--policy", "fixed:4", "--max-workers", "4"]
    rng = random.Random(1)
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    kills, t0, killed_driver = 0, time.monotonic(), False
    while driver.poll() is None and time.monotonic() - t0 < 120:
        time.sleep(rng.uniform(1.5, 2.5))
        pids = _worker_pids(driver.pid)
        if pids:
            os.kill(rng.choice(pids), signal.SIGKILL)
            kills += 1
        done = len(_results(out)) if (out / "results.sqlite").exists() else 0
        if done >= 120 and kills >= 2:
            workers = _worker_pids(driver.pid)
            driver.kill()  # the driver dies mid-run
            driver.wait()
            for pid in workers:  # as when a machine dies: its workers go with it
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).kill()
            killed_driver = True
            break
    if not killed_driver:
        driver.kill()
        driver.wait()
        pytest.fail(f"the run did not reach 120 results in 120 s: {driver.stderr.read().decode()[-2000:]}")
    assert kills >= 2
    before = {t for t, _, _ in _results(out)}
    assert 0 < len(before) < 300
    resumed_at = time.time_ns()
    res = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, cwd=tmp_path, timeout=180)
    assert res.returncode == 0, res.stderr
    rows = _results(out)
    assert [t for t, _, _ in rows] == list(range(300))  # exactly one result per task, none lost
    assert all(s == "ok" for _, s, _ in rows)
    assert {t for t, _, seg in rows if seg == 0} == before
    with sqlite3.connect(out / "results.sqlite") as db:  # the killed workers did lose running tasks
        lost = db.execute("SELECT COUNT(*) FROM attempts WHERE outcome = 'lost'").fetchone()[0]
    assert lost >= 1
    # no task recorded before the crash ran again after the resume
    rerun = [int(f.name.split(".")[0]) for f in marks.iterdir() if int(f.name.split(".")[2]) > resumed_at]
    assert not (set(rerun) & before)
    assert set(range(300)) - before <= set(rerun) | {int(f.name.split(".")[0]) for f in marks.iterdir()}


@pytest.mark.integration  # workers killed and restarted on a trace
def test_volatility_kills_and_restarts_workers_following_a_trace(tmp_path):
    """Node a leaves at trace second 20 and is back at 60; at 10 trace seconds per real second its
    worker is killed 2 s into the run and restarted 4 s later: its task is requeued, none is lost."""
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "a.tr").write_text("0 20 1\n60 100000 1\n")
    (trace / "b.tr").write_text("0 100000 1\n")
    job = tmp_path / "jobs.txt"
    job.write_text("sleep 0.4\n" * 24)
    s = run_job(str(job), RunOptions(out=tmp_path / "o", policy="fixed:2", max_workers=2,
                                     volatility=str(trace), time_scale=10.0, trace_start=0.0))
    assert s["ok"] == 24 and s["left"] == 0
    with sqlite3.connect(tmp_path / "o" / "results.sqlite") as db:
        kinds = [k for (k,) in db.execute("SELECT kind FROM events ORDER BY t_s")]
        assert [t for (t,) in db.execute("SELECT task FROM results ORDER BY task")] == list(range(24))
    assert "down" in kinds and kinds.count("up") >= 3  # two first boots, one return


def test_the_money_panel_shows_the_charge_so_far_live_workers_included(tmp_path):
    """As `status` counts it: a rented worker is charged each billing unit as it starts, not at its
    release; the plot has a title and its money axis a currency."""
    from skylease.experiments.run_report import charge_curve, run_figure
    from skylease.runtime.store import ResultStore

    job = tmp_path / "jobs.txt"
    job.write_text("sleep 0.5\n" * 6)
    s = run_job(str(job), RunOptions(out=tmp_path / "o", policy="fixed:1", max_workers=1, price=1.0,
                                     billing_unit=1.0))
    store = ResultStore(tmp_path / "o" / "results.sqlite", readonly=True)
    try:
        (req, rel), = store.query("SELECT requested_s, released_s FROM hosts")
        assert rel - req > 2.5  # the one worker lived three started units or more
        charged = charge_curve(store)
        t = np.array([req, req + 0.5, req + 1.5, req + 2.5, rel + 1.0])
        assert list(charged(t)) == [1.0, 1.0, 2.0, 3.0, s["cost"]]  # before its release, unit by unit
        svg = run_figure(store, s)
    finally:
        store.close()
    root = ET.fromstring(svg)  # a well-formed SVG document
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert any("Run of jobs.txt" in (t or "") for t in texts)
    assert "money charged ($)" in texts
