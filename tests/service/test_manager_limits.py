"""The lease manager's per-user limit: at most ``max_leases_per_user`` leases not over, counted per
owner (a finished, cancelled or refused lease frees its place; another user's leases do not count)."""

from __future__ import annotations

import os

import pytest

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.api import LeaseRefused, LeaseRequest
from skylease.runtime.leases.manager import LocalLeaseManager
from skylease.runtime.leases.site import Site, SiteNode
from skylease.service.server import load_serve_config, open_database


@pytest.fixture
def manager(tmp_path):
    site = Site(tuple(SiteNode(f"node{i}", ResourceTuple(1.0, 1024, 0, 2.0**62)) for i in range(2)),
                machine=(min(os.sched_getaffinity(0)),))
    engine = open_database(load_serve_config(None, data_dir=tmp_path))
    m = LocalLeaseManager(engine, site, time_scale=1, data_dir=tmp_path, max_leases_per_user=3).start()
    yield m
    m.close(stop_payloads=True)
    engine.dispose()


def test_at_most_n_leases_not_over_per_user(manager):
    long = LeaseRequest(nodes=2, duration=3600, command="sleep 600")
    ids = [manager.request("alice", long).id for _ in range(3)]  # one runs, two wait
    with pytest.raises(LeaseRefused, match="alice has 3 leases not over; at most 3"):
        manager.request("alice", long)
    assert manager.request("bob", long).id == ids[-1] + 1  # bob's count is his own
    manager.cancel("alice", ids[1])  # a cancelled lease is over: its place is free
    with pytest.raises(LeaseRefused, match="refused"):  # the nodes are busy: a refused lease...
        manager.request("alice", LeaseRequest(type="immediate", nodes=2, duration=60))
    fourth = manager.request("alice", long).id  # ... takes no place
    with pytest.raises(LeaseRefused, match="alice has 3 leases not over"):
        manager.request("alice", long)
    manager.cancel("alice", ids[0])
    manager.cancel("alice", fourth)
    for _ in range(2):
        manager.request("alice", long)
    with pytest.raises(LeaseRefused, match="alice has 3 leases not over"):
        manager.request("alice", long)
