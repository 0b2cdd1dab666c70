"""``skylease serve calibrate``: the site's machines timed with real guests, the scheduler's
overheads fitted to them (runtime/leases/calibrate.py), as a scheduler configuration file."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skylease.experiments.leases import load_config
from skylease.model.errors import UserError
from skylease.runtime.leases.calibrate import Sample, calibrate_site, to_toml
from skylease.runtime.leases.site import load_site

__all__ = ["calibrate", "parse_sizes"]


def parse_sizes(text: str) -> list[int]:
    """``"96,128,256"`` as MB sizes (UserError naming ``--sizes``)."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes:
        raise UserError(f"a comma-separated list of whole MB, got {text!r}", field="--sizes")
    return sizes


def calibrate(site_file: Path, image: str, sizes: str, time_scale: float, base: str,
              say: Callable[[str], None] | None = None) -> tuple[dict[str, Any], list[Sample], str]:
    """The fitted keys, the samples and the configuration file's text (checked: it loads)."""
    load_config(base)  # (a wrong base is said before any guest boots)
    site = load_site(site_file)
    keys, samples = calibrate_site(site, image, parse_sizes(sizes), time_scale, say=say or (lambda _: None))
    text = to_toml(keys, samples, time_scale, base)
    with tempfile.TemporaryDirectory(prefix="skylease-calibrated-") as tmp:  # (what is written loads)
        check = Path(tmp) / "calibrated.toml"
        check.write_text(text)
        load_config(check)
    return keys, samples, text
