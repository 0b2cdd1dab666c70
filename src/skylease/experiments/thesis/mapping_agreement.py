"""How close our Table 3.8 is to the thesis's on the inconsistent (OC) matrices: the figure
``skylease reproduce thesis-mapping`` prints under its table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: Gains (percentage points) this close to the thesis's count as agreeing.
TOLERANCE_PP = 2.0


@dataclass(frozen=True)
class Agreement:
    within: int  # OC cells whose gain is within TOLERANCE_PP of the thesis's
    cells: int  # OC cells the thesis gives a gain for
    max_diff_pp: float  # the largest |ours - thesis| (NaN without cells)


def oc_agreement(gains: pd.DataFrame) -> Agreement:
    """From :class:`~skylease.experiments.thesis.mapping_report.MappingReproduction`'s ``gains``."""
    oc = gains[gains["consistency"] == "oc"].dropna(subset=["thesis_gain"])
    diff = oc["diff_pp"].abs()
    return Agreement(within=int((diff <= TOLERANCE_PP).sum()), cells=len(oc), max_diff_pp=float(diff.max()))
