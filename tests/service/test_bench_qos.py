"""benchmarks/bench_qos.py cannot rot: its quick mode starts a real server, deposits credits,
registers bags of tasks (half of them served), sends progress reports and prediction requests from
two client processes for 2 s, replays them through QoSService in process, and prints one row per
layer with no failed request, the answers' cloud workers (the same in both layers: the replay is
faithful), and the storage a report takes; on SQLite and on PostgreSQL."""

from __future__ import annotations

import re

import pytest

from .bench import run_quick

# integration: the benchmarks' quick mode, end to end (pytest -m integration)
pytestmark = pytest.mark.integration

LAYERS = ["HTTP server, 2 clients", "service in process"]
ROW = re.compile(rf"^({'|'.join(LAYERS)})\s+([\d,]+)\s+([\d,.]+)\s+[\d.]+\s+[\d.]+\s+([\d,]+)\s", re.M)
CWS = re.compile(r"cloud workers started by the answers: ([\d,]+) by the server, ([\d,]+) in process; "
                 r"bags completed and replaced: ([\d,]+)")
STORAGE = re.compile(r"for ([\d,]+) reports = ([\d,.]+) B per report, i\.e\. per bag per minute")


def number(text: str) -> float:
    return float(text.replace(",", ""))


def check(out: str) -> None:
    rows = ROW.findall(out)
    assert [name for name, *_ in rows] == LAYERS, out
    counts = [number(n) for _, n, _, _ in rows]
    assert counts[0] > 0 and counts == [counts[0]] * 2, out  # the same requests, replayed in full
    assert all(number(rate) > 0 for _, _, rate, _ in rows), out
    assert all(failed == "0" for *_, failed in rows), out  # no request failed, in either layer
    for kind in ("report (served)", "report (not served)", "prediction", "registration"):
        assert re.search(rf"{re.escape(kind)} [\d,.]+ \([1-9][\d,]*\)", out), (kind, out)  # each was sent
    m = CWS.search(out)
    assert m is not None, out
    server, in_process, replaced = (number(x) for x in m.groups())
    assert server > 0 and in_process == server and replaced > 0, out  # served bags got CWs; bags completed
    s = STORAGE.search(out)
    assert s is not None and number(s.group(1)) > 0 and 0 < number(s.group(2)) < 1000, out
    assert "requests/s: service in process / server" in out and "server CPU:" in out, out
    assert "the whole database grew by" in out, out


def test_the_qos_benchmark_runs_in_quick_mode_on_sqlite(tmp_path):
    out = run_quick(tmp_path, script="bench_qos.py")
    assert "database: SQLite" in out and "pages in use (dbstat)" in out
    check(out)


@pytest.mark.usefixtures("postgres_url")
def test_the_qos_benchmark_runs_in_quick_mode_on_postgresql(tmp_path, postgres_url):
    # it makes (and drops) its databases on that server
    out = run_quick(tmp_path, "--db", postgres_url, script="bench_qos.py")
    assert "database: PostgreSQL" in out and "pg_total_relation_size" in out
    check(out)
