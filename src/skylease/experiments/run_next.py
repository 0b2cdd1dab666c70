"""What a user can do next with a run: the ``skylease run ... --resume`` command that finishes it
(with a larger ``--budget`` when the budget ran out), the one that reruns its failed tasks, and
the commands that export it, write its failed tasks as a job file, and read its report.

Decisions of ours (the issue is silent):

* The command that finishes a run repeats every option that differs from its default (a resume
  reads none of them from the store), never a token (a command shown or saved must hold no secret).
* When the budget ran out, the finishing command's budget is estimated from the run's cost per
  finished task so far (:func:`budget_to_finish`): the same budget would stop again at once.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from skylease.experiments.run_options import RunOptions

#: ``skylease run`` options as RunOptions fields, in the order a command shows them. (Never the
#: --qos-token: a command shown or saved in a report must not hold a secret; $SKYLEASE_TOKEN is
#: read when it is left out.)
_FLAGS = (("args", "--args"), ("policy", "--policy"), ("pools_file", "--pools"), ("pool", "--pool"),
          ("max_workers", "--max-workers"), ("price", "--price"), ("billing_unit", "--billing-unit"),
          ("budget", "--budget"), ("retries", "--retries"), ("task_timeout_s", "--timeout"),
          ("tail_qos", "--tail-qos"), ("reliable_pool", "--reliable-pool"),
          ("tail_credits", "--tail-credits"), ("qos", "--qos"), ("qos_credits", "--qos-credits"),
          ("qos_strategy", "--qos-strategy"), ("qos_infrastructure", "--qos-infrastructure"),
          ("report", "--report"),
          ("volatility", "--volatility"),
          ("volatile_pool", "--volatile-pool"), ("time_scale", "--trace-scale"),
          ("trace_start", "--trace-start"), ("seed", "--seed"))


def resume_command(job_spec: str, opts: RunOptions, *, retry_failed: bool = False) -> str:
    """The ``skylease run`` command that finishes this run: the same job, folder and options (each
    option that differs from its default; a resume reads none of them from the store)."""
    default = RunOptions()
    words = ["skylease", "run", job_spec, "--out", str(opts.out)]
    for name, flag in _FLAGS:
        value = getattr(opts, name)
        if value is not None and value != getattr(default, name):
            words += [flag, str(value)]
            if name == "policy":
                for arg in opts.policy_args:
                    words += ["--policy-arg", arg]
    for pattern in opts.transfer:
        words += ["--transfer", pattern]
    for pattern in opts.returns:
        words += ["--return", pattern]
    words += ["--cleanup"] * opts.cleanup + ["--shared"] * opts.shared
    words.append("--resume")
    if retry_failed:
        words.append("--retry-failed")
    return " ".join(shlex.quote(w) for w in words)


def budget_ran_out(opts: RunOptions, spent: float, least_charge: float) -> bool:
    """The run's ``--budget`` cannot rent one more worker: what is left of it is under the least
    charge of a worker of the main pool (its price times its minimum billed units, at least one)."""
    return opts.budget is not None and opts.budget - spent < least_charge - 1e-9


def budget_to_finish(spent: float, counts: Mapping[str, int], least_charge: float,
                     budget: float) -> float:
    """A ``--budget`` that can finish a run whose budget ran out: what was spent, plus the tasks left
    at the run's cost per finished task so far, plus one more worker's least charge (the margin a
    budget-watching policy needs to rent at all), rounded up to the cent; at least twice the old
    budget when no task finished (there is nothing to estimate from)."""
    finished = counts["ok"] + counts["failed"]
    more = spent / finished * counts["left"] + least_charge if finished else max(budget, least_charge)
    return math.ceil((spent + more) * 100 - 1e-6) / 100


def next_steps(job_spec: str, opts: RunOptions, counts: Mapping[str, int], *, spent: float = 0.0,
               least_charge: float = 0.0) -> dict[str, str]:
    """What the user can do next with a run: finish it, rerun its failed tasks (or write them as a
    job file to fix: ``skylease failed``), export, read.

    When the budget ran out (:func:`budget_ran_out`), resuming with the same ``--budget`` would stop
    again at once: the command to finish the run then gives a larger one (:func:`budget_to_finish`)."""
    steps = {}
    finish = opts
    if opts.budget is not None and (counts["left"] or counts["failed"]) \
            and budget_ran_out(opts, spent, least_charge):
        finish = replace(opts, budget=budget_to_finish(spent, counts, least_charge, opts.budget))
    if counts["left"]:
        steps["resume"] = resume_command(job_spec, finish)
    if counts["failed"]:
        steps["retry_failed"] = resume_command(job_spec, finish, retry_failed=True)
        steps["failed"] = f"skylease failed {shlex.quote(str(opts.out))} > fixed.txt"
    steps["export"] = f"skylease export {shlex.quote(str(opts.out))}"
    steps["report"] = str(Path(opts.out) / "report.md")
    return steps

