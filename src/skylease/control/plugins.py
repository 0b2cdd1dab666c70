"""One loader for every plug-in class a user names: ``MODULE:CLASS``, ``path/to/file.py:CLASS``, an
installed package's name (an entry point), with keyword parameters checked against the class.

The users: ``skylease run --policy`` (bag policies, :class:`skylease.control.env.Policy`), the
lease scheduler's policies (:mod:`skylease.control.leases.policies`), ``skylease map --heuristic``
and ``skylease place --algorithm`` (``skylease.experiments.mapping`` and ``.placement``). Each
names its built-ins; a name that is none of them is looked for here:

* ``MODULE:CLASS``: the module is imported with importlib (``CLASS`` may be dotted).
* ``FILE.py:CLASS`` (a spec whose module part ends in ``.py`` or holds a ``/``): the file is loaded
  as a module of its own (named ``skylease_plugin_<stem>_<hash of its path>``, so it never hides an
  installed module). Its folder is on ``sys.path`` only while the file runs, so it may import a
  helper beside it; ``sys.path`` is as it was afterwards. The same file, unchanged, is loaded once.
* ``NAME`` (no colon): the entry point ``NAME`` of the caller's group (``skylease.policies`` for
  bag policies), as an installed package declares it in its metadata.

Parameters come as text (``--policy-arg KEY=VALUE``: :func:`parse_args` marks them :class:`Text`)
or typed (a TOML table: :func:`params_from_toml`). Text is converted by the constructor's
annotation: ``int``, ``float`` (never NaN), ``bool`` (true/false, yes/no, on/off, 1/0), ``str``,
a union of these (tried in its order), and ``X | None`` (the text ``none`` is ``None``); a
parameter without annotation gets the text. A typed value must fit its annotation (an ``int``
fits a ``float``). Every mistake is a :class:`PluginError`: a :class:`~skylease.model.errors.UserError`
in one line, with the plug-in's file and line when the plug-in's own code fails. No traceback.
The decisions behind these rules: ``docs/decisions/plugins.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import math
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError

#: The entry-point group an installed package declares its bag policies in.
POLICY_GROUP = "skylease.policies"

#: Parameter types text can be converted to (and typed values are checked against).
SCALARS: tuple[type, ...] = (bool, int, float, str)
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


class PluginError(UserError):
    """A plug-in that cannot be used; ``param`` names the parameter at fault (None: the class)."""

    def __init__(self, message: str, *, file: str | Path | None = None, line: int | None = None,
                 param: str | None = None) -> None:
        super().__init__(message, file=file, line=line)
        self.param = param


# -- finding the class ------------------------------------------------------------------------------
def is_spec(name: str) -> bool:
    """Whether ``name`` names a class (``MODULE:CLASS`` or ``FILE.py:CLASS``), not a built-in word."""
    module, sep, attr = name.strip().rpartition(":")
    return bool(sep and module.strip() and attr.strip())


def is_file_spec(name: str) -> bool:
    module = name.strip().rpartition(":")[0].strip()
    return module.endswith(".py") or "/" in module


def resolve_file_spec(name: str, base: Path | None = None) -> str:
    """``FILE.py:CLASS`` with the file's path made absolute (from ``base``, default the working
    folder), so that the spec means the same file from anywhere; any other spec unchanged."""
    if not is_spec(name) or not is_file_spec(name):
        return name
    path, _, attr = name.strip().rpartition(":")
    full = (base or Path.cwd()) / Path(path.strip()).expanduser()
    return f"{full.resolve()}:{attr.strip()}"


def load_class(spec: str, *, base: type | None = None, group: str | None = None,
               what: str = "plug-in") -> type:
    """The class ``spec`` names (see the module's doc), a subclass of ``base`` if given."""
    spec = spec.strip()
    if is_spec(spec):
        module_part, _, attr = spec.rpartition(":")
        module_part, attr = module_part.strip(), attr.strip()
        if is_file_spec(spec):
            module = _load_file(Path(module_part).expanduser())
            where = module_part
        else:
            module = _import(module_part)
            where = f"module {module_part!r}"
        obj: Any = module
        for part in attr.split("."):
            if not part.isidentifier() or not hasattr(obj, part):
                raise PluginError(f"{where} has no class {attr!r}")
            obj = getattr(obj, part)
    elif group is not None and ":" not in spec:
        obj = _entry_point(spec, group, what)
    else:
        raise PluginError(f"{spec!r} is not MODULE:CLASS or FILE.py:CLASS")
    if not inspect.isclass(obj):
        raise PluginError(f"{spec!r} is a {type(obj).__name__}, not a class")
    if base is not None and not issubclass(obj, base):
        raise PluginError(f"{class_path(obj)} is not a {what}: it must derive from "
                          f"{class_path(base)}")
    return obj


def class_path(cls: type) -> str:
    """``module:Qualname`` of a class; ``/path/to/file.py:Qualname`` for a class of a file plug-in
    (the spec that loads it again)."""
    module = sys.modules.get(cls.__module__)
    where = getattr(module, "__skylease_file__", None) or cls.__module__
    return f"{where}:{cls.__qualname__}"


def _import(name: str) -> types.ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            raise PluginError(f"no module named {e.name!r} (is it installed, or on PYTHONPATH?)") from None
        raise failure(e, name) from None
    except Exception as e:  # the plug-in's own code fails: say where, in one line
        raise failure(e, name) from None


def _load_file(path: Path) -> types.ModuleType:
    try:
        full = path.resolve()
        stat = full.stat()
    except FileNotFoundError:
        raise PluginError("no such file", file=path) from None
    except OSError as e:  # a name too long, a folder one cannot enter...
        raise PluginError(f"cannot read it: {e.strerror or e}", file=path) from None
    if not full.is_file():
        raise PluginError("is not a Python file (a folder?)", file=path)
    tag = hashlib.sha256(str(full).encode()).hexdigest()[:10]
    stem = "".join(c if c.isalnum() else "_" for c in full.stem)
    name = f"skylease_plugin_{stem}_{tag}"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__skylease_stat__", None) == (stat.st_mtime_ns, stat.st_size):
        return loaded
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise PluginError("cannot be loaded as a Python module", file=path)
    module = importlib.util.module_from_spec(spec)
    module.__skylease_stat__ = (stat.st_mtime_ns, stat.st_size)  # type: ignore[attr-defined]
    module.__skylease_file__ = str(full)  # type: ignore[attr-defined]
    sys.modules[name] = module  # (dataclasses and typing look a class's module up here)
    folder = str(full.parent)
    sys.path.insert(0, folder)  # its helpers beside it import while it runs; not after
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop(name, None)
        if isinstance(e, KeyboardInterrupt):
            raise
        raise failure(e, str(path)) from None
    finally:
        with contextlib.suppress(ValueError):  # (unless the plug-in took it out itself)
            sys.path.remove(folder)
    return module


def failure(e: BaseException, what: str) -> PluginError:
    """The plug-in's own error as one line: its file and line (the deepest frame outside Python's
    import machinery), the exception's type and message."""
    if isinstance(e, SyntaxError):
        return PluginError(f"cannot load {what}: SyntaxError: {e.msg}", file=e.filename, line=e.lineno)
    file, line = None, None
    tb = e.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith("<") and "importlib" not in Path(name).parts:
            file, line = name, tb.tb_lineno
        tb = tb.tb_next
    return PluginError(f"cannot load {what}: {type(e).__name__}: {_first_line(e)}", file=file, line=line)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"


def entry_point_names(group: str) -> list[str]:
    """The names installed packages declare in the entry-point group ``group``, sorted."""
    from importlib.metadata import entry_points  # (70 ms: only when a name is looked up)

    return sorted({ep.name for ep in entry_points(group=group)})


def _entry_point(name: str, group: str, what: str) -> Any:
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=group) if ep.name == name]
    if not found:
        known = entry_point_names(group)
        listed = f"; installed: {', '.join(known)}" if known else ""
        raise PluginError(f"no {what} named {name!r} (give MODULE:CLASS or FILE.py:CLASS, or install "
                          f"a package declaring it in the entry-point group {group!r}){listed}")
    ep = found[0]
    try:
        return ep.load()
    except ModuleNotFoundError as e:
        module = ep.value.partition(":")[0].strip()
        if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
            raise PluginError(f"entry point {name!r} ({ep.value}): no module named {e.name!r}") from None
        raise failure(e, f"entry point {name!r} ({ep.value})") from None
    except AttributeError:
        raise PluginError(f"entry point {name!r} ({ep.value}): no such class") from None
    except Exception as e:
        raise failure(e, f"entry point {name!r} ({ep.value})") from None


