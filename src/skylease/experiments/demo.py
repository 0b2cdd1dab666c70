"""``skylease demo``: a short tour of what has landed, on the simulator and the campaign runner.

The tour's parts run one after the other, and most of them keep one core busy. Two cannot be made
shorter: compiling the mapping heuristics (numba, the first time on a machine) and the real run of
``sleep`` commands, which keeps the cores idle. So, unless told to stay in this process, the tour
computes its later parts in one background process while this one does the earlier ones: parts 3,
4, 5 and 7 while part 2 compiles, part 10 while the real run sleeps. Each part prints what it
printed before, in the same order; a part whose background result is not there (or was asked for
with other arguments) is computed here, as before.
"""

from __future__ import annotations

from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skylease.control.fixed import FixedPool
from skylease.experiments.store import out_folder
from skylease.experiments.sweep import CampaignResult, run_campaign, summarize
from skylease.model.instance import InstanceType
from skylease.sim.env import simulate
from skylease.traces.synthetic import gamma_bag

if TYPE_CHECKING:  # imported where a table is made: a worker running cells need not pay 0.25 s
    import pandas as pd

# The render-like workload of the A2HA study: 256 tasks, 220 +- 125 s; hosts boot in 5 min and
# are billed per started hour at $0.10.
DEMO_TASKS = 256
DEMO_MEAN_S = 220.0
DEMO_SD_S = 125.0
DEMO_VM = InstanceType("vm", boot_time=300.0, billing_unit=3600.0, price=0.10)
DEMO_GRID = {"pool_size": [4, 8, 16, 32, 64]}


def fixed_pool_cell(pool_size: int, seed: int) -> dict[str, Any]:
    """One run: a fixed pool of ``pool_size`` hosts on a fresh draw of the render-like bag."""
    bag = gamma_bag(DEMO_TASKS, DEMO_MEAN_S, DEMO_SD_S, seed)
    r = simulate(FixedPool(pool_size), bag, [DEMO_VM])
    busy = sum(rec.end - rec.start for rec in r.records)
    paid = r.charged_units * DEMO_VM.billing_unit
    return {**r.summary(), "utilisation": busy / paid}


def run_fixed_pool_demo(out: str | Path | None, *, seeds: int = 5, mode: str = "processes",
                        workers: int | None = 2, scheduler: str | None = None,
                        progress: bool = True, prefetch: bool | None = None) -> CampaignResult:
    """Part 1, the tour's first. ``prefetch`` (default: unless ``mode`` is ``"inline"``, which asks
    for no other process) starts parts 3, 4, 5 and 7 in the background process first."""
    if prefetch if prefetch is not None else mode != "inline":
        _prefetch(("provisioning", ()), ("a2ha", (20, 0)), ("spequlos", (5, "nd", "small")),
                  ("placement", (130, 0.5, 0)))
    return run_campaign(fixed_pool_cell, DEMO_GRID, seeds=seeds, out=out, mode=mode,
                        workers=workers, scheduler=scheduler, progress=progress,
                        description="fixed pools on the simulator")


# -- the background process ---------------------------------------------------------------------
#: One process (spawned: the tour has threads by then), started by the first prefetch, ended when
#: the tour takes its last result (part 10's) or when this process exits.
_BACKGROUND: ProcessPoolExecutor | None = None
#: (part, its arguments) -> the background's future of what that part computes.
_PREFETCHED: dict[tuple[str, tuple[Any, ...]], Future[Any]] = {}


def _compute(part: str, args: tuple[Any, ...]) -> Any:
    """What part ``part`` computes, with ``args`` (in the background process, or here)."""
    if part == "qos":
        import tempfile

        with tempfile.TemporaryDirectory(prefix="skylease-demo-qos-") as tmp:
            return _qos_service_rows(tmp, *args)
    return {"provisioning": _provisioning_table, "a2ha": _a2ha_study, "spequlos": _spequlos_table,
            "placement": _placement_table}[part](*args)


