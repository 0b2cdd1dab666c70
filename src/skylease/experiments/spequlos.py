"""SpeQuloS runs: one bag of tasks on a simulated desktop grid, with and without the QoS policy.

The unit of the evaluation (decision S21) is an *environment* (middleware x trace x BoT
category) at one *seed*. The seed fixes the submission time, the BoT's draw, the node powers and
every other random choice of the desktop grid, so the baseline run (no QoS) and each strategy's
run see the same grid until the policy first acts: the paper's fairness rule, checked by
``tests/experiments/test_spequlos.py``.

Decisions where the paper and docs/decisions/spequlos.md are silent (also written into every report's
metadata):

* Traces are built once per process with seed :data:`TRACE_SEED` (``seti``/``nd`` are generated,
  the others read from the data sets), so every run of a campaign uses the same traces, as the
  paper's fixed traces.
* Submission times are uniform over ``[0, length - margin]``, where ``margin`` is
  :data:`SUBMIT_MARGIN_S` (or a third of the trace if shorter), so a BoT can finish before the
  trace ends (S21). Runs that still do not finish are reported with ``completion_s = inf``.
* ``cloud_work_share`` is the share of the BoT's tasks whose first result came from a cloud
  worker (measured), not the paper's proxy of 0.10 x the share of credits spent, which
  :func:`summarize` reports beside it as ``cloud_work_share_paper``.
* ``batch-accel`` (alone or as ``batch-accel+9C-C-R``) turns on BOINC's own batch acceleration in
  the BOINC server (:mod:`skylease.sim.dg.accel`; BOINC's defaults unless :func:`batch_accel`
  says otherwise); rows count the ``extra_results`` it created and when it first fired
  (``accel_at_s``).
* RANDOM's arrivals are read as quantiles of the Weibull by default (decision D1; ``iid`` and
  ``epsilon`` are switches) and a BOINC cloud worker buffers 3 replicas (D3, ``cloud_buffer``).
  Every run's row records its reading (``arrivals``, ``epsilon_s``, ``cloud_buffer``), and
  :func:`readings` is the dict the CLI's JSON and the reproduction's ``metadata.json`` carry.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skylease.control.env import Policy
from skylease.control.qos import SpeQuloS, parse_plan
from skylease.control.qos.credits import CREDITS_PER_CPU_HOUR
from skylease.control.qos.prediction import AlphaModel
from skylease.control.qos.strategy import CloudStrategy
from skylease.control.qos.tail import tail_stats
from skylease.experiments.sim_progress import Watched
from skylease.model.errors import UserError
from skylease.model.limits import check_number, check_seed, check_size, count
from skylease.sim.dg.accel import BatchAccel
from skylease.sim.dg.env import DesktopGridEnv, DGParams
from skylease.sim.dg.flat import FlatTrace, flatten
from skylease.sim.dg.workload import (
    ARRIVALS,
    BOT_CATEGORIES,
    BOT_FORMS,
    CREDIT_FRACTION,
    TASK_BYTES,
    custom_bot,
    make_bot,
    resolve_arrivals,
)
from skylease.traces.avail import load_trace
from skylease.traces.synthetic import is_synthetic
from skylease.traces.tables import DAY

__all__ = [
    "MIDDLEWARES",
    "TRACES",
    "batch_accel",
    "environment_cell",
    "readings",
    "run_once",
    "simulate",
    "submission_time",
    "tail_removal",
    "trace_for",
]

MIDDLEWARES = ("boinc", "xwhep")
#: The paper's six BE-DCI traces (decision S19), by the names :func:`load_trace` resolves.
TRACES = ("seti", "nd", "g5klyo", "g5kgre", "spot10", "spot100")
#: The traces made by a generator (decision S19), which ``--nodes`` and ``--days`` size.
GENERATED_TRACES = ("seti", "nd")
TRACE_SEED = 2013
SUBMIT_MARGIN_S = 10 * 86400.0
#: The completion ratio at which the oracle predicts (Table 7).
PREDICT_AT = 0.5
#: Peak bytes per cloud worker of a run (about 920 measured with 100,000): every credit order is
#: refused whose cloud workers, started at once, would not fit the memory budget.
CLOUD_WORKER_BYTES = 1024
#: A BOINC cloud worker's work buffer (replicas per request), the [RC] client's 3 (decision D3).
DEFAULT_CLOUD_BUFFER = 3
#: The largest --cloud-buffer: a CW holding more replicas than any BoT has WUs changes nothing.
MAX_CLOUD_BUFFER = 10_000


def check_readings(arrivals: str | None, epsilon: float | None, cloud_buffer: int,
                   sigma: str = "literal") -> tuple[str, float | None]:
    """Validate the run's readings before any work: RANDOM's arrivals (and cap), the cloud buffer and
    sigma, each a one-line UserError naming its option; returns the resolved ``(arrivals, epsilon)``."""
    if sigma not in ("literal", "std"):
        raise UserError(f"sigma must be 'literal' or 'std', got {sigma!r}", field="sigma")
    if epsilon is not None:
        check_number(epsilon, "--random-epsilon", above=0,
                     hint="the maximal gap between arrivals, in seconds; leave it out for none")
    try:
        reading = resolve_arrivals(arrivals, epsilon)
    except ValueError as exc:
        field = "--random-epsilon" if arrivals is not None and arrivals.strip().lower() in ARRIVALS \
            else "--random-arrivals"
        raise UserError(str(exc), field=field) from None
    if isinstance(cloud_buffer, bool) or not isinstance(cloud_buffer, int) \
            or not 1 <= cloud_buffer <= MAX_CLOUD_BUFFER:
        raise UserError(f"the cloud worker's buffer must be a whole number of replicas from 1 to "
                        f"{MAX_CLOUD_BUFFER:,}, got {cloud_buffer!r}", field="--cloud-buffer")
    return reading


def readings(arrivals: str | None = None, epsilon: float | None = None,
             cloud_buffer: int = DEFAULT_CLOUD_BUFFER, sigma: str = "literal") -> dict[str, Any]:
    """The readings a run was made under, as logged in its output metadata (decision S27)."""
    reading, eps = check_readings(arrivals, epsilon, cloud_buffer, sigma)
    return {
        "random_arrivals": reading,
        "random_arrivals_why": {
            "quantile": "decision D1: task i of n at F^-1((i - 1/2)/n) of weib(91.98 s, 0.57), the "
                        "paper's repartition function of arrival times",
            "iid": "decision S9b: offsets drawn i.i.d. from weib(91.98 s, 0.57), sorted",
            "epsilon": "decision S9b offsets with every gap between arrivals capped at epsilon (the paper's "
                       "maximal gap, Section 4.1)",
        }[reading],
        "random_epsilon_s": eps,
        "random_sigma": sigma,
        "cloud_buffer": cloud_buffer,
        "cloud_buffer_why": "decision D3: replicas a BOINC cloud worker asks for per request (the [RC] "
                            "client's 3 by default); XWHEP workers hold one job",
    }


@functools.lru_cache(maxsize=8)
def _trace(name: str, data_dir: str | None, n_nodes: int | None,
           duration_s: float | None) -> FlatTrace:
    return flatten(load_trace(name, seed=TRACE_SEED, data_dir=data_dir, n_nodes=n_nodes,
                              duration_s=duration_s))


def trace_for(name: str, data_dir: str | os.PathLike[str] | None = None, *, n_nodes: int | None = None,
              duration_s: float | None = None) -> FlatTrace:
    """The flattened trace ``name`` (one of :data:`TRACES` or a path), built once per process;
    ``n_nodes`` and ``duration_s`` size a generated one (:func:`~skylease.traces.avail.load_trace`)."""
    key = str(Path(name).resolve()) if os.sep in name or Path(name).exists() else name
    return _trace(key, None if data_dir is None else str(data_dir), n_nodes, duration_s)


def submission_time(trace: FlatTrace, seed: int) -> float:
    """The seed's submission time (s after the trace start): uniform over the trace minus a margin."""
    length = float(trace.t_end - trace.t_start)
    margin = min(SUBMIT_MARGIN_S, length / 3.0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5B0]))
    return float(rng.uniform(0.0, max(length - margin, 0.0)))


