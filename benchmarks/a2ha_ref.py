"""Standalone reference implementation of A2HA (Silva, Veiga, Ferreira, JISA 2011).

This is the "plain implementation" side of the A2HA benchmark and an independent cross-check of
skylease's own implementation. It deliberately does NOT import skylease: pure Python + heapq + numpy.

It implements the consolidated event-driven algorithm of decision ALG
(``docs/decisions/a2ha.md``) with the default decisions:

* floor p_h (2.2.1), window W_h = c + BOOT + (max(k, kplan)*U - BOOT)/beta, measured from the start of
  the running task (or max(now, boot end) when idle / booting);
* pooled Fig. 7 mean (A1); periodic allocation on every tick (A5), ticks at PERIOD, 2*PERIOD, ... (A27);
* round half away from zero (A3); creationRatio advanced only when n_nec >= 0 (A4), also when n_nec = 0;
* boundary rule 2.5 with alpha = 1.0 (A6, A7); interrupted tasks requeued at the head (A10);
* N/2 rule on alive hosts with kplan extension (2.6, A8); starvation guard (2.8, A9);
* tie order DONE < BOUNDARY < READY < PERIODIC at equal times (A24), FIFO among equal kinds;
* payment = sum over all created hosts of their k units (A25); wall time from t = 0 (A23);
* wasted time = elapsed time of interrupted tasks; continued hosts = hosts charged > 1 unit.

Decisions where 2.9 leaves room (documented so a cross-check can align):

* A task requeued by an interruption is handed to an idle, ready, alive host whose next boundary is
  strictly later than now (a host at its own boundary is about to be released), preferring the host
  with the latest boundary (most paid time left), ties to the lowest host index.
* The starvation guard also fires when an *idle* host is released at a boundary while tasks are pending
  and no host is alive (possible only at simultaneous boundaries); it creates exactly one host without
  running the allocation step (creationRatio unchanged). Within ALLOCATE it is ``n = max(n, 1)``.
* Stall detection (guard=False): once no host is alive, the state is frozen except creationRatio, so the
  periodic chain is stopped when no future tick can create a host (T undefined, n_nec <= 0, or
  cr = ir = 0); the heap then drains and the run returns with done < N. A 1-year horizon also stops.
  For unfinished runs wall_s is the time of the last processed event.
* A host that is still booting counts as alive (N/2 rule, guard, peak_alive) and contributes capacity
  from its boot end.

    python benchmarks/a2ha_ref.py            # self-check: W2, W1 (100 orderings) and W3 timing
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from heapq import heappop, heappush

import numpy as np

__all__ = ["run_a2ha", "run_orderings"]

# Event priorities at equal timestamps (A24).
_DONE, _BOUNDARY, _READY, _PERIODIC = 0, 1, 2, 3
_HORIZON = 365.0 * 86400.0


def run_a2ha(
    durations: Sequence[float],
    order: Sequence[int],
    *,
    cr0: float = 0.5,
    ir: float = 0.5,
    U: float = 3600.0,
    boot: float = 300.0,
    beta: float = 1.0,
    period: float = 300.0,
    init_hosts: int = 1,
    half_rule: bool = True,
    alpha: float = 1.0,
    guard: bool = True,
    possible: str = "floor",
    periodic_alloc: str = "always",
) -> dict:
    """Simulate one A2HA run (decision ALG). ``order`` is the pending-queue order (head first).

    ``possible`` in {'floor', 'fractional'} (2.2.1) and ``periodic_alloc`` in {'always', 'updated'}
    (A5) are the decisions' flags; the defaults are the reference decisions.
    """
    d = [float(x) for x in durations]
    N = len(d)
    if sorted(int(j) for j in order) != list(range(N)):
        raise ValueError("order must be a permutation of range(len(durations))")
    if possible not in ("floor", "fractional"):
        raise ValueError("possible must be 'floor' or 'fractional'")
    if periodic_alloc not in ("always", "updated"):
        raise ValueError("periodic_alloc must be 'always' or 'updated'")
    use_floor = possible == "floor"
    alloc_always = periodic_alloc == "always"

    H = (U - boot) / beta  # hostProcessingTime
    win_a = boot - boot / beta  # W_h = c + win_a + max(k, kplan) * win_b
    win_b = U / beta
    half_n = N / 2.0
    long_thr = alpha * H
    floor = math.floor
    ceil = math.ceil

    # pending queue: list used as a stack, head = last element
    pending = [int(j) for j in reversed(order)]

    # per-host state (index = host id)
    h_c: list[float] = []  # creation time
    h_bootend: list[float] = []
    h_k: list[int] = []  # committed charge units
    h_kplan: list[int] = []  # planned units
    h_task: list[int] = []  # running task or -1
    h_tstart: list[float] = []
    h_W: list[float] = []  # end of planned work window W_h (2.2.1), cached
    h_ready: list[bool] = []
    h_alive: list[bool] = []
    alive: list[int] = []  # ids of alive hosts (creation order)

    heap: list = []
    seq = 0

    remaining = N
    finished = 0
    total_pt = 0.0
    tavg = -1.0  # tasksAverageTime; <= 0 means undefined (A28)
    cr = cr0
    interrupted = 0
    wasted = 0.0
    peak_alive = 0
    t = 0.0
    ended = False

    def create_host(now: float) -> None:
        nonlocal seq, peak_alive
        h = len(h_c)
        h_c.append(now)
        h_bootend.append(now + boot)
        h_k.append(1)
        h_kplan.append(1)
        h_task.append(-1)
        h_tstart.append(0.0)
        h_W.append(now + win_a + win_b)
        h_ready.append(False)
        h_alive.append(True)
        alive.append(h)
        if len(alive) > peak_alive:
            peak_alive = len(alive)
        heappush(heap, (now + boot, _READY, seq, h, -1))
        heappush(heap, (now + U, _BOUNDARY, seq + 1, h, -1))
        seq += 2

    def allocate(now: float) -> int:
        """Fig. 3 lines 6-11 + Fig. 5 + N/2 rule + guard. Returns n_nec (None-safe: caller checks tavg)."""
        nonlocal cr
        # possibleTasks
        P = 0.0
        for h in alive:
            if h_task[h] >= 0:
                rem = h_W[h] - h_tstart[h]
            else:
                st = h_bootend[h]
                rem = h_W[h] - (now if now > st else st)
            if rem > 0.0:
                P += floor(rem / tavg) if use_floor else rem / tavg
        x = (remaining - P) * tavg / H
        n_nec = floor(x + 0.5) if x >= 0.0 else -floor(-x + 0.5)
        if n_nec >= 0:
            n = n_nec if cr == 1.0 else ceil(n_nec * cr)
            if half_rule and len(alive) + n > half_n:
                n = 0
                for h in alive:
                    if h_kplan[h] < 2:
                        h_kplan[h] = 2
                        if h_k[h] < 2:
                            h_W[h] = h_c[h] + win_a + 2 * win_b
                if pending:
                    for h in alive:
                        if h_W[h] - now < tavg:
                            kp = h_kplan[h] + 1
                            h_kplan[h] = kp
                            kk = h_k[h]
                            h_W[h] = h_c[h] + win_a + (kk if kk >= kp else kp) * win_b
            if guard and pending and not alive and n < 1:
                n = 1
            for _ in range(n):
                create_host(now)
            cr = cr + (1.0 - cr) * ir
        return n_nec

    for _ in range(init_hosts):
        create_host(0.0)
    heappush(heap, (period, _PERIODIC, seq, -1, -1))
    seq += 1

    while heap:
        ev = heappop(heap)
        t = ev[0]
        if t > _HORIZON:
            break
        kind = ev[1]
        h = ev[3]

        if kind == _DONE:
            if not h_alive[h]:
                continue  # stale: the task was interrupted at h's boundary
            j = ev[4]
            remaining -= 1
            finished += 1
            total_pt += d[j]
            tavg = total_pt / finished
            h_task[h] = -1
            if remaining == 0:
                ended = True
                break
            if pending:
                j2 = pending.pop()
                h_task[h] = j2
                h_tstart[h] = t
                heappush(heap, (t + d[j2], _DONE, seq, h, j2))
                seq += 1
            if tavg > 0.0:
                allocate(t)

        elif kind == _BOUNDARY:
            if not h_alive[h]:
                continue
            j = h_task[h]
            release = False
            if j < 0:
                release = True
            else:
                e = t - h_tstart[h]
                if h_k[h] < h_kplan[h]:
                    h_k[h] += 1  # planned extension: W_h unchanged (k <= kplan)
                elif tavg >= long_thr or e >= tavg:
                    # long-task mode, or the task ran past the average: let it finish
                    kk = h_k[h] + 1
                    h_k[h] = kk
                    h_W[h] = h_c[h] + win_a + kk * win_b
                else:
                    interrupted += 1
                    wasted += e
                    h_task[h] = -1
                    pending.append(j)  # head requeue (A10)
                    release = True
            if release:
                h_alive[h] = False
                alive.remove(h)
                if j >= 0:
                    # hand the requeued task to an idle alive host with paid time left
                    best = -1
                    best_b = t
                    for g in alive:
                        if h_task[g] < 0 and h_ready[g]:
                            b = h_c[g] + h_k[g] * U
                            if b > best_b:
                                best_b = b
                                best = g
                    if best >= 0:
                        j2 = pending.pop()
                        h_task[best] = j2
                        h_tstart[best] = t
                        heappush(heap, (t + d[j2], _DONE, seq, best, j2))
                        seq += 1
                if guard and pending and not alive:
                    create_host(t)
            else:
                heappush(heap, (h_c[h] + h_k[h] * U, _BOUNDARY, seq, h, -1))
                seq += 1

        elif kind == _READY:
            h_ready[h] = True
            if h_alive[h] and h_task[h] < 0 and pending:
                j2 = pending.pop()
                h_task[h] = j2
                h_tstart[h] = t
                heappush(heap, (t + d[j2], _DONE, seq, h, j2))
                seq += 1

        else:  # _PERIODIC (Fig. 7, pooled mean, A1)
            run_sum = 0.0
            n_run = 0
            for g in alive:
                if h_task[g] >= 0:
                    run_sum += t - h_tstart[g]
                    n_run += 1
            updated = False
            if n_run:
                fin_avg = total_pt / finished if finished else 0.0
                if run_sum / n_run > fin_avg:
                    tavg = (run_sum + total_pt) / (finished + n_run)
                    updated = True
            n_nec = None
            if tavg > 0.0 and (alloc_always or updated):
                n_nec = allocate(t)
            # nothing alive: the state is frozen except creationRatio -> detect a permanent stall;
            # then do not reschedule, so the heap drains and the run reports done < N
            if (
                not alive
                and pending
                and (tavg <= 0.0 or n_nec is None or n_nec <= 0 or (cr == 0.0 and ir == 0.0))
            ):
                continue
            heappush(heap, (t + period, _PERIODIC, seq, -1, -1))
            seq += 1

    S = sum(d)
    charged = sum(h_k)
    wall = t
    return {
        "hosts": len(h_c),
        "wall_s": wall,
        "speedup": S / wall if wall > 0 else float("nan"),
        "charged_hours": charged * U / 3600.0,
        "charged_units": charged,
        "interrupted_tasks": interrupted,
        "wasted_s": wasted,
        "continued_hosts": sum(1 for k in h_k if k > 1),
        "done": finished,
        "peak_alive": peak_alive,
        "completed": ended,
    }


def run_orderings(
    durations_or_fn: Sequence[float] | Callable[[int], Sequence[float]],
    n_orderings: int,
    seed: int,
    **kwargs,
) -> list[dict]:
    """Run ``n_orderings`` random orderings (numpy Generator permutations seeded by ``seed``).

    If ``durations_or_fn`` is callable it is called as ``fn(s)`` with a fresh integer seed drawn from
    the same generator before each run, so durations are redrawn per run (W2, W4).
    """
    rng = np.random.default_rng(seed)
    fixed = None if callable(durations_or_fn) else [float(x) for x in durations_or_fn]
    out = []
    for _ in range(n_orderings):
        if fixed is None:
            dur = [float(x) for x in durations_or_fn(int(rng.integers(0, 2**63 - 1)))]
        else:
            dur = fixed
        order = rng.permutation(len(dur)).tolist()
        out.append(run_a2ha(dur, order, **kwargs))
    return out


# --------------------------------------------------------------------------------------------------
# workloads for the self-check (W1-W4 of docs/decisions/a2ha.md)


def w2_durations(seed: int, n: int = 256) -> np.ndarray:
    """W2: N(150 s, 30 s), clipped > 0."""
    x = np.random.default_rng(seed).normal(150.0, 30.0, n)
    return np.maximum(x, 1e-3)


def w1_trace(seed: int = 7, n: int = 256) -> np.ndarray:
    """W1 substitute: gamma shape (220/125)^2, standardized to mean 220 / sd 125, clipped >= 5 s."""
    shape = (220.0 / 125.0) ** 2
    x = np.random.default_rng(seed).gamma(shape, 125.0**2 / 220.0, n)
    x = (x - x.mean()) / x.std() * 125.0 + 220.0
    return np.maximum(x, 5.0)


def w3_trace(seed: int = 11, n: int = 1480) -> np.ndarray:
    """W3 substitute: lognormal median 30 s, sigma = sqrt(2 ln(63.5/30)), scaled to mean exactly 63.5 s."""
    sigma = math.sqrt(2.0 * math.log(63.5 / 30.0))
    x = np.random.default_rng(seed).lognormal(math.log(30.0), sigma, n)
    return x * (63.5 / x.mean())


def _summary(name: str, res: list[dict]) -> None:
    def ms(key: str, scale: float = 1.0) -> str:
        v = np.array([r[key] for r in res], dtype=float) / scale
        return f"{v.mean():8.2f} +- {v.std(ddof=1):6.2f}"

    n_done = sum(r["completed"] for r in res)
    print(f"{name}: {len(res)} runs, {n_done} completed")
    print(f"  hosts        {ms('hosts')}")
    print(f"  wall (min)   {ms('wall_s', 60.0)}")
    print(f"  speedup      {ms('speedup')}")
    print(f"  charged (h)  {ms('charged_hours')}")
    print(f"  interrupted  {ms('interrupted_tasks')}")
    print(f"  wasted (min) {ms('wasted_s', 60.0)}")
    print(f"  continued    {ms('continued_hosts')}")
    print(f"  peak alive   {ms('peak_alive')}")


if __name__ == "__main__":
    t0 = time.perf_counter()
    res = run_orderings(w2_durations, 100, seed=2, cr0=0.5, ir=0.5)
    _summary("W2 synthetic N(150,30), redrawn, cr0=ir=0.5", res)
    print(
        "  prototype (PROTO): hosts 12.6-13.1, speedup 9.1-10.0, payment 13.1-13.4 h, interrupted 2-4, "
        "continued 0.2-0.5"
    )
    res = run_orderings(w2_durations, 100, seed=2, cr0=0.5, ir=0.5, guard=False)
    print(f"  without guard: {sum(not r['completed'] for r in res)}/100 runs stalled (prototype, A9: 2-9%)")

    w1 = w1_trace()
    print(f"\nW1 trace: mean {w1.mean():.1f} sd {w1.std():.1f} min {w1.min():.1f} max {w1.max():.1f} s")
    res = run_orderings(w1, 100, seed=1, cr0=0.5, ir=0.5)
    _summary("W1 gamma trace, cr0=ir=0.5", res)
    print(
        "  prototype (across cr0, ir): hosts 19.0-22.1, wall 68-78 min, speedup 12.2-14.3, payment "
        "21.3-23.8 h,"
    )
    print("         interrupted 3.5-6, wasted 6-10 min, continued 1.6-2.3")

    w3 = w3_trace()
    print(
        f"\nW3 trace: mean {w3.mean():.2f} median {np.median(w3):.1f} max {w3.max() / 60:.1f} min, "
        f"{int((w3 > 900).sum())} tasks > 15 min"
    )
    t1 = time.perf_counter()
    res = run_orderings(w3, 200, seed=3, cr0=0.5, ir=0.5)
    t2 = time.perf_counter()
    _summary("W3 lognormal trace, cr0=ir=0.5", res)
    print("  prototype: hosts 32.5-37.9, payment 40-44 h, interrupted ~6-7, continued 5.7-7.6, wasted ~3 min")
    print(f"  time for 200 orderings of 1480 tasks: {t2 - t1:.2f} s")
    print(f"\ntotal self-check time {time.perf_counter() - t0:.1f} s")
