"""The A2HA reproduction's numbers: the paper's published values and the fixed setup of our runs.

The paper's values are read from ``skylease/data/papers/a2ha.toml`` (each with its figure or table),
never written here, so a report always shows theirs as printed. The decisions that read them
(labels A1-A29, W1-W4, E1-E7, PROTO) are in ``docs/decisions/a2ha.md``.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any


def _load() -> dict[str, Any]:
    text = resources.files("skylease").joinpath("data/papers/a2ha.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


PAPER = _load()

SEED = 2011  # every experiment's orderings (and redrawn task times) come from this seed
FULL_ORDERINGS = 200  # the paper's 200 orderings per configuration (Sect. 4)
QUICK_ORDERINGS = 20
GRID_CR0 = (0.0, 0.25, 0.5, 0.75, 1.0)  # decision A16 (E4)
GRID_IR = (0.25, 0.5, 0.75)
QUICK_CR0 = (0.0, 0.5, 0.75, 1.0)
QUICK_IR = (0.5, 0.75)
PRESETS = {"conservative": (0.5, 0.5), "aggressive": (0.75, 0.75)}
GRID_WORKLOADS = {"image": "Fig. 9", "synthetic": "Fig. 10", "outsystems": "Fig. 11"}
REASONABLE_CR0 = (0.25, 0.5, 0.75)  # "suitable parameters": cr0 neither 0 nor 1
TRAJECTORY_H = 3600.0  # decision A14: Figs. 4b and 6b use a 60-min host processing time
NO_PERIODIC = 1e9  # Figs. 4b and 6b show Fig. 3 alone: no periodic (Fig. 7) adjustment

#: The optimum host counts of Figs. 9-11 (the dashed lines).
PAPER_OPTIMUM: dict[str, int] = {wl: PAPER["optimum"][wl] for wl in GRID_WORKLOADS}
#: Sect. 4.2: hosts above the optimum, percent, for suitable parameters.
PAPER_OVER_OPTIMUM: dict[str, int] = {k: v for k, v in PAPER["over_optimum"].items() if k != "source"}
#: Fig. 12: hosts, speedup range at that host count, and the efficiency floor (percent).
PAPER_FIG12: dict[str, Any] = PAPER["fig12"]
#: Figs. 4b and 6b: the prediction on one ordering of the image trace.
PAPER_FIG4B: dict[str, Any] = PAPER["fig4b"]
PAPER_FIG6B: dict[str, Any] = PAPER["fig6b"]
#: Table 1: charged hours, interrupted tasks, wasted minutes, continued hosts.
PAPER_TABLE1: dict[str, tuple[int, ...]] = {wl: tuple(PAPER["table1"][wl]) for wl in GRID_WORKLOADS}
_T2_COLUMNS = ("hosts", "wall_h", "speedup", "payment_h")
#: Table 2: (mean, sd) of hosts, wall h, speedup and payment h per row; None where not printed.
PAPER_TABLE2: dict[str, tuple[tuple[float, float] | None, ...]] = {
    row: tuple(tuple(cols[c]) if c in cols else None for c in _T2_COLUMNS)  # type: ignore[misc]
    for row, cols in PAPER["table2"].items() if row != "source"
}
#: Not the paper's: the reference prototype's Table 2 (decision PROTO), by initial hosts.
PROTOTYPE_TABLE2: dict[int, tuple[float, ...]] = {
    int(k): tuple(v) for k, v in PAPER["prototype_table2"].items() if k != "source"
}


def heuristic_row(initial_hosts: int) -> str:
    """Table 2's row label for the heuristic started with ``initial_hosts`` hosts."""
    return f"heuristic ({initial_hosts} initial host{'s' if initial_hosts > 1 else ''})"
