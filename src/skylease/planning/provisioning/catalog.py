"""Instance-type catalogs: frozen ``CloudType`` records, loaded from package-data or user TOML files."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError

BUILTIN = ("emr", "hybrid")


@dataclass(frozen=True)
class CloudType:
    """One instance type.

    ``capacity``: MapReduce work per instance-hour (Small-instance hours), or for Watershed the speed
    of one core relative to the reference core. ``price_minute`` defaults to ``price_hour / 60``.
    ``max_count``: maximum concurrent instances (AVAILABILITY); None = unlimited.
    """

    name: str
    location: str
    capacity: float
    price_hour: float
    price_minute: float | None = None
    init_minutes: float = 0.0
    max_count: int | None = None
    cores: int = 1

    @property
    def minute_price(self) -> float:
        return self.price_hour / 60.0 if self.price_minute is None else self.price_minute


_FIELDS = {"name": str, "location": str, "capacity": float, "price_hour": float, "price_minute": float,
           "init_minutes": float, "max_count": int, "cores": int}
_REQUIRED = ("name", "location", "capacity", "price_hour")


def load_catalog(name_or_path: str | Path) -> tuple[CloudType, ...]:
    """Load ``emr`` / ``hybrid`` (shipped with skylease) or a TOML file with ``[[types]]`` tables."""
    key = str(name_or_path)
    if key in BUILTIN:
        src = resources.files("skylease").joinpath("data", "catalogs", f"{key}.toml")
        label = f"<catalog {key}>"
        text = src.read_text(encoding="utf-8")
    else:
        path = Path(name_or_path)
        label = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"no such catalog (built-in: {', '.join(BUILTIN)})", file=path) from None
        except OSError as e:
            raise UserError(f"cannot read catalog: {e.strerror}", file=path) from None
    return parse_catalog(text, label)


def parse_catalog(text: str, label: str = "<catalog>") -> tuple[CloudType, ...]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"invalid TOML: {e}", file=label) from None
    extra = set(doc) - {"types"}
    if extra:
        raise UserError(f"unknown key(s) {', '.join(sorted(extra))}; expected [[types]]", file=label)
    rows = doc.get("types")
    if not isinstance(rows, list) or not rows:
        raise UserError("expected a non-empty [[types]] array", file=label, field="types")
    out: list[CloudType] = []
    seen: set[str] = set()
    for n, row in enumerate(rows):
        out.append(_parse_type(row, label, n, seen))
    return tuple(out)


def _parse_type(row: Any, label: str, n: int, seen: set[str]) -> CloudType:
    where = f"types[{n}]"
    if not isinstance(row, dict):
        raise UserError("expected a table", file=label, field=where)
    unknown = set(row) - set(_FIELDS)
    if unknown:
        raise UserError(f"unknown key(s) {', '.join(sorted(unknown))}", file=label, field=where)
    for k in _REQUIRED:
        if k not in row:
            raise UserError("missing", file=label, field=f"{where}.{k}")
    vals: dict[str, Any] = {}
    for k, v in row.items():
        f = f"{where}.{k}"
        want = _FIELDS[k]
        if want is str:
            if not isinstance(v, str) or not v.strip():
                raise UserError("expected a non-empty string", file=label, field=f)
        elif want is int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise UserError(f"expected an integer, got {v!r}", file=label, field=f)
            if v < (1 if k == "cores" else 0):
                raise UserError(f"must be >= {1 if k == 'cores' else 0}, got {v}", file=label, field=f)
        else:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise UserError(f"expected a finite number, got {v!r}", file=label, field=f)
            v = float(v)
            if v < 0 or (k == "capacity" and v == 0):
                rel = ">" if k == "capacity" else ">="
                raise UserError(f"must be {rel} 0, got {v:g}", file=label, field=f)
        vals[k] = v
    if vals["name"] in seen:
        raise UserError(f"duplicate type name {vals['name']!r}", file=label, field=f"{where}.name")
    seen.add(vals["name"])
    return CloudType(**vals)


def pick(types: tuple[CloudType, ...] | list[CloudType], *names: str) -> tuple[CloudType, ...]:
    """The named types, in the given order (UserError on an unknown name)."""
    by = {t.name: t for t in types}
    missing = [n for n in names if n not in by]
    if missing:
        raise UserError(f"unknown instance type(s) {', '.join(missing)}; known: {', '.join(by)}",
                        field="types")
    return tuple(by[n] for n in names)
