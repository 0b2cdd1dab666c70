"""A task's files (issue 39, item 2): `skylease run --transfer PATTERN --return PATTERN --cleanup`
round-trip a file per task through a working folder of the task's own, exactly once with two
workers; every mistake that can be known before the run is one line, exit 2, nothing made; the
others fail their task with the reason; a task without files runs as before, in the driver's folder.

Real runs on local workers (the files travel in the spec and the result, as over any pool)."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest

from skylease.experiments.run import run_job
from skylease.experiments.run_options import RunOptions
from skylease.experiments.run_results import export_run
from skylease.experiments.run_show import show_task
from skylease.model.errors import UserError
from skylease.runtime.execute import FILES_EXIT, WORKDIR_ENV, run_task
from skylease.runtime.files import MAX_TASK_BYTES, TaskFiles, plan_files
from skylease.runtime.jobs import load_job
from skylease.runtime.store import ResultStore

from ..cli_helpers import one_line

pytestmark = pytest.mark.timeout(240)

N = 12  # tasks of the round trip: more than two workers' first batch


def _inputs(folder: Path, n: int = N) -> None:
    (folder / "data").mkdir()
    for i in range(n):
        (folder / "data" / f"in{i}.txt").write_text(f"task {i} says hello\n" * (i + 1))


def _text_job(folder: Path, n: int = N, gate: Path | None = None) -> Path:
    # parallel's layout: the argument is the line's last word ({}); the output is {}.up. With a
    # gate, the first two tasks each wait (30 s at most) until both have started: they run on the
    # two workers at once, however late one of them comes up
    lines = [f"sh -c 'tr a-z A-Z < \"$0\" > \"$0.up\"; ls -R > listing.txt' data/in{i}.txt" for i in range(n)]
    if gate is not None:
        gate.mkdir()
        wait = (f"touch {gate}/{{i}}; for n in $(seq 300); do [ $(ls {gate} | wc -l) -ge 2 ] && break; "
                "sleep 0.1; done; ")
        lines[:2] = [wait.format(i=i) + line for i, line in enumerate(lines[:2])]
    (folder / "jobs.txt").write_text("\n".join(lines) + "\n")
    return folder / "jobs.txt"


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """The driver's folder (--transfer is relative to it) and the workers' working folders' home."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path / "work"))
    return tmp_path


def _run(job: Path, out: Path, **opts) -> dict:
    return run_job(str(job), RunOptions(out=out, policy="fixed:2", max_workers=2, **opts))


def test_a_file_per_task_round_trips_exactly_once_with_two_workers(here):
    _inputs(here)
    s = _run(_text_job(here, gate=here / "gate"), here / "o", transfer=["{}"],
             returns=["{}.up", "listing.txt"], cleanup=True)
    assert (s["ok"], s["failed"], s["left"]) == (N, 0, 0)
    for i in range(N):
        got = here / "o" / "files" / str(i) / "data" / f"in{i}.txt.up"
        assert got.read_text() == f"TASK {i} SAYS HELLO\n" * (i + 1)
        # the task's folder held its own input alone (and what it made)
        listing = (here / "o" / "files" / str(i) / "listing.txt").read_text()
        assert f"in{i}.txt" in listing and not any(f"in{j}.txt" in listing for j in range(N) if j != i)
    # nothing half-written, nothing else
    made = sorted(p.relative_to(here / "o" / "files").as_posix() for p in (here / "o" / "files").rglob("*")
                  if p.is_file())
    assert made == sorted([f"{i}/data/in{i}.txt.up" for i in range(N)]
                          + [f"{i}/listing.txt" for i in range(N)])
    db = sqlite3.connect(here / "o" / "results.sqlite")
    # exactly one result per task, and its files recorded once with their sizes
    assert db.execute("SELECT COUNT(*), COUNT(DISTINCT task) FROM results").fetchone() == (N, N)
    rows = db.execute("SELECT task, kind, name, size FROM files ORDER BY task, name").fetchall()
    assert len(rows) == 2 * N and {r[1] for r in rows} == {"returned"}
    assert ((1, "returned", "data/in1.txt.up", len("TASK 1 SAYS HELLO\n") * 2)) in rows
    assert db.execute("SELECT COUNT(DISTINCT host) FROM results").fetchone()[0] == 2
    db.close()
    # --cleanup: no working folder is left; the spec in the store carries no file contents
    assert list((here / "work").iterdir()) == []
    spec = json.loads(sqlite3.connect(here / "o" / "results.sqlite").execute(
        "SELECT spec FROM tasks WHERE id = 0").fetchone()[0])
    assert "files" not in spec
    # show and export list them
    t = show_task(here / "o", "3")
    assert {f["name"] for f in t["files"]} == {"data/in3.txt.up", "listing.txt"}
    assert Path(next(f["path"] for f in t["files"] if f["name"] == "listing.txt")).is_file()
    data = export_run(here / "o", output="-")[2]
    assert "returned_files" in data.decode().splitlines()[0]
    assert f"data/in3.txt.up ({len('TASK 3 SAYS HELLO') * 4 + 4} B); listing.txt (" in data.decode()


