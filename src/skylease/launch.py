"""The ``skylease`` console entry: the CLI in this process.

(It once sent ``skylease run`` to a warm per-user service that had Dask, pandas and matplotlib
imported; since a run imports none of them and its local workers are plain processes fed over a
pipe, a cold run is within 1.5x of ``xargs -P 2`` and the service was retired: issue 25,
docs/performance.md.)
"""

from __future__ import annotations


def main() -> None:
    from skylease.cli import console_main

    console_main()
