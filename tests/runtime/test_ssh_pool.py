"""`skylease run` on SSH hosts (SshPool): a real test site of sshd hosts on 127.0.0.171-174 (the
``ssh_site`` fixture, base 170). Tasks run on every host, each result once; a host whose sshd is
killed mid-run loses its tasks to the others without spending a retry; the pool's own verbs
(stop_task, kill, set_aside, machine) on live workers; a host that cannot be reached at start."""

from __future__ import annotations

import ast
import json
import shutil
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest
from tests.runtime.ssh_pools import pools_file

from skylease.cli import main
from skylease.model.instance import InstanceType
from skylease.runtime.execute import run_task
from skylease.runtime.leases.ssh import SshTarget
from skylease.runtime.pools import WorkerGone
from skylease.runtime.slurm import run_token
from skylease.runtime.ssh_pool import PoolHost, SshPool, worker_source

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BASE = 170  # this test module's addresses: 127.0.0.171-174


@pytest.fixture(scope="module")
def site(ssh_site):
    return ssh_site(4, base=BASE)


@pytest.fixture
def workdirs():
    """Run folders this test makes on the hosts (this machine's home: the site's hosts share its
    files), removed at its end: tokens added to the list it gives."""
    tokens: list[str] = []
    yield tokens
    for token in tokens:
        shutil.rmtree(Path.home() / ".skylease" / f"run-{token}", ignore_errors=True)


def results(out: Path) -> list[tuple]:
    with sqlite3.connect(out / "results.sqlite") as db:
        return db.execute("SELECT task, status, stdout_tail, machine FROM results ORDER BY task").fetchall()


