"""skylease: plan, run and simulate bags of tasks and resource leases."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("skylease")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
