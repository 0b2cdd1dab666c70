"""The lease manager's liveness (issue 33), in process on real processes and a real database: when
its thread dies (a spawn that fails, injected through its enactment, ``nodes_factory``) or its
payload watcher does, ``failure()`` says why and every call on leases raises Unavailable; a
request that was waiting for the manager's lock when the thread died is refused, not journaled; a
manager started again on the same database runs what was journaled."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.health import Unavailable
from skylease.runtime.leases.api import LeaseRequest
from skylease.runtime.leases.local import LocalNodes
from skylease.runtime.leases.manager import LocalLeaseManager
from skylease.runtime.leases.site import Site, SiteNode
from skylease.service.server import load_serve_config, open_database

LONG = LeaseRequest(nodes=1, duration=3600, command="sleep 600")
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


@pytest.fixture
def parts(tmp_path, payload_sandbox):
    site = Site(tuple(SiteNode(f"node{i}", ResourceTuple(1.0, 1024, 0, 2.0**62)) for i in range(2)),
                machine=(min(os.sched_getaffinity(0)),))
    engine = open_database(load_serve_config(None, data_dir=tmp_path))
    made: list[LocalLeaseManager] = []

    def manager(nodes_factory: Any = None) -> LocalLeaseManager:
        m = LocalLeaseManager(engine, site, time_scale=1, data_dir=tmp_path, sandbox=payload_sandbox,
                              nodes_factory=nodes_factory)
        made.append(m)
        return m.start()

    yield manager, engine
    for m in made:
        m.close(stop_payloads=True)
    engine.dispose()


def journaled(engine: sa.Engine) -> list[int]:
    with engine.connect() as c:
        return [r[0] for r in c.execute(sa.text("SELECT id FROM leases ORDER BY id"))]


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(Unavailable) as caught:
        call(*args)
    return str(caught.value)


def test_a_request_waiting_for_the_lock_when_the_thread_dies_is_refused_before_it_is_journaled(parts, caplog):
    manager, engine = parts
    entered, go = threading.Event(), threading.Event()

    class GatedNodes(LocalNodes):
        """The spawn of lease 1 waits for ``go`` (the manager's thread holds its lock meanwhile),
        then fails."""

        def spawn(self, lease: int, *args: Any, **kwargs: Any) -> Any:
            if lease == 1:
                entered.set()
                go.wait(10)
                raise RuntimeError("no more processes")
            return super().spawn(lease, *args, **kwargs)

    m = manager(GatedNodes)
    caplog.set_level(logging.ERROR, logger="skylease.health")
    assert m.request("alice", LONG).state == "active"  # answered once journaled; its spawn comes next
    assert entered.wait(10)
    answers: list[Any] = []
    waiting = threading.Thread(target=lambda: answers.append(_call(m.request, "bob", LONG)))
    waiting.start()
    time.sleep(0.3)
    assert waiting.is_alive() and m.failure() is None  # waiting for the lock, which the thread holds
    go.set()
    waiting.join(10)
    reason = f"the lease manager stopped at {STAMP}: RuntimeError: no more processes"
    assert len(answers) == 1 and isinstance(answers[0], Unavailable) and re.fullmatch(reason, str(answers[0]))
    assert journaled(engine) == [1]
    assert re.fullmatch(reason, m.failure() or "")
    for call, args in [(m.request, ("alice", LONG)), (m.cancel, ("alice", 1)), (m.lease, ("alice", 1)),
                       (m.leases, (None,)), (m.queue, ("alice",)), (m.hosts, ())]:
        assert refused(call, *args) == m.failure()
    assert m.now() >= 0  # (the clock still tells the time)
    assert journaled(engine) == [1]
    logged = [r for r in caplog.records if r.name == "skylease.health"]
    assert len(logged) == 1 and logged[0].exc_info is not None  # (once, with its traceback)
    assert re.fullmatch(reason, logged[0].getMessage())

    m.close()  # and started again, as `skylease serve` is: lease 1 runs
    again = manager()
    assert again.failure() is None
    view = again.lease("alice", 1)
    assert view.state == "active" and [p["state"] for p in view.payloads] == ["running"], view
    assert [v.id for v in again.leases(None)] == [1]


def _call(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # (the answer the thread got)
        return exc


def test_a_dead_payload_watcher_makes_the_manager_refuse_too(parts):
    manager, engine = parts

    class BreakingNodes(LocalNodes):
        """Its watcher breaks on its first look once ``broken`` is set."""

        broken = False

        def _handle(self, events: Any) -> bool:
            if self.broken:
                raise OSError("the watcher's selector broke")
            return super()._handle(events)

    m = manager(BreakingNodes)
    assert m.request("alice", LONG).id == 1
    m.nodes.broken = True
    payload = _first_payload(m)
    m.nodes.shutdown(payload, grace_s=60)  # (wakes the watcher)
    deadline = time.monotonic() + 5
    while m.failure() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    reason = f"the payload watcher stopped at {STAMP}: OSError: the watcher's selector broke"
    assert re.fullmatch(reason, m.failure() or ""), m.failure()
    assert refused(m.request, "bob", LONG) == m.failure()
    assert refused(m.leases, None) == m.failure()
    assert journaled(engine) == [1]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(payload.pid, 9)  # (nobody watches it any more)
    m.nodes.broken = False  # (closing looks once more)
    m.close()


def _first_payload(m: LocalLeaseManager) -> Any:
    """Lease 1's payload, once the manager's thread has started it."""
    deadline = time.monotonic() + 10
    while not m.nodes.live():
        assert time.monotonic() < deadline, "lease 1's payload never started"
        time.sleep(0.01)
    return m.nodes.live()[0]
