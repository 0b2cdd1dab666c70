"""The TOML file of ``skylease plan MODEL --config FILE``: one schema per model.

Keys: ``catalog`` (a shipped name or a file), ``types`` (the type names to use), ``[grid]``
(``lo``, ``hi``, ``step`` of the deadline grid), ``[options]`` (the model's solver options), and
``[job]`` (mapreduce, hybrid) or ``scenario`` / ``[[models]]`` (multi). A key of another model is
an unknown key here: nothing in the file is silently ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from skylease.model.files import KeyLines
from skylease.model.schema import FileModel, load_toml

_Name = Annotated[str, Field(min_length=1)]
_Pos = Annotated[float, Field(gt=0)]
_NonNeg = Annotated[float, Field(ge=0)]

#: The most deadlines a grid may hold (each is one solve; the shipped grids hold 24 to 96).
MAX_DEADLINES = 1000


class Grid(FileModel):
    lo: _Pos | None = None
    hi: _Pos | None = None
    step: _Pos | None = None


class _MapReduceJob(FileModel):
    map_work: _NonNeg | None = None
    reduce_work: _NonNeg | None = None


class _WatershedJob(FileModel):
    n_tasks: Annotated[int, Field(ge=1)] | None = None
    task_minutes: _Pos | None = None
    input_gb: _NonNeg | None = None
    local_cores: Annotated[int, Field(ge=0)] | None = None


class _MapReduceOptions(FileModel):
    limit: Annotated[int, Field(ge=1)] | None = None
    limit_scope: Literal["total", "per_type", "none"] | None = None
    billing: Literal["per_phase", "single_cluster"] | None = None
    method: Literal["auto", "ilp", "enumerate"] | None = None


class _HybridOptions(FileModel):
    interval_min: _Pos | None = None
    billing: Literal["hourly", "minute"] | None = None
    tiebreak: bool | None = None
    capacity: Literal["whole", "fluid"] | None = None
    method: Literal["auto", "ilp", "dp"] | None = None


class _MultiOptions(_HybridOptions):
    transfer_out_per_gb: dict[str, _NonNeg] | None = None
    init_penalty_tasks: _NonNeg | None = None


class _Model(FileModel):
    name: _Name
    n_tasks: Annotated[int, Field(ge=1)]
    task_minutes: _Pos
    input_gb: _NonNeg = 1.0
    data_at: Annotated[list[_Name], Field(min_length=1)]


class _Common(FileModel):
    catalog: _Name | None = None
    types: Annotated[list[_Name], Field(min_length=1)] | None = None
    grid: Grid | None = None


class MapReduceConfig(_Common):
    job: _MapReduceJob | None = None
    options: _MapReduceOptions | None = None


class HybridConfig(_Common):
    job: _WatershedJob | None = None
    options: _HybridOptions | None = None


class MultiConfig(_Common):
    options: _MultiOptions | None = None
    scenario: Literal["A", "B"] | None = None
    models: Annotated[list[_Model], Field(min_length=1)] | None = None

    @field_validator("scenario", mode="before")
    @classmethod
    def _upper(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v


SCHEMAS: dict[str, type[_Common]] = {"mapreduce": MapReduceConfig, "hybrid": HybridConfig,
                                     "multi": MultiConfig}


def read_plan_config(model: str, path: str | Path | None) -> tuple[_Common, KeyLines]:
    """The configuration of ``model`` (all defaults without a file) and where its keys are."""
    if path is None:
        return SCHEMAS[model](), KeyLines("", None)
    return load_toml(Path(path), SCHEMAS[model])
