"""Shared fixtures. Real data sets are reached only through ``shared_data``."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The project's real traces in ``../shared/data`` (skips when that folder is absent)."""
    path = ROOT.parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"real data not available: {path} is missing (see docs/howto/data.md)")
    return path


@pytest.fixture(autouse=True)
def _no_warm_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `skylease run` a test starts runs in its own process, unless the test asks for the warm
    service (tests/service), so no test leaves a service behind."""
    monkeypatch.setenv("SKYLEASE_NO_SERVER", "1")
