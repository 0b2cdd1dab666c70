"""Replay MapReduce and multi-model provisioning plans in the event simulator.

The planners are fluid: MapReduce work is divisible, and a Watershed model's machines finish
fractions of tasks. The simulator runs whole tasks on hosts that boot, are billed per started unit
and are stopped when the plan says. The issue's bar for every plan: the replayed cost equals the
plan's, and the completion time is within one interval of it (a quarter hour for MapReduce,
``interval_min`` for the multi-model plans). ``replay_watershed`` in
:mod:`skylease.experiments.provisioning` does the same for single-model hybrid plans.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from skylease.control.env import Environment, HostView, Policy
from skylease.control.scheduled import ScheduledPool
from skylease.model.errors import UserError
from skylease.model.host import HostState
from skylease.model.instance import InstanceType
from skylease.model.task import Task
from skylease.planning.provisioning import CloudType, MapReduceJob, Plan, WatershedModel
from skylease.planning.provisioning.multimodel import transfer_price
from skylease.sim.env import SimResult, simulate
from skylease.traces.synthetic import constant_bag

_EPS = 1e-9


@dataclass(frozen=True)
class MapReduceReplay:
    """A replayed MapReduce plan. Times in seconds; the reduce phase starts at ``map_s``."""

    cost: float
    makespan_s: float
    map_s: float
    reduce_s: float
    map_cost: float  # single cluster: the whole bill is here, ``reduce_cost`` is 0
    reduce_cost: float
    tasks: int
    unfinished: int


@dataclass(frozen=True)
class ModelReplay:
    """One model of a replayed multi-model plan."""

    name: str
    makespan_s: float
    compute_cost: float
    hosts: int  # one-core hosts rented (a host per core per run segment)
    done: int
    unfinished: int


@dataclass(frozen=True)
class MultiModelReplay:
    """A replayed multi-model plan: compute from the simulator plus the data transfers used."""

    cost: float
    makespan_s: float
    compute_cost: float
    transfer_cost: float
    models: tuple[ModelReplay, ...]

    @property
    def unfinished(self) -> int:
        return sum(m.unfinished for m in self.models)


def _pool(t: CloudType, *, unit: float, price: float) -> InstanceType:
    return InstanceType(t.name, speed=t.capacity, price=price, billing_unit=unit,
                        boot_time=t.init_minutes * 60.0, min_units=0 if price == 0 else 1)


class _Phases(ScheduledPool):
    """A fixed fleet that runs pool-pinned phases one after another (a barrier between them)."""

    def __init__(self, schedule: dict[str, list[tuple[float, int]]],
                 phases: list[dict[str, list[Task]]]) -> None:
        super().__init__(schedule, drain=True)
        self.phases = [p for p in phases if any(p.values())]
        self.left = 0
        self.barriers: list[float] = []

    def _submit_next(self, env: Environment) -> None:
        phase = self.phases.pop(0)
        for pool, tasks in phase.items():
            env.submit(tasks, pool=pool)
            self.left += len(tasks)

    def on_start(self, env: Environment) -> None:
        if self.phases:
            self._submit_next(env)  # first: ScheduledPool rents nothing while no task is pending
        super().on_start(env)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        self.left -= 1
        if self.left == 0:
            assert self.env is not None
            self.barriers.append(self.env.now)
            if self.phases:  # before the base class sees no pending task and releases every host
                self._submit_next(self.env)
        super().on_task_done(task, host, runtime)


def _shares(work_h: float, mix: dict[str, int], by_name: dict[str, CloudType], grain_s: float,
            first_id: int) -> dict[str, list[Task]]:
    """``work_h`` Small-instance hours split in proportion to capacity: each instance of type k
    gets ``capacity_k / Σ capacity`` of it, as equal tasks of at most ``grain_s`` reference
    seconds, queued on its type's pool."""
    if work_h <= 0:
        return {}
    total_cap = sum(n * by_name[name].capacity for name, n in mix.items())
    out: dict[str, list[Task]] = {}
    tid = first_id
    for name, n in mix.items():
        share = work_h * 3600.0 * by_name[name].capacity / total_cap  # reference seconds per host
        m = max(1, math.ceil(share / grain_s - _EPS))
        out[name] = [Task(tid + i, share / m) for i in range(n * m)]
        tid += n * m
    return out


