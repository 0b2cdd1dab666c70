"""The failure classes of a real run (docs/decisions/failure-classes.md): a failed task is retried on
another machine while one is live, after its backoff; a machine that fails task after task is set
aside and its workers start again elsewhere; nothing is lost or run twice.

The machines here are this machine's worker processes playing two machines ("good" and "bad", given
to each worker as it starts: :class:`TwoMachines`). The same rules on real SSH hosts are in the SSH
pool's tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from skylease.control.fixed import FixedPool
from skylease.model.instance import InstanceType
from skylease.model.task import Task
from skylease.runtime.env import WorkerEnvironment
from skylease.runtime.pools import LocalPool
from skylease.runtime.retries import RetryRules
from skylease.runtime.store import ResultStore

#: A task that fails (exit 3) at once on the machine "bad" and succeeds on "good" in 20 ms (so that
#: "bad", always free first, takes task after task).
FAILS_ON_BAD = '[ "$SKYLEASE_MACHINE" = bad ] && exit 3; sleep 0.02; echo "ran on $SKYLEASE_MACHINE"'


class TwoMachines(LocalPool):
    """Local workers placed on two pretend machines, the least used first ("bad" on a tie); a
    machine set aside gets no new worker, unless it is the last one."""

    def __init__(self, itype: InstanceType) -> None:
        super().__init__(itype)
        self.placed: dict[str, str] = {}
        self.aside: set[str] = set()

    def worker_env(self, name: str) -> dict[str, str]:
        usable = [m for m in ("bad", "good") if m not in self.aside]
        load = {m: sum(1 for n, x in self.placed.items() if x == m and n != name) for m in usable}
        self.placed[name] = min(usable, key=lambda m: load[m])
        return {**super().worker_env(name), "SKYLEASE_MACHINE": self.placed[name]}

    def machine(self, name: str) -> str | None:
        return self.placed.get(name)

    def set_aside(self, machine: str) -> bool:
        if not [m for m in ("bad", "good") if m != machine and m not in self.aside]:
            return False
        self.aside.add(machine)
        return True


def _run(tmp_path: Path, command: str, n: int, rules: RetryRules, retries: int):
    pool = TwoMachines(InstanceType("two"))
    store = ResultStore(tmp_path / "results.sqlite")
    store.start_segment(0)
    try:
        specs = [{"id": i, "kind": "shell", "command": command} for i in range(n)]
        env = WorkerEnvironment({"two": pool}, specs, store, FixedPool(2), retries=retries, rules=rules)
        res = env.run([Task(i, 0.0) for i in range(n)])
    finally:
        pool.close()
        store.close()
    db = sqlite3.connect(tmp_path / "results.sqlite")
    results = db.execute("SELECT task, status, stdout_tail FROM results ORDER BY task").fetchall()
    attempts = db.execute("SELECT task, outcome, machine, t_s FROM attempts ORDER BY t_s").fetchall()
    db.close()
    return res, results, attempts


def test_a_failed_task_is_retried_on_the_machine_it_did_not_fail_on(tmp_path):
    # one retry each: a retry given back to "bad" would fail the task for good
    res, results, attempts = _run(tmp_path, FAILS_ON_BAD, 16, RetryRules(set_aside_after=0), retries=1)
    assert res.outcome == "done" and res.failed == 0 and res.done == 16, res
    assert [r[1] for r in results] == ["ok"] * 16 and all("ran on good" in r[2] for r in results), results
    failed = [a for a in attempts if a[1] == "failed"]
    assert failed and all(a[2] == "bad" for a in failed), attempts  # (each failure, with its machine)
    assert len({a[0] for a in failed}) == len(failed) == res.retried  # one failure per task at most
    assert res.set_aside == {}


def test_a_machine_that_fails_three_tasks_in_a_row_is_set_aside(tmp_path):
    res, results, attempts = _run(tmp_path, FAILS_ON_BAD, 30, RetryRules(set_aside_after=3), retries=3)
    assert res.outcome == "done" and res.done == 30 and res.failed == 0, res
    assert res.set_aside == {"bad": "3 failed tasks in a row"} and res.kept == {}, res
    # every task ran once to its end: its one result, on "good" (nothing lost, nothing doubled)
    assert [r[0] for r in results] == list(range(30)) and all("ran on good" in r[2] for r in results)
    bad = [a for a in attempts if a[2] == "bad" and a[1] == "failed"]
    assert len(bad) >= 3, attempts
    last_bad = max(a[3] for a in bad)
    # after it was set aside, nothing more failed there (only tasks it held then were lost, unspent)
    assert all(a[2] != "bad" or a[3] <= last_bad + 0.5 for a in attempts), attempts


def test_a_machine_a_pool_cannot_do_without_is_kept_and_said(tmp_path):
    res, _, _ = _run(tmp_path, "exit 3", 8, RetryRules(set_aside_after=2), retries=0)
    assert res.failed == 8
    # both machines failed; one is set aside, the last one is kept (its pool has no other)
    assert len(res.set_aside) == 1 and len(res.kept) == 1, res
    assert set(res.set_aside) | set(res.kept) == {"bad", "good"}


def test_retries_wait_their_backoff_doubling(tmp_path):
    res, _, attempts = _run(tmp_path, "exit 3", 1, RetryRules(set_aside_after=0, backoff_s=0.3), retries=2)
    assert res.failed == 1 and res.retried == 2
    t = [a[3] for a in attempts if a[1] == "failed"]
    assert len(t) == 2, attempts
    # the first retry waits 0.3 s after the first failure; the third try 0.6 s after the second
    assert t[1] - t[0] >= 0.3, t
    assert res.elapsed_s >= 0.9, res.elapsed_s


def test_the_rules_alone():
    r = RetryRules(set_aside_after=2, backoff_s=1.0, backoff_max_s=5.0)
    assert [r.delay(n) for n in range(5)] == [0.0, 1.0, 2.0, 4.0, 5.0]
    assert not r.failed(1, "a") and r.avoid(1, "a", ["a", "b"]) and not r.avoid(1, "a", ["a"])
    assert not r.avoid(1, "b", ["a", "b"]) and not r.avoid(2, "a", ["a", "b"])
    r.succeeded("a")
    assert not r.failed(2, "a") and r.failed(3, "a")  # two in a row since its success
    r.aside["b"] = "x"
    assert not r.avoid(1, "a", ["a", "b"])  # the other machine is set aside: run where it can
    assert not r.failed(4, None) and RetryRules().delay(3) == 0.0


def test_every_try_is_shown_and_exported_with_its_machine(tmp_path, capsys, monkeypatch):
    import json
    import socket

    from skylease.cli import main

    monkeypatch.chdir(tmp_path)
    # line 1 fails its first try (exit 3), then succeeds; line 2 succeeds at once
    (tmp_path / "jobs.txt").write_text('[ -e tried ] || { touch tried; exit 3; }; echo second\ntrue\n')
    out = tmp_path / "run"
    argv = ["run", "jobs.txt", "--out", str(out), "--policy", "fixed:1", "--retries", "1", "--backoff", "0.2",
            "--set-aside-after", "1"]
    assert main(argv) == 0
    said = capsys.readouterr().out
    here = socket.gethostname()
    # the only machine failed a task: its pool cannot do without it (kept, and said so)
    assert f"kept: {here} (1 failed task in a row" in " ".join(said.split()), said
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kept"] == {here: "1 failed task in a row"} and summary["set_aside"] == {}
    assert main(["export", str(out), "--attempts", "--format", "json", "--output", "-"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["line"], r["attempt"], r["outcome"], r["exit_code"]) for r in rows] == [
        (1, 1, "failed", 3), (1, 2, "ok", 0), (2, 1, "ok", 0)], rows
    assert {r["machine"] for r in rows} == {here} and all(r["worker"] == "local-0" for r in rows), rows
    assert main(["show", str(out), "line:1"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert f"attempt 1 │ failed, exit code 3 on {here}" in shown, shown
    assert main(["export", str(out), "--attempts", "--format", "jobs"]) == 2
    assert "--attempts writes rows of tries" in capsys.readouterr().err
