"""The SpeQuloS paper's published numbers that the report puts beside ours.

They are read from the package's ``data/papers/spequlos.toml``, where each carries the line of the
paper's text it comes from; the readings and gates applied to them are the decisions of
docs/decisions/spequlos.md. Tables 2 and 3 (the traces) are :data:`skylease.traces.tables.PAPER_TABLES`.
"""

from __future__ import annotations

from typing import Any

from skylease.traces.tables import spequlos_paper

__all__ = ["PAPER", "PAPER_CREDITS_ORDER", "PAPER_FIG2", "PAPER_FIG8", "PAPER_TABLE1", "PAPER_TABLE7"]

#: Every number of ``spequlos.toml``, as read.
PAPER: dict[str, Any] = spequlos_paper()


def _rows(section: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {k: tuple(v) for k, v in section.items() if isinstance(v, list)}


#: Table 1 of the paper: % of BoT in tail (BOINC, XWHEP), % of time in tail (BOINC, XWHEP).
PAPER_TABLE1 = _rows(PAPER["table1"])
#: Table 7 of the paper: success % per trace: SMALL B, SMALL X, BIG B, BIG X, RANDOM B, RANDOM X, Mixed.
PAPER_TABLE7 = _rows(PAPER["table7"])
#: Fig. 8 anchors (text): (middleware, trace, BoT) -> (without, with 9C-C-R) average completion (s).
PAPER_FIG8 = {tuple(a["environment"]): tuple(a["completion_s"]) for a in PAPER["fig8"]}
#: Fig. 2 (text): median <= 1.33; P(slowdown >= 2); 95th percentile.
PAPER_FIG2 = _rows(PAPER["fig2"])
#: The paper's order of the credits spent per deployment (Fig. 7).
PAPER_CREDITS_ORDER: str = PAPER["fig7"]["credits_order"]
