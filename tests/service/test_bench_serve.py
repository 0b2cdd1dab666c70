"""benchmarks/bench_serve.py cannot rot: its quick mode starts a real server, puts leases in, sends
requests from two client processes for 2 s, replays them through the lease manager and the
scheduler in process, prints one row per layer and the ratios, and leaves no payload behind (the
benchmark checks that itself); on SQLite and on PostgreSQL."""

from __future__ import annotations

import re

import pytest

from .bench import run_quick

# integration: the benchmarks' quick mode, end to end (pytest -m integration)
pytestmark = pytest.mark.integration

LAYERS = ["HTTP server, 2 clients", "manager in process", "scheduler alone"]
ROW = re.compile(rf"^({'|'.join(LAYERS)})\s+([\d,]+)\s+([\d,.]+)\s", re.M)


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
