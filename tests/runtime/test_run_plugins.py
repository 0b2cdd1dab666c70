"""`skylease run --policy FILE.py:CLASS` (and MODULE:CLASS) with `--policy-arg`: a policy of one's own
drives real local workers, its describe() is in summary.json, `simulate replay` of the run loads the
same class with the same parameters, and a bad plug-in or parameter is one line, exit 2, nothing
written."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from skylease.cli import main
from skylease.experiments.run_next import resume_command
from skylease.experiments.run_options import RunOptions

pytestmark = pytest.mark.timeout(240)

# A researcher's policy, in a file of its own: one host at the start, `more` hosts once the first
# task is done (so the callbacks visibly reach it), all released when no task is left.
POLICY = '''\
from skylease.control.env import Policy


class StepUp(Policy):
    def __init__(self, more: int = 1, pool: str | None = None, label: str = "mine") -> None:
        if more < 0:
            raise ValueError(f"more must be >= 0, got {more}")
        self.more, self.pool, self.label = more, pool, label
        self.stepped = False

    def on_start(self, env):
        self.env = env
        env.acquire(self.pool, 1)

    def on_task_done(self, task, host, runtime):
        if not self.stepped:
            self.stepped = True
            self.env.acquire(self.pool, self.more)
        if self.env.pending() == 0:
            for h in list(self.env.hosts()):
                self.env.release(h.id)
'''


@pytest.fixture
def lab(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / "stepup.py").write_text(POLICY)
    (folder / "jobs.txt").write_text("sleep 0.4\n" * 6)
    monkeypatch.chdir(folder)
    return folder


def test_a_policy_file_drives_real_workers_and_replay_loads_the_same_class(lab, tmp_path, capsys,
                                                                          monkeypatch):
    out = tmp_path / "out"
    code = main(["run", "jobs.txt", "--out", str(out), "--max-workers", "3", "--policy", "stepup.py:StepUp",
                 "--policy-arg", "more=2", "--policy-arg", "label=trial 1"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    s = json.loads((out / "summary.json").read_text())
    spec = f"{(lab / 'stepup.py').resolve()}:StepUp"
    assert (s["ok"], s["hosts"], s["peak_hosts"]) == (6, 3, 3)  # 1 at the start, 2 more after a task
    assert (s["policy"], s["policy_args"]) == (spec, ["more=2", "label=trial 1"])
    assert s["policy_class"] == f"{spec}(more=2, pool='local', label='trial 1')"
    assert f"| policy_class | {s['policy_class']} |" in (out / "report.md").read_text()
    # replayed from another folder: the recorded spec (made absolute) and parameters load it again
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", "replay", str(out), "--seeds", "2", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["policy_class"] == s["policy_class"]
    assert [r["hosts"] for r in rep["simulated"]] == [3, 3]
    # the policy file gone since the run: one line naming the run, exit 2
    (lab / "stepup.py").unlink()
    assert main(["simulate", "replay", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"skylease simulate replay: error: {out}: cannot load the run's policy '{spec}': "
                          ), err
    assert "stepup.py: --policy: no such file" in err
    # a resume command repeats the parameters
    opts = RunOptions(out=out, policy=spec, policy_args=["more=2", "label=trial 1"])
    shown = f"--policy {spec} --policy-arg more=2 --policy-arg 'label=trial 1'"
    assert shown in resume_command("jobs.txt", opts)


def test_a_module_class_runs_with_its_parameters(lab, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "jobs.txt", "--out", str(out), "--max-workers", "2", "--policy",
                 "skylease.control.fixed:FixedPool", "--policy-arg", "n=2"]) == 0, capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    assert (s["ok"], s["hosts"]) == (6, 2)
    assert s["policy_class"] == "skylease.control.fixed:FixedPool(n=2, pool='local')"


def test_a_built_in_policy_records_its_class_too(lab, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "jobs.txt", "--out", str(out), "--max-workers", "1", "--policy", "fixed:1"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert (s["policy"], s["policy_args"]) == ("fixed:1", [])
    assert s["policy_class"] == "skylease.control.fixed:FixedPool(n=1, pool='local')"


BROKEN = {
    "syntax.py": "from skylease.control.env import Policy\n\nclass P(Policy)\n    pass\n",
    "imports.py": "import nosuch_dependency_zz\n",
    "ctor.py": "from skylease.control.env import Policy\n\nclass P(Policy):\n    def __init__(self):\n"
               "        raise KeyError('boom')\n",
    "describe.py": "from skylease.control.env import Policy\n\nclass P(Policy):\n    def describe(self):\n"
                   "        return 1 / 0\n",
}

#: argv after `run jobs.txt --out OUT` -> the start of the line's text after "skylease run: error: ".
BAD = [
    (["--policy", "gone.py:P"], "{lab}/gone.py: --policy: no such file"),
    (["--policy", "nosuch_module_zz:P"], "--policy: no module named 'nosuch_module_zz'"),
    (["--policy", "syntax.py:P"], "{lab}/syntax.py:3: --policy: cannot load {lab}/syntax.py: SyntaxError"),
    (["--policy", "imports.py:P"], "{lab}/imports.py:1: --policy: cannot load {lab}/imports.py: "
                                   "ModuleNotFoundError: No module named 'nosuch_dependency_zz'"),
    (["--policy", "ctor.py:P"], "{lab}/ctor.py:5: --policy: {lab}/ctor.py:P: KeyError: 'boom'"),
    (["--policy", "describe.py:P"],
     "{lab}/describe.py:5: --policy: P.describe() fails: ZeroDivisionError: division by zero"),
    (["--policy", "stepup.py:Nope"], "--policy: {lab}/stepup.py has no class 'Nope'"),
    (["--policy", "json:JSONDecoder"], "--policy: json.decoder:JSONDecoder is not a bag policy"),
    (["--policy", "zzpolicy"], "--policy: unknown policy 'zzpolicy'; one of fixed:N"),
    (["--policy", "stepup.py:StepUp", "--policy-arg", "lots=3"],
     "--policy-arg: unknown parameter 'lots' of StepUp; it takes more, pool, label"),
    (["--policy", "stepup.py:StepUp", "--policy-arg", "more=two"],
     "--policy-arg: parameter 'more' of StepUp takes int, got 'two'"),
    (["--policy", "stepup.py:StepUp", "--policy-arg", "more=-1"],
     "--policy-arg: {lab}/stepup.py:StepUp: more must be >= 0, got -1"),
    (["--policy", "stepup.py:StepUp", "--policy-arg", "more"], "--policy-arg: expected KEY=VALUE"),
    (["--policy", "stepup.py:StepUp", "--budget", "3"],
     "--budget: {lab}/stepup.py:StepUp does not watch a budget"),
    (["--policy", "fixed:2", "--policy-arg", "n=3"], "--policy-arg: goes with a MODULE:CLASS"),
]


@pytest.mark.parametrize(("argv", "line"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_plug_in_is_one_line_exit_2_and_nothing_written(lab, tmp_path, capsys, argv, line):
    for name, body in BROKEN.items():
        (lab / name).write_text(body)
    t0 = time.monotonic()
    assert main(["run", "jobs.txt", "--out", str(tmp_path / "new" / "X"), *argv]) == 2
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("skylease run: error: " + line.format(lab=lab.resolve())), err
    assert not (tmp_path / "new").exists()


def test_an_installed_policy_is_named_by_its_entry_point(tmp_path, monkeypatch):
    """`--policy NAME`: the class an installed package declares in the entry-point group
    skylease.policies (a dist-info folder on the path, as pip leaves it), given the run's pool."""
    from skylease.experiments.run_policies import parse_policy
    from skylease.model.errors import UserError

    (tmp_path / "zz_lab_policies.py").write_text(POLICY)
    info = tmp_path / "zz_lab_policies-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zz-lab-policies\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[skylease.policies]\nstep-up = zz_lab_policies:StepUp\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    policy, order = parse_policy("step-up", "gpu", None, 60.0, ["more=4"])
    assert type(policy).__name__ == "StepUp" and (policy.more, policy.pool, order) == (4, "gpu", "fifo")
    with pytest.raises(UserError) as e:
        parse_policy("step-down", "gpu", None, 60.0)
    assert str(e.value).startswith("--policy: unknown policy 'step-down'; one of fixed:N")
    assert str(e.value).endswith("or the name of an installed policy (installed: step-up)")