def _category(bot: str) -> str:
    """SMALL, BIG, RANDOM, or a bag of one's own: ``N:SECONDS`` (checked: N within the memory
    budget) or drawn, ``KIND:N:...`` (checked as it is drawn)."""
    try:
        own = custom_bot(bot)
    except ValueError as e:
        raise UserError(str(e), field="--bot") from None
    if own is not None:
        check_size(own[0], "tasks", TASK_BYTES, field="--bot")
        return f"{own[0]}:{own[1]:g}"
    if is_synthetic(bot):
        return bot.strip()
    cat = bot.strip().upper()
    if cat not in BOT_CATEGORIES:
        raise UserError(f"unknown BoT category {bot!r}: use one of {'; '.join(BOT_FORMS)}", field="bot")
    return cat


def _middleware(mw: str) -> str:
    key = mw.strip().lower()
    if key == "xw":
        key = "xwhep"
    if key not in MIDDLEWARES:
        raise UserError(f"unknown middleware {mw!r}: use boinc or xwhep", field="middleware")
    return key


#: Which cloud workers stop at the next tick once idle (decision S4): ``all`` ([RC], the default) or
#: ``greedy`` (the paper's l.198 names Greedy only; Conservative's idle workers stay billed).
IDLE_STOPS = ("all", "greedy")


