"""Instance types and catalogs of them, loaded from TOML or JSON and validated."""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skylease.model.billing import Billing
from skylease.model.errors import UserError


@dataclass(frozen=True, slots=True)
class InstanceType:
    """A kind of host that can be rented.

    ``speed`` is relative to the reference host (a task of work w takes w / speed seconds);
    ``price`` is per started ``billing_unit`` seconds; ``boot_time`` is charged but does no work;
    ``max_count`` of None means unlimited.
    """

    name: str
    speed: float = 1.0
    price: float = 1.0
    billing_unit: float = 3600.0
    boot_time: float = 0.0
    max_count: int | None = None
    location: str = "default"
    min_units: int = 1

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("instance type name must not be empty")
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise ValueError(f"{self.name}: speed must be > 0, got {self.speed!r}")
        if not (self.boot_time >= 0 and math.isfinite(self.boot_time)):
            raise ValueError(f"{self.name}: boot_time must be >= 0, got {self.boot_time!r}")
        if self.max_count is not None and self.max_count < 0:
            raise ValueError(f"{self.name}: max_count must be >= 0, got {self.max_count!r}")
        Billing(self.billing_unit, self.price, self.min_units)  # validates the billing fields

    @property
    def billing(self) -> Billing:
        return Billing(self.billing_unit, self.price, self.min_units)


class _InstanceTypeSpec(BaseModel):
    """File schema of one instance type (field-level checks give the field in errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Annotated[str, Field(min_length=1)]
    speed: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0
    price: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1.0
    billing_unit: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 3600.0
    boot_time: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    max_count: Annotated[int, Field(ge=0)] | None = None
    location: str = "default"
    min_units: Annotated[int, Field(ge=0)] = 1


class _CatalogSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "catalog"
    instance_type: list[_InstanceTypeSpec] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class Catalog:
    """Named instance types, in file order."""

    types: tuple[InstanceType, ...]
    name: str = "catalog"

    def __post_init__(self) -> None:
        names = [t.name for t in self.types]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"instance type names must be unique, repeated: {sorted(dup)}")

    def __getitem__(self, name: str) -> InstanceType:
        for t in self.types:
            if t.name == name:
                return t
        raise KeyError(name)

    def __iter__(self) -> Iterator[InstanceType]:
        return iter(self.types)

    def __len__(self) -> int:
        return len(self.types)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.types]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "instance_type": [asdict(t) for t in self.types]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str | Path = "<catalog>") -> Catalog:
        """Validate a parsed catalog; errors name the source, line (when known) and field."""
        try:
            spec = _CatalogSpec.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = err["loc"]
            field = ".".join(
                f"[{p}]" if isinstance(p, int) else str(p) for p in loc
            ).replace(".[", "[")
            line = _line_of(source, loc)
            raise UserError(err["msg"].lower(), file=source, line=line, field=field or None) from None
        types = tuple(InstanceType(**s.model_dump()) for s in spec.instance_type)
        try:
            return cls(types, spec.name)
        except ValueError as exc:
            raise UserError(str(exc), file=source, field="instance_type") from None

    @classmethod
    def load(cls, path: str | Path) -> Catalog:
        """Load a catalog from a ``.toml`` or ``.json`` file."""
        p = Path(path)
        if not p.is_file():
            raise UserError("no such file", file=p)
        text = p.read_text(encoding="utf-8")
        try:
            if p.suffix.lower() == ".json":
                data = json.loads(text)
            elif p.suffix.lower() == ".toml":
                data = tomllib.loads(text)
            else:
                raise UserError("catalog must be a .toml or .json file", file=p)
        except json.JSONDecodeError as exc:
            raise UserError(exc.msg, file=p, line=exc.lineno) from None
        except tomllib.TOMLDecodeError as exc:
            raise UserError(str(exc), file=p) from None
        if not isinstance(data, dict):
            raise UserError("expected a table/object at top level", file=p, line=1)
        return cls.from_dict(data, source=p)


def _line_of(source: str | Path, loc: tuple[Any, ...]) -> int | None:
    """Best-effort line of ``instance_type[i].field`` in a TOML or JSON catalog file."""
    p = Path(source)
    if not p.is_file() or not loc:
        return None
    lines = p.read_text(encoding="utf-8").splitlines()
    if loc[0] != "instance_type" or len(loc) < 2 or not isinstance(loc[1], int):
        key = str(loc[0])
        return next((i + 1 for i, s in enumerate(lines) if _names_key(s, key)), None)
    idx, key = loc[1], str(loc[2]) if len(loc) > 2 else None
    if p.suffix.lower() == ".toml":
        headers = [i for i, s in enumerate(lines) if s.strip().startswith("[[instance_type]]")]
    else:
        headers = [i for i, s in enumerate(lines) if '"name"' in s]
    if idx >= len(headers):
        return None
    start = headers[idx]
    end = headers[idx + 1] if idx + 1 < len(headers) else len(lines)
    if key is None:
        return start + 1
    for i in range(max(0, start - 1), end):
        if _names_key(lines[i], key):
            return i + 1
    return start + 1


def _names_key(line: str, key: str) -> bool:
    s = line.strip().lstrip("{,").strip()
    return s.startswith((f"{key} ", f"{key}=", f'"{key}"'))