def replay_mapreduce(plan: Plan, job: MapReduceJob, types: Sequence[CloudType], *,
                     grain_hours: float = 0.25) -> MapReduceReplay:
    """Run a MapReduce plan (either billing variant) in the event simulator.

    Decision (divisible work): as in the planner's model, a phase's work is divided among its
    instances in proportion to their capacity, each instance's share cut into equal tasks of at
    most ``grain_hours`` Small-instance hours (default a quarter hour, the planner's time
    resolution) and queued on its type's pool. Instances of a type then run in lock-step and
    every instance of the phase finishes its share at the fluid duration work / Σ capacity: the
    replay differs from the plan only by floating-point rounding. (A shared first-come queue of
    fixed-size splits, as a real MapReduce scheduler has, ends a phase up to one split late; with
    a plan that fills its billed hours exactly, as the paper's $6.30 in 3 h does, that buys one
    more hour of every instance.) One host per instance, of speed ``capacity``, booting for the
    catalog's ``init_minutes`` (0 in the EMR catalog: the paper's model has no start-up delay).

    ``per_phase`` billing: the map mix runs from t = 0 until its last task is done (the barrier),
    then the reduce mix is rented and runs the reduce work: two simulator runs, each billed per
    started hour of its own hosts. ``single_cluster``: one mix runs both phases in one run (the
    reduce tasks are queued at the map barrier) and is billed per started hour from t = 0 to the
    end of the reduce phase. Hosts stay until their phase is done.
    """
    if not plan.ok:
        raise UserError(f"cannot replay a plan that is {plan.status}")
    if not plan.model.startswith("mapreduce/"):
        raise UserError(f"not a MapReduce plan: {plan.model}")
    if not math.isfinite(grain_hours) or grain_hours <= 0:
        raise UserError(f"must be > 0, got {grain_hours!r}", field="grain_hours")
    grain_s = grain_hours * 3600.0
    by_name = {t.name: t for t in types}
    missing = set(plan.instances) - set(by_name)
    if missing:
        raise UserError(f"the plan uses type(s) {sorted(missing)} that are not in types", field="types")
    pools = [_pool(by_name[n], unit=3600.0, price=by_name[n].price_hour) for n in plan.instances]

    def mix(phase: int) -> dict[str, int]:
        return {n: c[phase] for n, c in plan.instances.items() if c[phase]}

    def run(fleet: dict[str, int], phases: list[dict[str, list[Task]]]) -> tuple[SimResult, list[float]]:
        policy = _Phases({n: [(0.0, c)] for n, c in fleet.items()}, phases)
        return simulate(policy, [], pools), [0.0, *policy.barriers]

    def tasks(r: SimResult) -> tuple[int, int]:
        return r.tasks, len(r.unfinished)

    if plan.detail.get("billing") == "single_cluster":
        fleet = mix(0)
        mp = _shares(job.map_work, fleet, by_name, grain_s, 0)
        rd = _shares(job.reduce_work, fleet, by_name, grain_s, sum(len(v) for v in mp.values()))
        r, b = run(fleet, [mp, rd])
        map_s = b[1] if mp else 0.0
        return MapReduceReplay(r.cost, r.makespan, map_s, r.makespan - map_s, r.cost, 0.0, *tasks(r))
    m, _ = run(mix(0), [_shares(job.map_work, mix(0), by_name, grain_s, 0)])
    r, _ = run(mix(1), [_shares(job.reduce_work, mix(1), by_name, grain_s, 0)])
    return MapReduceReplay(m.cost + r.cost, m.makespan + r.makespan, m.makespan, r.makespan, m.cost,
                           r.cost, m.tasks + r.tasks, len(m.unfinished) + len(r.unfinished))


