"""The live display's figures of a real run (experiments/run_progress.py), read at each progress
call of `skylease run`, and the CLI's table drawn from them."""

from __future__ import annotations

import pytest

from skylease.cli.live import _run_progress
from skylease.experiments.run import RunOptions, run_job
from skylease.experiments.run_progress import RunProgress, run_progress

pytestmark = pytest.mark.timeout(120)


def test_progress_figures_follow_a_real_run(tmp_path):
    job = tmp_path / "jobs.txt"
    # (three rounds of 0.6 s on two workers: several progress calls, every 0.5 s, fall while tasks run,
    # even on a loaded machine; with 0.2 s tasks CI once saw none)
    job.write_text("sleep 0.6\n" * 6)
    seen: list[RunProgress] = []
    tables = []

    def on_progress(env):
        seen.append(run_progress(env))
        tables.append(_run_progress(env, 1.0))

    s = run_job(str(job), RunOptions(out=tmp_path / "o", policy="fixed:2", price=0.01, billing_unit=10.0),
                on_progress=on_progress)
    assert s["ok"] == 6 and seen
    for p in seen:
        assert p.done + p.running + p.left <= 6 and min(p.done, p.running, p.left) >= 0
        assert [w.pool for w in p.pools] == ["local"] and all(0 <= w.up <= w.rented <= 2 for w in p.pools)
        assert p.spent >= 0 and p.predicted_s is None and p.qos == ()  # no QoS policy in this run
    assert max(p.done for p in seen) >= 1 and max(p.running for p in seen) >= 1
    assert [p.now_s for p in seen] == sorted(p.now_s for p in seen)
    assert tables[-1].row_count == 4  # tasks, the local pool's workers, spent / budget, time left
