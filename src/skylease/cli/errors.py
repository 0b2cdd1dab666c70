"""Every usage error in the CLI's own words, on one line: ``skylease CMD: error: --option: reason``
(docs/cli.md). Click's and pydantic's messages ("Invalid value for '--price': Input should be a valid
number, ...", "(Possible options: --price)") never reach the user: this module rewrites each kind
of click usage error, in one place, for :func:`skylease.cli.main`."""

from __future__ import annotations

import difflib
import re
from typing import Any

#: How close a typo must be to a name for "did you mean" (difflib's ratio): ``--pric`` -> ``--price``
#: (0.91), ``--workrs`` -> ``--workers``; ``--frobnicate`` is close to nothing.
SUGGEST_CUTOFF = 0.75


def suggestion(typo: str, names: list[str] | tuple[str, ...]) -> str | None:
    """The one name close enough to ``typo`` to be what was meant, else None."""
    close = difflib.get_close_matches(typo, list(names), n=1, cutoff=SUGGEST_CUTOFF)
    return close[0] if close else None


def command_path(root: Any, args: list[str]) -> str:
    """``skylease`` and the (sub)command names ``args`` start with: "skylease leases show"."""
    path, cmd = ["skylease"], root
    for tok in args:
        subs = getattr(cmd, "commands", None)
        if not subs:
            break
        if tok in subs:
            path.append(tok)
            cmd = subs[tok]
        elif not tok.startswith("-"):
            break
    return " ".join(path)


def line(prog: str, message: str) -> str:
    """The error line: one line whatever the message holds."""
    return f"{prog}: error: {' '.join(str(message).split())}"


def usage_message(e: Any) -> str:
    """A click usage error (typer's vendored click, or click's own) as ``WHAT: reason``."""
    kind = type(e).__name__
    ctx = getattr(e, "ctx", None)
    if kind == "NoSuchOption":
        return _no_such_option(getattr(e, "option_name", "") or "", ctx)
    if kind == "MissingParameter":
        return _missing(e, ctx)
    if kind == "BadParameter":
        return f"{_param_name(e)}: {_bad_value(e)}"
    if kind == "BadOptionUsage":
        msg = getattr(e, "message", str(e))
        name = getattr(e, "option_name", "") or "option"
        if "requires" in msg and "argument" in msg:
            return f"{name}: needs a value"
        if "does not take a value" in msg:
            return f"{name}: takes no value"
        return f"{name}: {_lower(msg)}"
    msg = getattr(e, "message", None) or str(e)
    m = re.match(r"Got unexpected extra arguments?(?:\(s\))? \((.*)\)", msg)
    if m:
        extra = m.group(1)
        if extra.startswith("-"):  # a command that reads "-5" as a value takes "--typo" as one too
            return _no_such_option(extra.split()[0], ctx)
        return f"{extra}: unexpected argument{_see_help(ctx, 'says what it takes')}"
    m = re.match(r"No such command '(.*?)'", msg)
    if m:
        return _no_such_command(m.group(1), ctx)
    if msg.startswith("Missing command"):
        return f"a command is missing{_see_help(ctx)}"
    return _lower(msg)


def _param_name(e: Any) -> str:
    hint = getattr(e, "param_hint", None)
    if hint:
        return hint if isinstance(hint, str) else hint[0]
    param = getattr(e, "param", None)
    if param is None:
        return "value"
    opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
    if opts:
        return max(opts, key=len) if not opts[0].startswith("--") else opts[0]
    return str(getattr(param, "metavar", None) or (param.name or "value").upper())


def _bad_value(e: Any) -> str:
    """A wrong value, in our words: pydantic's error code (typer converts with pydantic) says what."""
    cause = e.__cause__
    errors = getattr(cause, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (IndexError, TypeError):
            first = None
        if first is not None:
            return _pydantic(first)
    msg = getattr(e, "message", "") or str(e)
    return _lower(msg.rstrip("."))


def _pydantic(err: dict) -> str:
    kind, ctx, got = err.get("type", ""), err.get("ctx") or {}, err.get("input")
    shown = _shown(got)
    if kind in ("float_parsing", "float_type", "decimal_parsing"):
        return f"not a number: {shown}"
    if kind in ("int_parsing", "int_type", "int_from_float", "int_parsing_size"):
        return f"not a whole number: {shown}"
    if kind in ("bool_parsing", "bool_type"):
        return f"not yes or no: {shown}"
    if kind == "finite_number":
        return f"must be a finite number, got {shown}"
    bounds = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"),
              "less_than_equal": ("<=", "le"), "less_than": ("<", "lt")}
    if kind in bounds:
        op, key = bounds[kind]
        return f"must be {op} {_shown(ctx.get(key))}, got {shown}"
    return f"{_lower(str(err.get('msg', 'wrong value')))}, got {shown}"


def _shown(value: Any) -> str:
    """A value as the user typed it: a number bare (``-1``, ``0``), other text quoted."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return repr(value)
        return value.strip() or repr(value)
    return str(value)


def _no_such_option(name: str, ctx: Any) -> str:
    names: list[str] = []
    cmd = getattr(ctx, "command", None)
    for p in getattr(cmd, "params", []):
        if not getattr(p, "hidden", False):
            opts = [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]
            names += [o for o in opts if o.startswith("-")]
    close = suggestion(name.partition("=")[0], names)
    if close is not None:
        return f"{name}: no such option; did you mean {close}?"
    return f"{name}: no such option{_see_help(ctx)}"


def _no_such_command(name: str, ctx: Any) -> str:
    cmd = getattr(ctx, "command", None)
    subs = [n for n, c in (getattr(cmd, "commands", None) or {}).items() if not getattr(c, "hidden", False)]
    close = suggestion(name, subs)
    if close is not None:
        return f"{name}: no such command; did you mean {close}?"
    return f"{name}: no such command{_see_help(ctx)}"


def _missing(e: Any, ctx: Any) -> str:
    param = getattr(e, "param", None)
    name = _param_name(e)
    if param is not None and getattr(param, "param_type_name", "") == "option":
        return f"{name}: missing (this command needs it)"
    return f"{name}: missing{_see_help(ctx, 'says what it takes')}"


def _see_help(ctx: Any, what: str = "lists them") -> str:
    path = getattr(ctx, "command_path", None)
    return f" ({path} --help {what})" if path else ""


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() else text