def stop_idle_cw(idle_stop: str, strategy: CloudStrategy | None) -> bool:
    """Whether ``strategy``'s idle cloud workers stop at the next tick under the ``idle_stop`` reading."""
    if idle_stop not in IDLE_STOPS:
        raise UserError(f"unknown idle-stop reading {idle_stop!r}: use {' or '.join(IDLE_STOPS)}",
                        field="idle_stop")
    return idle_stop == "all" or (strategy is not None and strategy.greedy)


def batch_accel(min_frac_done: float | None = None, max_not_done: int | None = None,
                period: float | None = None) -> BatchAccel:
    """BOINC's batch-acceleration parameters (None: BOINC's default), checked as the CLI's options."""
    d = BatchAccel()
    if min_frac_done is not None:
        check_number(min_frac_done, "--accel-min-frac-done", minimum=0, maximum=1,
                     hint="BATCH_ACCEL_MIN_FRAC_DONE, the fraction of the jobs done")
    if max_not_done is not None and (isinstance(max_not_done, bool) or not isinstance(max_not_done, int)
                                     or max_not_done < 0):
        raise UserError(f"must be a whole number of jobs >= 0, got {max_not_done!r} "
                        "(BATCH_ACCEL_MAX_NOT_DONE)", field="--accel-max-not-done")
    if period is not None:
        check_number(period, "--accel-period", above=0, maximum=86400 * 365,
                     hint="seconds between two runs of batch_accel.php")
    return BatchAccel(
        min_frac_done=d.min_frac_done if min_frac_done is None else float(min_frac_done),
        max_not_done=d.max_not_done if max_not_done is None else max_not_done,
        period=d.period if period is None else float(period),
    )


