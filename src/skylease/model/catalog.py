"""Instance types and catalogs of them, loaded from TOML or JSON and validated."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from skylease.model.errors import UserError
from skylease.model.files import KeyLines, parse_json, parse_toml, read_text
from skylease.model.instance import InstanceType
from skylease.model.schema import FileModel, validate


class _InstanceTypeSpec(FileModel):
    """File schema of one instance type (field-level checks give the field in errors)."""

    name: Annotated[str, Field(min_length=1)]
    speed: Annotated[float, Field(gt=0)] = 1.0
    price: Annotated[float, Field(ge=0)] = 0.0
    billing_unit: Annotated[float, Field(gt=0)] = 3600.0
    boot_time: Annotated[float, Field(ge=0)] = 0.0
    max_count: Annotated[int, Field(ge=0)] | None = None
    location: str = "default"
    min_units: Annotated[int, Field(ge=0)] = 1


class _CatalogSpec(FileModel):
    name: str = "catalog"
    instance_type: Annotated[list[_InstanceTypeSpec], Field(min_length=1)]


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
    def from_dict(cls, data: Mapping[str, Any], source: str | Path = "<catalog>", *,
                  text: str | None = None) -> Catalog:
        """Validate a parsed catalog; errors name the source, the field and, given the file's
        ``text``, the line."""
        keys = KeyLines(text or "", source, is_json=Path(str(source)).suffix.lower() == ".json")
        spec = validate(_CatalogSpec, data, keys)
        types = tuple(InstanceType(**s.model_dump()) for s in spec.instance_type)
        names = [t.name for t in types]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise keys.error(f"instance type names must be unique: {name!r} is repeated",
                                 "instance_type", i, "name")
        return cls(types, spec.name)

    @classmethod
    def load(cls, path: str | Path) -> Catalog:
        """Load a catalog from a ``.toml`` or ``.json`` file."""
        p = Path(path)
        if p.suffix.lower() not in (".toml", ".json"):
            raise UserError("catalog must be a .toml or .json file", file=p)
        text = read_text(p)
        data = parse_json(text, p) if p.suffix.lower() == ".json" else parse_toml(text, p)
        if not isinstance(data, dict):
            raise UserError("expected a table/object at top level", file=p, line=1)
        return cls.from_dict(data, source=p, text=text)
