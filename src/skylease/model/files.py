"""Reading the user's files: text, JSON and TOML, each mistake one :class:`UserError` naming the
file and the line; where a document's keys are (:class:`KeyLines`) and how a message shows a key
or a value. Checking a document against a schema is :mod:`skylease.model.schema`'s: this module
imports no pydantic, so that a command reading a plain file (``skylease run jobs.txt``) does not
pay for it (some 0.1 s at every start)."""

from __future__ import annotations

import ast
import datetime as dt
import difflib
import gzip
import json
import re
import warnings
from collections.abc import Mapping, Sequence
from itertools import accumulate, repeat
from operator import sub
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError

Loc = tuple[str | int, ...]


# -- reading --------------------------------------------------------------------------------------
def read_bytes(path: Path) -> bytes:
    """The whole file (gunzipped if the name ends in .gz), or a UserError naming it."""
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError("file not found", file=path) from None
    except IsADirectoryError:
        raise UserError("is a directory, not a file", file=path) from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"cannot read file: {' '.join(reason.split())}", file=path) from None


def read_text(path: Path) -> str:
    """The whole file as UTF-8 text (a leading byte-order mark dropped), or a UserError naming it."""
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UserError("not a text file (invalid UTF-8)", file=path, line=line) from None


def read_json(path: Path) -> object:
    """The parsed JSON document of a (possibly gzipped) file, or a UserError naming file and line."""
    return parse_json(read_text(path), path)


def parse_json(text: str, file: str | Path, *, bounded: bool = False) -> object:
    """The JSON document in ``text``, or a UserError naming ``file`` and the line. ``bounded``: a
    text from a client (a request body, a request file) is first held to :func:`check_json_limits`."""
    if bounded:
        check_json_limits(text, file)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON: {exc.msg}", file=file, line=exc.lineno) from None
    except RecursionError:  # (nested deeper than the parser's stack: no traceback either)
        raise UserError("not valid JSON: nested too deeply", file=file) from None
    except ValueError as exc:  # an integer past Python's 4,300 digits
        raise UserError(f"not valid JSON: {' '.join(str(exc).split())}", file=file) from None


#: The deepest nesting of arrays and objects, and the longest number (in characters), of a JSON
#: text from a client: far beyond what any request needs, far below what makes the parser recurse
#: or convert for long (docs/decisions/serve-request-bodies.md).
JSON_MAX_DEPTH = 32
JSON_MAX_NUMBER = 100
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_NUMBER = re.compile(r"(?<![-+0-9.eE])[-0-9][-+0-9.eE]{" + str(JSON_MAX_NUMBER) + ",}")
_JSON_BRACKETS = re.compile(r"[^\[\]{}]+")
_OPEN_CLOSE = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def check_json_limits(text: str, file: str | Path) -> None:
    """A UserError (naming ``file`` and the line) if the JSON ``text`` nests arrays and objects
    deeper than :data:`JSON_MAX_DEPTH` or holds a number longer than :data:`JSON_MAX_NUMBER`
    characters; read before parsing, in linear time, strings left out (a bracket or a digit inside
    one counts for nothing). Whether the text is valid JSON is the parser's to say."""
    bare = _JSON_STRING.sub('""', text)  # (a valid string holds no raw line break: lines are kept)
    if (m := _JSON_NUMBER.search(bare)) is not None:
        raise UserError(f"a number longer than {JSON_MAX_NUMBER} characters", file=file,
                        line=bare.count("\n", 0, m.start()) + 1)
    brackets = _JSON_BRACKETS.sub("", bare).encode("ascii").translate(_OPEN_CLOSE)
    if not brackets or max(accumulate(map(sub, brackets, repeat(1)))) <= JSON_MAX_DEPTH:
        return  # (each bracket as +1 or -1, summed in C: the deepest level)
    depth = 0
    for m in re.finditer(r"[\[\]{}]", bare):  # (rare: where it went too deep, for the line)
        depth += 1 if m.group() in "[{" else -1
        if depth > JSON_MAX_DEPTH:
            raise UserError(f"nested more than {JSON_MAX_DEPTH} levels deep (arrays and objects)",
                            file=file, line=bare.count("\n", 0, m.start()) + 1)


_TOML_POS_RE = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_TOML_END_RE = re.compile(r"\s*\(at end of document\)$")


