"""`skylease leases simulate --rules FILE`: the fairness report printed (the figures are
:mod:`skylease.experiments.fairness_report`'s)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from skylease.cli import format as fmt
from skylease.cli.common import out

#: Refusals listed one per line; the rest are counted (all are in --json).
SHOWN_REFUSALS = 10
#: Users in the table (past that, those the rules refused most, then those that ran most).
SHOWN_USERS = 20


def print_fairness(workload: Path, rules: Path, *, inject: Path | None, config: str | None, users: str | None,
                   image_seed: int | None, as_json: bool, gantt: Path | None) -> None:
    """Run the report and print it (a table of both runs, one per user, the rules' refusals)."""
    from skylease.experiments.fairness_report import fairness_report

    if gantt is not None:
        from skylease.experiments.report import check_output

        check_output(gantt, "--gantt")
    report = fairness_report(workload, rules, inject=inject, config=config, users=users,
                             image_seed=image_seed)
    if gantt is not None:  # (the run under the rules)
        report.with_rules.gantt(gantt)
    if as_json:
        print(json.dumps(report.to_json(), allow_nan=False))
        return
    s = report.summary()
    out.print(f"{s['workload']} ({s['format']}, {s['nodes']} nodes) under {s['configuration']}, without and "
              f"with the rules of {s['rules']}", markup=False, highlight=False, soft_wrap=True)
    table = fmt.table("", "without", "with")
    rules = sorted(set(s["without"]["refused_by"]) | set(s["with"]["refused_by"]))
    for label, key in (("leases", "leases"), ("refused", "refused")):
        table.add_row(label, f"{s['without'][key]:,}", f"{s['with'][key]:,}")
    for rule in rules:
        table.add_row(f"  by {rule}", *(f"{s[r]['refused_by'].get(rule, 0):,}" for r in ("without", "with")))
    table.add_row("reclaimed (idle)", f"{s['without']['reclaimed']:,}", f"{s['with']['reclaimed']:,}")
    table.add_row("mean wait", *(_dur(s[r]["mean_wait_s"]) for r in ("without", "with")))
    table.add_row("p95 wait", *(_dur(s[r]["p95_wait_s"]) for r in ("without", "with")))
    table.add_row("utilisation", *(_pct(s[r]["utilisation"]) for r in ("without", "with")))
    out.print(table)
    users_table = fmt.table("user", "leases", "refused", "mean wait", "node-hours")
    users = report.users()
    if len(users) > SHOWN_USERS:  # (the most refused first, then the most node-hours)
        users = sorted(users, key=lambda u: (-u["with"]["refused"], -u["without"]["node_hours"]))
    for row in users[:SHOWN_USERS]:
        a, b = row["without"], row["with"]
        users_table.add_row(row["user"], f"{b['leases']:,}", _pair(a["refused"], b["refused"]),
                            f"{_dur(a['mean_wait_s'])} -> {_dur(b['mean_wait_s'])}",
                            f"{a['node_hours']:,.1f} -> {b['node_hours']:,.1f}")
    out.print(users_table)
    if len(users) > SHOWN_USERS:
        out.print(f"  and {len(users) - SHOWN_USERS:,} more users (--json lists all)")
    refused = report.refused()
    for r in refused[:SHOWN_REFUSALS]:
        out.line(f"  lease {r['id']} ({r['user']}): {r['reason']}")
    if len(refused) > SHOWN_REFUSALS:
        out.print(f"  and {len(refused) - SHOWN_REFUSALS:,} more refused by the rules (--json lists all)")


def _pair(a: Any, b: Any) -> str:
    return f"{a:,} -> {b:,}"


def _dur(seconds: float) -> str:
    from skylease.model.units import clock

    return "-" if math.isnan(seconds) else clock(round(seconds))


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f} %"