def test_the_worker_program_is_the_local_workers_without_skylease_imports(tmp_path) -> None:
    source = worker_source()
    modules = {alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import)
               for alias in node.names}
    modules |= {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    assert not any(str(m).startswith("skylease") for m in modules), modules
    # it runs isolated (no site-packages: no psutil, no skylease) and speaks the wire
    proc = subprocess.Popen(["python3", "-I", "-S", "-c", source], cwd=tmp_path, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        task = {"id": 3, "kind": "shell", "command": "echo hi"}
        proc.stdin.write(json.dumps({"id": 7, "op": "task", "args": [task]}).encode() + b"\n")
        proc.stdin.flush()
        ready, answer = json.loads(proc.stdout.readline()), json.loads(proc.stdout.readline())
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    assert "ready" in ready and answer["id"] == 7 and answer["result"]["stdout_tail"] == "hi\n", answer


def test_fifty_tasks_run_on_every_host_each_result_once(site, tmp_path, capsys, workdirs):
    workdirs.append(run_token(tmp_path / "out"))
    jobs = tmp_path / "jobs.txt"
    # (0.2 s each: tiny tasks would go in batches, maybe all to the first worker up)
    jobs.write_text("".join(f"sleep 0.2; echo $SKYLEASE_HOST {i} $SKYLEASE_WORKDIR $PWD\n"
                            for i in range(50)))
    out = tmp_path / "out"
    code = main(["run", str(jobs), "--pools", str(pools_file(tmp_path, site)), "--policy", "fixed:8",
                 "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    rows = results(out)
    assert [r[0] for r in rows] == list(range(50)) and {r[1] for r in rows} == {"ok"}
    seen = {}
    for task, _, stdout, machine in rows:
        host, i, workdir, cwd = stdout.split()
        assert int(i) == task and workdir == cwd == f"{Path.home()}/.skylease/run-{run_token(out)}"
        seen[host] = machine
    assert sorted(seen) == [h.address for h in site.hosts]  # spread over all four
    assert {seen[h.address] for h in site.hosts} == {h.name for h in site.hosts}  # their own hostnames
    s = json.loads((out / "summary.json").read_text())
    assert (s["ok"], s["lost"], s["retried"], s["peak_hosts"]) == (50, 0, 0, 8)


def test_the_pools_verbs_on_live_workers(site, workdirs):
    workdirs.append("verbs")
    hosts = [PoolHost(SshTarget(h.address, identity_file=site.key, known_hosts=site.known_hosts), 1)
             for h in site.hosts[:2]]
    pool = SshPool(InstanceType("lab"), hosts, "verbs")
    pool.connect()
    try:
        assert pool.itype.max_count == 2
        assert pool.set_aside(site.hosts[0].address)
        assert not pool.set_aside(site.hosts[1].address)  # (its last host: kept)
        pool.start("lab-0")
        assert pool.machine("lab-0") == site.hosts[1].address  # the host set aside gets nothing
        pool.start("lab-1")  # no free slot left: it waits, booting
        assert pool.machine("lab-1") is None and pool.alive("lab-1") and not pool.gone("lab-1")
        deadline = time.monotonic() + 20
        while "lab-0" not in pool.workers() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pool.start_costs and 0 < pool.start_costs[0] < 20
        call = pool.submit("lab-0", run_task, {"id": 1, "kind": "shell", "command": "sleep 60"}, 1, None)
        time.sleep(0.3)
        pool.stop_task("lab-0", call)  # killed on the host (no psutil there: /proc), the worker lives on
        assert call.result(10)["exit_code"] == 128 + 9
        call = pool.submit("lab-0", run_task, {"id": 2, "kind": "shell", "command": "sleep 60"}, 1, None)
        pool.kill("lab-0")
        with pytest.raises(WorkerGone):
            call.result(10)
        assert not pool.alive("lab-0")
        with pytest.raises(KeyError):
            pool.set_aside("127.0.0.1")
    finally:
        pool.close()
    deadline = time.monotonic() + 10
    while (left := site.ssh(site.hosts[1].name, "pgrep -x sleep || true").stdout.strip()) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == ""  # neither task's process outlived its worker


def test_an_unreachable_host_is_left_out_with_a_warning_all_of_them_exit_2(site, tmp_path, capsys, workdirs):
    workdirs.append(run_token(tmp_path / "a"))
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("echo $SKYLEASE_HOST\n" * 4)
    # port 2 of a host's address: nothing listens there (refused at once)
    pools = pools_file(tmp_path, site, slots=1, extra_hosts=f', "{site.hosts[0].address}:2"')
    code = main(["run", str(jobs), "--pools", str(pools), "--policy", "fixed:5",
                 "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"warning: pool lab: {site.hosts[0].address}:2:" in err and "left out" in err, err
    pools.write_text(pools.read_text().replace("hosts = [", f'hosts = ["{site.hosts[1].address}:2"]\n#'))
    code = main(["run", str(jobs), "--pools", str(pools), "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no host could be reached" in err, err
    assert f"{site.hosts[1].address}:2" in err and not (tmp_path / "b").exists()


def test_a_host_killed_mid_run_loses_its_tasks_to_the_others_without_a_retry(site, tmp_path, capsys,
                                                                            workdirs):
    workdirs.append(run_token(tmp_path / "out"))
    jobs = tmp_path / "jobs.txt"
    # 40 tasks of 1 s on 8 slots: about 5 s of run, so the victim still has tasks in hand when it is
    # killed after the first 8 results even on a loaded machine (with tasks of 0.2 s, CI once saw the
    # kill land after the victim's last task: nothing lost)
    jobs.write_text("".join(f"sleep 1; echo $SKYLEASE_HOST {i}\n" for i in range(40)))
    out = tmp_path / "out"
    victim = site.hosts[3]

    def kill_when_running() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if (out / "results.sqlite").exists() and len(results(out)) >= 8:
                    break
            except sqlite3.Error:  # the run holds it a moment
                pass
            time.sleep(0.02)
        site.kill_host(victim.name)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    try:
        code = main(["run", str(jobs), "--pools", str(pools_file(tmp_path, site)), "--policy", "fixed:8",
                     "--retries", "0", "--out", str(out)])
    finally:
        killer.join()
        site.restart_host(victim.name, die_with_caller=True)
    assert code == 0, capsys.readouterr().err
    rows = results(out)
    assert [r[0] for r in rows] == list(range(40)) and {r[1] for r in rows} == {"ok"}
    s = json.loads((out / "summary.json").read_text())
    assert s["lost"] >= 1 and s["retried"] == 0 and s["failed"] == 0, s
    with sqlite3.connect(out / "results.sqlite") as db:
        lost = db.execute("SELECT task FROM attempts WHERE outcome = 'lost'").fetchall()
    assert lost and all(victim.address not in rows[t][2] for (t,) in lost)  # finished elsewhere
