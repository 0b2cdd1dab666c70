"""The SpeQuloS paper's trace tables (Tables 2 and 3), used by the trace generators and statistics.

The numbers live in the package's ``data/papers/spequlos.toml`` (section ``traces``, with the line of
the paper's text they come from), beside the paper's other published numbers.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

DAY = 86400.0


def spequlos_paper() -> dict[str, Any]:
    """Every published number of the SpeQuloS paper we compare with, as ``spequlos.toml`` holds them."""
    text = resources.files("skylease").joinpath("data/papers/spequlos.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


#: The SpeQuloS paper's Table 2 (node counts) and Table 3 (duration quartiles, seconds), verbatim.
PAPER_TABLES: dict[str, dict[str, float]] = {
    name: row for name, row in spequlos_paper()["traces"].items() if isinstance(row, dict)}
