"""A plain restart of a real ``skylease serve`` on the default site (no site file): the journal's
replay agrees with its stored events even though the data folder's free space changed in between
(the default site's disk is fixed at the first start: docs/decisions/serve-default-site.md)."""

from __future__ import annotations

import httpx
import pytest

from skylease.cli import main
from skylease.runtime.leases.site import machine_cpus

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so this skips)
pytestmark = pytest.mark.usefixtures("payload_sandbox")


def test_a_restart_replays_a_rejection_after_the_free_space_changed(serve_process, tmp_path, capsys):
    serve = serve_process()  # python -m skylease serve --port 0 --data-dir DATA, on the default site
    assert main(["serve", "user", "add", "alice", "--data-dir", str(serve.data)]) == 0
    auth = {"Authorization": f"Bearer {capsys.readouterr().out.strip()}"}
    serve.start()
    # more disk than any node has: refused, its reason naming the largest node's disk
    body = {"type": "best-effort", "nodes": 1, "duration": 60, "disk": 2**40}
    r = httpx.post(serve.url + "/leases", json=body, headers=auth, timeout=30)
    assert r.status_code == 409 and "the largest node has" in r.json()["detail"], r.text
    reason = httpx.get(serve.url + "/leases/1", headers=auth, timeout=30).json()["reason"]
    serve.stop()

    # the data folder's free space changes between the runs (by 4 MB per node at least)
    (tmp_path / "filler").write_bytes(b"\1" * (max(64, 4 * len(machine_cpus())) * 2**20))
    serve.start()
    got = httpx.get(serve.url + "/leases/1", headers=auth, timeout=30).json()
    serve.stop()
    err = serve.stderr()
    assert "replay differs" not in err and "ERROR" not in err and "Traceback" not in err, err
    assert got["state"] == "rejected" and got["reason"] == reason
