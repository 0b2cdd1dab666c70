"""Enactments of test-site hosts for the tests of runtime/leases/host_*.py: a connection to a host of
the test site, and closing what a test made."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from skylease.runtime.leases.ssh import SshConnection, SshError, SshTarget


def connection(site: Any, host: int, folder: Path) -> SshConnection:
    """A connection (not open yet) to the test site's ``host`` (0: host1) as root with the site's
    key, its control socket in ``folder`` (one master per folder and host)."""
    h = site.hosts[host]
    return SshConnection(SshTarget(h.address, 22, "root", site.key, site.known_hosts, 5.0), folder)


def close_all(made: list) -> None:
    """Close every HostNodes a test made, its payloads killed (a host that stopped answering: as it is)."""
    for hn in made:
        with contextlib.suppress(SshError):
            hn.close(kill=True, grace_s=0.2)
