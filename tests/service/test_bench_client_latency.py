"""benchmarks/client_latency.py cannot rot: one run per command against a real `skylease serve`
(bounded: --runs 1, a bound no machine misses, so the wall clock cannot fail it; the bound itself is
the benchmark's, docs/performance.md), every command answered (exit 0) and a row for each beside
curl's call."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration  # 10-33 s of the README's test command: run by CI's second level
@pytest.mark.usefixtures("payload_sandbox")  # (a real server: it confines its payloads)
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl (the peer) is not installed")
def test_the_benchmark_times_every_client_command_beside_curl(tmp_path):
    argv = [sys.executable, str(ROOT / "benchmarks" / "client_latency.py"), "--runs", "1", "--bound", "1000",
            "--json"]
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert [row["command"] for row in res["rows"]] == [
        "skylease leases list", "skylease leases show 1", "skylease leases queue", "skylease leases hosts",
        "skylease qos account", "skylease qos bots", "skylease leases list --json", "skylease login"]
    for row in res["rows"]:
        assert row["curl_s"] > 0 and 0 < row["median_s"] < 1000 and not row["over"], row
        assert row["ratio"] == pytest.approx(row["median_s"] / row["curl_s"])
