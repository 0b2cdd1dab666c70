"""The live display of a real run on a terminal (`skylease run`, part 8 of `skylease demo`)."""

from __future__ import annotations

from rich.table import Table

from skylease.cli.common import _duration, err


def _with_live_display(run, budget: float | None) -> dict:
    """``run(on_progress)`` with the live display of a real run on a terminal (none otherwise)."""
    if not err.is_terminal:
        return run(None)
    from rich.live import Live

    with Live(console=err, refresh_per_second=4, transient=True) as live:
        return run(lambda env: live.update(_run_progress(env, budget)))


def _run_progress(env, budget: float | None) -> Table:
    """The live display of a real run."""
    pr = env.progress()
    running = sum(1 for h in env.hosts() if h.task is not None)
    t = Table("", "now", title=f"skylease run, {env.now:,.0f} s")
    t.add_row("tasks done / running / left", f"{pr.completed} / {running} / {env.pending() - running}")
    for p in env.pools():
        hs = env.hosts(p)
        up = sum(1 for h in hs if h.up_at is not None and h.state.value in ("idle", "busy"))
        t.add_row(f"workers {p} (up / rented)", f"{up} / {len(hs)}")
    spent = env.spent()
    t.add_row("spent" + (" / budget" if budget is not None else ""),
              f"{spent:,.2f}" + (f" / {budget:,.2f}" if budget is not None else ""))
    from skylease.experiments.run_eta import run_eta

    t.add_row("time left (ETA)", _duration(run_eta(env)))
    pred = _predicted(env.policy)
    if pred is not None:
        t.add_row("predicted completion (QoS oracle)", f"{pred:,.0f} s")
    for p in getattr(env.policy, "policies", (env.policy,)):
        last = getattr(p, "last", None)  # a run served by a QoS service: its last answer
        if last is not None:
            t.add_row("QoS credits spent / ordered" + ("" if p.attached else " (service unreachable)"),
                      f"{last.credits_spent:,.2f} / {last.credits_ordered:,.2f}")
    return t


def _predicted(policy) -> float | None:
    for p in getattr(policy, "policies", (policy,)):
        pr = getattr(p, "prediction", None)
        if pr is not None:
            return float(pr.t_pred)
    return None