def _prefetch(*parts: tuple[str, tuple[Any, ...]]) -> None:
    global _BACKGROUND
    import multiprocessing

    if _BACKGROUND is None:
        _BACKGROUND = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    for key in parts:
        _PREFETCHED[key] = _BACKGROUND.submit(_compute, *key)


def _take(part: str, args: tuple[Any, ...]) -> Any:
    """The background's result of ``part`` with ``args``, else that part computed here. An error in
    the background is raised here, as it would have been had the part run here."""
    global _BACKGROUND
    from concurrent.futures.process import BrokenProcessPool

    future = _PREFETCHED.pop((part, args), None)
    try:
        result = future.result() if future is not None else _compute(part, args)
    except BrokenProcessPool:  # the process could not start or died (not the part's error): do it here
        result = _compute(part, args)
    if part == "qos" and not _PREFETCHED and _BACKGROUND is not None:  # the tour's last: end it now
        _BACKGROUND.shutdown(wait=False, cancel_futures=True)
        _BACKGROUND = None
    return result


def fixed_pool_table(result: CampaignResult) -> pd.DataFrame:
    """Mean over seeds per pool size: the trade-off a user faces when guessing a pool size."""
    s = summarize(result.table, ["pool_size"], ["makespan_s", "cost", "charged_units", "utilisation"])
    return s[["pool_size", "makespan_s_mean", "makespan_s_std", "cost_mean", "charged_units_mean",
              "utilisation_mean"]]


MAPPING_DEMO_HEURISTICS = ("min-min", "sufferage", "luo1", "low3", "best")


def mapping_demo(n: int = 1024, m: int = 32, seed: int = 1) -> pd.DataFrame:
    """Batch-mode mapping heuristics on one CVB instance: makespan, flowtime, energy, time."""
    import time as _time

    import pandas as pd

    from skylease.planning.mapping import HEURISTICS, lower_bound, random_voltages
    from skylease.traces.etc import cvb

    etc = cvb(n, m, 0.6, 0.3, 1000.0, seed)
    volts = random_voltages(m, seed)
    lb = lower_bound(etc)
    rows = []
    for h in MAPPING_DEMO_HEURISTICS:
        HEURISTICS[h](etc[:8, :4], voltages=volts[:4])  # compile (numba) outside the timing
        t0 = _time.perf_counter()
        s = HEURISTICS[h](etc, voltages=volts)
        ms = (_time.perf_counter() - t0) * 1000
        rows.append({"heuristic": h, "makespan": s.makespan, "rho": s.makespan / lb,
                     "flowtime": s.flowtime, "energy": s.energy, "ms": ms})
    return pd.DataFrame(rows)


def provisioning_demo() -> pd.DataFrame:
    """The ILP paper's Watershed job: ILP plans against naive fleets, each replayed in the simulator."""
    return _take("provisioning", ())


def _provisioning_table() -> pd.DataFrame:
    import pandas as pd

    from skylease.experiments.provisioning import replay_watershed
    from skylease.planning.provisioning import WatershedJob, load_catalog, pick, solve_watershed
    from skylease.planning.provisioning.baselines import ws_naive

    job = WatershedJob()
    types = pick(load_catalog("hybrid"), "local", "azure-small")
    rows = []
    for label, plan in (
        ("ILP, deadline 61 min (1-min intervals)", solve_watershed(job, types, 61, interval_min=1)),
        ("naive: 16 local + 22 small", ws_naive(job, 22)),
        ("ILP, deadline 70 min", solve_watershed(job, types, 70)),
        ("naive: 16 local + 20 small", ws_naive(job, 20)),
    ):
        sim = replay_watershed(plan, job, types)
        rows.append({"plan": label, "minutes": plan.makespan_s / 60, "cost": plan.cost,
                     "sim_minutes": sim.makespan / 60, "sim_cost": sim.cost, "solve_ms": plan.solve_ms})
    return pd.DataFrame(rows)


