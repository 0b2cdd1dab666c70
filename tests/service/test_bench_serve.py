"""benchmarks/bench_serve.py cannot rot: its quick mode starts a real server, puts leases in, sends
requests from two client processes for 2 s, replays them through the lease manager and the
scheduler in process, prints one row per layer and the ratios, and leaves no payload behind (the
benchmark checks that itself); on SQLite and on PostgreSQL."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["HTTP server, 2 clients", "manager in process", "scheduler alone"]
ROW = re.compile(rf"^({'|'.join(LAYERS)})\s+([\d,]+)\s+([\d,.]+)\s", re.M)


def run_quick(tmp_path: Path, *extra: str, script: str = "bench_serve.py") -> str:
    """``benchmarks/SCRIPT --quick EXTRA`` in ``tmp_path``; its output (it must succeed)."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick", *extra],
                       cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stdout


def check(out: str) -> None:
    rows = ROW.findall(out)
    assert [name for name, _, _ in rows] == LAYERS, out
    counts = [int(n.replace(",", "")) for _, n, _ in rows]
    assert counts[0] > 0 and counts == [counts[0]] * 3, out  # the same requests, replayed in full
    assert all(float(rate.replace(",", "")) > 0 for _, _, rate in rows), out
    assert "requests/s: scheduler / server" in out and "server CPU:" in out, out
    assert "100 best-effort leases put in first" in out and "before the clients, " in out, out


def test_the_serve_benchmark_runs_in_quick_mode_on_sqlite(tmp_path):
    out = run_quick(tmp_path)
    assert "database: SQLite" in out
    check(out)


@pytest.mark.usefixtures("postgres_url")
def test_the_serve_benchmark_runs_in_quick_mode_on_postgresql(tmp_path, postgres_url):
    out = run_quick(tmp_path, "--db", postgres_url)  # it makes (and drops) its databases on that server
    assert "database: PostgreSQL" in out
    check(out)
