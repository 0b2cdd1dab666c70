"""AccaSim's EASY backfilling (``EASYBackfilling`` + ``FirstFit``) on an SWF log, as a user runs it:
one process, the simulator's own SWF reader, every output file off.

    python benchmarks/accasim_easy.py LOG.swf [--nodes 144]

The system is ``--nodes`` nodes of one core each, and a job asks for its requested-processors
field in nodes: the same machine and requests as ``skylease leases simulate`` on a Blue Horizon
log (144 single-CPU nodes, :data:`skylease.sim.leases.BLUE_HORIZON_NODES`). Used by
``benchmarks/bench_leases_whole.py``.
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import json
import logging
import tempfile
from pathlib import Path

# AccaSim 1.1.3 (2021) imports Mapping & co. from `collections`, gone since Python 3.10
for _name in ("Mapping", "MutableMapping", "Sequence", "Iterable", "Callable"):
    setattr(collections, _name, getattr(collections.abc, _name))

from accasim.base.allocator_class import FirstFit  # noqa: E402
from accasim.base.scheduler_class import EASYBackfilling  # noqa: E402
from accasim.base.simulator_class import Simulator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--nodes", type=int, default=144)
    args = ap.parse_args()
    logging.disable(logging.INFO)  # its progress lines: not part of what is compared
    with tempfile.TemporaryDirectory(prefix="accasim-") as tmp:
        sys_config = Path(tmp) / "system.json"
        sys_config.write_text(json.dumps({
            "system_name": "blue-horizon", "start_time": 0, "equivalence": {"processor": {"core": 1}},
            "groups": {"node": {"core": 1}}, "resources": {"node": args.nodes}}))
        sim = Simulator(str(args.log), str(sys_config), EASYBackfilling(FirstFit()), RESULTS_FOLDER_PATH=tmp,
                        scheduling_output=False, statistics_output=False, pprint_output=False,
                        benchmark_output=False, show_statistics=False, save_parameters=None)
        sim.start_simulation()
        print(json.dumps({"dispatched": sim.dispatched_jobs, "rejected": sim.rejected_jobs}))


if __name__ == "__main__":
    main()
