"""The thesis's published chapter-3 numbers, as printed, read from ``data/papers/thesis_mapping.toml``.

Sect. 3.4's example (Table 3.3 and the makespans and deviations of its text) and Tables 3.6-3.8,
each with its table in the data file; how the reproduction reads them is in
``docs/decisions/thesis.md`` (A7, A9). Kept apart from the code that computes ours, so a report
always shows theirs verbatim.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

import numpy as np


def _load() -> dict[str, Any]:
    path = resources.files("skylease").joinpath("data/papers/thesis_mapping.toml")
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text)


def _column(name: str) -> tuple[int, int, str]:
    size, consistency = name.split()
    n, m = size.split("x")
    return int(n), int(m), consistency


PAPER = _load()
_EX = PAPER["example"]

# Table 3.3: the running example, 8 tasks x 4 machines.
EXAMPLE_ETC = np.array(_EX["etc"], dtype=float)
EXAMPLE_OPTIMUM: float = _EX["optimum"]  # not printed in the thesis; exhaustive search (decision A7)
# Section 3.4, at λ = 0.8: makespan and "error deviation from the optimal" (%).
EXAMPLE_MAKESPANS: dict[str, float] = dict(_EX["makespan"])
EXAMPLE_DEVIATIONS: dict[str, float] = dict(_EX["deviation_pct"])

STUDY_HEURISTICS: tuple[str, ...] = tuple(PAPER["table_3_6"]["heuristics"])  # Tables 3.6/3.7 order

_T38_COLS = [_column(c) for c in PAPER["table_3_8"]["columns"]]
#: Table 3.8: %Gain of Low_3's mean flowtime over Luo_1's. Key: (v_task, v_mach); value:
#: {(n, m, consistency): gain}.
TABLE_3_8: dict[tuple[float, float], dict[tuple[int, int, str], float]] = {
    (row[0], row[1]): dict(zip(_T38_COLS, row[2:], strict=True)) for row in PAPER["table_3_8"]["rows"]
}
#: The second printed copy of a scenario, where it differs from the first.
TABLE_3_8_DUPLICATES: dict[tuple[tuple[float, float], tuple[int, int, str]], float] = {
    ((vt, vm), _column(col)): v for vt, vm, col, v in PAPER["table_3_8"]["duplicates"]
}

#: Tables 3.6 and 3.7 (512 x 16, OC, 1000 instances): (B, EB) per heuristic in STUDY_HEURISTICS order.
#: Table 3.6: V_mach = 0.6, by V_task; Table 3.7: V_task = 0.6, by V_mach.
TABLE_3_6: dict[float, tuple[list[int], list[int]]] = {k: (b, eb) for k, b, eb in PAPER["table_3_6"]["rows"]}
TABLE_3_7: dict[float, tuple[list[int], list[int]]] = {k: (b, eb) for k, b, eb in PAPER["table_3_7"]["rows"]}