def run_once(middleware: str, trace: str, bot: str, strategy: str = "9C-C-R", seed: int = 0, *,
             data_dir: str | os.PathLike[str] | None = None, alpha: float = 1.0,
             sigma: str = "literal", credits: float | None = None,
             epsilon: float | None = None, arrivals: str | None = None,
             cloud_buffer: int = DEFAULT_CLOUD_BUFFER, accel: BatchAccel | None = None,
             idle_stop: str = "all", strategy_args: Mapping[str, Any] | None = None,
             wrap: Callable[[SpeQuloS], Policy] | None = None, nodes: int | None = None,
             days: float | None = None, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """One BoT run: the row of metrics an experiment records (times in seconds after submission).

    ``strategy``: a SpeQuloS strategy (``9C-C-R``...), ``none`` (the policy still predicts,
    without renting anything), or a strategy of one's own, ``MODULE:CLASS`` or ``FILE.py:CLASS``
    (a :class:`~skylease.control.qos.strategy.CloudStrategy`) built with ``strategy_args``
    (``--strategy-arg KEY=VALUE`` texts parsed by :func:`skylease.control.plugins.parse_args`, or
    typed values); ``alpha``: the prediction's correction factor; ``credits``: the
    order (default: decision S28's 10 % of the BoT's workload); ``arrivals``/``epsilon``: RANDOM's
    reading of its arrivals (:func:`~skylease.sim.dg.workload.resolve_arrivals`: ``quantile`` by
    default, ``iid``, or ``epsilon`` with its cap); ``cloud_buffer``: replicas a BOINC cloud
    worker asks for per request (decision D3); ``wrap``: the environment runs ``wrap(policy)``
    instead of the SpeQuloS policy, a policy that passes every callback on and watches the run
    (:mod:`skylease.experiments.qos_service`). ``nodes``/``days``: the size of a generated trace
    (``seti``, ``nd``: :func:`~skylease.traces.avail.load_trace`); ``progress(done, n)`` is told
    the tasks done as the run goes (:class:`~skylease.experiments.sim_progress.Watched`).

    BOINC's own batch acceleration joins with ``strategy`` ``batch-accel`` (alone) or
    ``batch-accel+9C-C-R``; ``accel``: its parameters (default BOINC's, :func:`batch_accel`).
    """
    mw, cat = _middleware(middleware), _category(bot)
    plan = parse_plan(strategy, strategy_args)
    if plan.accel and mw != "boinc":
        raise UserError("batch-accel is the BOINC server's batch acceleration; XWHEP has none: use "
                        "--middleware boinc", field="--strategy")
    reading, eps = check_readings(arrivals, epsilon, cloud_buffer, sigma)
    flat = trace_for(trace, data_dir, n_nodes=nodes, duration_s=None if days is None else days * DAY)
    ss = np.random.SeedSequence([seed, 0xB07])
    ss_bot, ss_env = ss.spawn(2)
    b = make_bot(cat, seed=int(ss_bot.generate_state(1)[0]), sigma=sigma, arrivals=reading, epsilon=eps)
    if credits is not None:
        check_order(credits, b.credits / CREDIT_FRACTION)
    order = b.credits if credits is None else float(credits)
    submit = submission_time(flat, seed)
    params = DGParams(cw_buffer=cloud_buffer, accel=(accel or BatchAccel()) if plan.accel else None)
    env = DesktopGridEnv(mw, flat, b, submit_at=submit, seed=ss_env, params=params)
    stop_idle = stop_idle_cw(idle_stop, plan.qos)
    policy = SpeQuloS(plan.qos, order, predict_at=PREDICT_AT, alpha=AlphaModel(alpha), stop_idle_cw=stop_idle)
    watched = policy if wrap is None else wrap(policy)
    res = env.run(watched if progress is None else Watched(watched, progress))
    n = len(b)
    ts = tail_stats(res.completion_times, n)
    ps = policy.summary()
    return {
        "middleware": mw, "trace": flat.name, "nodes": flat.n_nodes, "bot": cat, "strategy": plan.name,
        "seed": seed, "submit_s": submit, "n_tasks": n, "completed": res.completed,
        "completion_s": float(res.completion_s), "ideal_s": float(ts.ideal_time),
        "tail_slowdown": float(ts.slowdown),
        "tail_tasks": ts.tail_tasks, "tail_task_share": ts.tail_task_share,
        "tail_time_share": ts.tail_time_share,
        "credits_ordered": ps["credits_ordered"], "credits_used": ps["credits_spent"],
        "credits_share": ps["credits_spent"] / order if order > 0 else 0.0,
        "cloud_work_share": res.cw_tasks / n, "cws": ps["cws"], "cw_started_s": ps["cw_started_at"],
        "cw_up_s": res.cw_first_up_s,
        "predicted_s": ps["t_pred"], "predict_p": ps["predict_p"],
        "events": res.events, "wall_s": res.wall_s,
        "extra_results": res.extra_results, "accel_at_s": res.accel_at_s,
        "arrivals": reading, "epsilon_s": math.nan if eps is None else eps, "cloud_buffer": cloud_buffer,
        "idle_stop": idle_stop,
    }


#: The largest order, in multiples of what running every task of the bag in the cloud costs.
MAX_ORDER_FACTOR = 10


def check_order(credits: float, whole_bag: float) -> None:
    """Refuse an order beyond :data:`MAX_ORDER_FACTOR` times ``whole_bag`` (the credits that run
    every task in the cloud): its cloud workers could never be given work, and a greedy strategy
    would start them all at once (minutes of simulation for nothing)."""
    most = MAX_ORDER_FACTOR * whole_bag
    if credits > most:
        raise UserError(f"{credits:,.6g} credits is more than {MAX_ORDER_FACTOR} times what running the "
                        f"whole bag in the cloud costs ({whole_bag:,.0f} credits); at most {most:,.0f}",
                        field="--credits")


def environment_cell(middleware: str, trace: str, bot: str, strategies: Sequence[str], seed: int,
                     data_dir: str | None = None) -> list[dict[str, Any]]:
    """One campaign cell: the baseline and every strategy of ``strategies`` at one seed (paired)."""
    return [run_once(middleware, trace, bot, s, seed, data_dir=data_dir) for s in ("none", *strategies)]


def tail_removal(t_speq: float, t_nospeq: float, t_ideal: float, eps: float = 1.0) -> float | None:
    """TRE ``1 - (t_speq - t_ideal)/(t_nospeq - t_ideal)``, clipped at 1; None when the baseline
    had no tail (``t_nospeq - t_ideal <= eps`` seconds, decision S16)."""
    gap = t_nospeq - t_ideal
    if not (math.isfinite(gap) and gap > eps):
        return None
    if not math.isfinite(t_speq):
        return -math.inf
    return min(1.0, 1.0 - (t_speq - t_ideal) / gap)


def _tre_note(row: dict[str, Any], base: dict[str, Any]) -> str | None:
    """Why the tail removal efficiency is missing or not a number; None when it is one."""
    n, strat = row["n_tasks"], row["strategy"]
    if not math.isfinite(base["completion_s"]):
        done = f"{base['completed']:,} of {n:,} tasks"
        if strat != "none":
            ok = math.isfinite(row["completion_s"])
            done += (f"; with {strat} it finished" if ok
                     else f" ({row['completed']:,} with {strat}, which did not finish either)")
        return (f"The run without QoS did not finish: the trace ended with {done} done, so it has "
                "no measurable tail to remove.")
    if not math.isfinite(row["completion_s"]):
        return (f"The run with {strat} did not finish ({row['completed']:,} of {n:,} tasks done when "
                f"the trace ended) while the run without QoS did.")
    if row["tre"] is None:
        return "The run without QoS had no tail, so there was nothing to remove."
    return None


#: What ``skylease simulate spequlos --json`` prints per run.
JSON_KEYS = ("completion_s", "ideal_s", "tail_slowdown", "tail_task_share", "credits_used",
             "cloud_work_share", "predicted_s")


def simulate(middleware: str, trace: str, bot: str, strategy: str = "9C-C-R", seed: int = 0, *,
             data_dir: str | os.PathLike[str] | None = None, alpha: float = 1.0,
             credits: float | None = None, sigma: str = "literal",
             epsilon: float | None = None, arrivals: str | None = None,
             cloud_buffer: int = DEFAULT_CLOUD_BUFFER, accel: BatchAccel | None = None,
             strategy_args: Mapping[str, Any] | None = None, nodes: int | None = None,
             days: float | None = None,
             progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """One strategy's run and its paired baseline (same seed): the CLI's result.

    Top-level keys are the strategy's run (:data:`JSON_KEYS` and more); ``baseline`` holds the run
    without QoS; ``tre`` is the tail removal efficiency against it (None: the baseline had no tail
    or did not finish; ``-inf``: the strategy's run did not finish) and ``tre_note`` says why when
    it is not a number. ``credits`` may buy at most 2,097,152 cloud workers at once (the memory
    budget of :mod:`skylease.model.limits`): 31,457,280 credits. ``readings`` is what the run was
    made under (:func:`readings`). ``accel``: batch-acceleration
    parameters (:func:`batch_accel`), only with a ``batch-accel`` strategy. ``strategy_args``: the
    parameters of a strategy of one's own (:func:`run_once`). ``nodes``/``days``: the size of a
    generated trace (:func:`run_once`). ``progress(run, done, n)``: the tasks done of ``n``, as each
    run goes (``run``: "baseline", then the strategy's name).
    """
    meta = readings(arrivals, epsilon, cloud_buffer, sigma)
    seed = check_seed(seed)
    check_number(alpha, "--alpha", above=0)
    if credits is not None:
        check_number(credits, "--credits", minimum=0)
        # The most cloud workers any strategy starts is the credits' CPU hours (greedy, G).
        n_cw = credits / CREDITS_PER_CPU_HOUR
        check_size(n_cw, "cloud workers", CLOUD_WORKER_BYTES, field="--credits",
                   asked=f"{credits:,.6g} credits buy up to {count(n_cw)} at once")
    plan = parse_plan(strategy, strategy_args)  # (a mistake in the strategy or its arguments: first)
    if accel is not None and not plan.accel:
        raise UserError("the batch-acceleration options need --strategy batch-accel (or "
                        "batch-accel+STRATEGY)", field="--strategy")
    if _category(bot) != "RANDOM" and (arrivals is not None or epsilon is not None):
        # only RANDOM's tasks arrive over time: on another bag the option would change nothing
        raise UserError(f"RANDOM bags only (their arrival times); --bot {bot.strip().lower()} has every "
                        f"task at the start", field="--random-arrivals" if arrivals is not None
                        else "--random-epsilon")
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1):
        raise UserError(f"must be a whole number >= 1, got {nodes!r}", field="--nodes")
    if (nodes is not None or days is not None) and trace.strip() not in GENERATED_TRACES:
        raise UserError(f"sizes a generated trace ({', '.join(GENERATED_TRACES)}); {trace.strip()!r} has its "
                        "own nodes and length", field="--nodes" if nodes is not None else "--days")
    if days is not None:
        check_number(days, "--days", above=0, maximum=3650)
    def told(run: str) -> Callable[[int, int], None] | None:
        return None if progress is None else (lambda done, n: progress(run, done, n))

    kw = dict(data_dir=data_dir, alpha=alpha, credits=credits, sigma=sigma, epsilon=epsilon,
              arrivals=arrivals, cloud_buffer=cloud_buffer, accel=accel, nodes=nodes, days=days)
    base = (None if plan.name == "none"
            else run_once(middleware, trace, bot, "none", seed, progress=told("baseline"), **kw))
    row = run_once(middleware, trace, bot, strategy, seed, strategy_args=strategy_args,
                   progress=told(plan.name), **kw)
    base = row if base is None else base
    row["baseline"] = {k: base[k] for k in (*JSON_KEYS, "tail_tasks", "tail_time_share", "completed")}
    row["tre"] = tail_removal(row["completion_s"], base["completion_s"], base["ideal_s"])
    row["tre_note"] = _tre_note(row, base)
    row["speedup"] = (base["completion_s"] / row["completion_s"]
                      if math.isfinite(row["completion_s"]) and row["completion_s"] > 0 else None)
    row["readings"] = meta
    return row


def result_json(res: dict[str, Any]) -> str:
    """:func:`simulate`'s result as JSON text: an unfinished run's infinite times (and a ``-inf``
    tail removal) become ``null``, since JSON has no infinity; numpy numbers become plain ones."""
    import json

    if _all_finite(res):
        return json.dumps(res, default=float, allow_nan=False)
    return json.dumps(_finite_or_none(res), default=float)  # (a numpy number: once a TypeError)


def _all_finite(d: dict[str, Any]) -> bool:
    return all(not isinstance(v, float) or math.isfinite(v) for v in d.values()) and all(
        _all_finite(v) for v in d.values() if isinstance(v, dict))


def _finite_or_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (_finite_or_none(v) if isinstance(v, dict) else
                None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}
