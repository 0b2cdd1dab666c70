"""Desktop labs: the thesis's UnaCloud lab, desktops files, SPECpower tables, and users.

- :func:`thesis_lab` -- the 109 desktops of thesis §6.1.3 (70 with 4 cores, 39 with 8; decision B1),
  all with the thesis's power curve, optionally in a random order (the study shuffles the index
  order per instance, decision B5: First-Fit, FFD and Best-Fit depend on it).
- :func:`draw_users` -- a user on a given share of the desktops, chosen at random, each for a
  session of U[60, 240] minutes (§6.1.3.2).
- :func:`user_sessions` -- users coming and going over days, for the online variant (beyond the
  thesis): sessions of U[60, 240] minutes during the lab's opening hours.
- :func:`read_desktops` / :func:`read_power_table` -- the file formats of ``skylease place``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from skylease.model.desktop import ECR_MON_W, ECR_USER_W, Desktops
from skylease.model.errors import UserError
from skylease.model.power import THESIS_POWER, PowerModel, PowerTable
from skylease.traces.textio import parse_number, read_csv_records, read_text

__all__ = ["OPEN_HOURS", "THESIS_LAB_CORES", "USER_SESSION_MINUTES", "draw_users", "read_desktops",
           "read_power_table", "thesis_lab", "user_sessions"]

#: (desktops, cores each) of the thesis's three labs: 70 x 4 + 39 x 8 = 592 cores.
THESIS_LAB_CORES = ((70, 4), (39, 8))
#: A user's session length, uniform in this range (minutes), §6.1.3.2.
USER_SESSION_MINUTES = (60.0, 240.0)

#: When the labs are open to students (hours of the day); nobody sits at a desktop outside them.
OPEN_HOURS = (8.0, 20.0)

#: The most cores a desktop in a file may have (a bound on the per-desktop power table).
MAX_DESKTOP_CORES = 4096

DESKTOP_COLUMNS = ("name", "power", "monitor_w", "user_w", "user_minutes")


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def thesis_lab(order: int | np.random.Generator | None = None) -> Desktops:
    """The thesis's 109 desktops, no users; pc001-pc070 have 4 cores, pc071-pc109 8.

    With ``order`` (a seed or generator) the desktops come in a random order; without it, by name.
    """
    cores = np.concatenate([np.full(n, c) for n, c in THESIS_LAB_CORES])
    lab = Desktops(cores=cores)
    if order is None:
        return lab
    return lab.take(_rng(order).permutation(len(lab)))


def draw_users(n_desktops: int, fraction: float, rng: int | np.random.Generator | None) -> np.ndarray:
    """Session minutes per desktop: fraction x n random desktops (half rounded up: 55 of 109 at 50 %)
    get a session of U[60, 240] minutes, the others 0 (no user)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"the share of desktops with a user must be in [0, 1], got {fraction:g}")
    g = _rng(rng)
    k = int(np.floor(fraction * n_desktops + 0.5))
    minutes = np.zeros(n_desktops)
    who = g.choice(n_desktops, size=k, replace=False)
    minutes[who] = g.uniform(*USER_SESSION_MINUTES, size=k)
    return minutes