# -- parameters -------------------------------------------------------------------------------------
class Text(str):
    """A parameter given as text (``--policy-arg KEY=VALUE``): converted by the annotation. A plain
    ``str`` is a typed value (from a TOML table), checked against it like any other."""

    __slots__ = ()


def parse_args(pairs: Sequence[str], option: str = "--policy-arg") -> dict[str, Text]:
    """``KEY=VALUE`` texts as a mapping (a key given twice is a mistake, not "the last wins")."""
    out: dict[str, Text] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise UserError(f"expected KEY=VALUE with KEY a parameter name, got {pair!r}", field=option)
        if key in out:
            raise UserError(f"{key!r} is given twice", field=option)
        out[key] = Text(value.strip())
    return out


def params_from_toml(path: str | Path, table: str | None = None) -> dict[str, Any]:
    """The typed keyword parameters of a TOML file (its table ``table``, dotted, or the whole file)."""
    from skylease.model.files import read_toml

    path = Path(path)
    try:
        data: Any = read_toml(path)[0]
    except UserError as e:
        raise PluginError(e.message, file=e.file, line=e.line) from None
    for part in (table.split(".") if table else []):
        if not isinstance(data, dict) or part not in data:
            raise PluginError(f"no table [{table}]", file=path)
        data = data[part]
    if not isinstance(data, dict):
        raise PluginError(f"[{table}] is not a table", file=path)
    return dict(data)


