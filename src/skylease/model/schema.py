"""TOML (or JSON) documents checked against a pydantic schema, each mistake one line in our words.

Every configuration file skylease reads (job files, pools files, plan and lease configurations,
catalogs) has a schema derived from :class:`FileModel`: strict types (TOML has them; ``"5"`` is
not a number, ``2.0`` is not a whole number), no unknown keys, no ``inf``/``nan`` unless a field
says so. :func:`validate` maps pydantic's first error (the first in the file) to one line in our
words: ``must be a whole number >= 0, got 'many'``, or ``unknown key 'retires'; did you mean
'retries'?``. This module sits in ``model`` (the lowest layer) so that the catalog can use it too;
reading the files is :mod:`skylease.model.files`'s.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from skylease.model.files import KeyLines, Loc, read_toml, shown, unknown_key

M = TypeVar("M", bound=BaseModel)


def load_toml(path: Path, schema: type[M]) -> tuple[M, KeyLines]:
    """A TOML file checked against ``schema``, and where its keys are (for later checks)."""
    doc, text = read_toml(path)
    keys = KeyLines(text, path)
    return validate(schema, doc, keys), keys


# -- checking against a schema --------------------------------------------------------------------
class FileModel(BaseModel):
    """The base of every file schema: strict types, no unknown keys, finite numbers."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


def validate(schema: type[M], doc: Mapping[str, Any], keys: KeyLines, *, strict: bool | None = None) -> M:
    """``doc`` as a ``schema`` instance, or a UserError about the first mistake in the file
    (``strict``: overrides the schema's own strictness, e.g. False for text fields to convert)."""
    try:
        return schema.model_validate(doc, strict=strict)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    first = min(errors, key=lambda e: keys.line(*e["loc"]) or float("inf"))  # min is stable
    loc = tuple(first["loc"])
    raise keys.error(_message(schema, first), *loc) from None


def _message(schema: type[BaseModel], err: Mapping[str, Any]) -> str:
    loc, kind = tuple(err["loc"]), err["type"]
    if kind == "extra_forbidden":
        return unknown_key(str(loc[-1]), _known_keys(schema, loc[:-1]))
    if kind == "missing":
        return "required, but not given"
    if kind in ("value_error", "assertion_error"):
        return str(err.get("ctx", {}).get("error", err["msg"]))
    if kind in ("string_too_long", "too_long") and "max_length" in err.get("ctx", {}):
        # the reason itself (a 5,000-character command was "must be a non-empty string")
        what = "characters" if kind == "string_too_long" else "items"
        got = err.get("input")
        size = f"{len(got):,} {what}, " if isinstance(got, str | list | tuple | dict) else ""
        return f"too long: {size}at most {err['ctx']['max_length']:,}"
    where = _field_at(schema, loc)
    expected = _expected(*where) if where is not None else None
    if expected is None:
        text = str(err["msg"])
        return f"{text[:1].lower()}{text[1:]}, got {shown(err.get('input'))}"
    return f"must be {expected}, got {shown(err.get('input'))}"


def _unwrap(tp: Any) -> tuple[Any, list[Any]]:
    """The type under ``Annotated[...]`` and ``X | None``, and the constraints met on the way."""
    meta: list[Any] = []
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp, *extra = get_args(tp)
            for e in extra:
                meta.extend(e.metadata if isinstance(e, FieldInfo) else [e])
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp, meta
            tp = args[0]
        else:
            return tp, meta


def _field_at(schema: type[BaseModel], loc: Loc) -> tuple[Any, list[Any], bool] | None:
    """The type at ``loc`` in the schema, its constraints, and whether inf/nan are allowed."""
    tp: Any = schema
    meta: list[Any] = []
    inf_ok = bool(schema.model_config.get("allow_inf_nan", True))
    for part in loc:
        tp, more = _unwrap(tp)
        meta += more
        origin = get_origin(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
            if part not in tp.model_fields:
                return None
            inf_ok = bool(tp.model_config.get("allow_inf_nan", True))
            info = tp.model_fields[part]
            tp, meta = info.annotation, list(info.metadata)
        elif origin in (list, tuple, set, frozenset) and isinstance(part, int):
            tp, meta = get_args(tp)[0], []
        elif origin is dict and isinstance(part, str):
            tp, meta = get_args(tp)[1], []
        else:
            return None
    tp, more = _unwrap(tp)
    return tp, meta + more, inf_ok


_PLURAL = {str: "strings", int: "whole numbers", float: "numbers", bool: "booleans"}


def _expected(tp: Any, meta: list[Any], inf_ok: bool) -> str | None:
    """What a value of type ``tp`` with constraints ``meta`` must be, in words."""
    for m in meta:
        if hasattr(m, "allow_inf_nan"):  # a field's own Field(allow_inf_nan=...)
            inf_ok = bool(m.allow_inf_nan)
    parts = [f"{op} {getattr(m, name):g}" for m in meta
             for cls, name, op in ((at.Ge, "ge", ">="), (at.Gt, "gt", ">"), (at.Le, "le", "<="),
                                   (at.Lt, "lt", "<"))
             if isinstance(m, cls)]
    bounds = "".join(f" {p}" for p in parts[:1]) + "".join(f" and {p}" for p in parts[1:])
    non_empty = any(isinstance(m, at.MinLen) and m.min_length >= 1 for m in meta)
    origin = get_origin(tp)
    if tp is bool:
        return "true or false"
    if tp is int:
        return "a whole number" + bounds
    if tp is float:
        return ("a number" if inf_ok else "a finite number") + bounds
    if tp is str:
        return "a non-empty string" if non_empty else "a string"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (list, tuple, set, frozenset):
        item, _ = _unwrap(get_args(tp)[0])
        if isinstance(item, type) and issubclass(item, BaseModel):
            of = "tables"
        else:
            of = _PLURAL.get(item, "values")
        return f"a {'non-empty ' if non_empty else ''}list of {of}"
    if origin is dict or (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return "a non-empty table" if non_empty else "a table"
    return None


def _known_keys(schema: type[BaseModel], loc: Loc) -> list[str]:
    where = _field_at(schema, loc) if loc else (schema, [], True)
    if where is None:
        return []
    tp = where[0]
    return list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []
