"""A real lease manager on local one-CPU nodes served by a real uvicorn server (the app_server
fixture), for the API tests that need the real scheduler behind the routes: alice and bob."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.manager import LocalLeaseManager
from skylease.runtime.leases.site import Site, SiteNode
from skylease.service.auth import add_user
from skylease.service.leases_api import create_app
from skylease.service.server import load_serve_config, open_database


def served_manager(tmp_path, app_server, payload_sandbox, nodes: int = 2,
                   **manager: Any) -> Iterator[tuple[str, dict[str, str], LocalLeaseManager]]:
    """Yields the server's URL, alice's and bob's tokens and the manager (``manager``: its options);
    everything stopped after."""
    site = Site(tuple(SiteNode(f"node{i}", ResourceTuple(1.0, 1024, 0, 2.0**62)) for i in range(nodes)),
                machine=(min(os.sched_getaffinity(0)),))
    engine = open_database(load_serve_config(None, data_dir=tmp_path))
    tokens = {u: add_user(engine, u) for u in ("alice", "bob")}
    m = LocalLeaseManager(engine, site, time_scale=1, data_dir=tmp_path, sandbox=payload_sandbox,
                          **manager).start()
    srv = app_server(create_app(m, engine))
    yield srv.url, tokens, m
    srv.stop()
    m.close(stop_payloads=True)
    engine.dispose()
