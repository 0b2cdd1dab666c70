"""Real runs served with QoS (test_qos_runs.py, test_bot_browser.py, test_runs_report.py): a site
(users, pools, a volatility trace, a job whose tasks on the volatile worker grid-1 are slow), the
server's and the run's commands, and deposits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from skylease.service.auth import add_user
from skylease.service.db import create_schema, engine_for

# grid-1 is the slow volatile worker: 18 s a task; every other worker 0.2 s
SLOW = ("python3 -c \"import os,time; time.sleep(18 if os.environ.get('SKYLEASE_WORKER') == 'grid-1' "
        "else 0.2)\"\n")
N_TASKS = 20
DEPOSIT = 100.0
ORDER = 30.0  # 2 CPU hours: the conservative rule rents up to 2 cloud workers


def make_site(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A server's data folder with users alice, bob and root (admin), the pools, trace and job (the
    ``site`` fixture of tests/service/conftest.py): (root folder, data folder, tokens)."""
    data = tmp_path / "serve"
    data.mkdir()
    engine = engine_for(None, data)
    create_schema(engine)
    tokens = {u: add_user(engine, u, admin=(u == "root")) for u in ("alice", "bob", "root")}
    engine.dispose()
    (tmp_path / "pools.toml").write_text("[pools.grid]\nmax_count = 2\nboot_time = 1\n"
                                        "[pools.cloud]\nmax_count = 2\nboot_time = 1\n")
    trace = tmp_path / "trace"
    trace.mkdir()  # both nodes leave at trace second 10 and are back at 30 (10 trace seconds a second):
    for node in ("a", "b"):  # each worker is killed 1 s into the run, its task requeued, and restarted
        (trace / f"{node}.tr").write_text("0 10 1\n30 100000 1\n")
    (tmp_path / "jobs.txt").write_text(SLOW * N_TASKS)
    return tmp_path, data, tokens


def server_argv(data: Path) -> list[str]:
    return [sys.executable, "-m", "skylease", "serve", "--port", "0", "--data-dir", str(data)]


def run_argv(root: Path, out: str, qos: tuple[str, str] | None) -> list[str]:
    argv = [sys.executable, "-m", "skylease", "run", str(root / "jobs.txt"), "--out", str(root / out),
            "--policy", "fixed:2", "--pools", str(root / "pools.toml"), "--pool", "grid", "--seed", "3",
            "--volatility", str(root / "trace"), "--volatile-pool", "grid", "--trace-scale", "10",
            "--trace-start", "0"]
    if qos is not None:
        url, token = qos
        argv += ["--qos", url, "--qos-token", token, "--reliable-pool", "cloud", "--qos-credits", str(ORDER),
                 "--qos-strategy", "9A-C-D", "--qos-infrastructure", "local-grid"]
    return argv


def launch(argv: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    _out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return err


def deposit(url: str, tokens: dict[str, str], user: str) -> None:
    r = httpx.post(f"{url}/qos/accounts/{user}/deposits", json={"credits": DEPOSIT},
                   headers={"Authorization": f"Bearer {tokens['root']}"})
    assert r.status_code == 201, r.text
