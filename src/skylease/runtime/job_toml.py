"""The schema of a ``.toml`` job file (:mod:`skylease.runtime.jobs` reads it). Apart because it is
pydantic's, which a run of a plain text file of commands does not import."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from skylease.model.limits import MAX_RETRIES
from skylease.model.schema import FileModel


class JobFile(FileModel):
    """The keys of a ``.toml`` job file (the grid's and CSV's contents are checked by the reader)."""

    command: str | None = None
    callable: str | None = None
    grid: dict[str, list[Any]] | None = None
    csv: str | None = None
    retries: Annotated[int, Field(ge=0, le=MAX_RETRIES)] | None = None  # as --retries, which wins when given
    timeout: Annotated[float, Field(gt=0)] | None = None  # seconds, as --timeout
