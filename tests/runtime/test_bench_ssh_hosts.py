"""benchmarks/bench_ssh_hosts.py cannot rot: its quick mode starts its own 4-host test site (base
180), runs 80 `true` and 16 `sleep 0.05` with `skylease run` and with `parallel --sshlogin` on
its hosts, and prints both times, the throughput ratios and the workers' start cost."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skylease.testing.site import SiteError, probe

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
ROW = re.compile(r"^\| ([\d,]+) `(true|sleep 0\.05)`, 4 hosts x 2 slots "
                 r"\| ([\d.]+) \| ([\d.]+) \| ([\d.]+)x \|", re.M)


def test_the_quick_benchmark_prints_both_tools_and_the_ratios(tmp_path):
    try:
        probe()
        if shutil.which("parallel") is None:
            raise SiteError("GNU parallel is not installed (.ci/run installs Debian's parallel)")
    except SiteError as exc:
        why = f"cannot run the SSH hosts benchmark here: {exc}"
        pytest.fail(why) if os.environ.get("SKYLEASE_REQUIRE_SSH") == "1" else pytest.skip(why)
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_ssh_hosts.py"), "--quick",
                        "--base", "180"], cwd=tmp_path, capture_output=True, text=True, timeout=200)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = ROW.findall(r.stdout)
    assert [(n, w) for n, w, *_ in rows] == [("80", "true"), ("16", "sleep 0.05")], r.stdout
    for _, _, par, ours, ratio in rows:
        assert float(par) > 0 and float(ours) > 0
        assert abs(float(ratio) - float(par) / float(ours)) < 0.02 + 0.01 * float(ratio), r.stdout
    assert re.search(r"worker start on a host \(rented to up, [1-9]\d* workers\): median [\d.]+ s", r.stdout)
