"""The benchmarks' quick mode, run as a user runs it (test_bench_*.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_quick(tmp_path: Path, *extra: str, script: str = "bench_serve.py") -> str:
    """``benchmarks/SCRIPT --quick EXTRA`` in ``tmp_path``; its output (it must succeed)."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick", *extra],
                       cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stdout