def test_without_cleanup_each_task_keeps_its_folder(here):
    _inputs(here, 3)
    s = _run(_text_job(here, 3), here / "o", transfer=["{}"], returns=["{}.up"])
    assert s["ok"] == 3
    kept = sorted((here / "work").iterdir())
    assert len(kept) == 3
    for folder in kept:
        i = int(folder.name.removeprefix("skylease-task").partition("-")[0])
        assert (folder / "data" / f"in{i}.txt").read_text() == f"task {i} says hello\n" * (i + 1)
        assert (folder / "data" / f"in{i}.txt.up").is_file()
    t = show_task(here / "o", "1")
    workdir = [f["name"] for f in t["files"] if f["kind"] == "workdir"]
    assert len(workdir) == 1 and workdir[0].endswith(str(next(p for p in kept if "task1-" in p.name)))


def test_a_task_without_files_runs_as_before_in_the_drivers_folder(here):
    (here / "jobs.txt").write_text("pwd\nls\n")
    (here / "marker").write_text("")
    s = _run(here / "jobs.txt", here / "o")
    assert s["ok"] == 2
    assert show_task(here / "o", "0")["stdout_tail"].strip() == str(here)
    assert "marker" in show_task(here / "o", "1")["stdout_tail"]
    db = sqlite3.connect(here / "o" / "results.sqlite")
    # the store as before: no files table
    assert db.execute("SELECT 1 FROM sqlite_master WHERE name = 'files'").fetchone() is None
    assert "returned_files" not in export_run(here / "o", output="-")[2].decode().splitlines()[0]
    assert not (here / "o" / "files").exists() and not (here / "work").exists()
    # the worker's answer has the same keys as before
    assert set(run_task({"id": 0, "kind": "shell", "command": "true"})) == {
        "task", "attempt", "exit_code", "stdout_tail", "stderr_tail", "runtime_s", "host", "pid",
        "started_unix", "ended_unix", "result"}


def test_grid_parameters_name_the_files(here):
    _inputs(here, 2)
    (here / "job.toml").write_text('command = "wc -c < {name} > {name}.n"\n'
                                   '[grid]\nname = ["data/in0.txt", "data/in1.txt"]\n')
    s = _run(here / "job.toml", here / "o", transfer=["{name}"], returns=["{.}.txt.n"], cleanup=True)
    assert s["ok"] == 2
    counted = (here / "o" / "files" / "1" / "data" / "in1.txt.n").read_text().strip()
    assert counted == str(len("task 1 says hello\n") * 2)


# -- mistakes known before the run: one line, exit 2, nothing made -------------------------------


