"""benchmarks/bench_lease_api.py cannot rot: its quick mode puts leases in through the server's own
manager, starts a real server on that database (which recovers them), runs a POST phase and a GET
phase from two client processes for 2 s each (every answer checked: 201, 200), replays both through
the manager and the scheduler in process, and prints one row per phase and layer with the ratios."""

from __future__ import annotations

import re

import pytest

from .bench import run_quick

# integration: the benchmark's quick mode, end to end (pytest -m integration)
pytestmark = pytest.mark.integration

LAYERS = ["server, 2 clients", "manager in process", "scheduler alone"]
ROW = re.compile(rf"^(POST|GET)\s+({'|'.join(LAYERS)})\s+([\d,]+)\s+([\d,.]+)\s", re.M)


def check(out: str) -> None:
    rows = ROW.findall(out)
    want = [(p, la) for p in ("POST", "GET") for la in LAYERS]
    assert [(phase, name) for phase, name, _, _ in rows] == want, out
    for phase in ("POST", "GET"):
        counts = [int(n.replace(",", "")) for p, _, n, _ in rows if p == phase]
        assert counts[0] > 0 and counts == [counts[0]] * 3, out  # the same requests, replayed in full
    assert all(float(rate.replace(",", "")) > 0 for _, _, _, rate in rows), out
    assert "300 best-effort leases put in first" in out and "the server recovered them" in out, out
    assert "POST: requests/s scheduler / server" in out and "GET target (1,000/s" in out, out


def test_the_lease_api_benchmark_runs_in_quick_mode_on_sqlite(tmp_path):
    out = run_quick(tmp_path, script="bench_lease_api.py")
    assert "database: SQLite" in out
    check(out)


@pytest.mark.usefixtures("postgres_url")
def test_the_lease_api_benchmark_runs_in_quick_mode_on_postgresql(tmp_path, postgres_url):
    out = run_quick(tmp_path, "--db", postgres_url, script="bench_lease_api.py")
    assert "database: PostgreSQL" in out
    check(out)
