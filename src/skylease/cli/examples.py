"""One example per command, shown at the end of its ``--help`` (docs/cli.md). Each is a command
that works as written from the repository's folder (the files it names are in examples/, or
made by the example before it); tests/test_cli_fuzz.py checks that every --help has one and that
each parses."""

from __future__ import annotations

from typing import Any

EXAMPLES: dict[str, tuple[str, ...]] = {
    "": ("skylease demo", "skylease run examples/sleep-jobs.txt --out runs/sleep"),
    "demo": ("skylease demo --seeds 2 --out runs/demo",),
    "map": ("skylease etc generate small.etc --tasks 64 --machines 8",
            "skylease map small.etc --heuristic min-min"),
    "place": ("skylease place --desktops thesis-lab --vms synthetic:130 --users 0.5",),
    "login": ("skylease login --server http://127.0.0.1:8642",),
    "logout": ("skylease logout",),
    "run": ("skylease run examples/sleep-jobs.txt --out runs/sleep",
            "skylease run examples/sweep.toml --out runs/a2ha --policy a2ha --price 0.01 --billing-unit 1m "
            "--budget 1",
            "seq 3 | sed 's/^/echo /' | skylease run - --out runs/echo --dry-run"),
    "status": ("skylease status runs/sleep",),
    "export": ("skylease export runs/sleep --output tasks.csv", "skylease export runs/sleep --format json "
               "--output tasks.json"),
    "show": ("skylease show runs/sleep 0", "skylease show runs/sleep line:3"),
    "failed": ("skylease failed runs/sleep > fixed.txt", "skylease run fixed.txt --out runs/fixed"),
    "data": ("skylease data",),
    "data fetch": ("skylease data fetch braun",),
    "data import": ("skylease data import power ~/Downloads/power",),
    "data path": ("skylease data path power",),
    "etc": ("skylease etc generate small.etc --tasks 64 --machines 8",),
    "etc generate": ("skylease etc generate small.etc --tasks 64 --machines 8 --consistency pc-half",),
    "etc stats": ("skylease etc stats small.etc",),
    "traces": ("skylease traces stats nd --nodes 50 --days 2",),
    "traces stats": ("skylease traces stats nd --nodes 50 --days 2",),
    "plan": ("skylease plan hybrid --deadline 70m",),
    "plan mapreduce": ("skylease plan mapreduce --deadline 3h",),
    "plan hybrid": ("skylease plan hybrid --deadline 70m",),
    "plan multi": ("skylease plan multi --deadline 105m",),
    "plan pareto": ("skylease plan pareto hybrid --plot front.png",),
    "simulate": ("skylease simulate a2ha --workload synthetic --orderings 20",),
    "simulate a2ha": ("skylease simulate a2ha --workload synthetic --orderings 20 --boot-time 5m "
                      "--billing-unit 1h --compare",),
    "simulate bag": ("skylease simulate bag --workload constant:100:300 --policy fixed:8 --price 0.10",),
    "simulate spequlos": ("skylease simulate spequlos --middleware xwhep --trace nd --bot small",),
    "simulate replay": ("skylease simulate replay runs/sleep --seeds 3",),
    "reproduce": ("skylease reproduce ilp --out reports/ilp",),
    "reproduce ilp": ("skylease reproduce ilp --out reports/ilp",),
    "reproduce a2ha": ("skylease reproduce a2ha --quick --out reports/a2ha",),
    "reproduce spequlos": ("skylease reproduce spequlos --quick --out reports/spequlos",),
    "reproduce haizea": ("skylease reproduce haizea --quick --out reports/haizea",),
    "reproduce thesis-mapping": ("skylease reproduce thesis-mapping --quick --out reports/mapping",),
    "reproduce thesis-placement": ("skylease reproduce thesis-placement --quick --out reports/placement",),
    "leases": ("skylease leases list",),
    "leases simulate": ("skylease leases simulate --workload "
                        "\"$(skylease data path haizea)/preemption.lwf\"",
                        "skylease leases simulate --workload examples/fair-week.xml "
                        "--rules examples/fairness-rules.toml"),
    "leases request": ("skylease leases request --nodes 2 --duration 1h",
                       "skylease leases request --nodes 4 --duration 30m --start-in 15m",
                       "skylease leases request --nodes 1 --duration 2h --before-end 600"),
    "leases when": ("skylease leases when --nodes 4 --duration 2h",
                    "skylease leases when --nodes 4 --duration 2h --not-before 1:00:00 --json"),
    "leases cancel": ("skylease leases cancel 3",),
    "leases list": ("skylease leases list --all",),
    "leases show": ("skylease leases show 3",),
    "leases extend": ("skylease leases extend 3 --by 30m", "skylease leases extend 3 --end 2:00:00 --json"),
    "leases logs": ("skylease leases logs 3", "skylease leases logs 3 --vnode 1 --bytes 65536"),
    "leases queue": ("skylease leases queue",),
    "leases hosts": ("skylease leases hosts",),
    "serve": ("skylease serve --port 0 --time-scale 60",),
    "serve user": ("skylease serve user add alice",),
    "serve user add": ("skylease serve user add alice",),
    "serve user list": ("skylease serve user list",),
    "serve user remove": ("skylease serve user remove alice",),
    "serve calibrate": ("skylease serve calibrate --site site.toml --image guest --time-scale 30 "
                        "--out calibrated.toml",),
    "qos": ("skylease qos account",),
    "qos account": ("skylease qos account",),
    "qos deposit": ("skylease qos deposit alice 100 --note \"first month\"",),
    "qos order": ("skylease qos order 3 500",),
    "qos predict": ("skylease qos predict 3",),
    "qos bots": ("skylease qos bots --all",),
    "qos history": ("skylease qos history local-grid",),
}


def epilog(path: str) -> str | None:
    """The ``--help`` epilog of the command at ``path`` ("" for ``skylease`` itself): its examples,
    kept as written (click's ``\\b`` keeps a paragraph from being rewrapped)."""
    lines = EXAMPLES.get(path)
    if not lines:
        return None
    return "\b\n" + ("Example:" if len(lines) == 1 else "Examples:") + "".join(f"\n  {x}" for x in lines)


def add_examples(command: Any, path: tuple[str, ...] = ()) -> None:
    """Give every command of the click tree ``command`` its example (where it has none)."""
    if getattr(command, "epilog", None) is None:
        command.epilog = epilog(" ".join(path))
    for name, sub in (getattr(command, "commands", None) or {}).items():
        add_examples(sub, (*path, name))