@pytest.mark.parametrize(("argv", "needles"), [
    (["--transfer", "{}"], ["jobs.txt:2: --transfer: data/in9.txt: no such file"]),
    (["--transfer", "data/*.csv"], ["jobs.txt:1: --transfer: data/*.csv: matches no file"]),
    (["--transfer", "data"], ["jobs.txt:1: --transfer: data: not a file"]),
    (["--transfer", "../x"], ["jobs.txt:1: --transfer: ../x: must be a relative path"]),
    (["--transfer", "/etc/hostname"], ["--transfer: /etc/hostname: must be a relative path"]),
    (["--return", "../{}.up"], ["jobs.txt:1: --return: ../data/in0.txt.up (from ../{}.up): must be"]),
    (["--return", "/tmp/x"], ["--return: /tmp/x: must be a relative path"]),
    (["--return", "{name}"], ["jobs.txt:1: --return: {name}: {name} names no parameter"]),
    (["--return", "a{b"], ["--return: a{b: a lone brace"]),
    (["--return", ""], ["--return: must not be empty"]),
    (["--shared", "--transfer", "{}"], ["--shared:"]),
    (["--cleanup"], ["--cleanup: goes with --transfer or --return"]),
])
def test_a_mistake_known_before_the_run_is_one_line_and_nothing_is_made(here, capsys, argv, needles):
    _inputs(here, 1)
    (here / "jobs.txt").write_text("cat data/in0.txt\ncat data/in9.txt\n")
    one_line(capsys, ["run", "jobs.txt", "--out", "o", "--policy", "fixed:1", *argv], *needles)
    assert not (here / "o").exists() and not (here / "work").exists()


def test_too_much_for_one_task_is_refused_before_the_run(here, capsys):
    (here / "big.bin").write_bytes(b"")
    with open(here / "big.bin", "r+b") as f:
        f.truncate(MAX_TASK_BYTES + 1)  # sparse: its size is what counts
    (here / "jobs.txt").write_text("wc -c big.bin\n")
    one_line(capsys, ["run", "jobs.txt", "--out", "o", "--transfer", "{}"],
             "jobs.txt:1: --transfer: big.bin: the task's files would hold 16,777,217 bytes, "
             "over the 16,777,216")
    assert not (here / "o").exists()


def test_placeholders_that_do_not_fit_the_job_are_refused(here):
    (here / "job.toml").write_text('command = "echo {a} {b}"\n[grid]\na = [1]\nb = [2]\n')
    job = load_job(str(here / "job.toml"))
    with pytest.raises(UserError, match=r"--return: {}: {} stands for a job's one parameter; this one has 2"):
        plan_files(job, [], ["{}"], cleanup=False, base=here, out=here / "o")
    (here / "args.json").write_text("[[1], [2]]")
    py = load_job("math:sqrt", args=str(here / "args.json"))
    with pytest.raises(UserError, match="--transfer: goes with shell tasks"):
        plan_files(py, ["x"], [], cleanup=False, base=here, out=here / "o")


# -- mistakes found while running: the task fails with the reason --------------------------------


def test_a_returned_file_missing_or_too_large_fails_the_task_with_the_reason(here):
    (here / "jobs.txt").write_text("echo made > a.out\ntrue\nhead -c 100 /dev/zero > big.out; exit 4\n")
    s = _run(here / "jobs.txt", here / "o", returns=["*.out"], cleanup=True)
    assert (s["ok"], s["failed"]) == (1, 2)
    assert (here / "o" / "files" / "0" / "a.out").read_text() == "made\n"
    t = show_task(here / "o", "1")
    assert t["exit_code"] == FILES_EXIT and "--return *.out: no such file in the task's working folder" \
        in t["stderr_tail"]
    assert [f["kind"] for f in t["files"]] == ["missing"]
    # a task that failed keeps its own exit code; its files come back (they say why it failed)
    assert show_task(here / "o", "2")["exit_code"] == 4
    assert (here / "o" / "files" / "2" / "big.out").stat().st_size == 100
    # over the limit a task may bring back: not returned, said
    folder_files = {"transfer": {}, "return": ["big.out"], "cleanup": True, "max_bytes": 10}
    r = run_task({"id": 7, "kind": "shell", "command": "head -c 11 /dev/zero > big.out",
                  "files": folder_files})
    assert r["exit_code"] == FILES_EXIT and "big.out: 11 bytes, over the 10 bytes" in r["stderr_tail"]
    assert r["files"]["returned"] == {} and r["files"]["missing"] == ["big.out"]


