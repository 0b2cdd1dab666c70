"""``skylease serve`` with a fault injected through the lease manager's enactment, for the crash and
liveness tests (test_serve_crash.py, test_serve_liveness.py).

The real server: :func:`skylease.service.server.serve` with the real lease manager on this machine's
nodes (:func:`~skylease.service.server.local_manager`), made with ``nodes_factory`` (the manager's
seam) a :class:`~skylease.runtime.leases.local.LocalNodes` whose spawn of one lease's payload
SIGKILLs this process right before the real spawn (``kill_before_spawn``: the request's transaction
committed, no process yet) or right after it (``kill_after_spawn``: a process, not recorded yet),
or raises (``fail_spawn``: the manager's thread dies). Production code reads no switch for it.

    python seamed_serve.py '{"options": {"port": 0, "data_dir": "...", ...}, "kill_before_spawn": 2}'

``options`` are keys of the server's configuration (ServeConfig); it prints the start line of
``skylease serve``.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from typing import Any


def main(spec: dict[str, Any]) -> None:
    from skylease.runtime.leases.local import LocalNodes
    from skylease.service.server import load_serve_config, local_manager, serve

    before, after, fail = (spec.get(k) for k in ("kill_before_spawn", "kill_after_spawn", "fail_spawn"))

    class FaultyNodes(LocalNodes):
        def spawn(self, lease: int, *args: Any, **kwargs: Any) -> Any:
            if lease == before:
                os.kill(os.getpid(), signal.SIGKILL)
            if lease == fail:
                raise RuntimeError(f"the spawn of lease {lease} failed (injected by the test)")
            p = super().spawn(lease, *args, **kwargs)
            if lease == after:
                os.kill(os.getpid(), signal.SIGKILL)
            return p

    cfg = load_serve_config(None, **spec["options"])
    serve(cfg, manager_factory=functools.partial(local_manager, nodes_factory=FaultyNodes),
          announce=lambda s: print(s.line(), flush=True))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