def _lanes(totals: list[int]) -> list[int]:
    """Lengths (in intervals) of the machines of a type whose count per interval never rises."""
    return [sum(1 for c in totals if c > lane) for lane in range(max(totals, default=0))]


def _segments(lanes: list[int], budgets: list[int], pieces: list[int],
              penalty: list[float]) -> list[list[tuple[int, int]]]:
    """Cut the lanes (machines) into runs, one model per run: ``out[k]`` is model k's list of
    (first interval, end interval) runs, ``budgets[k]`` machine-intervals in all, in at most
    ``pieces[k]`` runs (the machines the plan stages for it) when the greedy rule finds a way.

    Greedy, longest machine first: fill the rest of a machine with one model that can take all of
    it and keep enough for its other runs (the one with the longest average run left), else put
    the model that fits whole and would cost most to split, else split the model whose staging
    loses the least work (``penalty[k]``, in tasks; one staging more than the plan counts, paid
    in lost work).
    """
    b, p = list(budgets), list(pieces)
    out: list[list[tuple[int, int]]] = [[] for _ in budgets]
    for length in lanes:
        pos = 0
        while pos < length:
            r = length - pos
            take = [k for k in range(len(b)) if b[k] == r or (b[k] > r and p[k] >= 2)]
            whole = [k for k in range(len(b)) if 0 < b[k] < r]
            if take:
                k = max(take, key=lambda k: (b[k] / max(p[k], 1), -k))
            elif whole:
                k = max(whole, key=lambda k: (penalty[k] * (p[k] <= 1), b[k], -k))
            else:
                k = min((k for k in range(len(b)) if b[k] > 0), key=lambda k: (penalty[k], b[k], k))
            s = min(b[k], r)
            out[k].append((pos, pos + s))
            pos, b[k], p[k] = pos + s, b[k] - s, p[k] - 1
    return out


def replay_multimodel(plan: Plan, models: Sequence[WatershedModel],
                      types: Sequence[CloudType]) -> MultiModelReplay:
    """Run a multi-model plan in the event simulator, whole tasks, boot delays and billing.

    A whole-task plan (``capacity="whole"``, the default) names its machines: it is replayed by
    ``_replay_machines`` on time and at ``multimodel.cost_if_stopped``. A fluid plan is replayed by
    ``_replay_fluid`` (below), which can only approximate it.
    """
    if not plan.ok:
        raise UserError(f"cannot replay a plan that is {plan.status}")
    if not plan.model.startswith("multimodel/"):
        raise UserError(f"not a multi-model plan: {plan.model}")
    by_name = {t.name: t for t in types}
    missing = set(plan.instances) - set(by_name)
    if missing:
        raise UserError(f"the plan uses type(s) {sorted(missing)} that are not in types", field="types")
    if {m.name for m in models} != set(plan.detail["assignment"]):
        raise UserError("the models are not the plan's", field="models")
    if "machines" in plan.detail:
        return _replay_machines(plan, models, by_name)
    return _replay_fluid(plan, models, types)


class _Machines(Policy):
    """Rent every host at t=0 with its own task list; release it at its stop, or all when done."""

    def __init__(self, queues: dict[str, list[Task]], stops: dict[str, float],
                 model_of: dict[int, str]) -> None:
        self.queues, self.stops, self.model_of = queues, stops, model_of
        self.finished: dict[str, float] = {}
        self.done: dict[str, int] = {}
        self.late: set[int] = set()
        self.env: Environment | None = None

    def on_start(self, env: Environment) -> None:
        self.env = env
        for pool, tasks in self.queues.items():
            env.submit(tasks, pool=pool)
            for h in env.acquire(pool, 1):
                env.call_at(self.stops[pool], self._stop, h)

    def _stop(self, host: int) -> None:
        env = self.env
        assert env is not None
        if any(h.id == host for h in env.hosts()):
            if env.host(host).state is HostState.BUSY:
                self.late.add(host)  # never for a whole-task plan: its tasks end by the stop
            else:
                env.release(host)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        env = self.env
        assert env is not None
        name = self.model_of.get(task.id)
        if name is not None:
            self.finished[name] = env.now
            self.done[name] = self.done.get(name, 0) + 1
        if host.id in self.late:
            env.release(host.id)
        if env.pending() == 0:
            for h in list(env.hosts()):
                env.release(h.id)


