"""The journal's group commit (runtime/leases/group_commit.py, docs/decisions/serve-throughput.md).

Unit: batches are written in the order they were taken whatever thread writes them, a write waits
for the ones before it, and after a failed write nothing later is written and every waiter is
told. On the real lease manager: eight threads request leases at once; each lease is in the
journal's tables when its request returns (what a 201 promises), requests share transactions, and a
restarted manager replays the journal into the same leases and events."""

from __future__ import annotations

import sys
import threading
import time

import pytest
import sqlalchemy as sa

from skylease.control.leases.lease import ResourceTuple
from skylease.runtime.leases.api import LeaseRequest
from skylease.runtime.leases.group_commit import GroupCommit, JournalFailed
from skylease.runtime.leases.journal import leases
from skylease.runtime.leases.manager import LocalLeaseManager
from skylease.runtime.leases.site import Site, SiteNode
from skylease.service.server import load_serve_config, open_database


def test_batches_are_written_in_the_order_they_were_taken():
    written: list[str] = []
    order: GroupCommit[str] = GroupCommit(written.append, lambda exc: None)
    first, second = order.taken(), order.taken()
    assert (first, second, order.next) == (1, 2, 3)
    late = threading.Thread(target=order.write, args=(second, "b"))
    late.start()
    late.join(0.2)
    assert late.is_alive() and written == []  # the second waits for the first
    order.write(first, "a")
    late.join(5)
    assert written == ["a", "b"]
    order.wait_for(2)  # written: at once


def test_a_batch_is_taken_only_when_no_write_is_under_way():
    gate, written = threading.Event(), []

    def slow(batch: str) -> None:
        gate.wait(5)
        written.append(batch)

    order: GroupCommit[str] = GroupCommit(slow, lambda exc: None)
    n = order.taken()
    writer = threading.Thread(target=order.write, args=(n, "a"))
    writer.start()
    asked: list[bool] = []
    waiter = threading.Thread(target=lambda: asked.append(order.should_take(2)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not asked  # batch 1 being written: batch 2 keeps gathering
    gate.set()
    writer.join(5)
    waiter.join(5)
    assert asked == [True] and written == ["a"]  # now it is this thread's to take


def test_after_a_failed_write_nothing_later_is_written_and_every_waiter_is_told():
    told: list[BaseException] = []
    written: list[str] = []

    def write(batch: str) -> None:
        if batch == "bad":
            raise OSError("disk full")
        written.append(batch)

    order: GroupCommit[str] = GroupCommit(write, told.append)
    ok, bad, later = order.taken(), order.taken(), order.taken()
    order.write(ok, "ok")
    with pytest.raises(JournalFailed, match="disk full"):
        order.write(bad, "bad")
    with pytest.raises(JournalFailed):
        order.write(later, "later")
    with pytest.raises(JournalFailed):
        order.wait_for(later)
    with pytest.raises(JournalFailed):
        order.should_take(4)
    order.wait_for(ok)  # what was written stays written
    assert written == ["ok"] and [str(e) for e in told] == ["disk full"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
@pytest.mark.timeout(60)
def test_concurrent_requests_are_each_journaled_before_they_return(tmp_path, payload_sandbox):
    """Every lease is an advance reservation far ahead (no payload starts). First, while another
    connection holds the database's write lock, 8 threads request one lease each: the first write
    waits, the 7 others are scheduled meanwhile and share the next transaction. Then 8 threads x 25
    requests: each lease is in the journal's tables when its request returns, and a restarted
    manager replays the journal into the same leases."""
    site = Site(tuple(SiteNode(f"n{i}", ResourceTuple()) for i in range(4)))
    engine = open_database(load_serve_config(None, data_dir=tmp_path))
    commits = [0]
    sa.event.listen(engine, "commit", lambda _conn: commits.__setitem__(0, commits[0] + 1))
    m = LocalLeaseManager(engine, site, data_dir=tmp_path, sandbox=payload_sandbox).start()
    missing: list[int] = []
    views: dict[int, dict] = {}

    def client(c: int, n: int, first: int) -> None:
        with engine.connect() as conn:
            for i in range(n):
                req = LeaseRequest(type="advance-reservation", nodes=1, duration=60,
                                   start_in=10**6 + 100 * (first + c * n + i))
                v = m.request(f"u{c}", req)
                views[v.id] = v.model_dump()
                if conn.execute(sa.select(leases.c.id).where(leases.c.id == v.id)).first() is None:
                    missing.append(v.id)
                conn.rollback()  # (a fresh snapshot for the next look)

    def clients(n: int, first: int, while_busy: float = 0.0) -> None:
        threads = [threading.Thread(target=client, args=(c, n, first)) for c in range(8)]
        blocker = engine.raw_connection() if while_busy else None
        if blocker is not None:
            blocker.driver_connection.execute("BEGIN IMMEDIATE")  # another process's write, say
        for t in threads:
            t.start()
        if blocker is not None:
            time.sleep(while_busy)
            assert not views  # nothing answered while nothing can be written
            blocker.driver_connection.rollback()
            blocker.close()
        for t in threads:
            t.join(50)

    try:
        before = commits[0]
        clients(1, 0, while_busy=0.5)
        assert len(views) == 8 and not missing
        assert commits[0] - before <= 4, commits[0] - before  # the first, the 7 that came meanwhile (in
        # one, or two if the loop's commit took some after a poll)
        clients(25, 8)
        assert not missing, f"answered before they were journaled: {missing}"
        assert len(views) == 208 and all(v["state"] == "scheduled" for v in views.values())
    finally:
        m.close(stop_payloads=True)
    again = LocalLeaseManager(engine, site, data_dir=tmp_path, sandbox=payload_sandbox)
    try:
        again.start()
        assert again.replayed_events_match is True
        got = {v.id: v.model_dump() for v in again.leases(None)}
        for view in (*views.values(), *got.values()):
            view.pop("planned", None)  # (what is planned after now: now moved on)
        assert got == views
    finally:
        again.close(stop_payloads=True)
        engine.dispose()
