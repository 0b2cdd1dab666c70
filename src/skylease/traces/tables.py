"""The SpeQuloS paper's trace tables (Tables 2 and 3), used by the trace generators and statistics."""

from __future__ import annotations

DAY = 86400.0

#: The SpeQuloS paper's Table 2 (node counts) and Table 3 (duration quartiles, seconds), verbatim.
PAPER_TABLES: dict[str, dict[str, float]] = {
    "seti": dict(length_days=120, mean=24391, std=6793, min=15868, max=31092,
                 av_q25=61, av_q50=531, av_q75=5407, unav_q25=174, unav_q50=501, unav_q75=3078),
    "nd": dict(length_days=413.87, mean=180, std=4.129, min=77, max=501,
               av_q25=952, av_q50=3840, av_q75=26562, unav_q25=640, unav_q50=960, unav_q75=1920),
    "g5klyo": dict(length_days=31, mean=90.573, std=105.4, min=6, max=226,
                   av_q25=21, av_q50=51, av_q75=63, unav_q25=191, unav_q50=236, unav_q75=480),
    "g5kgre": dict(length_days=31, mean=474.69, std=178.7, min=184, max=591,
                   av_q25=5, av_q50=182, av_q75=11268, unav_q25=23, unav_q50=547, unav_q75=6891),
    "spot10": dict(length_days=90, mean=82.186, std=3.814, min=29, max=87,
                   av_q25=4415, av_q50=5432, av_q75=17109, unav_q25=4162, unav_q50=5034, unav_q75=9976),
    "spot100": dict(length_days=90, mean=823.95, std=4.945, min=196, max=877,
                    av_q25=1063, av_q50=5566, av_q75=22490, unav_q25=383, unav_q50=1906, unav_q75=10274),
}  # fmt: skip
