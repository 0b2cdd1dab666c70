"""A plain pure-Python reading of the thesis's placement heuristics and energy (decisions B3.1-B4 in
docs/decisions/thesis.md).

Written straight from the pseudo-code, without numpy or skylease: lists, ``sorted`` with tuple
keys, the PM list literally re-sorted after every Sorting placement, Eq. 6.10 as a loop over each
desktop's VMs. The tests check that ``skylease.planning.placement`` gives identical placements and
the same energy; ``benchmarks/bench_placement.py`` times the two on the reproduction grid.
"""

from __future__ import annotations

ALGORITHMS = ("ff", "ffd", "bf", "bf-trace", "sorting", "sorting-none", "similar", "rr")


def _decreasing(cores, minutes, secondary="time_desc"):
    idx = list(range(len(cores)))
    if secondary == "none":
        return sorted(idx, key=lambda v: -cores[v])
    sign = -1 if secondary == "time_desc" else 1
    return sorted(idx, key=lambda v: (-cores[v], sign * minutes[v], v))


def ref_place(algorithm, cores, minutes, desk_cores, desk_user, free=None, has_vm=None):
    """Desktop index per VM (-1 = did not fit)."""
    n_d = len(desk_cores)
    free = list(desk_cores) if free is None else list(free)
    has_vm = [False] * n_d if has_vm is None else [bool(h) for h in has_vm]
    out = [-1] * len(cores)
    if algorithm == "similar":
        return _similar(cores, minutes, desk_user, free, has_vm, out)
    if algorithm in ("ff", "rr", "bf-trace"):
        order = list(range(len(cores)))
    else:
        order = _decreasing(cores, minutes, "none" if algorithm == "sorting-none" else "time_desc")
    pms = list(range(n_d))
    for v in order:
        c = cores[v]
        chosen = -1
        if algorithm in ("ff", "rr", "ffd"):
            for j in range(n_d):
                if free[j] >= c:
                    chosen = j
                    break
        elif algorithm in ("bf", "bf-trace"):
            fits = [j for j in range(n_d) if free[j] >= c]
            if fits:
                chosen = min(fits, key=lambda j: (free[j] - c, j))
        else:  # Alg. 11: re-order the PMs, then first fit
            pms = sorted(pms, key=lambda j: (not has_vm[j], not desk_user[j], -free[j], j))
            for j in pms:
                if free[j] >= c:
                    chosen = j
                    break
        if chosen >= 0:
            out[v] = chosen
            free[chosen] -= c
            has_vm[chosen] = True
    return out


def _similar(cores, minutes, desk_user, free, has_vm, out):
    order = _decreasing(cores, minutes)
    pms = sorted(range(len(free)), key=lambda j: (not has_vm[j], not desk_user[j], -free[j], j))
    for j in pms:
        for v in order:
            if out[v] >= 0 or cores[v] > free[j]:
                continue
            out[v] = j
            free[j] -= cores[v]
            anchor = minutes[v]
            while free[j] > 0:
                fitting = [u for u in order if out[u] < 0 and cores[u] <= free[j]]
                if not fitting:
                    break
                u = min(fitting, key=lambda u: abs(minutes[u] - anchor))  # first of the closest
                out[u] = j
                free[j] -= cores[u]
            break
    return out


def ref_power(load_pct, table=None, a=45.341, b=0.1651, idle=47.0):
    """The thesis curve, or a SPECpower table (11 values) interpolated."""
    if table is not None:
        k = min(int(load_pct // 10), 9)
        return table[k] + (table[k + 1] - table[k]) * (load_pct - 10 * k) / 10
    return a * load_pct**b if load_pct > 0 else idle


def ref_energy(desk_of_vm, cores, minutes, desk_cores, user_minutes, model="c", monitor_w=20.0,
               user_w=87.0, table=None):
    """Total Wh of a placement (Eq. 6.10 per desktop, split where the user leaves for models a, b)."""
    total = 0.0
    for j in range(len(desk_cores)):
        vms = [v for v in range(len(cores)) if desk_of_vm[v] == j]
        if not vms:
            continue
        d = user_minutes[j]
        run = {v: minutes[v] + 0.1 * min(d, minutes[v]) for v in vms}
        ends = sorted(run.values(), reverse=True)
        points = sorted(set(ends) | ({d} if model != "c" and 0 < d < ends[0] else set()))
        t0 = 0.0
        for t1 in points:
            running = sum(cores[v] for v in vms if run[v] >= t1)
            p = ref_power(100.0 * running / desk_cores[j], table)
            present = d > 0 and (model == "c" or t1 <= d)
            if present and model == "a":
                p *= 1.1
            elif present:
                p = max(0.0, p + monitor_w - user_w)
            total += p * (t1 - t0) / 60.0
            t0 = t1
    return total