def accepted(cls: type) -> list[str] | None:
    """The keyword parameters ``cls``'s constructor takes (None: any, it takes ``**kwargs``)."""
    try:
        ps = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in ps.values()):
        return None
    return [n for n, p in ps.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def check_params(cls: type, params: Mapping[str, Any]) -> None:
    """Unknown or missing keyword parameters, named before the class is built."""
    try:
        ps = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # no signature to read: the constructor will say
        return
    names = accepted(cls)
    if names is not None:
        for key in params:
            if key not in names:
                known = f"; it takes {', '.join(names)}" if names else "; it takes none"
                raise PluginError(f"unknown parameter {key!r} of {cls.__qualname__}{known}", param=key)
    missing = [n for n, p in ps.items() if p.default is p.empty and n not in params
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if missing:
        raise PluginError(f"{cls.__qualname__} needs the parameter {missing[0]!r}")


def convert_params(cls: type, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` for ``cls``'s constructor: text converted, typed values checked, by annotation."""
    hints = _hints(cls)
    out: dict[str, Any] = {}
    for key, value in params.items():
        hint = hints.get(key, inspect.Parameter.empty)
        out[key] = _convert(cls, key, hint, value)
    return out


def _hints(cls: type) -> dict[str, Any]:
    init = cls.__init__  # type: ignore[misc]
    try:
        return typing.get_type_hints(init)
    except Exception:  # a name the annotations use that cannot be resolved: read them as written
        raw = getattr(init, "__annotations__", {}) or {}
        return {k: _from_text(v) if isinstance(v, str) else v for k, v in raw.items()}


def _from_text(annotation: str) -> Any:
    """An annotation written as text, when it cannot be evaluated: the scalars and their unions."""
    names = {t.__name__: t for t in SCALARS} | {"None": type(None)}
    text = annotation.replace("Optional[", "").replace("]", "|None")
    parts = [p.strip() for p in text.split("|")]
    if parts and all(p in names for p in parts):
        kinds = tuple(dict.fromkeys(names[p] for p in parts))
        return kinds[0] if len(kinds) == 1 else typing.Union[kinds]  # noqa: UP007
    return inspect.Parameter.empty


def _options(hint: Any) -> tuple[type, ...] | None:
    """The scalar types (and NoneType) ``hint`` allows; None when it is not made of those."""
    if hint is inspect.Parameter.empty or hint is Any:
        return None
    if hint in SCALARS or hint is type(None):
        return (hint,)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = typing.get_args(hint)
        if all(k in SCALARS or k is type(None) for k in kinds):
            return kinds
    return ()


def _type_name(kinds: tuple[type, ...]) -> str:
    return " | ".join("None" if k is type(None) else k.__name__ for k in kinds)


def _convert(cls: type, key: str, hint: Any, value: Any) -> Any:
    kinds = _options(hint)
    if kinds is None:  # no annotation (or Any): the value as given
        return str(value) if isinstance(value, Text) else value
    if not isinstance(value, Text):  # typed (a TOML value): it must fit
        if kinds and not any(_fits(value, k) for k in kinds):
            raise _mistyped(cls, key, kinds, repr(value))
        return value
    if not kinds:
        raise PluginError(f"parameter {key!r} of {cls.__qualname__} is {_hint_name(hint)}, which cannot be "
                          f"given as text (give it in a TOML table)", param=key)
    text = str(value).strip()
    # `none` is None where None is allowed (`str | None` too); else the annotation's order decides:
    # `int | float` makes "3" an int
    for kind in sorted(kinds, key=lambda k: k is not type(None)):
        got = _parse(text, kind)
        if got is not _NO:
            return got
    raise _mistyped(cls, key, kinds, repr(str(value)))


_NO = object()


def _parse(text: str, kind: type) -> Any:
    if kind is type(None):
        return None if text.lower() in ("none", "null") else _NO
    if kind is bool:
        low = text.lower()
        return True if low in _TRUE else False if low in _FALSE else _NO
    converter: Callable[[str], Any] = kind
    try:
        got = converter(text)
    except ValueError:
        return _NO
    if kind is float and math.isnan(got):  # never a policy's parameter: a mistake
        return _NO
    return got


def _fits(value: Any, kind: type) -> bool:
    if kind is type(None):
        return value is None
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _hint_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _mistyped(cls: type, key: str, kinds: tuple[type, ...], given: str) -> PluginError:
    return PluginError(f"parameter {key!r} of {cls.__qualname__} takes {_type_name(kinds)}, got {given}",
                       param=key)


# -- building ---------------------------------------------------------------------------------------
def instantiate(cls: type, params: Mapping[str, Any], spec: str | None = None) -> Any:
    """``cls(**params)`` (converted and checked first); the constructor's own refusal in one line."""
    check_params(cls, params)
    kwargs = convert_params(cls, params)
    try:
        return cls(**kwargs)
    except ValueError as e:  # the class's own check of its parameters: its message says it all
        bad = [p for p in kwargs if p in str(e)]
        raise PluginError(f"{spec or class_path(cls)}: {_first_line(e)}",
                          param=bad[0] if len(bad) == 1 else None) from None
    except Exception as e:  # a bug in the class: where it is, in one line
        where = failure(e, "")
        raise PluginError(f"{spec or class_path(cls)}: {type(e).__name__}: {_first_line(e)}",
                          file=where.file, line=where.line) from None


def load(spec: str, params: Mapping[str, Any] | None = None, *, base: type | None = None,
         group: str | None = None, what: str = "plug-in") -> Any:
    """The instance of the class ``spec`` names (:func:`load_class`) built with ``params``."""
    cls = load_class(spec, base=base, group=group, what=what)
    return instantiate(cls, dict(params or {}), spec.strip())


def load_option(spec: str, args: Sequence[str], *, base: type, group: str, what: str,
                builtins: Sequence[str], option: str) -> Any:
    """A command's plug-in option (``--heuristic``, ``--algorithm``...) that is not a built-in name:
    ``spec`` (``MODULE:CLASS``, ``FILE.py:CLASS`` or a name installed in ``group``) built with
    ``args`` (``KEY=VALUE`` from ``{option}-arg``). Every mistake is one line on ``option`` or, for a
    parameter at fault, on ``{option}-arg``; an unknown name lists ``builtins`` and the installed."""
    text = spec.strip()
    arg_option = f"{option}-arg"
    params: dict[str, Any] = parse_args(args, arg_option)
    installed = [] if is_spec(text) else entry_point_names(group)
    if not is_spec(text) and (":" in text or text not in installed):
        listed = f"; installed: {', '.join(installed)}" if installed else ""
        raise UserError(f"unknown {what.split()[-1]} {spec!r}; choose from {', '.join(builtins)}, or give "
                        f"MODULE:CLASS or FILE.py:CLASS{listed}", field=option)
    try:
        return load(text, params, base=base, group=group, what=what)
    except PluginError as e:
        field = arg_option if e.param in params else option
        raise UserError(e.message, file=e.file, line=e.line, field=field) from None


def describe(obj: object) -> str:
    """``module:Class(k=v, ...)``: the class path and the constructor's parameters the object keeps
    as attributes of the same name (its state otherwise, such as an environment, is left out)."""
    cls = type(obj)
    names = accepted(cls) or []
    state = getattr(obj, "__dict__", {}) or {}
    shown = ", ".join(f"{n}={state[n]!r}" for n in names if n in state)
    return f"{class_path(cls)}({shown})"


def find_in_working_folder() -> None:
    """Put the working folder first on ``sys.path`` (unless it is there), as ``python -m`` does, so
    a ``MODULE:CLASS`` policy or a ``package.module:function`` job beside where the command runs is
    found the way the run's workers find it (they start in that folder with it on their path)."""
    import os

    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
