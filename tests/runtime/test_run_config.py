"""`skylease run` configured by files: a job file's options are applied (the command line wins),
a pool without a price is free, mistakes in job and pools files are one line naming file:line:key,
and the pools example of docs/howto/run.md runs as written."""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
from pathlib import Path

import pytest

from skylease.cli import main
from skylease.experiments.run import run_job
from skylease.experiments.run_options import RunOptions, job_settings
from skylease.model.errors import UserError
from skylease.runtime.jobs import load_job

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(240)


def fails_once(tmp_path: Path, extra: str) -> Path:
    """A job file of one task that exits 3 on its first try and 0 on the next."""
    mark = tmp_path / "mark"
    job = tmp_path / "once.toml"
    job.write_text(f'command = "test -e {{m}} || (touch {{m}}; exit 3)"\n{extra}\n[grid]\nm = ["{mark}"]\n')
    return job


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_retries_in_the_job_file_are_applied(tmp_path, capsys):
    job = fails_once(tmp_path, "retries = 1")
    code = main(["run", str(job), "--out", str(tmp_path / "o"), "--policy", "fixed:1"])
    assert code == 0, capsys.readouterr().err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (s["ok"], s["failed"], s["retried"]) == (1, 0, 1)
    with sqlite3.connect(tmp_path / "o" / "results.sqlite") as db:
        assert db.execute("SELECT outcome, exit_code FROM attempts").fetchall() == [("failed", 3)]


def test_the_command_line_wins_over_the_job_file(tmp_path, capsys):
    job = fails_once(tmp_path, "retries = 1")
    code = main(["run", str(job), "--out", str(tmp_path / "o"), "--policy", "fixed:1", "--retries", "0"])
    assert code == 1  # --retries 0 given: the task's one failure is final
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (s["ok"], s["failed"], s["retried"]) == (0, 1, 0)


def test_precedence_command_line_then_job_file_then_defaults(tmp_path):
    job = load_job(str(fails_once(tmp_path, "retries = 2\ntimeout = 30")))
    assert job_settings(job, RunOptions()) == (2, 30.0)
    assert job_settings(job, RunOptions(retries=0, task_timeout_s=5.0)) == (0, 5.0)
    plain = load_job(str(fails_once(tmp_path, "")))
    assert job_settings(plain, RunOptions()) == (0, None)
    with pytest.raises(UserError, match="must be >= 0") as e:
        job_settings(plain, RunOptions(retries=-1))
    assert e.value.field == "--retries"


def test_a_timeout_in_the_job_file_kills_the_task(tmp_path):
    job = tmp_path / "slow.toml"
    job.write_text('command = "sleep 30"\ntimeout = 0.5\n')
    s = run_job(str(job), RunOptions(out=tmp_path / "o", policy="fixed:1"))
    assert (s["ok"], s["failed"]) == (0, 1) and s["wall_s"] < 20
    with sqlite3.connect(tmp_path / "o" / "results.sqlite") as db:
        assert db.execute("SELECT exit_code FROM results").fetchall() == [(124,)]


def test_a_pool_without_a_price_is_free(tmp_path):
    pools = tmp_path / "pools.toml"
    pools.write_text("[pools.p]\nmax_count = 1\nbilling_unit = 1\n")  # one unit a second: $1 a second before
    job = tmp_path / "jobs.txt"
    job.write_text("sleep 1.2\n")
    s = run_job(str(job), RunOptions(out=tmp_path / "o", policy="fixed:1", pools_file=pools))
    assert s["ok"] == 1 and s["cost"] == 0
    with sqlite3.connect(tmp_path / "o" / "results.sqlite") as db:
        assert db.execute("SELECT SUM(cost) FROM hosts").fetchone()[0] == 0


@pytest.mark.parametrize(("name", "text", "where"), [
    ("job.toml", 'command = "true"\nretires = 2\n',
     "job.toml:2: retires: unknown key 'retires'; did you mean 'retries'?"),
    ("job.toml", 'command = "true"\nretries = -1\n',
     "job.toml:2: retries: must be a whole number >= 0 and <= 100, got -1"),
    ("job.toml", 'command = "true"\ntimeout = -5\n',
     "job.toml:2: timeout: must be a finite number > 0, got -5"),
    ("pools.toml", '[pools.gpu]\nprice = 0.5\nmax_count = "many"\n',
     "pools.toml:3: pools.gpu.max_count: must be a whole number >= 0, got 'many'"),
    ("pools.toml", "[pools.gpu]\nprise = 0.5\n",
     "pools.toml:2: pools.gpu.prise: unknown key 'prise'; did you mean 'price'?"),
    ("pools.toml", "[pools.gpu]\nkind = 'local'\n",  # was accepted, and did nothing
     "pools.toml:2: pools.gpu.kind: unknown key 'kind'; the keys are price, billing_unit, min_units, "
     "boot_time, max_count, speed, cluster, kwargs, address, hosts, ssh, slots"),
    ("pools.toml", "[pool.gpu]\nprice = 1\n",
     "pools.toml:1: pool: unknown key 'pool'; did you mean 'pools'?"),
    ("pools.toml", "pools = {}\n",
     "pools.toml:1: pools: must be a non-empty table, got an empty table"),
])
def test_mistakes_in_job_and_pools_files_are_one_line(tmp_path, capsys, monkeypatch, name, text, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    (tmp_path / "jobs.txt").write_text("true\n")
    argv = ["run", name] if name == "job.toml" else ["run", "jobs.txt", "--pools", name]
    assert one_error_line(capsys, [*argv, "--out", "o"]) == f"skylease run: error: {where}"
    assert not (tmp_path / "o").exists()


# -- the pools example of docs/howto/run.md ---------------------------------------------------------
def _doc_blocks(kind: str) -> list[str]:
    text = (ROOT / "docs" / "howto" / "run.md").read_text()
    return re.findall(rf"```{kind}\n(.*?)```", text, flags=re.S)


def test_the_pools_example_in_the_docs_is_the_example_file():
    (block,) = [b for b in _doc_blocks("toml") if b.startswith("# examples/pools.toml")]
    assert block == (ROOT / "examples" / "pools.toml").read_text()


@pytest.mark.integration  # 10-33 s of the README's test command: run by CI's second level
def test_the_pools_example_in_the_docs_runs_as_written(tmp_path, capsys, monkeypatch):
    (block,) = [b for b in _doc_blocks("bash") if "--pools examples/pools.toml" in b]
    argv = shlex.split(block.replace("\\\n", " "), comments=True)
    assert argv[0] == "skylease"
    monkeypatch.chdir(ROOT)  # the example's paths are the repository's
    code = main([*argv[1:], "--out", str(tmp_path / "o")])
    assert code == 0, capsys.readouterr().err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["left"] == 0 and s["failed"] == 0 and s["cost"] <= 2.00
