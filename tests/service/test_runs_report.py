"""Real runs reported to a real `skylease serve` (issue 21): `skylease run --report URL` of 20 shell
tasks, some of which fail (`exit 3`). The service's task table equals the run's own result store,
failed tasks first; the run's end is said. Then the server is killed (SIGKILL) mid-run: the run
goes on and succeeds as it would have, says once that the service does not answer, and once the
server is back on the same port its rows catch up: the table is whole again. A `--resume` continues
the same run on the service. Options are checked before any work, in one line."""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import httpx
import pytest

from skylease.cli import main
from skylease.service.db import create_schema, engine_for

from .conftest import ServeProcess, three_users
from .qos_runs import launch

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so these skip)
# integration: real runs reporting to a real server, killed with -9 in one (pytest -m integration)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240),
              pytest.mark.usefixtures("payload_sandbox")]
N_TASKS = 20
FAILING = {2, 7, 11, 16}  # these exit 3


def job(tmp: Path, sleep: float) -> Path:
    lines = [f"sleep {sleep}; echo task {i} says no >&2; exit 3" if i in FAILING else f"sleep {sleep}"
             for i in range(N_TASKS)]
    path = tmp / "jobs.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def site(tmp_path):
    """A server's data folder with users alice, bob and root (an administrator)."""
    engine = engine_for(None, tmp_path / "serve")
    create_schema(engine)
    tokens = three_users(engine)
    engine.dispose()
    return tmp_path, tmp_path / "serve", tokens


def server_argv(data: Path, port: int = 0) -> list[str]:
    return [sys.executable, "-m", "skylease", "serve", "--port", str(port), "--data-dir", str(data)]


def run_argv(jobs: Path, out: Path, url: str, token: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "skylease", "run", str(jobs), "--out", str(out), "--policy", "fixed:2",
            "--report", url, "--report-token", token, *extra]


def local_table(out: Path) -> dict[int, tuple[str, int | None]]:
    """The run's own result store: task -> (status as the service says it, exit code)."""
    with sqlite3.connect(out / "results.sqlite") as db:
        return {t: ("done" if s == "ok" else "failed", code)
                for t, s, code in db.execute("SELECT task, status, exit_code FROM results")}


