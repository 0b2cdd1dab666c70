"""The warm service of `skylease run`: runs are served by a warm child with the client's streams,
folder and environment; exit codes and one-line errors come through; a killed client kills its run
(which resumes); Ctrl-C reaches the run; the socket folder must be the user's alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from skylease.service import warm

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="the warm service is Linux-only"),
              pytest.mark.timeout(240)]  # a real run that hangs fails here instead of stalling the suite


@pytest.fixture(scope="module")
def warm_env():
    """An environment whose `skylease run` uses a warm service of its own (a private socket folder,
    short enough for a Unix socket path), stopped at the end."""
    runtime = tempfile.mkdtemp(prefix="slw", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if k != warm.OFF_ENV}
    env.update(XDG_RUNTIME_DIR=runtime, SKYLEASE_SERVER_IDLE_S="60")
    yield env
    subprocess.run([sys.executable, "-m", "skylease", "server", "stop"], env=env, capture_output=True,
                   timeout=60)
    shutil.rmtree(runtime, ignore_errors=True)


def _run(args, env, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "skylease", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=180, **kw)


def _services(env) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "skylease", "server", "status", "--json"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _segment_pids(out: Path) -> list[int]:
    with sqlite3.connect(out / "results.sqlite") as db:
        return [p for (p,) in db.execute("SELECT pid FROM segments ORDER BY segment")]


def test_runs_are_served_by_one_warm_service_in_the_clients_folder(tmp_path, warm_env):
    job = tmp_path / "jobs.txt"
    job.write_text("".join(f"echo $SKYLEASE_WORKER > w{i}.txt; sleep 0.05\n" for i in range(12)))
    first = _run(["run", "jobs.txt", "--out", "o1", "--policy", "fixed:2", "--workers", "2"], warm_env,
                 tmp_path)
    assert first.returncode == 0, first.stderr
    (svc,) = [s for s in _services(warm_env) if s["current"]]
    second = subprocess.Popen([sys.executable, "-m", "skylease", "run", "jobs.txt", "--out", "o2", "--policy",
                               "fixed:2", "--workers", "2"], env=warm_env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = second.communicate(timeout=180)
    assert second.returncode == 0, stderr
    assert [s["pid"] for s in _services(warm_env) if s["current"]] == [svc["pid"]]  # the same service
    (driver,) = _segment_pids(tmp_path / "o2")
    assert driver != second.pid  # the run was driven by the service's child, not by the client
    assert "Results:" in stdout  # the summary reached the client's own stdout
    for out in ("o1", "o2"):
        with sqlite3.connect(tmp_path / out / "results.sqlite") as db:
            assert db.execute("SELECT COUNT(*) FROM results WHERE status = 'ok'").fetchone()[0] == 12
    # tasks ran in the client's folder, on workers forked by the service with their own environment
    assert {p.read_text().strip() for p in tmp_path.glob("w*.txt")} <= {"local-0", "local-1"}
    assert (tmp_path / "o2" / "report.md").exists()


def test_user_mistakes_and_failed_tasks_keep_their_exit_codes(tmp_path, warm_env):
    bad = _run(["run", "missing.txt"], warm_env, tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "missing.txt" in bad.stderr and "Traceback" not in bad.stderr
    opt = _run(["run", "x.txt", "--policy", "fixed:0"], warm_env, tmp_path)
    assert opt.returncode == 2 and "Traceback" not in opt.stderr
    (tmp_path / "f.txt").write_text("true\nfalse\n")
    failed = _run(["run", "f.txt", "--out", "of", "--policy", "fixed:1"], warm_env, tmp_path)
    assert failed.returncode == 1, failed.stderr


def test_a_killed_client_takes_its_run_down_and_the_run_resumes(tmp_path, warm_env):
    job = tmp_path / "jobs.txt"
    job.write_text("sleep 0.2\n" * 40)
    args = ["run", "jobs.txt", "--out", "o", "--policy", "fixed:2", "--workers", "2"]
    client = subprocess.Popen([sys.executable, "-m", "skylease", *args], env=warm_env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = tmp_path / "o" / "results.sqlite"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if store.exists():
            with sqlite3.connect(store) as db:
                if db.execute("SELECT COUNT(*) FROM results").fetchone()[0] >= 4:
                    break
        time.sleep(0.1)
    (driver,) = _segment_pids(tmp_path / "o")
    client.kill()
    client.wait()
    gone = time.monotonic() + 10
    while psutil.pid_exists(driver) and psutil.Process(driver).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < gone, "the run went on without its client"
        time.sleep(0.05)
    with sqlite3.connect(store) as db:
        before = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    assert 4 <= before < 40
    res = _run([*args, "--resume"], warm_env, tmp_path)
    assert res.returncode == 0, res.stderr
    with sqlite3.connect(store) as db:
        assert [t for (t,) in db.execute("SELECT task FROM results ORDER BY task")] == list(range(40))


def test_ctrl_c_reaches_the_run(tmp_path, warm_env):
    (tmp_path / "jobs.txt").write_text("sleep 0.5\n" * 40)
    client = subprocess.Popen([sys.executable, "-m", "skylease", "run", "jobs.txt", "--out", "o", "--policy",
                               "fixed:1"], env=warm_env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    store = tmp_path / "o" / "results.sqlite"
    deadline = time.monotonic() + 60
    while not store.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    client.send_signal(signal.SIGINT)
    _, stderr = client.communicate(timeout=60)
    assert client.returncode == 130, stderr
    assert "interrupted" in stderr
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] < 40


def test_a_socket_folder_others_can_open_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = tmp_path / f"skylease-{os.getuid()}"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    assert warm.service_dir() is None
    monkeypatch.delenv(warm.OFF_ENV)
    assert warm.warm_run(["run", "x.txt"]) is None  # so the command runs in its own process


def test_the_service_key_follows_the_code(tmp_path, monkeypatch):
    key = warm.code_key()
    assert key == warm.code_key()
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    assert warm.code_key() != key  # another import path: another service
