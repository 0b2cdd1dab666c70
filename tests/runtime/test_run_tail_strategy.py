"""`skylease run --tail-qos FILE.py:CLASS`: a SpeQuloS strategy of one's own cuts the tail of a real
run on local workers, as the built-in 9A-C-D does in tests/runtime/test_run.py."""

from __future__ import annotations

import sqlite3

import pytest

from skylease.experiments.run import run_job
from skylease.experiments.run_options import RunOptions, check_options
from skylease.model.errors import UserError

STRATEGY = '''
from skylease.control.qos import CloudStrategy


class OneCopy(CloudStrategy):
    """One cloud worker, copying the tasks still running, once `at` of the tasks were assigned."""

    usage = "duplicate"

    def __init__(self, at: float = 0.9, workers: int = 1) -> None:
        self.at, self.workers = at, workers

    def should_use_cloud(self, s):
        return s.submitted > 0 and s.assigned >= self.at * s.submitted

    def cloud_workers_to_start(self, s, credits):
        return self.workers
'''


@pytest.mark.integration  # a real run with an 18 s task and cloud workers
def test_a_strategy_of_one_s_own_cuts_the_tail_of_a_real_run(tmp_path, monkeypatch):
    (tmp_path / "one_copy.py").write_text(STRATEGY)
    pools = tmp_path / "pools.toml"
    pools.write_text("[pools.grid]\nmax_count = 2\nboot_time = 2\n"
                     "[pools.cloud]\nmax_count = 2\nboot_time = 2\n")
    job = tmp_path / "jobs.txt"
    # grid-1 is the slow volatile worker: 18 s per task; everyone else 0.2 s
    cmd = ("python3 -c \"import os,time; time.sleep(18 if os.environ.get('SKYLEASE_WORKER') == 'grid-1' "
           "else 0.2)\"\n")
    job.write_text(cmd * 20)
    monkeypatch.chdir(tmp_path)  # the file is named relative to the working folder, as on the CLI
    s = run_job(str(job), RunOptions(out=tmp_path / "o", policy="fixed:2", pools_file=pools, pool="grid",
                                     tail_qos="one_copy.py:OneCopy", reliable_pool="cloud", tail_tick_s=0.5))
    assert s["ok"] == 20 and s["left"] == 0
    assert s["qos"]["strategy"] == "OneCopy(at=0.9, workers=1)" and s["qos"]["cws"] == 1
    assert s["tail_qos"] == f"{tmp_path / 'one_copy.py'}:OneCopy"  # (the same file on --resume)
    assert s["hosts_per_pool"].get("cloud", 0) == 1
    assert s["elapsed_s"] < 18.0  # a cloud copy finished grid-1's task
    with sqlite3.connect(tmp_path / "o" / "results.sqlite") as db:
        won = dict(db.execute("SELECT pool, COUNT(*) FROM results GROUP BY pool").fetchall())
    assert won.get("cloud", 0) >= 1


@pytest.mark.parametrize(("spec", "says"), [
    ("gone.py:OneCopy", "gone.py: --tail-qos: no such file"),
    ("json:JSONDecoder", "--tail-qos: json.decoder:JSONDecoder is not a SpeQuloS strategy"),
    ("none", "--tail-qos: 'none' cuts no tail"),
])
def test_a_bad_tail_strategy_is_one_line(spec, says, tmp_path):
    job = tmp_path / "jobs.txt"
    job.write_text("true\n")
    with pytest.raises(UserError) as e:
        check_options(RunOptions(out=tmp_path / "o", tail_qos=spec, reliable_pool="local"))
    assert str(e.value).startswith(says) and "\n" not in str(e.value)
