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

__all__ = ["CALIBRATION_FILE", "calibrate", "calibrated", "parse_sizes"]

#: The calibrated keys of a scheduler configuration.
KEYS = ("suspend_rate", "resume_rate", "enactment_overhead_s", "shutdown_s")
#: The memory sizes (MB) a server's start-up calibration times.
DEFAULT_SIZES = (96, 128, 256)


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
              say: Callable[[str], None] | None = None, pause_s: float = 0.0
              ) -> tuple[dict[str, Any], list[Sample], str]:
    """The fitted keys, the samples and the configuration file's text (checked: it loads); each
    guest is resumed ``pause_s`` seconds after its save."""
    load_config(base)  # (a wrong base is said before any guest boots)
    site = load_site(site_file)
    keys, samples = calibrate_site(site, image, parse_sizes(sizes), time_scale, say=say or (lambda _: None),
                                   pause_s=pause_s)
    text = to_toml(keys, samples, time_scale, base)
    with tempfile.TemporaryDirectory(prefix="skylease-calibrated-") as tmp:  # (what is written loads)
        check = Path(tmp) / "calibrated.toml"
        check.write_text(text)
        load_config(check)
    return keys, samples, text


#: The calibration a server made at its first start (``--calibrate``), in its data folder.
CALIBRATION_FILE = "calibration.toml"


def calibrated(scheduler: Any, site: Any, image: str, time_scale: float, data_dir: Path,
               say: Callable[[str], None]) -> Any:
    """``scheduler`` with the VM overheads of ``<data_dir>/calibration.toml``: made at the first
    start by timing guests of ``image`` on the site's machines (written then), read at every later
    one (a restart must schedule under the configuration its journal was made with)."""
    import tomllib

    path = data_dir / CALIBRATION_FILE
    if path.exists():
        try:
            keys = {k: v for k, v in tomllib.loads(path.read_text()).items() if k in KEYS}
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UserError(f"cannot be read: {exc}", file=path) from None
        say(f"the VM overheads calibrated at the first start ({path}): "
            + ", ".join(f"{k} = {v}" for k, v in keys.items()))
    else:
        say(f"calibrating the VM overheads with image {image!r} (a minute or so; once: kept in {path})")
        smallest = min(n.capacity.memory for n in site.nodes)
        sizes = [m for m in DEFAULT_SIZES if m <= smallest] or [smallest]
        try:
            keys, samples = calibrate_site(site, image, sizes, time_scale, say=say)
        except UserError as exc:
            raise UserError(exc.message, field="--calibrate") from None
        keys = {k: v for k, v in keys.items() if v is not None}
        notes = [line for line in to_toml(keys, samples, time_scale, "NOVM-SR").splitlines()
                 if line.startswith("#")]
        text = "\n".join([*(f"{k} = {v}" for k, v in keys.items()), "", *notes])
        part = path.with_name(path.name + ".part")
        part.write_text(text + "\n")
        part.replace(path)
    try:
        return scheduler.with_(**keys)
    except (TypeError, ValueError) as exc:
        raise UserError(f"not a calibration: {exc}", file=path) from None
