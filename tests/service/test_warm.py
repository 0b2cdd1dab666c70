"""The warm service of `skylease run`: runs are served by a warm child with the client's streams,
folder and environment; exit codes and one-line errors come through; a killed client kills its run
(which resumes); Ctrl-C reaches the run; the socket folder must be the user's alone. Only a run that
executes its tasks starts the service, and says so; `ps` tells the service, a run and a worker
apart; `server stop` stops this install's services only (`--all`: every install's)."""

from __future__ import annotations

import contextlib
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

from skylease.launch import SERVE_COMMAND
from skylease.runtime.forkserver import DASK_TITLES_ENV, listen
from skylease.service import registry, warm

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="the warm service is Linux-only"),
              pytest.mark.timeout(240)]  # a real run that hangs fails here instead of stalling the suite


def _private_env():
    """An environment whose `skylease run` uses a warm service of its own (a private socket folder,
    short enough for a Unix socket path); stop it with `_stop_all`."""
    runtime = tempfile.mkdtemp(prefix="slw", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if k != registry.OFF_ENV}
    env.update(XDG_RUNTIME_DIR=runtime, SKYLEASE_SERVER_IDLE_S="60")
    return env


def _stop_all(env) -> None:
    subprocess.run([sys.executable, "-m", "skylease", "server", "stop", "--all"], env=env,
                   capture_output=True, timeout=60)
    shutil.rmtree(env["XDG_RUNTIME_DIR"], ignore_errors=True)


@pytest.fixture(scope="module")
def warm_env():
    """A private service folder shared by the tests of this module (one service for all)."""
    env = _private_env()
    yield env
    _stop_all(env)


@pytest.fixture
def fresh_env():
    """A private service folder with no service in it yet."""
    env = _private_env()
    yield env
    _stop_all(env)


def _run(args, env, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "skylease", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=180, **kw)


def _services(env) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "skylease", "server", "status", "--json"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _wait_for_results(store: Path, n: int) -> None:
    """Until the run writing ``store`` has recorded ``n`` results (a minute at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if store.exists():
            with sqlite3.connect(store) as db:
                if db.execute("SELECT COUNT(*) FROM results").fetchone()[0] >= n:
                    return
        time.sleep(0.1)


def _answering(env, n: int = 1) -> list[dict]:
    """The services, once ``n`` of them answer (one still importing its modules does not, yet)."""
    deadline = time.monotonic() + 120
    while True:
        found = _services(env)
        if len([s for s in found if "pid" in s]) >= n:
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def _segment_pids(out: Path) -> list[int]:
    with sqlite3.connect(out / "results.sqlite") as db:
        return [p for (p,) in db.execute("SELECT pid FROM segments ORDER BY segment")]


def test_runs_are_served_by_one_warm_service_in_the_clients_folder(tmp_path, warm_env):
    job = tmp_path / "jobs.txt"
    job.write_text("".join(f"echo $SKYLEASE_WORKER > w{i}.txt; sleep 0.05\n" for i in range(12)))
    first = _run(["run", "jobs.txt", "--out", "o1", "--policy", "fixed:2", "--workers", "2"], warm_env,
                 tmp_path)
    assert first.returncode == 0, first.stderr
    (svc,) = [s for s in _answering(warm_env) if s["current"]]
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
    _wait_for_results(store, 4)
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
    assert registry.service_dir() is None
    monkeypatch.delenv(registry.OFF_ENV)
    assert warm.warm_run(["run", "x.txt"]) is None  # so the command runs in its own process


def test_the_service_key_follows_the_code(tmp_path, monkeypatch):
    key = registry.code_key()
    assert key == registry.code_key()
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    assert registry.code_key() != key  # another import path: another service


# -- when it starts, what ps shows, what stop stops -----------------------------------------------------
def _service_processes(env) -> list[int]:
    """Processes of any kind that live on the private service folder (its socket is in their title
    or command line)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if env["XDG_RUNTIME_DIR"] in " ".join(p.info["cmdline"] or ()):
                found.append(p.pid)
    return found