def test_nothing_leaves_or_enters_outside_the_working_folder(here):
    secret = here / "secret.txt"
    secret.write_text("not yours")
    r = run_task({"id": 1, "kind": "shell", "command": f"ln -s {secret} leak.txt; echo ok > ok.txt",
                  "files": {"return": ["*.txt", "leak.txt"], "cleanup": True, "max_bytes": 100}})
    assert set(r["files"]["returned"]) == {"ok.txt"} and r["files"]["missing"] == ["leak.txt"]
    bad = run_task({"id": 2, "kind": "shell", "command": "true", "files": {
        "transfer": {"../escaped.txt": [0o644, base64.b64encode(b"x").decode()]}, "cleanup": True}})
    assert bad["exit_code"] == FILES_EXIT and "not a relative path inside" in bad["stderr_tail"]
    assert not (here / "work" / "escaped.txt").exists() and list((here / "work").iterdir()) == []
    # the driver writes nothing outside OUT/files/ID either, whatever a result says
    files = TaskFiles(base=here, out=here / "o")

    store = ResultStore(here / "r.sqlite")
    try:
        out = files.returned(5, {"exit_code": 0, "files": {"returned": {"../../x": "eA=="}}}, store)
        assert out["exit_code"] == FILES_EXIT and "not a relative path" in out["stderr_tail"]
        assert store.task_files(5) == {5: [{"kind": "missing", "name": "../../x", "size": None}]}
    finally:
        store.close()
    assert not (here / "x").exists() and not (here / "o").exists()


def test_an_input_gone_after_the_check_fails_its_task(here):
    _inputs(here, 2)
    job = load_job(str(_text_job(here, 2)))
    files = plan_files(job, ["{}"], [], cleanup=True, base=here, out=here / "o")
    (here / "data" / "in1.txt").unlink()
    spec = files.spec(job.tasks[1].to_json())
    assert "cannot read it" in spec["files"]["error"] and spec["files"]["transfer"] == {}
    r = run_task(spec)
    assert r["exit_code"] == FILES_EXIT and "--transfer data/in1.txt: cannot read it" in r["stderr_tail"]
    ok = run_task(files.spec(job.tasks[0].to_json()))
    assert ok["exit_code"] == 0 and ok["files"]["folder"] is None
    # the stored spec is never made heavy: each send reads the file anew
    assert "files" not in job.tasks[0].to_json()


def test_dry_run_and_the_resume_command_carry_the_files(here):
    from skylease.experiments.run_dry import dry_run
    from skylease.experiments.run_next import resume_command

    _inputs(here, 2)
    opts = RunOptions(out=here / "o", policy="fixed:1", transfer=["{}"], returns=["{}.up", "x y"],
                      cleanup=True)
    d = dry_run(str(_text_job(here, 2)), opts)
    assert d["files"] == f"2 file(s) sent; {{}}.up, x y brought back to {here / 'o' / 'files'}; " \
        "working folders removed"
    assert not (here / "o").exists()
    assert resume_command("jobs.txt", opts).endswith(
        "--transfer '{}' --return '{}.up' --return 'x y' --cleanup --resume")
    assert dry_run(str(_text_job(here, 2)), RunOptions(out=here / "o", policy="fixed:1"))["files"] is None


def test_a_failed_task_rerun_replaces_its_files(here):
    flag = here / "fixed"
    (here / "jobs.txt").write_text(f"echo a > a.txt; test -f {flag} && echo b > b.txt\n")
    s = _run(here / "jobs.txt", here / "o", returns=["a.txt", "b.txt"], cleanup=True)
    assert s["failed"] == 1
    assert [(f["kind"], f["name"]) for f in show_task(here / "o", "0")["files"]] == [
        ("returned", "a.txt"), ("missing", "b.txt")]
    flag.write_text("")
    s = _run(here / "jobs.txt", here / "o", returns=["a.txt", "b.txt"], cleanup=True, resume=True,
             retry_failed=True)
    assert (s["ok"], s["failed"]) == (1, 0)
    t = show_task(here / "o", "0")
    assert [(f["kind"], f["name"], f["size"]) for f in t["files"]] == [
        ("returned", "a.txt", 2), ("returned", "b.txt", 2)]
    assert (here / "o" / "files" / "0" / "b.txt").read_text() == "b\n"