def service_table(url: str, token: str, run: int) -> list[dict]:
    r = httpx.get(f"{url}/runs/{run}/tasks", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def only_run(url: str, token: str) -> dict:
    runs = httpx.get(f"{url}/runs", headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
    assert len(runs) == 1, runs
    return runs[0]


def same_as_the_store(url: str, token: str, out: Path) -> tuple[dict, list[dict]]:
    """The service's one run, ended as failed with the failing tasks, its table equal to the store's."""
    r = only_run(url, token)
    assert (r["state"], r["n_tasks"], r["done"], r["failed"], r["running"], r["queued"]) == \
        ("failed", N_TASKS, N_TASKS - len(FAILING), len(FAILING), 0, 0)
    rows = service_table(url, token, r["id"])
    assert {t["task"]: (t["status"], t["exit_code"]) for t in rows} == local_table(out)
    assert len(local_table(out)) == N_TASKS
    return r, rows


def test_a_real_run_reports_its_task_table_failed_first(site):
    tmp, data, tokens = site
    proc = ServeProcess(data, argv=server_argv(data))
    url = proc.start(cwd=tmp)
    try:
        run = launch(run_argv(job(tmp, 0.2), tmp / "out", url, tokens["alice"]), tmp)
        _out, err = run.communicate(timeout=120)
        assert run.returncode == 1, err[-3000:]  # some tasks failed: the run says so, as without --report
        assert "Traceback" not in err
        r, rows = same_as_the_store(url, tokens["alice"], tmp / "out")
        assert r["ended"] is not None and r["name"] == "jobs.txt"
        assert [t["task"] for t in rows[:len(FAILING)]] == sorted(FAILING)  # failed first, by task
        assert all(t["status"] == "failed" and "says no" in t["stderr_tail"] for t in rows[:len(FAILING)])
        assert all(t["attempts"] == 1 and t["stderr_tail"] is None for t in rows[len(FAILING):])
        # bob sees nothing of it
        assert httpx.get(f"{url}/runs", headers={"Authorization": f"Bearer {tokens['bob']}"}).json() == []
        assert httpx.get(f"{url}/runs/{r['id']}",
                         headers={"Authorization": f"Bearer {tokens['bob']}"}).status_code == 404
        # a resume (all failed tasks again) continues the same run on the service
        again = launch(run_argv(job(tmp, 0.2), tmp / "out", url, tokens["alice"], "--resume",
                                "--retry-failed"), tmp)
        _out, err = again.communicate(timeout=120)
        assert again.returncode == 1, err[-3000:]
        r2, _ = same_as_the_store(url, tokens["alice"], tmp / "out")
        assert r2["id"] == r["id"] and r2["ended"] >= r["ended"]
    finally:
        proc.stop()


def test_the_service_killed_mid_run_does_not_fail_the_run(site):
    tmp, data, tokens = site
    proc = ServeProcess(data, argv=server_argv(data))
    url = proc.start(cwd=tmp)
    port = int(url.rsplit(":", 1)[1])
    try:
        # (2.5 s tasks: the run still runs when a restart that is slow on a busy machine is over)
        run = launch(run_argv(job(tmp, 2.5), tmp / "out", url, tokens["alice"]), tmp)
        deadline = time.monotonic() + 60
        while True:  # until the service has some rows, not all
            runs = httpx.get(f"{url}/runs", headers={"Authorization": f"Bearer {tokens['alice']}"}).json()
            if runs and runs[0]["done"] + runs[0]["failed"] >= 2:
                break
            assert time.monotonic() < deadline and run.poll() is None, "the run never reported"
            time.sleep(0.2)
        proc.kill9()
        time.sleep(3)
        assert run.poll() is None  # the run goes on without the service
        url2 = proc.start(cwd=tmp, extra=("--port", str(port)))
        assert url2 == url
        _out, err = run.communicate(timeout=120)
        assert run.returncode == 1, err[-3000:]  # the failing tasks, nothing else
        assert err.count("does not answer") == 1, err
        assert "Traceback" not in err
        same_as_the_store(url, tokens["alice"], tmp / "out")
    finally:
        proc.stop()


def test_the_service_down_at_the_end_is_said_honestly(site):
    """The service gone for good: the run still succeeds as it would, and says what was not sent."""
    tmp, data, tokens = site
    proc = ServeProcess(data, argv=server_argv(data))
    url = proc.start(cwd=tmp)
    try:
        run = launch(run_argv(job(tmp, 0.5), tmp / "out", url, tokens["alice"]), tmp)
        time.sleep(0.5)
    finally:
        proc.kill9()
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 1, err[-3000:]
    assert len(local_table(tmp / "out")) == N_TASKS
    assert "did not get all of this run" in err and "task rows unsent" in err, err


@pytest.mark.parametrize(("argv", "says"), [
    (["--report", "localhost:8642"], "--report: 'localhost:8642' is not a service URL"),
    (["--report", "http://127.0.0.1:1"], "--report-token: no token"),
    (["--report-token", "x"], "--report-token: goes with --report URL"),
])
def test_report_options_are_checked_before_any_work(tmp_path, capsys, monkeypatch, argv, says):
    monkeypatch.delenv("SKYLEASE_TOKEN", raising=False)
    jobs = job(tmp_path, 0)
    assert main(["run", str(jobs), "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_a_refused_token_stops_the_run_before_any_work(site, capsys):
    tmp, data, _tokens = site
    proc = ServeProcess(data, argv=server_argv(data))
    url = proc.start(cwd=tmp)
    try:
        jobs = job(tmp, 0)
        argv = ["run", str(jobs), "--out", str(tmp / "out"), "--report", url, "--report-token", "nope"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "--report: the service at" in err and "invalid token" in err, err
        assert not (tmp / "out").exists()
    finally:
        proc.stop()


def test_a_qos_run_reports_its_table_linked_to_its_bag(site):
    tmp, data, tokens = site
    (tmp / "pools.toml").write_text("[pools.grid]\nmax_count = 2\nboot_time = 1\n"
                                    "[pools.cloud]\nmax_count = 1\nboot_time = 1\n")
    proc = ServeProcess(data, argv=server_argv(data))
    url = proc.start(cwd=tmp)
    try:
        run = launch([sys.executable, "-m", "skylease", "run", str(job(tmp, 0.1)), "--out", str(tmp / "out"),
                      "--policy", "fixed:2", "--pools", str(tmp / "pools.toml"), "--pool", "grid",
                      "--qos", url, "--qos-token", tokens["alice"], "--reliable-pool", "cloud"], tmp)
        _out, err = run.communicate(timeout=120)
        assert run.returncode == 1, err[-3000:]
        r, _rows = same_as_the_store(url, tokens["alice"], tmp / "out")
        bags = httpx.get(f"{url}/qos/bots", headers={"Authorization": f"Bearer {tokens['alice']}"}).json()
        assert [b["id"] for b in bags] == [r["bot"]] and r["bot"] is not None
    finally:
        proc.stop()
