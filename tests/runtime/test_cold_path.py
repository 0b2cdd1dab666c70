"""The cold path of `skylease run` and of campaigns (issues 25 and 42): no numpy, Dask, pandas,
matplotlib or pydantic in a local run's process, local campaign workers of our own that survive a
dying worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from skylease.experiments.sweep import run_campaign

HEAVY = ("numpy", "distributed", "dask", "pandas", "matplotlib", "pydantic")


def _modules_after(code: str, cwd: Path) -> list[str]:
    probe = f"import sys\n{code}\nprint('modules:', ' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    res = subprocess.run([sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()[-1].split()[1:]


def test_a_local_run_imports_no_numpy_dask_pandas_matplotlib_or_pydantic(tmp_path):
    """numpy alone is 0.1-0.2 s of a run's start here, pydantic and its schemas 0.1 s (a text file of
    commands, the default local pool: no schema to check): a run of commands needs none of them."""
    (tmp_path / "jobs.txt").write_text("true\n" * 20)
    code = ("from skylease.cli import main\n"
            "assert main(['run', 'jobs.txt', '--out', 'o', '--policy', 'fixed:2', '--max-workers', '2'])"
            " == 0")
    assert _modules_after(code, tmp_path) == []
    assert (tmp_path / "o" / "run_over_time.svg").read_text().startswith("<svg")


def test_a_local_campaign_starts_no_dask(tmp_path):
    code = ("import math\nfrom skylease.experiments.sweep import run_campaign\n"
            "def cell(x, seed):\n    return {'y': math.sqrt(x)}\n"
            "r = run_campaign(cell, {'x': list(range(40))}, mode='processes', workers=2, progress=False)\n"
            "assert len(r.table) == 40 and not r.failed")
    assert not {"distributed", "dask"} & set(_modules_after(code, tmp_path))


def _dies_once(x: int, seed: int, marks: str) -> dict:
    """Cell 3 kills its worker process the first time it runs."""
    mark = Path(marks) / f"{x}"
    if x == 3 and not mark.exists():
        mark.write_text("died")
        os._exit(9)
    return {"y": x * 2}


def test_a_batch_whose_worker_dies_runs_again_on_a_new_worker(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    res = run_campaign(_dies_once, {"x": list(range(12)), "marks": [str(marks)]}, mode="processes",
                       workers=2, batch=2, progress=False, out=tmp_path / "out")
    assert not res.failed
    assert sorted(res.table["y"]) == [2 * x for x in range(12)]
    assert (marks / "3").exists()  # it did die once
