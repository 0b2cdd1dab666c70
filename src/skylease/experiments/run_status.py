"""``skylease status``: what a run shows while it runs or once it stopped, read-only.

A run is ``running`` while its last segment is open, its driver's process is alive and its
heartbeat is under 10 s old; ``finished`` once every task has a result; else ``stopped`` (with the
commands that finish it: :mod:`skylease.experiments.run_next`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from skylease.experiments.run_next import next_steps
from skylease.experiments.run_options import stored_options
from skylease.experiments.run_pools import least_charge
from skylease.experiments.run_results import open_run


def status(out: str | Path) -> dict[str, Any]:
    """What ``skylease status`` shows of a running or finished run (read-only)."""
    store = open_run(out)
    try:
        meta = store.meta()
        counts = store.counts()
        seg = store.query("SELECT * FROM segments ORDER BY segment DESC LIMIT 1")
        last = dict(seg[0]) if seg else {}
        running = bool(last) and last.get("ended_unix") is None and _pid_alive(int(last["pid"])) \
            and time.time() - float(last.get("heartbeat_unix") or 0) < 10
        spent = store.spent_before()
        live = store.query("SELECT pool, COUNT(*) AS n FROM hosts WHERE released_s IS NULL AND segment = ? "
                           "GROUP BY pool", (last.get("segment", -1),)) if running else []
        registered = "fingerprint" in meta
        state = "running" if running else ("finished" if registered and counts["left"] == 0 else "stopped")
        opts = stored_options(meta)
        st = {"out": str(out), "job": meta.get("job"), "state": state,
              "segments": last.get("segment", -1) + 1, **counts, "cost": spent,
              "budget": opts.budget, "workers": {r["pool"]: r["n"] for r in live}}
        if registered and state != "running" and meta.get("options"):
            opts.out = Path(out)
            billing = (meta.get("billing") or {}).get(str(last.get("segment"))) or {}
            main = opts.pool if opts.pool in billing else next(
                (n for n in billing if n != opts.reliable_pool), None)
            least = least_charge(billing[main]) if main is not None else 0.0
            st["next"] = next_steps(str(meta["job"]), opts, counts, spent=spent, least_charge=least)
        return st
    finally:
        store.close()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