def _replay_machines(plan: Plan, models: Sequence[WatershedModel],
                     by_name: dict[str, CloudType]) -> MultiModelReplay:
    """Replay a whole-task plan: each machine as the plan names it.

    Each core of a machine is a one-core host of its own pool (billed the per-core price, per
    minute or per started hour as the plan), rented at t=0, booting for its first run's stage-in,
    running the tasks the plan gives that run (then, for a later run, a stage-in task and that
    run's tasks), and released at the end of its last run or when the job is done. Tasks are
    whole and pinned to the host the plan gives them, so every task ends where the plan's slot
    ends: the job finishes in the plan's last interval, and the bill is exactly
    ``multimodel.cost_if_stopped(plan, types, finish)``.
    """
    minute = plan.detail["billing"] == "minute"
    by_model = {m.name: m for m in models}
    pools: list[InstanceType] = []
    queues: dict[str, list[Task]] = {}
    stops: dict[str, float] = {}
    model_of: dict[int, str] = {}
    owner: dict[str, str] = {}
    used: set[tuple[str, str]] = set()
    tid = 0
    for tname, chains in plan.detail["machines"].items():
        t = by_name[tname]
        price = (t.minute_price if minute else t.price_hour) / t.cores
        for mi, chain in enumerate(chains):
            for core in range(t.cores):
                pool = f"{tname}#{mi}.{core}"
                pools.append(InstanceType(pool, speed=t.capacity, price=price,
                                          billing_unit=60.0 if minute else 3600.0,
                                          boot_time=chain[0]["stage_min"] * 60.0,
                                          min_units=0 if price == 0 else 1))
                stops[pool] = chain[-1]["end_min"] * 60.0
                owner[pool] = chain[0]["model"]
                tasks: list[Task] = []
                for ri, run in enumerate(chain):
                    n = run["tasks"] // t.cores + (core < run["tasks"] % t.cores)
                    if ri and n:
                        tasks.append(Task(tid, run["stage_min"] * 60.0 * t.capacity))  # stage the model
                        tid += 1
                    for _ in range(n):
                        model_of[tid] = run["model"]
                        tasks.append(Task(tid, by_model[run["model"]].task_minutes * 60.0))
                        tid += 1
                queues[pool] = tasks
        for chain in chains:
            for run in chain:
                if t.location not in by_model[run["model"]].data_at:
                    used.add((run["model"], t.location))
    policy = _Machines(queues, stops, model_of)
    r = simulate(policy, [], pools)
    hosts: dict[str, int] = {}
    cost: dict[str, float] = {}
    for h in r.host_table:
        name = owner[h.pool]
        hosts[name] = hosts.get(name, 0) + 1
        cost[name] = cost.get(name, 0.0) + h.cost(r.end_time)
    runs = []
    for m in models:
        done = policy.done.get(m.name, 0)
        runs.append(ModelReplay(m.name, policy.finished.get(m.name, 0.0), cost.get(m.name, 0.0),
                                hosts.get(m.name, 0), done, m.n_tasks - done))
    listed = {(d["model"], d["to"]): d["cost"] for d in plan.detail.get("transfers", [])}
    transfer = math.fsum(listed.get(key, transfer_price(by_model[key[0]], key[1])) for key in sorted(used))
    return MultiModelReplay(r.cost + transfer, max(x.makespan_s for x in runs), r.cost, transfer, tuple(runs))


