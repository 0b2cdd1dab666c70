"""`skylease simulate`: provisioning policies on simulated bags of tasks, and a real run replayed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import simulate_app
from skylease.cli.common import err, out
from skylease.cli.format import duration_option

if TYPE_CHECKING:
    from rich.progress import TaskID


# -- simulate -------------------------------------------------------------------------------
@simulate_app.command("a2ha")
def simulate_a2ha_cmd(
    workload: Annotated[str, typer.Option(help="image | synthetic | outsystems | long (the paper's), "
                                          "a WfCommons .json(.gz), a .csv of runtimes, or "
                                          "normal|gamma|lognormal:N:MEAN:SD, constant:N:SECONDS.")],
    preset: Annotated[str | None, typer.Option(help="conservative (0.5/0.5, default) or aggressive "
                                               "(0.75/0.75).")] = None,
    creation_ratio: Annotated[float | None, typer.Option(help="Initial creationRatio, 0..1.")] = None,
    increase_ratio: Annotated[float | None, typer.Option(help="increaseRatio, 0..1.")] = None,
    budget: Annotated[float | None, typer.Option(help="Hard cap on money: the charged cost never "
                                                 "exceeds it.")] = None,
    budget_factor: Annotated[float, typer.Option(help="The paper's soft budget: beta x the minimum "
                                                 "cost (hosts work (unit - boot)/beta).")] = 1.0,
    initial_hosts: Annotated[int, typer.Option(help="Hosts rented at t = 0.")] = 1,
    orderings: Annotated[int, typer.Option(help="Random task orderings (runs).")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the orderings (and of redrawn task times).")] = 0,
    boot: Annotated[float, typer.Option("--boot-time", metavar="DURATION", parser=duration_option(),
                                        help="Host boot time (charged, no work): 300, 5m.")] = 300.0,
    unit: Annotated[float, typer.Option("--billing-unit", metavar="DURATION",
                                        parser=duration_option(positive=True),
                                        help="Billing unit: 3600, 1h.")] = 3600.0,
    price: Annotated[float, typer.Option(help="Price ($) per billing unit.")] = 1.0,
    compare: Annotated[bool, typer.Option("--compare", help="Also run a fixed pool of the optimal "
                                          "size and Dask's adaptive rule on the same orderings.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """A2HA: budget-aware adaptive host allocation for a bag of tasks with unknown task times."""
    from rich.progress import Progress

    from skylease.experiments.a2ha import study

    kwargs = dict(preset=preset, creation_ratio=creation_ratio, increase_ratio=increase_ratio,
                  budget=budget, budget_factor=budget_factor, initial_hosts=initial_hosts,
                  orderings=orderings, seed=seed, boot_s=boot, unit_s=unit, price=price, compare=compare)
    if as_json or not err.is_terminal:
        res = study(workload, **kwargs)
        if as_json:
            print(json.dumps(res))
            return
    else:
        with Progress(console=err.made(), transient=True) as bar:
            task = bar.add_task("orderings", total=orderings)
            res = study(workload, progress=lambda i: bar.update(task, completed=i), **kwargs)
    out.print(f"{res['workload']}: {res['tasks']} tasks, {res['orderings']} orderings, "
              f"{res['policy']}; optimal hosts {res['optimal_hosts']}")
    cols = [("hosts", "hosts created"), ("wall_s", "wall time"), ("speedup", "speedup"),
            ("charged_hours", "charged (h)"), ("cost", "cost"), ("interrupted_tasks", "interrupted tasks"),
            ("wasted_s", "wasted"), ("continued_hosts", "continued hosts")]
    runs = [("A2HA", res), *res.get("baselines", {}).items()]
    table = fmt.table("mean ± sd", *(label for label, _ in runs))
    for k, label in cols:
        table.add_row(label, *(_mean_sd(k, r[k]) for _, r in runs))
    out.print(table)
    if res["unfinished_runs"]:
        out.print(f"{res['unfinished_runs']} of {res['orderings']} runs stopped with tasks unfinished "
                  f"(on average {res['unfinished']['mean']:.1f}): the budget could not buy another unit")


@simulate_app.command("bag")
def simulate_bag_cmd(
    workload: Annotated[str, typer.Option(help="What `simulate a2ha --workload` takes: image | synthetic "
                                          "| outsystems | long, a WfCommons .json(.gz), a .csv of "
                                          "runtimes, normal|gamma|lognormal:N:MEAN:SD, constant:N:SECONDS.")],
    policy: Annotated[str, typer.Option(help="As `skylease run --policy`: fixed:N | a2ha[:PRESET] | "
                                        "dask-adaptive[:MAX] | MODULE:CLASS | FILE.py:CLASS | an "
                                        "installed policy's name.")],
    policy_arg: Annotated[list[str] | None, typer.Option("--policy-arg", help="KEY=VALUE: a parameter of "
                                                         "a MODULE:CLASS policy (repeatable).")] = None,
    budget: Annotated[float | None, typer.Option(help="Hard cap on money, given to a policy that "
                                                 "takes `budget`.")] = None,
    orderings: Annotated[int, typer.Option(help="Runs (A2HA: random task orders; redrawn workloads: "
                                           "new task times).")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the runs: the same seed gives every policy the "
                                      "same bags.")] = 0,
    boot: Annotated[float, typer.Option("--boot-time", metavar="DURATION", parser=duration_option(),
                                        help="Host boot time (charged, no work): 300, 5m.")] = 300.0,
    unit: Annotated[float, typer.Option("--billing-unit", metavar="DURATION",
                                        parser=duration_option(positive=True),
                                        help="Billing unit: 3600, 1h.")] = 3600.0,
    price: Annotated[float, typer.Option("--price", help="Price ($) of a host per billing unit.")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Any bag policy (a built-in or your own class) on the simulated cloud of `simulate a2ha`."""
    from skylease.experiments.bag import study

    res = study(workload, policy, policy_arg or (), budget=budget, orderings=orderings, seed=seed,
                boot_s=boot, unit_s=unit, price=price)
    if as_json:
        print(json.dumps(res))
        return
    out.print(f"{res['workload']}: {res['tasks']} tasks, {res['orderings']} run(s), {res['order']} order",
              markup=False, highlight=False, soft_wrap=True)
    out.line(f"policy: {res['policy_class']}")
    table = fmt.table("mean ± sd", "value")
    for k, label in (("wall_s", "makespan"), ("cost", "cost"), ("hosts", "hosts"),
                     ("charged_hours", "charged (h)"), ("speedup", "speedup"),
                     ("interrupted_tasks", "interrupted tasks"), ("unfinished", "unfinished tasks")):
        table.add_row(label, _mean_sd(k, res[k]))
    out.print(table)
    if res["unfinished_runs"]:
        out.print(f"{res['unfinished_runs']} of {res['orderings']} run(s) ended with tasks unfinished (on "
                  f"average {res['unfinished']['mean']:.1f}): no host was left to run them", markup=False,
                  highlight=False, soft_wrap=True)


