"""Bad values are refused before any work, with one line naming the option (issue 18, items 1 and 7):
negative seeds, NaN and infinity, sizes the machine cannot hold, and plot files that cannot be written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from skylease.cli import main

from .cli_helpers import one_line, run

ROOT = Path(__file__).resolve().parents[1]
A2HA = ["simulate", "a2ha", "--workload", "synthetic", "--orderings", "2"]
SPEQULOS = ["simulate", "spequlos", "--middleware", "boinc", "--trace", "nd", "--bot", "small"]


@pytest.fixture(scope="module")
def etc_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("etc") / "small.etc"
    assert main(["etc", "generate", str(path), "--tasks", "8", "--machines", "4"]) == 0
    return path


# -- seeds ------------------------------------------------------------------------------------------
def test_every_seed_option_refuses_a_negative_seed(capsys, etc_file, tmp_path):
    for argv, option in (
        (["map", etc_file, "--voltages", "-1"], "--voltages"),
        (["etc", "generate", tmp_path / "x.etc", "--seed", "-1"], "--seed"),
        (["traces", "stats", "nd", "--seed", "-1"], "--seed"),
        ([*A2HA, "--seed", "-1"], "--seed"),
        ([*SPEQULOS, "--seed", "-1"], "--seed"),
        (["place", "--desktops", "thesis-lab", "--vms", "synthetic:10", "--seed", "-1"], "--seed"),
        (["leases", "simulate", "--workload", etc_file, "--image-seed", "-1"], "--image-seed"),
    ):
        one_line(capsys, argv, option)
    assert not (tmp_path / "x.etc").exists()


# -- NaN, infinity and the names of the options ----------------------------------------------------
@pytest.mark.parametrize("argv, option", [
    ([*A2HA, "--budget", "nan"], "--budget"),
    ([*A2HA, "--budget", "inf"], "--budget"),
    ([*A2HA, "--budget-factor", "inf"], "--budget-factor"),
    ([*A2HA, "--creation-ratio", "nan"], "--creation-ratio"),
    ([*A2HA, "--price", "inf"], "--price"),
    ([*A2HA, "--boot-time", "nan"], "--boot-time"),
    ([*A2HA, "--billing-unit", "0"], "--billing-unit"),  # was "boot: invalid value 300.0"
    ([*A2HA, "--billing-unit", "inf"], "--billing-unit"),
    ([*A2HA, "--preset", "lazy"], "--preset"),
    ([*SPEQULOS, "--credits", "inf"], "--credits"),
    ([*SPEQULOS, "--credits", "nan"], "--credits"),
    ([*SPEQULOS, "--alpha", "inf"], "--alpha"),
    ([*SPEQULOS, "--random-epsilon", "inf"], "--random-epsilon"),
    (["etc", "generate", "OUT", "--mu", "-1000"], "--mu"),  # was "--v-task"
    (["etc", "generate", "OUT", "--v-mach", "nan"], "--v-mach"),
    (["etc", "generate", "OUT", "--method", "range", "--r-mach", "inf"], "--r-mach"),
    (["traces", "stats", "nd", "--days", "inf"], "--days"),
    (["plan", "hybrid", "--deadline", "inf"], "--deadline"),
    (["plan", "mapreduce", "--deadline", "nan"], "--deadline"),
    (["plan", "hybrid", "--budget", "nan"], "--budget"),
    (["plan", "multi", "--weight", "nan"], "--weight"),
])
def test_nan_infinity_and_wrong_values_name_their_option(capsys, tmp_path, monkeypatch, argv, option):
    monkeypatch.chdir(tmp_path)
    one_line(capsys, argv, f"error: {option}: ")
    assert not (tmp_path / "OUT").exists()


def test_a_budget_that_buys_no_host_is_refused_not_a_nan_speedup(capsys):
    _, err = one_line(capsys, [*A2HA, "--budget", "0"], "--budget", "does not buy one billing unit")
    assert "nan" not in err
    code, out, err = run(capsys, *A2HA, "--budget", "1", "--json")  # one host-hour: a real result
    assert code == 0 and json.loads(out)["speedup"]["mean"] > 0


# -- sizes: refused at once, in little memory -------------------------------------------------------
def run_limited(argv: list[str], cwd: Path, data: Path, limit_gb: float = 2.0, timeout: float = 60.0):
    """``skylease ARGV`` in a child process whose address space is capped: (exit code, stderr, seconds)."""
    script = textwrap.dedent(f"""
        import resource, sys
        cap = int({limit_gb} * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        from skylease.cli import main
        sys.exit(main({[str(a) for a in argv]!r}))
    """)
    env = {**os.environ, "SKYLEASE_DATA": str(data)}  # the data folder the shared_data fixture found
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                       cwd=cwd, env=env)
    return r.returncode, r.stderr, time.perf_counter() - t0


@pytest.mark.parametrize("argv, needles", [
    (["map", "HUGE"], ["HUGE:1", "too many tasks x machines", "at most 8,388,608", "GB"]),
    (["etc", "stats", "HUGE"], ["HUGE:1", "too many tasks x machines"]),
    (["etc", "generate", "out.etc", "--tasks", "100000000", "--machines", "100000"],
     ["--tasks x --machines", "at most 8,388,608 tasks x machines"]),
    (["simulate", "a2ha", "--workload", "gamma:100000000:100:10"], ["--workload", "at most 2,097,152 tasks"]),
    (["simulate", "a2ha", "--workload", "gamma:100000:100:10"], ["--orderings", "at most", "h)"]),
    (["simulate", "a2ha", "--workload", "synthetic", "--orderings", "1000000000"], ["--orderings"]),
    ([*SPEQULOS, "--credits", "1e9"], ["--credits", "at most 2,097,152 cloud workers"]),
    ([*SPEQULOS, "--credits", "1e300"], ["--credits", "cloud workers"]),
    ([*SPEQULOS, "--credits", "1e7"], ["--credits", "times what running the whole bag in the cloud costs"]),
    (["simulate", "a2ha", "--workload", "constant:10:100", "--orderings", "1000000000"],
     ["--orderings", "too many orderings", "at most"]),
    (["simulate", "a2ha", "--workload", "constant:10:100", "--initial-hosts", "1000000000"],
     ["--initial-hosts", "too many initial hosts"]),
    (["traces", "stats", "nd", "--nodes", "100000000"], ["--nodes", "at most"]),
    (["traces", "stats", "nd", "--days", "1e9"], ["--nodes x --days", "availability intervals"]),
    (["traces", "stats", "spot10", "--nodes", "5000000"], ["--nodes", "availability intervals"]),
])
def test_sizes_past_the_limits_are_refused_at_once_in_little_memory(tmp_path, argv, needles, shared_data):
    (tmp_path / "HUGE").write_text("1000000000 1000000000 0\n1 2 3\n")
    code, err, seconds = run_limited(argv, tmp_path, shared_data)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, (n, err)
    assert seconds < 15  # the interpreter and imports take a few seconds on a loaded machine
    assert not (tmp_path / "out.etc").exists()


def test_a_plan_deadline_past_the_horizon_is_the_horizon_plan_at_once(tmp_path):
    """Every hybrid deadline past 110 min has the same $0 plan (the 16 free cores alone finish by
    then): 1e5 min took over a minute and 1e12 min exhausted memory; both now answer as 110 min."""
    plans = []
    for d in ("110m", "100000m", "1e12"):
        t0 = time.perf_counter()
        argv = [sys.executable, "-m", "skylease.cli", "plan", "hybrid", "--deadline", d, "--json"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert time.perf_counter() - t0 < 15
        p = json.loads(r.stdout)
        plans.append({k: p[k] for k in ("cost", "makespan_s", "instances", "billed_units", "starts")})
    assert plans[0] == plans[1] == plans[2]
    assert plans[0]["cost"] == 0 and plans[0]["makespan_s"] == 110 * 60


def test_plan_horizon_is_where_the_plans_stop_changing():
    from skylease.planning.provisioning import WatershedJob, load_catalog, pick, solve_watershed
    from skylease.planning.provisioning.watershed import plan_horizon

    types = pick(load_catalog("hybrid"), "local", "azure-small")
    job = WatershedJob()
    assert plan_horizon(job, types, 10) == 11  # 16 free cores: 10 min to start, 63 x 1.5 min each
    paid = pick(types, "azure-small")
    h = plan_horizon(WatershedJob(n_tasks=200), paid, 10)
    assert h == 33  # one small instance alone: 30 min to start, 200 x 1.5 min
    at_h = solve_watershed(WatershedJob(n_tasks=200), paid, h * 10)
    for d in (h * 10 + 10, h * 10 + 500, 1e9):
        p = solve_watershed(WatershedJob(n_tasks=200), paid, d)
        assert (p.cost, p.makespan_s, p.instances) == (at_h.cost, at_h.makespan_s, at_h.instances)


# -- output files checked before the work -----------------------------------------------------------
@pytest.mark.parametrize("where, needle", [
    ("missing/f.png", "no such folder"),
    ("x.png", "is a folder"),
    ("f.txt", "must be a .png, .pdf or .svg file"),
])
def test_a_plot_that_cannot_be_written_is_refused_before_the_table(capsys, tmp_path, where, needle):
    (tmp_path / "x.png").mkdir()
    out, _ = one_line(capsys, ["plan", "pareto", "hybrid", "--plot", tmp_path / where], "--plot", needle)
    assert out == ""  # nothing printed, nothing solved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.png"]


def test_a_plot_in_a_read_only_folder_is_refused_before_the_table(capsys, tmp_path):
    folder = Path("/sys")  # read-only even for root, who may write in a chmod 555 folder
    if os.access(folder, os.W_OK) and os.geteuid() != 0:
        pytest.skip("no read-only folder here")
    out, _ = one_line(capsys, ["plan", "pareto", "hybrid", "--plot", folder / "f.png"], "--plot",
                        "cannot write in this folder")
    assert out == ""
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        one_line(capsys, ["plan", "pareto", "hybrid", "--plot", ro / "f.png"], "cannot write")


def test_gantt_and_etc_outputs_use_the_same_check(capsys, tmp_path, etc_file):
    (tmp_path / "d.png").mkdir()
    one_line(capsys, ["leases", "simulate", "--workload", etc_file, "--gantt", tmp_path / "d.png"],
             "--gantt", "is a folder")
    one_line(capsys, ["etc", "generate", tmp_path / "no" / "x.etc"], "OUT_FILE", "no such folder")
    one_line(capsys, ["etc", "generate", tmp_path / "d.png"], "OUT_FILE", "is a folder")


# -- SpeQuloS: say what happened when the bag never finishes -----------------------------------------
def test_a_bag_that_never_finishes_is_said_so_not_no_tail(capsys, tmp_path):
    trace = tmp_path / "tiny"
    trace.mkdir()
    (trace / "n1.tr").write_text("0 3600 1\n")
    (trace / "n2.tr").write_text("0 7200 1\n")
    code, out, err = run(capsys, "simulate", "spequlos", "--middleware", "boinc", "--trace", trace,
                         "--bot", "small")
    assert code == 0, err
    assert "had no tail" not in out
    assert "did not finish" in " ".join(out.split())
    assert "nan" not in out
    code, out, _ = run(capsys, "simulate", "spequlos", "--middleware", "boinc", "--trace", trace,
                       "--bot", "small", "--json")
    res = json.loads(out)
    assert res["tre"] is None and "did not finish" in res["tre_note"]
