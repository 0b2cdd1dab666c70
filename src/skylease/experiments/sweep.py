"""Run a function over a parameter grid x repetitions, in parallel on Dask, crash-safe.

``run_campaign(fn, {"n": [5, 10], "boot": [0, 300]}, seeds=3, out="runs/x")`` calls
``fn(n=..., boot=..., seed=...)`` once per cell (4 parameter combinations x 3 repetitions), each
with a seed derived from the cell itself, so a cell gives the same result wherever and whenever it
runs. ``fn`` returns one row (a mapping) or a list of rows; the rows of every cell, prefixed with
the cell's parameters, ``rep`` and ``seed``, form the result table.

Where cells run: ``mode="processes"`` (default) starts local worker processes of its own
(:class:`skylease.runtime.pools.LocalWorker`, no Dask: a worker is up in some 30 ms plus the import
of the cell's module, where a Dask LocalCluster took about 1 s of the two cores), sends them the
cells in batches, two batches queued per worker so that none waits for the driver between
batches, and writes each batch's records as it comes back; ``scheduler="tcp://host:8786"`` uses an
existing Dask cluster instead; ``mode="threads"`` a Dask LocalCluster of threads; ``mode="inline"``
runs cells one by one in this process.

With an output folder every finished cell is appended to ``cells.jsonl`` as it arrives; running
the same campaign again into the same folder skips the finished cells (kill it, re-run it, and
only the missing cells run). At the end ``results.csv`` (and ``results.parquet`` when pyarrow is
installed) are written atomically. A cell that raises is recorded as failed with its error and is
retried by the next run; failures are returned, never dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import inspect
import itertools
import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skylease.experiments.store import CellStore, atomic_write_bytes_via
from skylease.model.errors import UserError

if TYPE_CHECKING:  # imported where a table is made: a worker running cells need not pay 0.25 s
    import pandas as pd

Row = Mapping[str, Any]
CellFn = Callable[..., Row | Sequence[Row]]
RESERVED = ("rep", "seed")
MODES = ("processes", "threads", "inline")


@dataclass(frozen=True)
class Cell:
    """One run of the campaign: a parameter combination and a repetition."""

    params: dict[str, Any]
    rep: int
    seed: int
    key: str


@dataclass
class CampaignResult:
    """The table of every finished cell, and what happened in this run."""

    table: pd.DataFrame
    cells: int
    ran: int
    skipped: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0
    out: Path | None = None


def cell_key(params: Mapping[str, Any], rep: int) -> str:
    """A stable identity for a cell (same parameters and repetition, same key, everywhere)."""
    blob = json.dumps({"params": params, "rep": rep}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def cell_seed(base_seed: int, key: str) -> int:
    """A deterministic 63-bit seed for a cell, independent of run order and machine."""
    h = hashlib.sha256(f"{base_seed}:{key}".encode()).hexdigest()
    return int(h[:15], 16)


def grid_cells(grid: Mapping[str, Sequence[Any]], seeds: int | Sequence[int] = 1,
               base_seed: int = 0) -> list[Cell]:
    """The cells of ``grid`` x repetitions, in grid order.

    ``seeds`` is a number of repetitions (0..n-1) or an explicit list of repetition numbers.
    """
    for name, values in grid.items():
        if name in RESERVED:
            raise UserError(f"parameter name {name!r} is reserved", field=name)
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise UserError("grid values must be a non-empty list", field=name)
        for v in values:
            try:
                json.dumps(v)
            except TypeError:
                raise UserError(f"value {v!r} is not a plain number/string/list", field=name) from None
    reps = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not reps:
        raise UserError("at least one repetition is needed", field="seeds")
    names = list(grid)
    cells = []
    for combo in itertools.product(*(grid[n] for n in names)):
        params = dict(zip(names, combo, strict=True))
        for rep in reps:
            key = cell_key(params, rep)
            cells.append(Cell(params, rep, cell_seed(base_seed, key), key))
    return cells


def _takes_rep(fn: CellFn) -> bool:
    try:
        return "rep" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def run_cells(fn: CellFn, cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """Run a batch of cells in this process; each gives a record (rows, or the error).

    ``fn`` gets the cell's parameters and ``seed``, and ``rep`` too if it has such a parameter
    (for studies whose instances are numbered, like the thesis's replicates).
    """
    out = []
    with_rep = _takes_rep(fn)
    for c in cells:
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"key": c.key, "params": c.params, "rep": c.rep, "seed": c.seed}
        try:
            extra = {"rep": c.rep} if with_rep else {}
            res = fn(**c.params, seed=c.seed, **extra)
            rows = [dict(res)] if isinstance(res, Mapping) else [dict(r) for r in res]
            for r in rows:
                clash = (set(r) & set(c.params)) | (set(r) & set(RESERVED))
                if clash:
                    raise ValueError(f"result row repeats parameter column(s) {sorted(clash)}")
            rec.update(ok=True, rows=rows)
        except Exception as exc:  # a failing cell is recorded, reported and retried next time
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            rec.update(ok=False, error=tb)
        rec["elapsed_s"] = time.perf_counter() - t0
        out.append(rec)
    return out


def run_pickled_cells(payload: bytes, cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """:func:`run_cells` for a function shipped as cloudpickle bytes (see :func:`_portable`)."""
    import cloudpickle

    return run_cells(cloudpickle.loads(payload), cells)


def _portable(fn: CellFn, wrap: Callable[[CellFn], Any] | None = None) -> bytes:
    """Pickle ``fn`` (or ``wrap(fn)``) so workers can load it even if its module is not importable
    there.

    A function whose module is not part of an installed distribution (a script, a module found
    only through the current folder, a test module) would leave Dask workers unable to
    deserialize it, and Dask then waits forever; such modules are pickled by value instead.
    """
    import cloudpickle

    name = getattr(fn, "__module__", None) or "__main__"
    module = sys.modules.get(name)
    installed = importlib.metadata.packages_distributions()
    by_value = module is not None and name != "__main__" and name.split(".")[0] not in installed
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(fn if wrap is None else wrap(fn))
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def run_cell_dicts(fn: CellFn, cells: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`run_cells` on a local worker, the cells as plain dicts (they travel as JSON; the
    worker unpickles ``fn`` once, with this call around it)."""
    return run_cells(fn, [Cell(**dict(c)) for c in cells])


#: Times a cell is sent again after its worker died under it (then it fails).
BATCH_TRIES = 3


def _run_on_local_workers(fn: CellFn, todo: list[Cell], workers: int | None, batch: int | None,
                          collect: Callable[[list[dict[str, Any]]], None],
                          advance: Callable[[int], None]) -> None:
    """The cells on local worker processes of our own (see the module docstring)."""
    import base64
    import functools
    import queue
    from collections import deque

    from skylease.runtime.pools import LocalWorker, WorkerGone, kill_tree

    n = workers or min(len(todo), os.cpu_count() or 1)
    payload = base64.b64encode(_portable(fn, lambda f: functools.partial(run_cell_dicts, f))).decode()
    env = dict(os.environ)  # functions are found as this process finds them: its folder first
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *filter(None, sys.path[1:]), *filter(None, [env.get(
        "PYTHONPATH")])])
    pool = [LocalWorker(env, os.getcwd()) for _ in range(n)]
    waiting: deque[Cell] = deque(todo)
    cap = batch or 64
    left, deaths = len(todo), dict.fromkeys((c.key for c in todo), 0)
    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def send(i: int) -> None:
        # guided self-scheduling: a share of what is left, so that the workers end together (a
        # worker holds two batches, so the share is of twice the workers), at most ``cap``
        k = batch or max(1, min(cap, -(-len(waiting) // (4 * n))))
        cells = [waiting.popleft() for _ in range(min(k, len(waiting)))]
        if cells:
            plain = [{"params": x.params, "rep": x.rep, "seed": x.seed, "key": x.key} for x in cells]
            c = pool[i].submit("call", [payload, plain])
            c.add_done_callback(lambda c, i=i, cells=cells: inbox.put((i, cells, c)))

    try:
        for i in range(n):
            send(i)
            send(i)  # the next batch queued behind the running one: no round trip between them
        while left:
            i, cells, c = inbox.get()
            try:
                recs = c.result()
            except WorkerGone:
                if pool[i].gone:
                    pool[i] = LocalWorker(env, os.getcwd())
                again = []
                recs = []
                for x in cells:
                    deaths[x.key] += 1
                    if deaths[x.key] < BATCH_TRIES:
                        again.append(x)
                    else:
                        recs.append({"key": x.key, "params": x.params, "rep": x.rep, "seed": x.seed,
                                     "ok": False, "elapsed_s": 0.0,
                                     "error": f"its worker process died {BATCH_TRIES} times running it"})
                waiting.extendleft(reversed(again))
                if not recs:
                    send(i)
                    continue
            left -= len(recs)
            collect(recs)
            advance(len(recs))
            send(i)
    finally:
        for w in pool:
            w.close()
        for w in pool:
            try:
                w.proc.wait(timeout=5)
            except Exception:
                kill_tree(w.proc.pid)
                w.proc.wait()  # dead (kill_tree does not reap): not left a zombie


def _function_name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def _batches(cells: Sequence[Cell], n_workers: int, batch: int | None) -> list[list[Cell]]:
    if batch is None:  # enough batches to balance load, few enough to keep Dask overhead small
        batch = max(1, min(64, len(cells) // max(1, n_workers * 8)))
    return [list(cells[i : i + batch]) for i in range(0, len(cells), batch)]


def check_cluster(address: str | None, workers: int | None = None, timeout: float = 3.0,
                  field: str = "--scheduler") -> None:
    """Check where a campaign will run before a command makes its output folder or starts any work.

    ``workers`` (local worker processes) must be whole, >= 1 and at most this machine's cores (or
    2): the cells are CPU-bound, so more processes only cost memory (about 150 MB each). ``address`` (a
    Dask scheduler) must answer as one within ``timeout`` seconds: a refused connection (at once),
    a silent host, or something else listening on that port (Dask's handshake fails) is refused.
    """
    if workers is not None:
        cores = max(2, os.cpu_count() or 1)
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= cores:
            raise UserError(f"must be a whole number from 1 to {cores} (the cores of this machine; more "
                            f"processes cannot run the cells sooner), got {workers!r}", field="--processes")
    if address is None:
        return
    import asyncio

    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port

    def refuse(why: str) -> UserError:
        return UserError(f"cannot reach the Dask scheduler at {address!r}: {why} (checked before "
                         "anything was written)", field=field)

    try:
        scheme, loc = parse_address(address)
        if scheme in ("tcp", "tls"):  # a refused port answers at once; Dask would retry until the timeout
            with socket.create_connection(parse_host_port(loc, 8786), timeout=timeout):
                pass
    except (OSError, ValueError, TypeError) as exc:
        raise refuse(exc.strerror if isinstance(exc, OSError) and exc.strerror
                     else f"not a scheduler address, e.g. tcp://HOST:8786 ({' '.join(str(exc).split())})"
                     ) from None

    async def handshake() -> None:
        comm = await connect(address, timeout=timeout)
        await comm.close()

    try:
        asyncio.run(handshake())
    except (OSError, TimeoutError) as exc:
        raise refuse(" ".join(str(exc).split())[:200] or type(exc).__name__) from None
    except Exception as exc:  # something else listens there: Dask's handshake reads garbage
        raise refuse(f"what answers is not a Dask scheduler ({type(exc).__name__} in the handshake)"
                     ) from None


def run_campaign(
    fn: CellFn,
    grid: Mapping[str, Sequence[Any]],
    *,
    seeds: int | Sequence[int] = 1,
    base_seed: int = 0,
    out: str | Path | None = None,
    mode: str = "processes",
    scheduler: str | None = None,
    workers: int | None = None,
    batch: int | None = None,
    progress: bool = True,
    description: str | None = None,
    connect_timeout: float = 10.0,
) -> CampaignResult:
    """Run ``fn`` over ``grid`` x ``seeds`` and return every finished cell's rows as a table."""
    if mode not in MODES:
        raise UserError(f"mode must be one of {', '.join(MODES)}, got {mode!r}", field="mode")
    if workers is not None and workers < 1:
        raise UserError(f"workers must be >= 1, got {workers}", field="--processes")
    t0 = time.perf_counter()
    cells = grid_cells(grid, seeds, base_seed)
    store = None
    done: set[str] = set()
    if out is not None:
        store = CellStore(Path(out))
        store.open({"function": _function_name(fn), "base_seed": base_seed, "grid": dict(grid)})
        done = store.done_keys()
    todo = [c for c in cells if c.key not in done]
    fresh: list[dict[str, Any]] = []

    def collect(records: list[dict[str, Any]]) -> None:
        if store is not None:
            store.append_many(records)  # one write per batch
        fresh.extend(records)

    label = description or f"{_function_name(fn).split(':')[-1]}: {len(cells)} cells"
    with _progress(progress, label, len(cells), len(cells) - len(todo)) as advance:
        if todo and mode == "inline" and scheduler is None:
            for c in todo:
                recs = run_cells(fn, [c])
                collect(recs)
                advance(len(recs))
        elif todo and mode == "processes" and scheduler is None:
            _run_on_local_workers(fn, todo, workers, batch, collect, advance)
        elif todo:
            _run_on_dask(fn, todo, mode, scheduler, workers, batch, collect, advance,
                         connect_timeout)

    keys = {c.key for c in cells}
    records = list(store.records()) if store is not None else fresh
    latest: dict[str, dict[str, Any]] = {}
    for rec in records:  # last word per cell: a success after a failure wins
        if rec["key"] in keys and (rec.get("ok") or not latest.get(rec["key"], {}).get("ok")):
            latest[rec["key"]] = rec
    order = {c.key: i for i, c in enumerate(cells)}
    ok = sorted((r for r in latest.values() if r.get("ok")), key=lambda r: order[r["key"]])
    failed = [r for r in latest.values() if not r.get("ok")]
    table = _table(ok, list(grid))
    if store is not None:
        _write_tables(table, store.folder)
    return CampaignResult(
        table=table,
        cells=len(cells),
        ran=len(fresh),
        skipped=len(cells) - len(todo),
        failed=failed,
        elapsed_s=time.perf_counter() - t0,
        out=store.folder if store is not None else None,
    )


def _run_on_dask(fn: CellFn, todo: list[Cell], mode: str, scheduler: str | None,
                 workers: int | None, batch: int | None,
                 collect: Callable[[list[dict[str, Any]]], None],
                 advance: Callable[[int], None], connect_timeout: float) -> None:
    with _environ_kept():
        _run_on_client(fn, todo, mode, scheduler, workers, batch, collect, advance, connect_timeout)


@contextlib.contextmanager
def _environ_kept() -> Iterator[None]:
    """This process's environment as it was: a LocalCluster writes its workers' settings into it
    (PYTHONHASHSEED, OMP_NUM_THREADS=1, ...), which every later subprocess of the caller would
    otherwise inherit (a user's own programs)."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != saved:
            os.environ.clear()
            os.environ.update(saved)


def _run_on_client(fn: CellFn, todo: list[Cell], mode: str, scheduler: str | None,
                   workers: int | None, batch: int | None,
                   collect: Callable[[list[dict[str, Any]]], None],
                   advance: Callable[[int], None], connect_timeout: float) -> None:
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=f"{connect_timeout}s")
        except Exception as exc:  # as check_cluster: refused, timed out, or not a Dask scheduler
            raise UserError(f"cannot reach Dask scheduler {scheduler}: {exc}",
                            field="scheduler") from None
    else:
        n = workers or min(len(todo), os.cpu_count() or 1)
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=(mode == "processes"),
            dashboard_address=None,
            silence_logs=50,
        )
        client = Client(cluster)
    try:
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        payload = client.scatter(_portable(fn), broadcast=True)
        futures = [
            client.submit(run_pickled_cells, payload, b, pure=False)
            for b in _batches(todo, n_workers, batch)
        ]
        for fut in as_completed(futures):
            recs = fut.result()
            collect(recs)
            advance(len(recs))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _table(records: list[dict[str, Any]], param_names: list[str]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for rec in records:
        prefix = {**rec["params"], "rep": rec["rep"], "seed": rec["seed"]}
        rows.extend({**prefix, **r} for r in rec["rows"])
    if not rows:
        return pd.DataFrame(columns=[*param_names, *RESERVED])
    return pd.DataFrame(rows)


def _write_tables(table: pd.DataFrame, folder: Path) -> None:
    atomic_write_bytes_via(folder / "results.csv", lambda p: table.to_csv(p, index=False))
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return
    atomic_write_bytes_via(folder / "results.parquet", lambda p: table.to_parquet(p, index=False))


class _progress:
    """A rich progress bar (or nothing), exposing ``advance(n)``."""

    def __init__(self, enabled: bool, label: str, total: int, completed: int) -> None:
        self.enabled = enabled
        self.label, self.total, self.completed = label, total, completed
        self._bar: Any = None

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda n: None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TimeRemainingColumn(), transient=False)
        self._bar.__enter__()
        task = self._bar.add_task(self.label, total=self.total, completed=self.completed)
        return lambda n: self._bar.advance(task, n)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def summarize(table: pd.DataFrame, by: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Mean and standard deviation of ``metrics`` per group of ``by`` (over repetitions)."""
    g = table.groupby(list(by), sort=False)[list(metrics)]
    res = g.agg(["mean", "std"])
    res.columns = [f"{m}_{s}" for m, s in res.columns]
    return res.reset_index()


__all__ = ["CampaignResult", "Cell", "cell_key", "cell_seed", "grid_cells", "run_campaign",
           "run_cells", "summarize"]
