"""The thesis's published chapter-6 numbers, read from ``data/papers/thesis_placement.toml``.

Sect. 6.1.2.4's worked example and Sect. 6.1.3.3's percentages (decisions B4, B6 in
``docs/decisions/thesis.md``). Figs. 6.2 and 6.3 carry no printed values: only the text's
percentages can be compared. Kept apart from the code that computes ours, so a report always
shows theirs verbatim.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any


def _load() -> dict[str, Any]:
    path = resources.files("skylease").joinpath("data/papers/thesis_placement.toml")
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text)


PAPER = _load()
_EX, _CL = PAPER["example"], PAPER["claims"]

# Sect. 6.1.2.4 worked example: 2 desktops x 8 cores; VMs of 10 h, 1 h and 10.5 h, 4 cores each.
EXAMPLE_DESKTOP_CORES: tuple[int, ...] = tuple(_EX["desktop_cores"])
EXAMPLE_VM_CORES: tuple[int, ...] = tuple(_EX["vm_cores"])
EXAMPLE_VM_MINUTES: tuple[float, ...] = tuple(_EX["vm_minutes"])
# The placements the text gives (desktop per VM), and their Model C energy with no users (decision
# B4: 1783.9 and 1099.8 Wh; the text gives no Wh), checked within 1 Wh.
EXAMPLE_ALG11: tuple[int, ...] = tuple(_EX["alg11"])  # {VM1, VM2 | VM3}
EXAMPLE_ALG12: tuple[int, ...] = tuple(_EX["alg12"])  # {VM1, VM3 | VM2}
EXAMPLE_WH: dict[str, float] = dict(_EX["wh"])

STUDY_ALGORITHMS = ("ff", "ffd", "bf", "sorting", "similar")  # the grid; the thesis ran the first four
RELATED = ("ff", "ffd", "bf")  # what Sorting is compared with in the text

# Sect. 6.1.3.3, Sorting against the related heuristics ("up to", "on average" as printed).
DESKTOPS_SAVED_0: dict[str, float] = dict(_CL["desktops_saved_no_users"])  # % fewer PMs, no users
DESKTOPS_SAVED_50: float = _CL["desktops_saved_half_busy"]  # % fewer PMs "on average", 50 % busy
ENERGY_SAVED_0: dict[str, float] = dict(_CL["energy_saved_no_users"])  # % less ECR, no users
ENERGY_SAVED_50: dict[str, float] = dict(_CL["energy_saved_half_busy"])  # % less ECR, 50 % busy
FF_MORE_DESKTOPS_THAN_BF: float = _CL["ff_more_desktops_than_bf"]  # "approx. 4 %" more PMs than BF