def a2ha_demo(orderings: int = 20, seed: int = 0) -> dict[str, Any]:
    """A2HA vs a fixed pool of the optimal size vs Dask's adaptive rule on the paper's synthetic job."""
    return _take("a2ha", (orderings, seed))  # type: ignore[no-any-return]


def _a2ha_study(orderings: int, seed: int) -> dict[str, Any]:
    from skylease.experiments.a2ha import study

    return study("synthetic", orderings=orderings, seed=seed, compare=True)


#: The demo's SpeQuloS strategies: the paper's default, its best, and Flat (CWs as plain workers).
SPEQULOS_DEMO_STRATEGIES = ("none", "9C-C-R", "9A-G-D", "9C-C-F")


def spequlos_demo(seeds: int = 5, trace: str = "nd", bot: str = "small") -> pd.DataFrame:
    """SpeQuloS strategies vs no QoS on a Notre Dame-like desktop grid, both middlewares, paired seeds;
    on BOINC also its own batch acceleration (``batch-accel``: no cloud, no credits)."""
    return _take("spequlos", (seeds, trace, bot))


def _spequlos_table(seeds: int, trace: str, bot: str) -> pd.DataFrame:
    import numpy as np
    import pandas as pd

    from skylease.experiments.spequlos import MIDDLEWARES, run_once, tail_removal

    rows = []
    for mw in MIDDLEWARES:
        base = [run_once(mw, trace, bot, "none", k) for k in range(seeds)]
        for strategy in (*SPEQULOS_DEMO_STRATEGIES, *(("batch-accel",) if mw == "boinc" else ())):
            runs = (base if strategy == "none"
                    else [run_once(mw, trace, bot, strategy, k) for k in range(seeds)])
            tre = [tail_removal(r["completion_s"], b["completion_s"], b["ideal_s"])
                   for r, b in zip(runs, base, strict=True)]
            tre = [x for x in tre if x is not None]
            rows.append({"middleware": mw, "strategy": strategy,
                         "completion_h": float(np.mean([r["completion_s"] for r in runs])) / 3600,
                         "slowdown": float(np.mean([r["tail_slowdown"] for r in runs])),
                         "tre": float(np.mean(tre)) if tre and strategy != "none" else None,
                         "credits_share": float(np.mean([r["credits_share"] for r in runs])),
                         "cloud_tasks": float(np.mean([r["cloud_work_share"] for r in runs]))})
    return pd.DataFrame(rows)


def leases_demo(config: str = "NOVM-SR") -> Any:
    """The lease scheduler on a tiny workload built here (no data needed): 4 nodes; a 1-node
    best-effort lease of 1 h at 00:00, a 2-node one of 40 min at 00:05, and at 00:15 an advance
    reservation of all 4 nodes for 00:30-01:00, which preempts both."""
    from skylease.control.leases import BLUE_HORIZON_NODE, Lease, LeaseKind
    from skylease.experiments.leases import Workload, simulate_workload

    def be(i: int, submit: int, nodes: int, dur: int) -> Lease:
        return Lease(i, LeaseKind.BEST_EFFORT, submit, nodes, dur, dur, dur)

    ar = Lease(3, LeaseKind.ADVANCE_RESERVATION, 900, 4, 1800, 1800, 1800, start=1800, preemptible=False)
    leases = [be(1, 0, 1, 3600), be(2, 300, 2, 2400), ar]
    return simulate_workload(Workload("demo", "code", leases, 4, BLUE_HORIZON_NODE), config=config)


def real_run_demo(folder: str | Path, tasks: int = 40, seed: int = 0,
                  on_progress: Any = None) -> dict[str, Any]:
    """A real bag of ``sleep`` commands (about 50 s of sleeping) run by A2HA on local workers, at most
    8 at once: a sleeping worker takes no CPU, so more workers than cores finish sooner. While it
    sleeps, the background process (if the tour started one) computes part 10."""
    import numpy as np

    from skylease.experiments.run import run_job
    from skylease.experiments.run_options import RunOptions

    folder = out_folder(folder)
    if _BACKGROUND is not None:
        _prefetch(("qos", ("nd", "small")))
    rng = np.random.default_rng(seed)
    job = folder / "sleep-jobs.txt"
    job.write_text("".join(f"sleep {s:.2f}\n" for s in rng.uniform(0.5, 2.0, tasks)))
    # a folder kept from an earlier demo holds this run already: resuming it runs nothing again
    opts = RunOptions(out=folder / "run", policy="a2ha:aggressive", price=0.01, billing_unit=10.0,
                      budget=0.5, max_workers=REAL_RUN_WORKERS,
                      resume=(folder / "run" / "results.sqlite").exists())
    return run_job(str(job), opts, on_progress=on_progress)