def _replay_fluid(plan: Plan, models: Sequence[WatershedModel],
                  types: Sequence[CloudType]) -> MultiModelReplay:
    """Replay a fluid plan (``capacity="fluid"``): one run per model, whole tasks.

    Decision (layout): the ILP fixes, per type, the machines alive in each interval (counts that
    never rise), and per (type, model) the machine-intervals spent on the model and how many
    machines stage it; which machine does which model when is left open (its per-interval split
    is one of many equal optima, and a machine may leave a model and come back unstaged). The
    replay keeps the per-type counts exactly and lays each model's machine-intervals on the
    type's machines one model after another, wrapping onto the next machine (McNaughton's rule),
    so every machine switches models only at interval boundaries and a model is staged once per
    machine that runs it: the plan's machine-intervals, hence its minute bill, are kept exactly.

    Each run of a model on a machine is, per core, a one-core host billed its per-core price
    (per minute or per started hour, as the plan), rented when the run starts, booting for the
    type's ``init_minutes`` (the stage-in the plan charges as InitPenalty) and stopped at the
    run's end (a task still running there is lost and re-queued). Decision (overrun): the hosts
    of a model's last-ending runs are not stopped at their end but finish the model, so a plan
    that promised fractions of tasks shows up as extra time and cost, never as missing tasks.
    Data transfers are the plan's prices, paid for each (model, location) the replay ran at
    without the model's data.
    """
    by_name = {t.name: t for t in types}
    assignment = plan.detail["assignment"]
    step = plan.detail["interval_min"] * 60.0
    minute = plan.detail["billing"] == "minute"
    segs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for tname, totals in plan.instances.items():
        per = [assignment[m.name].get(tname, {}) for m in models]
        budgets = [sum(a.get("counts", [])) for a in per]
        if sum(budgets) != sum(totals):
            raise UserError(f"the plan's assignment does not add up for {tname}")
        pieces = [a.get("machines", 0) for a in per]
        t = by_name[tname]
        penalty = [t.init_minutes * t.capacity / m.task_minutes for m in models]
        for m, s in zip(models, _segments(_lanes(list(totals)), budgets, pieces, penalty), strict=True):
            if s:
                segs[m.name, tname] = s
    runs = []
    used: set[tuple[str, str]] = set()
    for m in models:
        mine = {tn: s for (mn, tn), s in segs.items() if mn == m.name}
        last = max(e for s in mine.values() for _, e in s)
        pools, schedule = [], {}
        for tname, s in mine.items():
            t = by_name[tname]
            price = (t.minute_price if minute else t.price_hour) / t.cores
            pools.append(_pool(t, unit=60.0 if minute else 3600.0, price=price))
            delta: dict[int, int] = {}
            for a, e in s:
                delta[a] = delta.get(a, 0) + t.cores
                if e != last:  # the overrun rule: the last-ending runs finish the model
                    delta[e] = delta.get(e, 0) - t.cores
            count, steps = 0, []
            for i in sorted(delta):
                count += delta[i]
                steps.append((i * step, count))
            schedule[tname] = steps
            if t.location not in m.data_at:
                used.add((m.name, t.location))
        bag = constant_bag(m.n_tasks, m.task_minutes * 60.0, name=m.name)
        r = simulate(ScheduledPool(schedule, drain=True), bag, pools)
        runs.append(ModelReplay(m.name, r.makespan, r.cost, r.hosts, r.done, len(r.unfinished)))
    listed = {(d["model"], d["to"]): d["cost"] for d in plan.detail.get("transfers", [])}
    by_model = {m.name: m for m in models}
    transfer = math.fsum(listed.get(key, transfer_price(by_model[key[0]], key[1])) for key in sorted(used))
    compute = math.fsum(r.compute_cost for r in runs)
    return MultiModelReplay(compute + transfer, max(r.makespan_s for r in runs), compute, transfer,
                            tuple(runs))
