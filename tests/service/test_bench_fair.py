"""benchmarks/bench_fair.py cannot rot: its logic (percentiles, the plan of sessions within the
caps, the verdicts, the pacing) is checked here, and its quick mode starts real servers, opens 200
event streams from one session (6 open, 194 refused) and 200 over sessions within the caps (all
open), puts 300 leases in for one user and measures another's requests beside them, and prints
each part's figures, its reference and their ratio (the bounds themselves are measured on a quiet
machine: docs/performance.md)."""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

import pytest

from skylease.service.web.sse import MAX_STREAMS_PER_SESSION, MAX_STREAMS_PER_USER

from .bench import run_quick

# integration: the benchmarks' quick mode, end to end (pytest -m integration)
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_fair", ROOT / "benchmarks" / "bench_fair.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_fair"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_fair", None)


def test_the_benchmark_knows_the_servers_caps(bench):
    assert (bench.PER_SESSION, bench.PER_USER) == (MAX_STREAMS_PER_SESSION, MAX_STREAMS_PER_USER)


def test_the_plan_of_sessions_stays_within_the_caps(bench):
    plan = bench.session_plan(200)
    assert len(plan) == 200
    per_session, per_user = {}, {}
    for user, sid in plan:
        per_session[sid] = per_session.get(sid, 0) + 1
        per_user[user] = per_user.get(user, 0) + 1
    assert max(per_session.values()) == 6 and max(per_user.values()) == 30
    assert len(per_session) == 34 and len(per_user) == 7
    assert len({u for u, s in plan if s == 5}) == 1  # a session is one user's
    assert bench.session_plan(6) == [(0, 0)] * 6 and bench.session_plan(7)[-1] == (0, 1)


def test_the_verdicts_and_the_pacing(bench):
    assert bench.percentile_ms([0.001, 0.002, 0.003], 50) == pytest.approx(2.0)
    assert math.isnan(bench.percentile_ms([], 50))
    assert bench.streams_verdict(2.0, 3.9, 6, 194, 200) == (pytest.approx(1.95), True)
    assert bench.streams_verdict(2.0, 4.2, 6, 194, 200)[1] is False  # slower than twice idle
    assert bench.streams_verdict(2.0, 2.0, 7, 193, 200)[1] is False  # one past the cap accepted
    assert bench.streams_verdict(2.0, 2.0, 6, 190, 200)[1] is False  # some neither open nor refused
    assert bench.streams_verdict(2.0, 2.0, 3, 0, 3) == (1.0, True)  # fewer attempts than the cap
    assert bench.streams_verdict(0.0, 2.0, 6, 194, 200)[0] == math.inf
    assert bench.paced(3, 0.02, 10.0) == pytest.approx([10.0, 10.02, 10.04])


@pytest.mark.usefixtures("payload_sandbox")  # (its servers run real payloads: confined)
def test_the_fair_sharing_benchmark_runs_in_quick_mode(tmp_path):
    out = run_quick(tmp_path, script="bench_fair.py")
    assert "database: SQLite" in out
    assert "(a) 200 event streams from one session: 6 open, 194 refused (429), 0 other answers" in out, out
    m = re.search(r"GET /leases p50: idle ([\d.]+) ms \(60 requests\), with the stream attempts open "
                  r"([\d.]+) ms \(60\); ratio ([\d.]+) \(bound 2\)", out)
    assert m and float(m.group(3)) == pytest.approx(float(m.group(2)) / float(m.group(1)), abs=0.01), out
    assert re.search(r"\(a'\) 200 event streams over 34 sessions of 7 users \(within the caps\): 200 open, "
                     r"0 refused", out), out
    assert "(b) heavy put 300 leases in" in out, out
    label = r"heavy idle \(reference\)|heavy polls its first page|heavy polls pages of 1,000"
    rows = re.findall(rf"^\s+({label})\s+other's POST /leases p50\s+[\d.]+ ms, p99\s+[\d.]+ ms "
                      r"\((\d+) requests, \{201: (\d+)\}\)", out, re.M)
    assert [r[0] for r in rows] == ["heavy idle (reference)", "heavy polls its first page",
                                    "heavy polls pages of 1,000"], out
    assert all(r[1] == r[2] for r in rows), out  # every request of the other user was granted
    assert "pages of 100" in out and "pages of 300" in out, out  # the default page; all 300 at once
    assert "p99 while heavy polls its first page / idle:" in out and "load average at the end" in out, out