#: Workers the real run may rent at once (its tasks sleep: more workers than cores is no overload).
REAL_RUN_WORKERS = 8

PLACEMENT_DEMO_ALGORITHMS = ("ff", "ffd", "bf", "sorting", "similar")


def placement_demo(n_vms: int = 130, users: float = 0.5, seed: int = 0) -> pd.DataFrame:
    """VM placement on the thesis's lab with a user at half the desktops: each heuristic's energy."""
    return _take("placement", (n_vms, users, seed))


def _placement_table(n_vms: int, users: float, seed: int) -> pd.DataFrame:
    import pandas as pd

    from skylease.experiments.placement import place_request

    rows = []
    for a in PLACEMENT_DEMO_ALGORITHMS:
        r = place_request("thesis-lab", f"synthetic:{n_vms}", algorithm=a, users=users, seed=seed)
        rows.append({"algorithm": a, "desktops_used": r["desktops_used"],
                     "with_user": r["desktops_used_with_user"], "kwh": r["energy_wh"] / 1000,
                     "unplaced": len(r["unplaced"])})
    t = pd.DataFrame(rows)
    t["saving_vs_ff"] = 1.0 - t["kwh"] / float(t.loc[t["algorithm"] == "ff", "kwh"].iloc[0])
    return t


def qos_service_demo(folder: str | Path, trace: str = "nd", bot: str = "small") -> list[dict[str, Any]]:
    """SpeQuloS as a service, in process on a database in ``folder``: an administrator deposits
    5,000 credits for alice and for bob; each one's simulated bag (xwhep on a Notre Dame-like grid)
    is served by the service's Scheduler with their own strategy, billed to their own account.
    Each row: the bag as the service holds it, its completion without QoS, the account after.
    (A result the background process computed, in a folder of its own, leaves ``folder`` empty.)"""
    if ("qos", (trace, bot)) in _PREFETCHED:
        return _take("qos", (trace, bot))  # type: ignore[no-any-return]
    return _qos_service_rows(folder, trace, bot)


def _qos_service_rows(folder: str | Path, trace: str, bot: str) -> list[dict[str, Any]]:
    import sqlalchemy as sa

    from skylease.experiments.qos_service import serve_simulated
    from skylease.experiments.spequlos import run_once
    from skylease.runtime.qos.service import QoSService

    engine = sa.create_engine(f"sqlite:///{Path(folder) / 'qos.sqlite'}")

    @sa.event.listens_for(engine, "connect")
    def _wal(dbapi_conn: Any, _record: Any) -> None:  # as the server's: no fsync per bill
        dbapi_conn.execute("PRAGMA journal_mode = WAL")
        dbapi_conn.execute("PRAGMA synchronous = NORMAL")

    try:
        service = QoSService(engine)
        rows = []
        for owner, strategy, seed in (("alice", "9C-C-R", 1), ("bob", "9A-C-D", 2)):
            service.deposit(owner, 5000.0, note="demo")
            view, row = serve_simulated(service, owner, "xwhep", trace, bot, strategy, seed)
            base = run_once("xwhep", trace, bot, "none", seed)
            rows.append({"owner": owner, "strategy": strategy, "bag": view,
                         "completion_s": row["completion_s"], "without_s": base["completion_s"],
                         "cloud_tasks": row["cloud_work_share"], "balance": service.ledger.balance(owner)})
        return rows
    finally:
        engine.dispose()
