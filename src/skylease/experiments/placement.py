"""File-level entry point of ``skylease place``: read or draw desktops, VMs and users, place, cost."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skylease.model.desktop import Desktops, VMs
from skylease.model.errors import UserError

THESIS_LAB = "thesis-lab"
SYNTHETIC = "synthetic:"
CLI_ALGORITHMS = ("ff", "ffd", "bf", "sorting", "similar", "rr", "bf-trace")
ALGORITHM_GROUP = "skylease.placements"  # the entry-point group of installed placement algorithms


def load_desktops(spec: str, rng: np.random.Generator) -> Desktops:
    """``thesis-lab`` (the 109 desktops in a random order drawn from ``rng``) or a desktops file."""
    from skylease.traces.lab import read_desktops, thesis_lab

    if spec == THESIS_LAB:
        return thesis_lab(rng)
    return read_desktops(Path(spec))


def load_vms(spec: str, rng: np.random.Generator, desktops: Desktops) -> VMs:
    """``synthetic:N`` (N requests from the stand-in UnaCloud trace that fit the lab) or a VMs file."""
    from skylease.traces.vms import read_vms, sample_vms, vm_trace

    if spec.startswith(SYNTHETIC):
        text = spec[len(SYNTHETIC):]
        if not text.isdigit() or int(text) < 1:
            raise UserError(f"expected synthetic:N with N a whole number >= 1, got {spec!r}", field="--vms")
        n = int(text)
        try:
            return sample_vms(vm_trace(), n, rng, desktops.cores)
        except UserError as exc:
            raise UserError(exc.message, field="--vms") from None
    return read_vms(Path(spec))


def place_request(desktops: str, vms: str, *, algorithm: str = "sorting", users: float | None = None,
                  energy_model: str = "c", seed: int = 0, secondary: str = "time_desc",
                  algorithm_args: Sequence[str] = ()) -> dict[str, Any]:
    """What ``skylease place`` prints: the placement, the unplaced VMs and why, desktops used, energy.

    One ``seed`` draws, in turn, the thesis lab's order, the synthetic VMs and the users. ``users``
    (a share of desktops, 0-1) replaces the desktops file's users; ``None`` keeps them.
    ``algorithm`` is a built-in name or a
    :class:`~skylease.planning.placement.plugin.PlacementAlgorithm` subclass (``MODULE:CLASS``,
    ``FILE.py:CLASS`` or an installed package's name) built with ``algorithm_args``; a plug-in's
    answer is checked before it is costed.
    """
    from skylease.planning.placement import ENERGY_MODELS, SECONDARY_KEYS, energy
    from skylease.planning.placement.plugin import Builtin
    from skylease.traces.lab import draw_users

    builtin = algorithm in CLI_ALGORITHMS
    if builtin and algorithm_args:
        raise UserError(f"the built-in algorithm {algorithm} takes no parameters (--algorithm-arg goes "
                        "with a MODULE:CLASS or FILE.py:CLASS algorithm)", field="--algorithm-arg")
    model = energy_model.lower()
    if model not in ENERGY_MODELS:
        raise UserError(f"unknown energy model {energy_model!r}; choose from {', '.join(ENERGY_MODELS)}",
                        field="--energy-model")
    if secondary not in SECONDARY_KEYS:
        raise UserError(f"unknown secondary key {secondary!r}; choose from {', '.join(SECONDARY_KEYS)}",
                        field="--secondary")
    if users is not None and not (math.isfinite(users) and 0.0 <= users <= 1.0):
        raise UserError(f"the share of desktops with a user must be in [0, 1], got {users:g}",
                        field="--users")
    planner = Builtin(algorithm, secondary) if builtin else load_algorithm(algorithm, algorithm_args)
    rng = np.random.default_rng(seed)
    lab = load_desktops(desktops, rng)
    requests = load_vms(vms, rng, lab)
    if users is not None:
        lab = lab.with_users(draw_users(len(lab), users, rng))
    p = planner.placement(requests, lab) if builtin else _run_plugin(planner, requests, lab)
    e = energy(p, requests, lab, model)
    used = np.unique(p.desktop[p.placed])
    res: dict[str, Any] = {
        "algorithm": algorithm,
        "energy_model": model,
        "desktops": len(lab),
        "desktops_with_user": int(lab.user.sum()),
        "vms": len(requests),
        "desktops_used": e.desktops_used,
        "desktops_used_with_user": int(lab.user[used].sum()),
        "energy_wh": e.total_wh,
        "placement": {requests.names[v]: lab.names[int(d)] for v, d in enumerate(p.desktop) if d >= 0},
        "unplaced": [{"vm": requests.names[v], "cores": int(requests.cores[v]), "reason": why}
                     for v, why in sorted(p.unplaced.items())],
        "per_desktop": [{"desktop": lab.names[j], "cores": int(lab.cores[j]),
                         "user_minutes": float(lab.user_minutes[j]),
                         "vms": [requests.names[v] for v in p.vms_on(j)],
                         "used_cores": int(requests.cores[p.vms_on(j)].sum()),
                         "energy_wh": float(e.per_desktop_wh[j])} for j in used.tolist()],
    }
    if not builtin:  # (the built-ins' output is as it was)
        from skylease.control.plugins import describe

        res["algorithm_class"] = describe(planner)
    return res


def load_algorithm(spec: str, args: Sequence[str] = ()) -> Any:
    """The :class:`~skylease.planning.placement.plugin.PlacementAlgorithm` ``spec`` names, built
    with ``args`` (``KEY=VALUE``); every mistake one line on ``--algorithm`` or ``--algorithm-arg``."""
    from skylease.control import plugins
    from skylease.planning.placement.plugin import PlacementAlgorithm

    return plugins.load_option(spec, args, base=PlacementAlgorithm, group=ALGORITHM_GROUP,
                               what="placement algorithm", builtins=CLI_ALGORITHMS, option="--algorithm")


def _run_plugin(planner: Any, requests: VMs, lab: Desktops) -> Any:
    """A plug-in's checked placement; its wrong answer or its failure as one line naming it."""
    from skylease.control import plugins
    from skylease.planning.placement.plugin import BadAnswer, PlacementAlgorithm

    name = plugins.class_path(type(planner))
    try:  # (the base's placement, even if the class overrides it: its answer is always checked)
        return PlacementAlgorithm.placement(planner, requests, lab)
    except BadAnswer as e:
        raise UserError(f"{name}.assign() {e}", field="--algorithm") from None
    except Exception as e:  # the plug-in's own bug: where it is, in one line
        where = plugins.failure(e, name)
        text = str(e).strip()
        raise UserError(f"{name}.assign() fails: {type(e).__name__}: "
                        f"{text.splitlines()[0] if text else '(no message)'}",
                        file=where.file, line=where.line, field="--algorithm") from None
