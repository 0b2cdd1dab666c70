"""Lease-manager speed: the Haizea runs against the issue's targets, skylease's slot table beside a plain one.

Targets (issue 7): the no-AR baseline under 10 s and the heaviest Table 1 run under 60 s on one core;
the full Table 1 + Figure 2 campaign (72 workloads x 6 configurations, plus 4 more image draws of
the Table 1 workloads) under 45 minutes on this 2-core machine (``--campaign``).

The reference is the same scheduler on a plain slot table that answers every query by scanning
(``benchmarks/leases_ref.py``, a direct transcription of decisions H3-H4 in docs/decisions/haizea.md): both
give the same runs (checked here: the same all-best-effort time and event count). Each run happens in this
process, one after the other, so each is one core's time.

    python benchmarks/bench_leases.py [--quick] [--no-reference] [--slow-reference] [--campaign]

The plain table needs about 40 s for the baseline and 8 minutes for the 30 % NOVM-SR run, so it runs
on those rows only unless ``--slow-reference`` is given.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import skylease.control.leases.scheduler as scheduler_module  # noqa: E402
from leases_ref import PlainSlotTable  # noqa: E402
from skylease.control.leases import SchedulerConfig, paper_configuration  # noqa: E402
from skylease.control.leases.slottable import SlotTable  # noqa: E402
from skylease.sim.leases import ar_leases, assign_images, be_leases, simulate_leases  # noqa: E402
from skylease.traces.lwf import read_plain_lwf  # noqa: E402
from skylease.traces.swf import best_effort_requests, read_swf  # noqa: E402

DATA = Path(os.environ.get("SKYLEASE_DATA", ROOT.parent / "shared" / "data"))
TABLE1_CONFIGS = ("NOVM-NOSR", "NOVM-SR", "VM-PREDEPLOY", "VM-MULT", "VM-REUSE-UNIFORM", "VM-REUSE-SKEWED")


def leases_for(days: int, rho: int | None, images: str | None) -> list:
    req = best_effort_requests(read_swf(DATA / "swf" / f"blue_{days}days.swf"))
    be = be_leases(req)
    leases = list(be)
    if rho is not None:
        name = f"work_{rho:02d}-dur_3h-size_2medium.lwf"
        ars = read_plain_lwf(DATA / "lwf" / "injected" / f"{days}days" / name)
        leases += ar_leases(ars[ars["start"] >= 0], len(be))
    if images is not None:
        assign_images(leases, images, seed=0)
    return leases


def run(days: int, rho: int | None, config: str, table: type[SlotTable]) -> tuple[float, int, int]:
    cfg, images = paper_configuration(config)
    leases = leases_for(days, rho, images)
    scheduler_module.SlotTable = table  # the scheduler builds its table from this name
    try:
        t0 = time.perf_counter()
        r = simulate_leases(leases, config=cfg if rho is not None else SchedulerConfig.novm_nosr())
        return time.perf_counter() - t0, r.all_best_effort, r.events
    finally:
        scheduler_module.SlotTable = SlotTable


def campaign() -> float:
    """The full reproduction campaign on 2 Dask worker processes; its wall time in seconds."""
    from skylease.experiments.haizea_report import reproduce_haizea

    with tempfile.TemporaryDirectory(prefix="bench-leases-") as tmp:
        rep = reproduce_haizea(tmp, workers=2, data_dir=DATA, progress=sys.stderr.isatty())
    return float(rep["campaign_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the baseline and the 30 %% VM-MULT run only")
    ap.add_argument("--no-reference", action="store_true", help="skip the plain slot table")
    ap.add_argument("--campaign", action="store_true", help="also time the full reproduction campaign")
    ap.add_argument("--slow-reference", action="store_true",
                    help="also run the plain table on the 30 %% VM-MULT run (about half an hour)")
    args = ap.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    # (days, rho, config, with the reference)
    rows = [(30, None, "NOVM-NOSR", True), (30, 30, "VM-MULT", args.slow_reference)]
    if not args.quick:
        rows = [(30, None, "NOVM-NOSR", True), (60, None, "NOVM-NOSR", True)]
        slow = ("VM-MULT",) if args.slow_reference else ()
        rows += [(30, 30, c, c in ("NOVM-SR", *slow)) for c in TABLE1_CONFIGS]
    print(f"{'trace':>6} {'ARs':>12} {'config':>16} {'events':>7} {'skylease s':>10} {'plain s':>8} "
          f"{'ratio':>6}")
    heaviest = (0.0, "")
    baseline_s = None
    for days, rho, config, with_ref in rows:
        ours_s, ours_t, ours_e = run(days, rho, config, SlotTable)
        ars = "none" if rho is None else f"{rho}%/3H/med"
        ref = "" if (not with_ref or args.no_reference) else None
        if ref is None:
            ref_s, ref_t, ref_e = run(days, rho, config, PlainSlotTable)
            if (ours_t, ours_e) != (ref_t, ref_e):
                raise SystemExit(f"the two tables disagree: {ours_t} / {ours_e} vs {ref_t} / {ref_e}")
            ref = f"{ref_s:>8.2f} {ref_s / ours_s:>5.1f}x"
        print(f"{days:>4} d {ars:>12} {config:>16} {ours_e:>7} {ours_s:>10.2f} {ref}", flush=True)
        if days == 30 and rho is None:
            baseline_s = ours_s
        if days == 30 and rho == 30:
            heaviest = max(heaviest, (ours_s, config))
    assert baseline_s is not None
    print(f"target: the baseline under 10 s: {baseline_s:.2f} s, "
          f"{'met' if baseline_s < 10 else 'NOT met'}")
    print(f"target: the heaviest Table 1 run under 60 s: {heaviest[1]} [30 %/3H/medium] {heaviest[0]:.2f} s, "
          f"{'met' if heaviest[0] < 60 else 'NOT met'}")
    if args.campaign:
        s = campaign()
        print(f"target: the full campaign under 45 min on 2 cores: {s / 60:.1f} min, "
              f"{'met' if s < 45 * 60 else 'NOT met'}")


if __name__ == "__main__":
    main()
