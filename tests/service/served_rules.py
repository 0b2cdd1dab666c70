"""A real lease manager under a scheduler configuration file (the fairness rules' served tests):
``LocalLeaseManager`` on one-CPU nodes of this machine, behind ``create_app`` on a real uvicorn
server, with its users."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.test_cli_leases import request

from skylease.control.leases.lease import ResourceTuple
from skylease.experiments.leases import load_config
from skylease.runtime.leases.manager import LocalLeaseManager
from skylease.runtime.leases.site import Site, SiteNode
from skylease.service.auth import add_user
from skylease.service.leases_api import create_app
from skylease.service.server import load_serve_config, open_database

Served = tuple[str, dict[str, str], LocalLeaseManager, Any, Path]


def served_rules(tmp_path: Path, app_server: Any, sandbox: Any, rules: str, users: tuple[str, ...], *,
                 nodes: int, scale: float) -> Iterator[Served]:
    """(url, tokens by user, the manager, a function that starts the manager again, tmp_path), the
    rules (a scheduler configuration file's text) in tmp_path/rules.toml; stopped at the end."""
    (tmp_path / "rules.toml").write_text(rules)
    site = Site(tuple(SiteNode(f"node{i}", ResourceTuple(1.0, 1024, 0, 2.0**62)) for i in range(nodes)),
                machine=(min(os.sched_getaffinity(0)),))
    engine = open_database(load_serve_config(None, data_dir=tmp_path))
    tokens = {u: add_user(engine, u) for u in users}
    config = load_config(tmp_path / "rules.toml").scheduler

    def manager() -> LocalLeaseManager:
        return LocalLeaseManager(engine, site, config=config, time_scale=scale, data_dir=tmp_path,
                                 sandbox=sandbox).start()

    m = manager()
    srv = app_server(create_app(m, engine))
    yield srv.url, tokens, m, manager, tmp_path
    srv.stop()
    m.close(stop_payloads=True)
    engine.dispose()



def hms(s: int) -> str:
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def request_xml(lid: int, user: str, nodes: int, duration: int, *, arrival: int = 0, start: int | None = None,
                extra: str = "") -> str:
    """One ``<lease-request>`` of ``user`` (times in seconds): best-effort without ``start``, else an
    advance reservation; ``extra``: more attributes of the request."""
    return request(lid, hms(arrival), nodes, start=None if start is None else hms(start),
                   duration=hms(duration), extra=f' user="{user}"{extra}')
