"""Instance-type catalogs: frozen ``CloudType`` records, loaded from package-data or user TOML files."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated

from pydantic import Field

from skylease.model.errors import UserError
from skylease.model.files import KeyLines, parse_toml, read_text
from skylease.model.schema import FileModel, validate

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


class _TypeSpec(FileModel):
    name: Annotated[str, Field(min_length=1)]
    location: Annotated[str, Field(min_length=1)]
    capacity: Annotated[float, Field(gt=0)]
    price_hour: Annotated[float, Field(ge=0)]
    price_minute: Annotated[float, Field(ge=0)] | None = None
    init_minutes: Annotated[float, Field(ge=0)] = 0.0
    max_count: Annotated[int, Field(ge=0)] | None = None
    cores: Annotated[int, Field(ge=1)] = 1


class _CatalogFile(FileModel):
    types: Annotated[list[_TypeSpec], Field(min_length=1)]


def load_catalog(name_or_path: str | Path) -> tuple[CloudType, ...]:
    """Load ``emr`` / ``hybrid`` (shipped with skylease) or a TOML file with ``[[types]]`` tables."""
    key = str(name_or_path)
    if key in BUILTIN:
        src = resources.files("skylease").joinpath("data", "catalogs", f"{key}.toml")
        return parse_catalog(src.read_text(encoding="utf-8"), f"<catalog {key}>")
    path = Path(name_or_path)
    if not path.exists():
        raise UserError(f"no such catalog (built-in: {', '.join(BUILTIN)})", file=path)
    return parse_catalog(read_text(path), str(path))


def parse_catalog(text: str, label: str = "<catalog>") -> tuple[CloudType, ...]:
    """The instance types of a catalog's TOML text; errors name ``label``, the line and the field."""
    keys = KeyLines(text, label)
    spec = validate(_CatalogFile, parse_toml(text, label), keys)
    out: list[CloudType] = []
    for n, row in enumerate(spec.types):
        if any(t.name == row.name for t in out):
            raise keys.error(f"duplicate type name {row.name!r}", "types", n, "name")
        out.append(CloudType(**row.model_dump()))
    return tuple(out)


def pick(types: tuple[CloudType, ...] | list[CloudType], *names: str) -> tuple[CloudType, ...]:
    """The named types, in the given order (UserError on an unknown name)."""
    by = {t.name: t for t in types}
    missing = [n for n in names if n not in by]
    if missing:
        raise UserError(f"unknown instance type(s) {', '.join(missing)}; known: {', '.join(by)}",
                        field="types")
    return tuple(by[n] for n in names)
