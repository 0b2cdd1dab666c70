"""A run's output seen (issue 36): one task whole (`show`), the failed tasks as a job (`failed`,
`export --failed --format jobs`), export's output, result and parameter columns, a job from
standard input with its resume, `run --dry-run`, and the ETA of the live display.

Every check runs on the results.sqlite of a real small run on local workers."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from skylease.experiments.run import run_job
from skylease.experiments.run_dry import dry_run
from skylease.experiments.run_eta import eta_s, run_eta
from skylease.experiments.run_options import RunOptions
from skylease.experiments.run_results import export_run
from skylease.experiments.run_show import failed_job, show_task
from skylease.experiments.run_stdin import STDIN_COPY
from skylease.model.errors import UserError

pytestmark = pytest.mark.timeout(240)

JOB = "\n".join([
    "# two fail, three succeed",
    "echo hello",
    "echo oops >&2; exit 3",
    "echo out; false",
    "echo bye",
    "printf 'a\\nb\\n'",
]) + "\n"


@pytest.fixture(scope="module")
def shell_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("shell-run")
    (folder / "jobs.txt").write_text(JOB)
    out = folder / "o"
    s = run_job(str(folder / "jobs.txt"), RunOptions(out=out, policy="fixed:1", max_workers=1))
    assert (s["ok"], s["failed"], s["left"]) == (3, 2, 0)
    return out


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("grid-run")
    (folder / "job.toml").write_text('command = "echo {scene}-{frame:02d}; test {frame} -lt 3"\n'
                                     '[grid]\nscene = ["a b", "c"]\nframe = [1, 4]\n')
    out = folder / "o"
    s = run_job(str(folder / "job.toml"), RunOptions(out=out, policy="fixed:1", max_workers=1))
    assert (s["ok"], s["failed"]) == (2, 2)
    return out


def test_show_a_task_by_id_and_by_line(shell_run):
    t = show_task(shell_run, "1")
    assert (t["id"], t["line"], t["command"], t["state"], t["exit_code"]) == (
        1, 3, "echo oops >&2; exit 3", "failed", 3)
    assert t["stderr_tail"] == "oops\n" and t["stdout_tail"] == "" and t["attempts"] == 1
    assert t["worker"] == "local-0" and t["pool"] == "local" and t["machine"]
    assert t["started_at"] <= t["ended_at"] and t["duration_s"] >= 0
    assert show_task(shell_run, "line:6")["stdout_tail"] == "a\nb\n"
    assert show_task(shell_run, " line:2 ")["id"] == 0


@pytest.mark.parametrize("ref", ["5", "-1", "x", "line:1", "line:x", "", "1.0"])
def test_an_unknown_task_is_one_line(shell_run, ref):
    with pytest.raises(UserError) as e:
        show_task(shell_run, ref)
    assert "\n" not in str(e.value) and "ids 0 to 4" in str(e.value) and str(shell_run) in str(e.value)


def test_failed_job_is_a_job_of_the_failed_commands(shell_run):
    f = failed_job(shell_run)
    assert (f["failed"], f["not_run"], f["kind"]) == (2, 0, "shell")
    commands = [line for line in f["text"].splitlines() if not line.startswith("#")]
    assert commands == ["echo oops >&2; exit 3", "echo out; false"]
    assert "# task 1, line 3: failed, exit code 3" in f["text"]


def test_a_grid_job_comes_back_as_its_rendered_commands(grid_run, tmp_path):
    f = failed_job(grid_run)
    commands = [line for line in f["text"].splitlines() if not line.startswith("#")]
    assert commands == ["echo 'a b'-04; test 4 -lt 3", "echo c-04; test 4 -lt 3"]
    # and skylease run takes it back: only those run (and fail again, the cause is not fixed)
    (tmp_path / "fixed.txt").write_text(f["text"])
    s = run_job(str(tmp_path / "fixed.txt"), RunOptions(out=tmp_path / "again", policy="fixed:1",
                                                         max_workers=1))
    assert (s["tasks"], s["failed"]) == (2, 2)
    assert show_task(tmp_path / "again", "0")["stdout_tail"] == "a b-04\n"


def test_export_has_output_result_and_parameter_columns(grid_run, shell_run, tmp_path):
    _, n, data = export_run(grid_run, fmt="csv", output="-")
    rows = list(csv.DictReader(io.StringIO(data.decode())))
    assert n == 4
    assert [(r["param_scene"], r["param_frame"]) for r in rows] == [("a b", "1"), ("a b", "4"), ("c", "1"),
                                                                   ("c", "4")]
    assert [r["stdout_tail"] for r in rows] == ["a b-01\n", "a b-04\n", "c-01\n", "c-04\n"]
    assert list(rows[0])[:16] == ["id", "line", "command", "state", "exit_code", "attempts", "started_at",
                                  "ended_at", "runtime_s", "pool", "worker", "machine", "cost_share",
                                  "stdout_tail", "stderr_tail", "result"]
    rows = json.loads(export_run(grid_run, fmt="json", output="-")[2])
    assert [r["param_frame"] for r in rows] == [1, 4, 1, 4]  # numbers stay numbers
    rows = json.loads(export_run(shell_run, fmt="json", output="-")[2])
    assert rows[1]["stderr_tail"] == "oops\n" and rows[2]["stdout_tail"] == "out\n"
    assert not any(k.startswith("param_") for k in rows[0])  # a text job has no parameters


def test_export_failed_filters_and_jobs_format(shell_run, tmp_path):
    rows = json.loads(export_run(shell_run, fmt="json", output="-", failed=True)[2])
    assert [r["id"] for r in rows] == [1, 2]
    where, n, _ = export_run(shell_run, fmt="jobs", failed=True)
    assert (Path(where).name, n) == ("jobs.txt", 2)
    assert Path(where).read_text() == failed_job(shell_run)["text"].split("\n", 1)[1]  # (no header)
    Path(where).unlink()
    everything = export_run(shell_run, fmt="jobs", output="-")[2].decode()
    assert [ln for ln in everything.splitlines() if not ln.startswith("#")] == [
        ln for ln in JOB.splitlines() if not ln.startswith("#")]


def test_a_callable_run_exports_its_result_and_fails_back_as_args(tmp_path):
    (tmp_path / "args.json").write_text("[3, -1, 5]\n")
    out = tmp_path / "o"
    s = run_job("math:factorial", RunOptions(out=out, policy="fixed:1", max_workers=1,
                                            args=str(tmp_path / "args.json")))
    assert s["failed"] == 1
    rows = json.loads(export_run(out, fmt="json", output="-")[2])
    assert [r["result"] for r in rows] == ["6", None, "120"]
    assert "ValueError" in rows[1]["stderr_tail"]
    assert show_task(out, "2")["result"] == "120" and show_task(out, "2")["args"] == [5]
    f = failed_job(out)
    assert (f["kind"], f["target"], json.loads(f["text"])) == ("python", "math:factorial", [[-1]])


def test_a_job_from_stdin_runs_and_resumes_from_its_kept_copy(tmp_path):
    marker = tmp_path / "marker"
    marker.write_text("")
    out = tmp_path / "o"
    text = f"echo one\ntest ! -e {marker}\n"
    s = run_job("-", RunOptions(out=out, policy="fixed:1", max_workers=1), stdin=io.StringIO(text))
    assert (s["job"], s["ok"], s["failed"]) == ("-", 1, 1)
    assert (out / STDIN_COPY).read_text() == text
    assert "skylease run - --out" in s["next"]["retry_failed"]
    marker.unlink()
    again = run_job("-", RunOptions(out=out, policy="fixed:1", max_workers=1, resume=True, retry_failed=True),
                    stdin=io.StringIO(""))  # nothing piped in: the kept copy
    assert (again["ok"], again["failed"]) == (2, 0)
    with pytest.raises(UserError, match="differs"):  # another job piped in on a resume
        run_job("-", RunOptions(out=out, resume=True), stdin=io.StringIO("echo other\n"))


def test_stdin_mistakes_are_one_line(tmp_path):
    for text, says in (("", "no commands"), ("# only a comment\n", "no commands"),
                       (b"\xff\xfe echo\n", "invalid UTF-8")):
        stream = io.BytesIO(text) if isinstance(text, bytes) else io.StringIO(text)
        with pytest.raises(UserError, match=says) as e:
            run_job("-", RunOptions(out=tmp_path / "o"), stdin=stream)
        assert "standard input" in str(e.value)
    with pytest.raises(UserError, match=r"no stdin-job\.txt"):
        run_job("-", RunOptions(out=tmp_path / "o", resume=True), stdin=io.StringIO(""))
    assert not (tmp_path / "o").exists()


def test_dry_run_says_what_would_run_and_writes_nothing(shell_run, tmp_path):
    job = shell_run.parent / "jobs.txt"
    d = dry_run(str(job), RunOptions(out=tmp_path / "new", policy="a2ha", price=0.5, billing_unit=120,
                                     budget=3.0, max_workers=2))
    assert (d["tasks"], d["to_run"], d["creates_out"], d["order"]) == (5, 5, True, "random")
    assert sorted(d["first"]) == sorted(ln for ln in JOB.splitlines() if not ln.startswith("#"))
    assert d["pools"]["local"]["price"] == 0.5 and d["pools"]["local"]["billing_unit"] == 120
    assert (d["budget"], d["workers"]) == (3.0, 2)
    assert not (tmp_path / "new").exists()
    before = sorted(p.name for p in shell_run.iterdir())
    d = dry_run(str(job), RunOptions(out=shell_run, policy="fixed:1", max_workers=1, resume=True,
                                     retry_failed=True))
    assert (d["to_run"], d["already_done"]) == (2, 3)
    assert d["first"] == ["echo oops >&2; exit 3", "echo out; false"]
    assert sorted(p.name for p in shell_run.iterdir()) == before
    with pytest.raises(UserError, match="already holds a run"):
        dry_run(str(job), RunOptions(out=shell_run))


def test_eta_from_the_running_rate():
    assert eta_s([], 5.0, 10) is None  # nothing finished: no estimate
    assert eta_s([1.0, 2.0], 2.0, 0) == 0.0
    assert eta_s([2.0, 4.0], 4.0, 6) == pytest.approx(12.0)  # 2 tasks in 4 s: 6 more in 12 s
    assert eta_s([2.0, 4.0], 8.0, 6) == pytest.approx(24.0)  # nothing since: the estimate grows
    # the window follows a pool that grew: the last 2 completions (1 s apart), not the mean
    assert eta_s([10.0, 20.0, 21.0, 22.0], 22.0, 4, window=2) == pytest.approx(4.0)


def test_the_live_eta_of_a_real_run(tmp_path):
    (tmp_path / "jobs.txt").write_text("sleep 0.2\n" * 6)
    seen: list[float | None] = []
    run_job(str(tmp_path / "jobs.txt"), RunOptions(out=tmp_path / "o", policy="fixed:1", max_workers=1),
            on_progress=lambda env: seen.append(run_eta(env)))
    assert seen[0] is None  # before the first task finished
    estimates = [s for s in seen if s is not None and s > 0]
    assert estimates and all(0.1 < s < 10 for s in estimates)  # 0.2 s a task, at most 5 left


# -- through the CLI ------------------------------------------------------------------------------
def _skylease(*argv: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    piped = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run([sys.executable, "-m", "skylease", *argv], cwd=cwd, text=True, capture_output=True,
                          timeout=120, **piped)


def test_the_output_commands_end_to_end(tmp_path, capsys):
    from skylease.cli import main

    marker = tmp_path / "marker"
    marker.write_text("")
    job = f"echo hello\necho oops >&2; exit 3\ntest ! -e {marker}\necho bye\n"
    # a dry run from standard input: what would run, and nothing written
    p = _skylease("run", "-", "--out", "o", "--max-workers", "1", "--dry-run", cwd=tmp_path, stdin=job)
    assert p.returncode == 0, p.stderr
    assert "tasks to run" in p.stdout and "  echo hello" in p.stdout and "o (would be created)" in p.stdout
    assert not (tmp_path / "o").exists()
    # the run itself, from standard input
    p = _skylease("run", "-", "--out", "o", "--max-workers", "1", "--policy", "fixed:1", cwd=tmp_path,
                  stdin=job)
    assert p.returncode == 1, p.stderr
    assert "skylease run - --out o --policy fixed:1 --max-workers 1 --resume --retry-failed" in p.stdout
    assert "skylease failed o > fixed.txt" in p.stdout  # (its Next: lines say so)
    # one task whole
    assert main(["show", str(tmp_path / "o"), "line:2"]) == 0
    shown = capsys.readouterr().out
    assert "echo oops >&2; exit 3" in shown and "failed, exit code 3" in shown and "oops" in shown
    assert main(["show", str(tmp_path / "o"), "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stderr_tail"] == "oops\n"
    assert main(["show", str(tmp_path / "o"), "9"]) == 2
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith("skylease show: error: ") and "no task '9'" in said[0]
    # the failed tasks as a job, run back after the fix
    assert main(["failed", str(tmp_path / "o")]) == 0
    captured = capsys.readouterr()
    assert [ln for ln in captured.out.splitlines() if not ln.startswith("#")] == [
        "echo oops >&2; exit 3", f"test ! -e {marker}"]
    assert "2 failed and 0 not run of 4 task(s)" in captured.err
    (tmp_path / "fixed.txt").write_text(captured.out.replace("exit 3", "exit 0"))
    marker.unlink()
    p = _skylease("run", "fixed.txt", "--out", "fixed", "--max-workers", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    # the export's new columns, and --failed --format jobs (the same job as `failed`)
    assert main(["export", str(tmp_path / "o"), "--format", "json", "--output", "-"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["stdout_tail"] for r in rows] == ["hello\n", "", "", "bye\n"]
    assert rows[1]["stderr_tail"] == "oops\n"
    assert main(["export", str(tmp_path / "o"), "--failed", "--format", "jobs", "--output", "-"]) == 0
    assert capsys.readouterr().out == captured.out.split("\n", 1)[1]
    # the resume of a run from standard input needs nothing piped in (its copy is kept)
    p = _skylease("run", "-", "--out", "o", "--max-workers", "1", "--policy", "fixed:1", "--resume",
                  "--retry-failed", cwd=tmp_path)
    assert p.returncode == 1, p.stderr  # `exit 3` still fails; the marker's task now succeeds
    assert main(["export", str(tmp_path / "o"), "--failed", "--format", "csv", "--output", "-"]) == 0
    assert [r["id"] for r in csv.DictReader(io.StringIO(capsys.readouterr().out))] == ["1"]


@pytest.mark.parametrize(("extra", "names"), [
    (["--policy", "fixed:0"], "--policy"), (["--pools", "gone.toml"], "gone.toml"),
    (["--budget", "1"], "--budget"), (["--retry-failed"], "--retry-failed"),
    (["--out", "taken"], "taken")])
def test_dry_run_refuses_what_run_refuses(extra, names, tmp_path, capsys):
    from skylease.cli import main

    (tmp_path / "jobs.txt").write_text("echo a\n")
    (tmp_path / "taken").write_text("a file\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(tmp_path / "jobs.txt"), "--out", str(tmp_path / "o"), "--dry-run",
                 *[str(tmp_path / x) if x in ("gone.toml", "taken") else x for x in extra]]) == 2
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith("skylease") and names in said[0], said
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_parameter_columns_keep_one_type_or_become_text():
    from skylease.experiments.run_results import param_columns

    specs = [{"params": {"n": 1, "s": "x", "m": 1, "l": [1, 2]}}, {"params": {"n": 2.5, "s": "y", "m": "a"}},
             {}]
    assert param_columns(specs) == {"param_n": [1, 2.5, None], "param_s": ["x", "y", None],
                                    "param_m": ["1", "a", None], "param_l": ["[1, 2]", None, None]}


def test_the_live_display_shows_the_eta(tmp_path):
    from rich.console import Console

    from skylease.cli.live import _run_progress

    (tmp_path / "jobs.txt").write_text("sleep 0.2\n" * 4)
    rows: list[str] = []

    def shown(env) -> None:
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(_run_progress(env, None))
        rows.append(next(ln for ln in console.export_text().splitlines() if "time left (ETA)" in ln))

    run_job(str(tmp_path / "jobs.txt"), RunOptions(out=tmp_path / "o", policy="fixed:1", max_workers=1),
            on_progress=shown)
    assert rows[0].split("│")[2].strip() == "-"  # nothing finished yet
    assert any(re.search(r"│ \d+(\.\d+)? (ms|s) +│", r) for r in rows), rows