@simulate_app.command("spequlos")
def simulate_spequlos_cmd(
    middleware: Annotated[str, typer.Option(help="boinc or xwhep.")],
    trace: Annotated[str, typer.Option(help="seti, nd, g5klyo, g5kgre, spot10, spot100, lanl, or a "
                                       "trace file (FTA .tab, spot .json, SWF .swf, .tr directory).")],
    bot: Annotated[str, typer.Option(help="small (1000 x 1 h), big (10000 x 1 min) or random "
                                     "(Table 6 of the paper), or a bag of one's own N:SECONDS (N tasks "
                                     "of SECONDS each on a 1,000 nops/s node, e.g. 1000000:3600).")],
    strategy: Annotated[str, typer.Option(help="WHEN-HOWMANY-HOW: WHEN 9C|9A|V, HOWMANY G|C, "
                                          "HOW F|R|D (e.g. 9A-G-D), or none; a strategy of "
                                          "one's own: FILE.py:CLASS or MODULE:CLASS (a "
                                          "skylease.control.qos.CloudStrategy); BOINC only: "
                                          "batch-accel (BOINC's own batch acceleration) or "
                                          "batch-accel+STRATEGY.")] = "9C-C-R",
    strategy_arg: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE: a parameter of a strategy of one's own (repeatable).")] = None,
    seed: Annotated[int, typer.Option(help="Seed: submission time, BoT draw, node powers, boots.")] = 0,
    credits: Annotated[float | None, typer.Option(help="Credits ordered for the BoT (default: 10 % "
                                                  "of its workload, 15 credits per CPU hour).")] = None,
    alpha: Annotated[float, typer.Option(help="Correction factor of the completion-time "
                                         "prediction (fitted from past runs).")] = 1.0,
    random_arrivals: Annotated[str | None, typer.Option(help="RANDOM only: quantile (default: task i of n "
                                                        "at the (i - 1/2)/n quantile of the Weibull), "
                                                        "iid (i.i.d. Weibull offsets) or epsilon "
                                                        "(iid with every gap capped, 60 s unless "
                                                        "--random-epsilon says).")] = None,
    random_epsilon: Annotated[float | None, typer.Option(help="RANDOM only: the epsilon reading's cap on "
                                                         "the gap between two arrivals, in seconds "
                                                         "(the paper's epsilon, typically 60); alone, "
                                                         "it implies --random-arrivals epsilon.")]
    = None,
    cloud_buffer: Annotated[int, typer.Option(min=1, help="BOINC: replicas a cloud worker asks for per "
                                              "request (its work buffer; 3 as a BOINC client).")] = 3,
    accel_min_frac_done: Annotated[float | None, typer.Option(
        help="batch-accel: accelerate once more than this fraction of the jobs is done "
             "(BOINC's BATCH_ACCEL_MIN_FRAC_DONE, default 0.85).")] = None,
    accel_max_not_done: Annotated[int | None, typer.Option(
        help="batch-accel: ... or once fewer than this many jobs are not done "
             "(BATCH_ACCEL_MAX_NOT_DONE, default 20).")] = None,
    accel_period: Annotated[float | None, typer.Option(
        metavar="DURATION", parser=duration_option(positive=True),
        help="batch-accel: time between two runs of BOINC's batch_accel.php (default 300, 5m).")] = None,
    nodes: Annotated[int | None, typer.Option(min=1, help="seti, nd: the generated grid's nodes (default: "
                                              "the paper's, 30,300 and 183).")] = None,
    days: Annotated[float | None, typer.Option(help="seti, nd: the generated trace's length in days "
                                               "(default: the paper's, 60 and 90).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """SpeQuloS: a bag of tasks on a volatile desktop grid, its tail cut with cloud workers."""
    from skylease.control.plugins import parse_args
    from skylease.experiments.spequlos import batch_accel, result_json, simulate

    given = (accel_min_frac_done, accel_max_not_done, accel_period)
    accel = None if given == (None, None, None) else batch_accel(*given)
    args = parse_args(strategy_arg or [], "--strategy-arg")
    kwargs = dict(credits=credits, alpha=alpha, arrivals=random_arrivals, epsilon=random_epsilon,
                  cloud_buffer=cloud_buffer, accel=accel, strategy_args=args, nodes=nodes, days=days)
    if as_json or not err.is_terminal:
        res = simulate(middleware, trace, bot, strategy, seed, **kwargs)
    else:
        from rich.progress import Progress

        with Progress(console=err.made(), transient=True) as bar:
            bars: dict[str, TaskID] = {}

            def told(run: str, done: int, n: int) -> None:
                if run not in bars:
                    bars[run] = bar.add_task(f"{run}: tasks done", total=n)
                bar.update(bars[run], completed=done, total=n)

            res = simulate(middleware, trace, bot, strategy, seed, progress=told, **kwargs)
    if as_json:
        print(result_json(res))
        return
    base = res["baseline"]

    def t(x: float) -> str:
        return fmt.duration(x) if math.isfinite(x) else "not finished"

    def ratio(x: float) -> str:
        return f"{x:.2f}" if math.isfinite(x) else "-"

    rd = res["readings"]
    arrivals = "" if res["bot"] != "RANDOM" else f"; arrivals: {rd['random_arrivals']}" + (
        f" (gaps capped at {rd['random_epsilon_s']:g} s)" if rd["random_epsilon_s"] is not None else "")
    kind = res["bot"].split(":")
    bag = (f"{res['n_tasks']:,} tasks of {fmt.duration(float(kind[1]))}" if len(kind) == 2
           else f"{res['n_tasks']:,} tasks ({res['bot']})" if len(kind) > 2
           else f"{res['n_tasks']} {res['bot']} tasks")
    out.print(f"{res['middleware']} on {res['trace']} ({res['nodes']:,} nodes): {bag} submitted at "
              f"{res['submit_s'] / 86400:.2f} days into the trace{arrivals}; strategy {res['strategy']}, "
              f"{res['credits_ordered']:.0f} credits ordered", soft_wrap=True)
    table = fmt.table("", "without QoS", res["strategy"])
    table.add_row("completion", t(base["completion_s"]), t(res["completion_s"]))
    table.add_row("ideal time", t(base["ideal_s"]), t(res["ideal_s"]))
    table.add_row("tail slowdown", ratio(base["tail_slowdown"]), ratio(res["tail_slowdown"]))
    table.add_row("tasks in tail", f"{base['tail_task_share']:.1%}", f"{res['tail_task_share']:.1%}")
    table.add_row("credits used", "0", f"{res['credits_used']:.0f} ({res['credits_share']:.0%})")
    table.add_row("cloud workers", "0", str(res["cws"]))
    table.add_row("tasks done in the cloud", "0", f"{res['cloud_work_share']:.1%}")
    if res["strategy"].startswith("batch-accel"):
        table.add_row("batch accelerated at", "-", t(res["accel_at_s"]) if res["accel_at_s"] is not None
                      else "never")
        table.add_row("extra results created", "0", f"{res['extra_results']:,}")
    table.add_row("predicted at 50 %", t(base["predicted_s"]) if base["predicted_s"] else "-",
                  t(res["predicted_s"]) if res["predicted_s"] else "-")
    out.print(table)
    if res["tre_note"] is not None:
        out.line(res["tre_note"])
    else:
        out.print(f"Tail removal efficiency {res['tre']:.0%}; completion {res['speedup']:.2f}x as fast "
                  "as without QoS.")


def _mean_sd(key: str, v: dict) -> str:
    """``mean ± sd`` of a metric over runs: times as durations, money with its currency."""
    if key.endswith("_s"):
        return f"{fmt.duration(v['mean'])} ± {fmt.duration(v['std'])}"
    if key == "cost":
        return f"{fmt.money(v['mean'])} ± {fmt.money(v['std'])}"
    return f"{v['mean']:.1f} ± {v['std']:.1f}"


@simulate_app.command("replay")
def simulate_replay_cmd(
    out_dir: Annotated[Path, typer.Argument(help="The output folder of a finished real run.")],
    seeds: Annotated[int, typer.Option(min=1, help="Task orderings to simulate (A2HA).")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Simulate a finished real run again: its measured task times, its policy and pools."""
    from skylease.experiments.run_replay import replay

    res = replay(out_dir, seeds=range(seeds))
    if as_json:
        print(json.dumps(res))
        return
    t = fmt.table("", "real", *(f"sim seed {s['seed']}" for s in res["simulated"]),
              title=f"{res['policy']}: {res['tasks']} tasks, boot {fmt.duration(res['boot_s'])}")
    real = res["real"]

    def num(v: float | None, spec: str) -> str:  # "-" where summary.json is gone
        return "-" if v is None else format(v, spec)

    t.add_row("workers rented", num(real["hosts"], "d"), *(str(s["hosts"]) for s in res["simulated"]))
    t.add_row("cost", fmt.money(real["cost"]), *(fmt.money(s["cost"]) for s in res["simulated"]))
    t.add_row("makespan", fmt.duration(real["elapsed_s"]),
              *(fmt.duration(s["makespan_s"]) for s in res["simulated"]))
    out.print(t)