def parse_toml(text: str, file: str | Path) -> dict[str, Any]:
    """The TOML document in ``text``, or a UserError naming ``file`` and the line."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg, line = str(exc), None
        if m := _TOML_POS_RE.search(msg):
            line, msg = int(m.group(1)), f"{msg[: m.start()]} (column {m.group(2)})"
        elif m := _TOML_END_RE.search(msg):
            line, msg = max(1, len(text.splitlines())), f"{msg[: m.start()]} (at end of file)"
        raise UserError(f"not valid TOML: {msg}", file=file, line=line) from None


def read_toml(path: Path) -> tuple[dict, str]:
    """The parsed TOML document and its text, or a UserError naming file and line."""
    text = read_text(path)
    return parse_toml(text, path), text


# -- where keys are -------------------------------------------------------------------------------
_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_TABLE_RE = re.compile(rf"^\s*\[\s*({_DOTTED})\s*\]")
_ARRAY_RE = re.compile(rf"^\s*\[\[\s*({_DOTTED})\s*\]\]")
_KEYVAL_RE = re.compile(rf"^\s*({_DOTTED})\s*=(.*)$")


def _key_parts(dotted: str) -> list[str]:
    return [k[1:-1] if k[0] in "\"'" else k for k in re.findall(_KEY, dotted)]


class KeyLines:
    """The line of every key of a TOML (or JSON) text, by its path: ``("pools", "gpu", "price")``,
    ``("instance_type", 1, "speed")`` (the second ``[[instance_type]]``).

    tomllib gives no positions, so this reads the text line by line: table headers, arrays of
    tables, dotted keys and multi-line strings are followed; a key inside an inline table or a
    multi-line array has the line of the key that holds it.
    """

    def __init__(self, text: str, file: str | Path | None, *, is_json: bool = False) -> None:
        self.file = file
        self._lines: dict[Loc, int] = {}
        if is_json:
            self._index_json(text)
        else:
            self._index_toml(text)

    def line(self, *loc: str | int) -> int | None:
        """The line of the key at ``loc``, or of the nearest enclosing key that has one."""
        for n in range(len(loc), 0, -1):
            if (line := self._lines.get(tuple(loc[:n]))) is not None:
                return line
        return None

    def error(self, message: str, *loc: str | int) -> UserError:
        """A UserError about the key at ``loc``: its file, its line and its dotted name."""
        return UserError(message, file=self.file, line=self.line(*loc), field=field_name(loc) or None)

    def _index_toml(self, text: str) -> None:
        table: Loc = ()
        arrays: dict[Loc, int] = {}  # each array of tables: the index of its last element

        def resolve(parts: list[str]) -> Loc:
            out: list[str | int] = []
            for p in parts:
                out.append(p)
                if tuple(out) in arrays:
                    out.append(arrays[tuple(out)])
            return tuple(out)

        closing: str | None = None  # the delimiter of the multi-line string being read
        for number, raw in enumerate(text.splitlines(), 1):
            if closing is not None:
                if raw.count(closing) % 2 == 1:
                    closing = None
                continue
            if m := _ARRAY_RE.match(raw):
                parts = _key_parts(m.group(1))
                base = (*resolve(parts[:-1]), parts[-1])
                arrays[base] = arrays.get(base, -1) + 1
                table = (*base, arrays[base])
                self._mark(table, number)
            elif m := _TABLE_RE.match(raw):
                table = resolve(_key_parts(m.group(1)))
                self._mark(table, number)
            elif m := _KEYVAL_RE.match(raw):
                self._mark(table + tuple(_key_parts(m.group(1))), number)
                value = m.group(2)
                for quote in ('"""', "'''"):
                    if value.count(quote) % 2 == 1:
                        closing = quote
                        break

    def _index_json(self, text: str) -> None:
        # Python's parser reads JSON (true/false/null are names) and keeps every node's line
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # JSON escapes Python does not know, such as \/
                tree = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        todo: list[tuple[Loc, ast.AST]] = [((), tree)]
        while todo:
            loc, node = todo.pop()
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values, strict=True):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        self._mark((*loc, k.value), k.lineno)
                        todo.append(((*loc, k.value), v))
            elif isinstance(node, ast.List):
                for i, v in enumerate(node.elts):
                    self._mark((*loc, i), v.lineno)
                    todo.append(((*loc, i), v))

    def _mark(self, loc: Loc, line: int) -> None:
        for n in range(1, len(loc) + 1):  # a dotted key also places the tables it names
            self._lines.setdefault(loc[:n], line)


def field_name(loc: Sequence[str | int]) -> str:
    """``("models", 0, "n_tasks")`` as ``models[0].n_tasks``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def unknown_key(key: str, known: Sequence[str]) -> str:
    """``unknown key 'retires'; did you mean 'retries'?`` (or the known keys, when none is near)."""
    near = difflib.get_close_matches(key, known, n=1)
    if near:
        return f"unknown key {key!r}; did you mean {near[0]!r}?"
    return f"unknown key {key!r}; the keys are {', '.join(known)}" if known else f"unknown key {key!r}"


def shown(value: Any) -> str:
    """A TOML value as a message shows it: short, and in TOML's words."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, dt.date | dt.time):  # a datetime is a date
        return "a date/time"
    if isinstance(value, Mapping):
        return "a table" if value else "an empty table"
    if isinstance(value, list | tuple):
        return "[]" if not value else "a list"
    return repr(value)