def _title(pid: int) -> str:
    """The process's command line as `ps` shows it."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def test_help_and_refused_runs_start_no_service(tmp_path, fresh_env):
    (tmp_path / "jobs.txt").write_text("true\n")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "results.sqlite").write_text("")
    for args, code in ((["run", "--help"], 0), (["run", "missing.txt"], 2), (["run"], 2),
                       (["run", "jobs.txt", "--policy", "fixed:0"], 2),
                       (["run", "jobs.txt", "--bogus"], 2), (["run", "jobs.txt", "--out", "taken"], 2)):
        r = _run(args, fresh_env, tmp_path)
        assert r.returncode == code, (args, r.stderr)
        assert "warm service" not in r.stderr, args
    time.sleep(0.5)  # a service started in the background would have bound its socket by now
    assert _services(fresh_env) == []
    assert _service_processes(fresh_env) == []
    assert list(Path(fresh_env["XDG_RUNTIME_DIR"]).glob("*/*.sock")) == []


def test_a_run_that_executes_its_tasks_starts_the_service_and_says_so(tmp_path, fresh_env):
    (tmp_path / "jobs.txt").write_text("true\n" * 3)
    first = _run(["run", "jobs.txt", "--out", "o1", "--policy", "fixed:1"], fresh_env, tmp_path)
    assert first.returncode == 0, first.stderr
    (line,) = first.stderr.splitlines()  # one line, and only this one
    assert "started a warm service" in line and "`skylease server stop`" in line
    assert f"{registry.OFF_ENV}=1" in line
    (svc,) = _answering(fresh_env)
    assert f"(pid {svc['pid']})" in line and svc["current"]
    second = _run(["run", "jobs.txt", "--out", "o2", "--policy", "fixed:1"], fresh_env, tmp_path)
    assert second.returncode == 0 and second.stderr == ""  # served; nothing more is started
    (driver,) = _segment_pids(tmp_path / "o2")
    assert psutil.Process(svc["pid"]).is_running() and driver not in (svc["pid"], os.getpid())
    assert [s["pid"] for s in _services(fresh_env)] == [svc["pid"]]
    off = subprocess.Popen([sys.executable, "-m", "skylease", "run", "jobs.txt", "--out", "o3", "--policy",
                            "fixed:1"], env={**fresh_env, registry.OFF_ENV: "1"}, cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, stderr = off.communicate(timeout=180)
    assert off.returncode == 0 and stderr == ""
    assert _segment_pids(tmp_path / "o3") == [off.pid]  # turned off: the run ran in its own process


def test_ps_tells_the_service_a_run_and_a_worker_apart(tmp_path, warm_env):
    (tmp_path / "jobs.txt").write_text("sleep 0.3\n" * 30)
    warmup = _run(["run", "jobs.txt", "--out", "o0", "--policy", "fixed:1", "--workers", "1"], warm_env,
                  tmp_path)
    assert warmup.returncode == 0, warmup.stderr  # the service is up after this one
    args = ["run", "jobs.txt", "--out", "o", "--policy", "fixed:2", "--workers", "2"]
    # as from a shell inside a Dask worker: Dask would retitle our run and workers "dask ..."
    env = {**warm_env, DASK_TITLES_ENV: "1"}
    client = subprocess.Popen([sys.executable, "-m", "skylease", *args], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_results(tmp_path / "o" / "results.sqlite", 2)
        (svc,) = [s for s in _answering(warm_env) if s["current"]]
        (driver,) = _segment_pids(tmp_path / "o")
        assert _title(svc["pid"]) == f"skylease-server (quits after 60 s idle) {svc['socket']}"
        assert _title(driver) == "skylease " + " ".join(args)
        workers = sorted(_title(p.pid) for p in psutil.Process(svc["pid"]).children()
                         if _title(p.pid).startswith("skylease worker"))
        assert workers == ["skylease worker local/local-0", "skylease worker local/local-1"]
    finally:
        client.wait(timeout=120)
    assert client.returncode == 0


def _fake_service(path: Path, install: str) -> subprocess.Popen:
    """A service of another install: it answers `ping` and `quit` as a real one does, with its own
    install key."""
    code = ("import sys; from skylease.runtime.forkserver import listen, serve; "
            "serve(listen(sys.argv[1]), {}, idle_s=120, "
            "hello={'key': 'x', 'install': sys.argv[2], 'started_unix': 0, 'idle_s': 120})")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), install])
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    return proc


def _older_service(path: Path, env) -> subprocess.Popen:
    """A real service of this install on another socket (as one started before a source was edited)."""
    listener = listen(str(path))
    try:
        return subprocess.Popen([*SERVE_COMMAND, str(listener.fileno()), str(path)], env=env,
                                pass_fds=(listener.fileno(),), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    finally:
        listener.close()


def test_stop_stops_this_installs_services_and_leaves_other_installs(tmp_path, fresh_env):
    folder = Path(fresh_env["XDG_RUNTIME_DIR"]) / f"skylease-{os.getuid()}"
    folder.mkdir(mode=0o700)
    other = _fake_service(folder / "0123456789abcdef.sock", install="another-install")
    older = _older_service(folder / "fedcba9876543210.sock", fresh_env)
    try:
        (tmp_path / "jobs.txt").write_text("true\n")
        assert _run(["run", "jobs.txt", "--policy", "fixed:1"], fresh_env, tmp_path).returncode == 0
        by_install = sorted((s["this_install"], s["current"]) for s in _answering(fresh_env, 3))
        assert by_install == [(False, False), (True, False), (True, True)]
        stop = subprocess.run([sys.executable, "-m", "skylease", "server", "stop"], env=fresh_env,
                              capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        assert "stopped 2 warm service(s); 1 of other installs left running (--all stops them)" in stop.stdout
        older.wait(timeout=30)
        time.sleep(0.5)
        assert other.poll() is None  # the other install's service still runs and answers
        (left,) = _services(fresh_env)
        assert left["install"] == "another-install" and left["pid"] == other.pid
        stop_all = subprocess.run([sys.executable, "-m", "skylease", "server", "stop", "--all"],
                                  env=fresh_env, capture_output=True, text=True, timeout=60)
        assert "stopped 1 warm service(s)" in stop_all.stdout
        other.wait(timeout=30)
        assert _services(fresh_env) == []
    finally:
        for p in (other, older):
            if p.poll() is None:
                p.kill()
