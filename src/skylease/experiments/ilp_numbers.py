"""The ILP reproduction's numbers: the paper's published values, read from ``data/papers/ilp.toml``.

Each point carries its claim label (R1-R18 of ``docs/decisions/ilp.md``) and the paper's section;
kept out of the code that computes ours, so the report always shows theirs as printed.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any


def _load() -> dict[str, Any]:
    text = resources.files("skylease").joinpath("data/papers/ilp.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


PAPER = _load()
#: Watershed points (Fig. 2): claim, plan kind and its parameters, the paper's minutes and cost.
WATERSHED: list[dict[str, Any]] = PAPER["watershed"]
#: The paper's comparisons (percent or factors).
RATIOS: dict[str, float] = PAPER["ratios"]
#: MapReduce points (Fig. 1): claim, the paper's minutes and cost.
MAPREDUCE: list[dict[str, Any]] = PAPER["mapreduce"]
#: Fig. 3: co-location's extra cost over the ILP at its elbow, percent, per scenario.
MULTIMODEL: dict[str, float] = {k: v for k, v in PAPER["multimodel"].items() if k != "source"}
#: Not the paper's: our literal-ILP MapReduce costs by deadline (decision CHECKS).
LITERAL_MAPREDUCE: list[tuple[float, float]] = [(d, c) for d, c in PAPER["checks"]["literal_mapreduce"]]
