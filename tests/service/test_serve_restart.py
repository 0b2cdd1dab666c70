"""A plain restart of a real ``skylease serve`` on the default site (no site file): the journal's
replay agrees with its stored events even though the data folder's free space changed in between
(the default site's disk is fixed at the first start: docs/decisions/serve-default-site.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from skylease.cli import main
from skylease.runtime.leases.site import machine_cpus

# (a real `skylease serve` confines its payloads: without bubblewrap it refuses to start, so this skips)
pytestmark = pytest.mark.usefixtures("payload_sandbox")

START_RE = re.compile(r"^skylease serve: (https?://\S+) \(OpenAPI at /docs\)")


class Serve:
    """``python -m skylease serve`` on a free loopback port, its data (and SQLite database) in ``data``,
    on the default site; its standard error in a file per start."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        argv = [sys.executable, "-m", "skylease", "serve", "--port", "0", "--data-dir", str(self.data)]
        with open(self.stderr_path(), "w") as err:
            self.proc = subprocess.Popen(argv, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        line = self.proc.stdout.readline().strip()
        m = START_RE.match(line)
        assert m is not None, f"no start line: {line!r}; stderr: {self.stderr_path().read_text()[-3000:]}"
        self.url = m.group(1)

    def stderr_path(self) -> Path:
        return self.data.parent / f"server-{self.starts}.err"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()


@pytest.fixture
def serve(tmp_path) -> Iterator[Serve]:
    srv = Serve(tmp_path / "serve")
    yield srv
    srv.stop()


def test_a_restart_replays_a_rejection_after_the_free_space_changed(serve: Serve, tmp_path, capsys):
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
    err = serve.stderr_path().read_text()
    assert "replay differs" not in err and "ERROR" not in err and "Traceback" not in err, err
    assert got["state"] == "rejected" and got["reason"] == reason
