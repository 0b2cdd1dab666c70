"""The live display of a real run on a terminal (`skylease run`, part 8 of `skylease demo`)."""

from __future__ import annotations

from skylease.cli import format as fmt
from skylease.cli.common import err


def _with_live_display(run, budget: float | None) -> dict:
    """``run(on_progress)`` with the live display of a real run on a terminal (none otherwise)."""
    if not err.is_terminal:
        return run(None)
    from rich.live import Live

    with Live(console=err.made(), refresh_per_second=4, transient=True) as live:
        return run(lambda env: live.update(_run_progress(env, budget)))


def _run_progress(env, budget: float | None):
    """The live display of a real run."""
    from skylease.experiments.run_progress import run_progress

    pr = run_progress(env)
    t = fmt.table("", "now", title=f"skylease run, {fmt.duration(pr.now_s)}")
    t.add_row("tasks done / running / left", f"{pr.done} / {pr.running} / {pr.left}")
    for w in pr.pools:
        t.add_row(f"workers {w.pool} (up / rented)", f"{w.up} / {w.rented}")
    t.add_row("spent" + (" / budget" if budget is not None else ""),
              fmt.money(pr.spent) + (f" / {fmt.money(budget)}" if budget is not None else ""))
    from skylease.experiments.run_eta import run_eta

    t.add_row("time left (ETA)", fmt.duration(run_eta(env)))
    if pr.predicted_s is not None:
        t.add_row("predicted completion (QoS oracle)", fmt.duration(pr.predicted_s))
    for q in pr.qos:
        t.add_row("QoS credits spent / ordered" + ("" if q.attached else " (service unreachable)"),
                  f"{q.spent:,.2f} / {q.ordered:,.2f}")
    return t
