"""The thesis's published chapter-6 numbers, as printed (§6.1.2.4, §6.1.3.3; spec 004 B4, B6).

Figs. 6.2 and 6.3 carry no printed values: only the text's percentages can be compared. Kept apart
from the code that computes ours, so a report always shows theirs verbatim.
"""

from __future__ import annotations

# §6.1.2.4 worked example: 2 desktops x 8 cores; VMs of 10 h, 1 h and 10.5 h, 4 cores each.
EXAMPLE_DESKTOP_CORES = (8, 8)
EXAMPLE_VM_CORES = (4, 4, 4)
EXAMPLE_VM_MINUTES = (600.0, 60.0, 630.0)
# The placements the text gives (desktop per VM), and their Model C energy with no users. The text
# gives no Wh; 1783.9 and 1099.8 Wh are the spec's verified values (B4 item 6 [V]); the issue's
# golden test asks for 1784 and 1100 within 1 Wh.
EXAMPLE_ALG11 = (0, 0, 1)  # {VM1, VM2 | VM3}
EXAMPLE_ALG12 = (0, 1, 0)  # {VM1, VM3 | VM2}
EXAMPLE_WH = {"alg11": 1784.0, "alg12": 1100.0}

STUDY_ALGORITHMS = ("ff", "ffd", "bf", "sorting", "similar")  # the grid; the thesis ran the first four
RELATED = ("ff", "ffd", "bf")  # what Sorting is compared with in the text

# §6.1.3.3, Sorting against the related heuristics ("up to", "on average" as printed).
DESKTOPS_SAVED_0 = {"ff": 41.0, "ffd": 41.0, "bf": 36.0}  # % fewer PMs, no users ("up to")
DESKTOPS_SAVED_50 = 30.0  # % fewer PMs "on average", 50 % busy
ENERGY_SAVED_0 = {"ff": 38.0, "ffd": 34.0, "bf": 35.0}  # % less ECR, no users ("up to")
ENERGY_SAVED_50 = {"ff": 48.0, "ffd": 45.0, "bf": 46.0}  # % less ECR, 50 % busy
FF_MORE_DESKTOPS_THAN_BF = 4.0  # "First-Fit utilizes more PMs (approx. 4 %) ... than Best-Fit"
