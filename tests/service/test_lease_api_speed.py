"""The lease API's fast paths (issue 40, item 6; docs/decisions/serve-throughput.md), on the real lease
manager through ``create_app`` on a real uvicorn server: ``GET /leases/{id}`` is answered on the event
loop when the manager's lock is free, and in a worker thread when it is not (the loop is never held
waiting for the lock: ``/health`` answers meanwhile); answers are the JSON of the views FastAPI would
have written; a user's count of leases not over is exact though it is pruned only at the limit."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from skylease.runtime.leases.api import LeaseNotFound, LeaseRequest

from .served_manager import served_manager


def far(i: int = 0) -> dict[str, object]:
    """An advance reservation far in the future (the i-th: one after the other on the one node)."""
    return {"type": "advance-reservation", "nodes": 1, "duration": 60, "start_in": 10**6 + 1000 * i,
            "command": "true"}


@pytest.fixture
def served(tmp_path, app_server, payload_sandbox):
    """One node; alice and bob; nothing here starts a payload (every lease is far in the future)."""
    yield from served_manager(tmp_path, app_server, payload_sandbox, nodes=1, max_leases_per_user=3)


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_lease_is_read_without_waiting_for_a_busy_lock(served):
    url, tokens, m = served
    with httpx.Client(base_url=url, timeout=10) as http:
        made = http.post("/leases", json=far(), headers=_h(tokens["alice"]))
        assert made.status_code == 201, made.text
        lid = made.json()["id"]
        assert made.json() == m.lease("alice", lid).model_dump(mode="json")  # the view's JSON
        assert m.lease_nowait("alice", lid) == m.lease("alice", lid)  # the lock is free: the view
        with pytest.raises(LeaseNotFound):
            m.lease_nowait("bob", lid)
        answered: list[httpx.Response] = []
        with m._lock:  # (another thread's command under way)
            busy = threading.Thread(target=lambda: answered.append(
                httpx.get(f"{url}/leases/{lid}", headers=_h(tokens["alice"]), timeout=10)))
            busy.start()
            time.sleep(0.3)
            t0 = time.monotonic()
            assert http.get("/health").status_code == 200  # the event loop is not waiting for the lock
            assert time.monotonic() - t0 < 0.25
            assert not answered  # the GET waits in a worker thread
            nowait: list[object] = []
            t = threading.Thread(target=lambda: nowait.append(m.lease_nowait("alice", lid)))
            t.start()
            t.join(5)
            assert nowait == [None]  # another thread holds the lock: None at once
        busy.join(10)
        assert [r.status_code for r in answered] == [200]
        assert answered[0].json() == m.lease("alice", lid).model_dump(mode="json")
        assert http.get(f"/leases/{lid}", headers=_h(tokens["bob"])).status_code == 404


def test_the_per_user_limit_counts_exactly_when_pruned_at_the_limit(served):
    """At most 3 leases not over per user (the fixture's limit): a cancelled one is over, so a
    fourth request after a cancel is accepted, and one more is refused."""
    url, tokens, m = served
    with httpx.Client(base_url=url, timeout=10, headers=_h(tokens["alice"])) as http:
        ids = [http.post("/leases", json=far(i)).json()["id"] for i in range(3)]
        refused = http.post("/leases", json=far(3))
        assert refused.status_code == 409 and "3 leases not over" in refused.json()["detail"]
        assert http.delete(f"/leases/{ids[0]}").status_code == 200
        assert http.post("/leases", json=far(4)).status_code == 201  # the cancelled one no longer counts
        assert http.post("/leases", json=far(5)).status_code == 409
    assert m.request("bob", LeaseRequest.model_validate(far(6))).owner == "bob"  # per user