def user_sessions(n_desktops: int, days: float, busy_share: float, rng: int | np.random.Generator | None,
                  open_hours: tuple[float, float] = OPEN_HOURS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Users coming and going: (desktop, start, end) of every session, in minutes from day 0, 00:00.

    Each desktop alternates, within each day's opening hours, between an idle gap drawn from an
    exponential law and a session of U[60, 240] minutes (the thesis's session length), cut at
    closing time. The mean gap, 150 (1 − s) / s minutes, makes a desktop busy for about a share s
    of the open hours (a little less, because sessions are cut at closing time). A decision of
    ours: the thesis has no user trace; any (desktop, start, end) arrays, e.g. from a trace, can
    be given to the online simulator instead.
    """
    if not 0.0 <= busy_share < 1.0:
        raise ValueError(f"the busy share must be in [0, 1), got {busy_share:g}")
    g = _rng(rng)
    desk: list[np.ndarray] = []
    start: list[np.ndarray] = []
    end: list[np.ndarray] = []
    if busy_share == 0.0 or n_desktops == 0:
        empty = np.array([], np.float64)
        return np.array([], np.int64), empty, empty.copy()
    lo, hi = USER_SESSION_MINUTES
    mean_gap = 0.5 * (lo + hi) * (1.0 - busy_share) / busy_share
    open_m, close_m = 60.0 * open_hours[0], 60.0 * open_hours[1]
    for day in range(int(np.ceil(days))):
        t0, t1 = 1440.0 * day + open_m, 1440.0 * day + close_m
        t = np.full(n_desktops, t0)
        alive = np.arange(n_desktops)
        # the first gap is drawn from the stationary gap law too, so desktops are not in lockstep
        while alive.size:
            t[alive] += g.exponential(mean_gap, size=alive.size)
            alive = alive[t[alive] < t1]
            length = g.uniform(lo, hi, size=alive.size)
            s = t[alive]
            e = np.minimum(s + length, t1)
            desk.append(alive.copy())
            start.append(s.copy())
            end.append(e)
            t[alive] = e
            alive = alive[e < t1]
    d, s, e = np.concatenate(desk), np.concatenate(start), np.concatenate(end)
    o = np.lexsort((s, d))
    return d[o], s[o], e[o]


def read_power_table(path: str | os.PathLike[str]) -> PowerTable:
    """A SPECpower table: 11 watts (0, 10, ..., 100 % load) on the first line that is not a comment.

    Lines starting with ``*``, ``#`` or ``/`` are comments (the CloudSim files carry a licence
    block after the numbers).
    """
    path = Path(path)
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        s = line.strip()
        if not s or s[0] in "*#/":
            continue
        tokens = s.replace(",", " ").split()
        if len(tokens) != 11:
            raise UserError(f"expected 11 numbers (watts at 0, 10, ..., 100 % load), found {len(tokens)}",
                            file=path, line=number)
        watts = tuple(parse_number(path, number, f"value {k + 1}", t, minimum=0.0)
                      for k, t in enumerate(tokens))
        return PowerTable(watts, name=path.stem)
    raise UserError("no power table: expected one line of 11 numbers", file=path, line=1)


def read_desktops(path: str | os.PathLike[str]) -> Desktops:
    """A desktops file: CSV with a header; ``cores`` is required.

    Optional columns: ``name``; ``power`` (``thesis`` for the thesis's curve, the default, or the
    path of a SPECpower table, relative to this file); ``monitor_w`` (20 W) and ``user_w`` (87 W),
    the monitor's and a user's draw (Table 6.1); ``user_minutes``, a user's session from t = 0
    (0 or empty: no user).
    """
    path = Path(path)
    records = read_csv_records(path, ("cores",), DESKTOP_COLUMNS)
    tables: dict[str, PowerModel] = {}
    models: list[PowerModel] = []
    cols: dict[str, list] = {k: [] for k in ("cores", "monitor_w", "user_w", "user_minutes", "power")}
    names: list[str] = []
    seen: dict[str, int] = {}
    for line, rec in records:
        name = rec.get("name") or f"pc{len(names) + 1:03d}"
        if name in seen:
            raise UserError(f"desktop name also used on line {seen[name]}", file=path, line=line,
                            field="name")
        seen[name] = line
        names.append(name)
        cols["cores"].append(int(parse_number(path, line, "cores", rec["cores"], integer=True, minimum=1,
                                              maximum=MAX_DESKTOP_CORES)))
        for key, default in (("monitor_w", ECR_MON_W), ("user_w", ECR_USER_W), ("user_minutes", 0.0)):
            cell = rec.get(key, "")
            cols[key].append(parse_number(path, line, key, cell, minimum=0.0) if cell else default)
        spec = rec.get("power", "") or "thesis"
        if spec not in tables:
            if spec.lower() == "thesis":
                tables[spec] = THESIS_POWER
            else:
                try:
                    tables[spec] = read_power_table(path.parent / spec)
                except UserError as exc:
                    raise UserError(f"power table {spec!r}: {exc}", file=path, line=line,
                                    field="power") from None
        model = tables[spec]
        if model not in models:
            models.append(model)
        cols["power"].append(models.index(model))
    return Desktops(cores=cols["cores"], user_minutes=cols["user_minutes"], monitor_w=cols["monitor_w"],
                    user_w=cols["user_w"], power_index=cols["power"], power_models=tuple(models),
                    names=tuple(names))
