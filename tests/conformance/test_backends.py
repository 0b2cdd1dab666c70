"""Every kind of pool the real environment drives implements the WorkerBackend protocol (no
attribute probing in the environment: a missing method is found here, not in the middle of a run)."""

from __future__ import annotations

import pytest

from skylease.model.instance import InstanceType
from skylease.runtime.backend import WorkerBackend
from skylease.runtime.pools import ClusterPool, LocalPool
from skylease.runtime.slurm import SlurmPool
from skylease.runtime.ssh_pool import SshPool

ITYPE = InstanceType("p")


@pytest.mark.parametrize("backend", [
    LocalPool(ITYPE),
    ClusterPool(ITYPE, address="tcp://127.0.0.1:1"),
    SlurmPool(ITYPE, cluster="dask_jobqueue.SLURMCluster"),
    SshPool(ITYPE, [], "token"),
], ids=["local", "cluster", "slurm", "ssh"])
def test_each_pool_is_a_worker_backend(backend: WorkerBackend) -> None:
    assert isinstance(backend, WorkerBackend)
    assert backend.itype is ITYPE


@pytest.mark.parametrize("pool", [LocalPool(ITYPE), SshPool(ITYPE, [], "token")], ids=["local", "ssh"])
def test_a_pool_billed_by_skylease_has_no_job_clock(pool: WorkerBackend) -> None:
    assert pool.started_at("p-0") is None and pool.ended_at("p-0") is None


def test_an_object_missing_a_method_is_not_a_backend() -> None:
    class Half:
        itype, claimed = ITYPE, False

        def start(self, name: str) -> None: ...

    assert not isinstance(Half(), WorkerBackend)
