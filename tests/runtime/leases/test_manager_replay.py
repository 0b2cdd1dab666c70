"""A restarted lease manager replays its journal into the same events it stored.

Each input (a request, a cancel, a premature end) stamps its events with its own lease time, as
the replay does. A cancel that arrives while no scheduler event is due used to stamp them with the
time of the last step instead, so the next start logged "the journal's replay differs from its
stored events" for a journal that was right."""

from __future__ import annotations

import sys
import time

import pytest

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.api import LeaseRequest
from skylease.runtime.leases.manager import LocalLeaseManager
from skylease.runtime.leases.site import Site, SiteNode
from skylease.service.server import load_serve_config, open_database

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
              pytest.mark.timeout(60)]

SCALE = 600  # lease seconds per real second


def test_a_cancel_between_two_steps_replays_into_the_events_it_stored(tmp_path, payload_sandbox):
    site = Site((SiteNode("n0", ResourceTuple()), SiteNode("n1", ResourceTuple())))
    engine = open_database(load_serve_config(None, data_dir=tmp_path))
    first = LocalLeaseManager(engine, site, time_scale=SCALE, data_dir=tmp_path, sandbox=payload_sandbox,
                              grace_s=0.2).start()
    try:
        view = first.request("alice", LeaseRequest(type="best-effort", nodes=1, duration=36_000))
        time.sleep(0.5)  # 300 lease seconds: nothing falls due (the lease ends at 36,000)
        cancelled = first.cancel("alice", view.id)
        assert cancelled.state == "cancelled"
        (event,) = [e for e in cancelled.events if e["event"] == "cancel"]
        assert event["time"] >= view.start + 250  # it came well after the last step
    finally:
        first.close(stop_payloads=True)
    second = LocalLeaseManager(engine, site, time_scale=SCALE, data_dir=tmp_path, sandbox=payload_sandbox)
    try:
        second.start()
        assert second.replayed_events_match is True
        assert second.lease("alice", view.id).events == cancelled.events
    finally:
        second.close(stop_payloads=True)
        engine.dispose()
