"""The policy of ``skylease run`` (and of ``skylease simulate replay`` of a run): a built-in
named by a word (``fixed:N``, ``a2ha[:PRESET]``, ``dask-adaptive[:MAX]``), or a
:class:`~skylease.control.env.Policy` subclass of one's own loaded by
:mod:`skylease.control.plugins` (``MODULE:CLASS``, ``FILE.py:CLASS``, or the name an installed
package declares in the entry-point group ``skylease.policies``) with ``--policy-arg KEY=VALUE``.

A policy of one's own is dispatched FIFO (only A2HA takes tasks in a random order, as in its paper).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from skylease.control.env import Policy
from skylease.model.errors import UserError

#: The built-in policies' names (``adaptive`` is ``dask-adaptive``'s old name).
BUILTIN_POLICIES = ("fixed", "a2ha", "dask-adaptive", "adaptive")
_KNOWN = ("fixed:N, a2ha[:conservative|aggressive], dask-adaptive[:MAX], MODULE:CLASS, FILE.py:CLASS "
          "or the name of an installed policy")


def parse_policy(spec: str, pool: str, budget: float | None, unit: float,
                 args: Sequence[str] = ()) -> tuple[Policy, str]:
    """``fixed:N``, ``a2ha[:conservative|aggressive]``, ``dask-adaptive[:MAX]``, or a
    :class:`~skylease.control.env.Policy` subclass of one's own (``MODULE:CLASS``, ``FILE.py:CLASS``
    or an entry point's name, built with the ``KEY=VALUE`` ``args``: :func:`custom_policy`); returns
    the policy and the dispatch order it needs (``fifo`` or ``random``)."""
    from skylease.control.a2ha import A2HA, PRESETS
    from skylease.control.dask_rule import DaskAdaptive
    from skylease.control.fixed import FixedPool

    name, _, arg = spec.strip().partition(":")
    name = name.lower()
    if name not in BUILTIN_POLICIES:
        return custom_policy(spec, pool, budget, args), "fifo"
    if args:
        raise UserError(f"goes with a MODULE:CLASS or FILE.py:CLASS policy; {name} takes its parameter in "
                        "--policy", field="--policy-arg")
    if name == "fixed":
        try:
            n = int(arg)
        except ValueError:
            raise UserError(f"expected fixed:N with N a number of workers, got {spec!r}",
                            field="--policy") from None
        if n < 1:
            raise UserError(f"fixed:N needs N >= 1, got {n}", field="--policy")
        if budget is not None:
            raise UserError("a fixed pool does not watch a budget; use --policy a2ha with --budget",
                            field="--budget")
        return FixedPool(n, pool=pool), "fifo"
    if name == "a2ha":
        preset = arg or "conservative"
        if preset not in PRESETS:
            raise UserError(f"unknown A2HA preset {preset!r}; one of {sorted(PRESETS)}", field="--policy")
        return A2HA.preset(preset, pool=pool, budget=budget, adjust_period=unit / 12.0), "random"
    if name in ("dask-adaptive", "adaptive"):
        if budget is not None:
            raise UserError("Dask's adaptive rule does not watch a budget; use --policy a2ha",
                            field="--budget")
        maximum: int | float = math.inf
        if arg:
            try:
                maximum = int(arg)
            except ValueError:
                raise UserError(f"expected dask-adaptive[:MAX], got {spec!r}", field="--policy") from None
            if maximum < 1:
                raise UserError(f"dask-adaptive:MAX needs MAX >= 1, got {maximum}", field="--policy")
        return DaskAdaptive(pool=pool, minimum=1, maximum=maximum), "fifo"
    raise AssertionError(name)  # (every name of BUILTIN_POLICIES is handled above)


def custom_policy(spec: str, pool: str, budget: float | None, args: Sequence[str] = ()) -> Policy:
    """A policy of one's own: the :class:`~skylease.control.env.Policy` subclass ``spec`` names,
    built with ``args`` (``KEY=VALUE``, converted by the constructor's annotations). A constructor
    that takes ``pool`` gets the pool the run rents when it is not given, one that takes ``budget``
    gets ``--budget``; ``--budget`` for a policy with no ``budget`` attribute is refused, as for
    the built-ins that do not watch one."""
    from skylease.control import plugins

    params: dict[str, Any] = plugins.parse_args(args)
    given = set(params)
    text = spec.strip()
    installed = plugins.entry_point_names(plugins.POLICY_GROUP)
    if not plugins.is_spec(text) and (":" in text or text not in installed):
        listed = f" (installed: {', '.join(installed)})" if installed else ""
        raise UserError(f"unknown policy {spec!r}; one of {_KNOWN}{listed}", field="--policy")
    try:
        cls = plugins.load_class(text, base=Policy, group=plugins.POLICY_GROUP, what="bag policy")
        takes = plugins.accepted(cls) or []
        if "pool" in takes and "pool" not in params:
            params["pool"] = pool
        if "budget" in takes and "budget" not in params and budget is not None:
            params["budget"] = budget
        policy = plugins.instantiate(cls, params, text)
    except plugins.PluginError as e:
        field = "--policy-arg" if e.param in given else "--policy"
        raise UserError(e.message, file=e.file, line=e.line, field=field) from None
    if budget is not None and not hasattr(policy, "budget"):
        raise UserError(f"{plugins.class_path(cls)} does not watch a budget (it has no attribute 'budget')",
                        field="--budget")
    return policy


def describe_policy(policy: Policy) -> str:
    """The policy's :meth:`~skylease.control.env.Policy.describe`, one line (a user's own method
    that fails is said as one line, before any work)."""
    from skylease.control import plugins

    try:
        text = str(policy.describe())
    except Exception as e:
        where = plugins.failure(e, "")  # (its file and line)
        text = str(e).strip().splitlines()[0] if str(e).strip() else "(no message)"
        raise UserError(f"{type(policy).__qualname__}.describe() fails: {type(e).__name__}: {text}",
                        file=where.file, line=where.line, field="--policy") from None
    return " ".join(text.split())
