"""skylease: plan, run and simulate bags of tasks and resource leases."""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # looked up on first use: importlib.metadata costs tens of milliseconds at every start
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("skylease")
        except PackageNotFoundError:  # running from a source tree that was never installed
            return "0.0.0+unknown"
    raise AttributeError(f"module 'skylease' has no attribute {name!r}")
