"""A real run's link to the service's Runs (issue 21): ``skylease run --report URL`` (and a run with
``--qos URL``) sends its task table to ``skylease serve`` as it changes.

:class:`RunReporter` registers the run (``POST /runs``) before any work: a refusal (a bad token) is
a :class:`UserError` then. From there a thread of its own reads the run's result store (a read-only
connection of its own: the run's writes never wait for it) every ``period`` seconds and sends the
task rows that changed since the last batch the service acknowledged, in batches the service takes
(at most :data:`BATCH_ROWS` rows and about :data:`BATCH_BYTES` of JSON each). Which tasks are running
comes from the run's progress hook (:meth:`RunReporter.observe`). :meth:`RunReporter.close` sends
what is left and says how the run ended.

Reporting never stops or slows the run: every call waits at most ``timeout`` seconds, in that thread.
A service that does not answer gets one warning line (``notice``), and the rows not acknowledged are
sent again at the next period, so a service restarted mid-run catches up. What could not be sent by
the end is counted (``unreported`` in :meth:`RunReporter.close`'s answer, said in one line too).
A reading of the store that takes long (a run of a million tasks) spaces the next one out, so the
reporter never takes more than about a twentieth of a core.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.model.wire import clean

__all__ = ["BATCH_BYTES", "BATCH_ROWS", "RunReporter", "store_rows"]

#: Rows per batch (the service takes up to 1,000) and the JSON size a batch stays under (the service
#: reads bodies up to 64 KiB).
BATCH_ROWS = 500
BATCH_BYTES = 48 * 1024
#: A run with nothing new says it is alive this often (s), so the service does not abandon it.
ALIVE_S = 30.0
_STDERR = 2048
_LABEL = 500

_SQL = """
SELECT t.id AS task, t.label, r.status, r.exit_code, r.machine, r.worker, r.pool, r.runtime_s,
       r.ended_s + s.started_unix AS ended, r.stderr_tail, COALESCE(a.n, 0) AS tries
FROM tasks t LEFT JOIN results r ON r.task = t.id LEFT JOIN segments s ON s.segment = r.segment
LEFT JOIN (SELECT task, COUNT(*) AS n FROM attempts WHERE outcome IN ('failed', 'lost') GROUP BY task) a
  ON a.task = t.id
ORDER BY t.id
"""


def _clean(text: Any, most: int, tail: bool = False, lines: bool = True) -> str | None:
    """Text the service stores: valid UTF-8, no control character but tab, LF and CR (none at all
    unless ``lines``: the service refuses them, skylease.model.wire) but U+FFFD in their place, at
    most ``most`` characters (the end of a tail)."""
    if text is None:
        return None
    s = clean(str(text).encode("utf-8", "replace").decode("utf-8"), lines=lines)
    return s[-most:] if tail else s[:most]


def store_rows(store_path: str | Path, running: Mapping[int, tuple[str | None, str | None]] | None = None
               ) -> dict[int, dict[str, Any]]:
    """Every task of the run's result store as the service's task row: ``done``/``failed`` from its
    result, else ``running`` if ``running`` has it (task -> (host, pool)), else ``queued``.
    ``attempts`` counts the tries that ended (failed or lost ones, and the one with the result)."""
    running = running or {}
    db = sqlite3.connect(Path(store_path).absolute().as_uri() + "?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        rows = db.execute(_SQL).fetchall()
    finally:
        db.close()
    out = {}
    for r in rows:
        tid = int(r["task"])
        row: dict[str, Any] = {"task": tid, "label": _clean(r["label"], _LABEL) or ""}
        if r["status"] is not None:
            err = None if r["status"] == "ok" else _clean(r["stderr_tail"], _STDERR, tail=True)
            row.update(status="done" if r["status"] == "ok" else "failed", attempts=int(r["tries"]) + 1,
                       exit_code=r["exit_code"], host=_clean(r["machine"] or r["worker"], 255, lines=False),
                       pool=_clean(r["pool"], 64, lines=False), runtime_s=r["runtime_s"], ended=r["ended"],
                       stderr_tail=err)
            for k in ("runtime_s", "ended"):  # (a clock step back must not make a row the service refuses)
                if row[k] is not None:
                    row[k] = max(0.0, float(row[k]))
        else:
            host, pool = running.get(tid, (None, None))
            row.update(status="running" if tid in running else "queued", attempts=int(r["tries"]),
                       host=_clean(host, 255, lines=False), pool=_clean(pool, 64, lines=False))
        out[tid] = row
    return out


class RunReporter:
    """One run reported to the service at ``url`` as the owner of ``token`` (see the module)."""

    def __init__(self, url: str, token: str, store_path: str | Path, *, name: str, command: str,
                 n_tasks: int, bot: int | None = None, run_id: int | None = None, period: float = 1.5,
                 timeout: float = 5.0, notice: Callable[[str], None] = print,
                 option: str = "--report") -> None:
        import httpx

        self.url, self.store_path, self.option = url.rstrip("/"), Path(store_path), option
        self.registration = {"name": _clean(name, 200, lines=False) or "run",
                             "command": _clean(command, 1000) or "", "n_tasks": int(n_tasks), "bot": bot}
        self.run_id, self.period, self.notice = run_id, float(period), notice
        self._resumed = run_id is not None  # the service may hold rows this process never sent
        self._http = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {token}"})
        self._acked: dict[int, dict[str, Any]] = {}
        self._running: dict[int, tuple[str | None, str | None]] = {}
        self._down = False
        self._last_sent = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one sender at a time (the thread, then close())
        self._thread: threading.Thread | None = None
        self.unreported = 0

    # -- HTTP -----------------------------------------------------------------------------------
    def _post(self, path: str, body: dict[str, Any]) -> Any:
        """The answer's JSON; None when the service did not answer (or answered 5xx); a refusal
        (4xx) is a UserError."""
        import httpx

        try:
            r = self._http.post(self.url + path, json=body)
        except (httpx.HTTPError, OSError) as exc:
            self._unreachable(type(exc).__name__)
            return None
        if r.status_code >= 500:
            self._unreachable(f"it answered {r.status_code}")
            return None
        if r.status_code >= 400:
            from skylease.runtime.qos.remote import refusal

            raise refusal(r, f"the service at {self.url}", self.option)
        if self._down:
            self._down = False
            self.notice(f"the run service at {self.url} answers again: the task table catches up")
        return r.json()

    def _unreachable(self, why: str) -> None:
        if not self._down:  # one line per outage, not one per period
            self._down = True
            self.notice(f"the run service at {self.url} does not answer ({why}); the run goes on, its "
                        "task table is sent when it answers")

    def register(self) -> int | None:
        """The run's id on the service (registered if it has none; a resumed run's id is checked,
        and a new run registered if the service no longer has it). None: the service did not
        answer (the thread tries again). UserError: refused."""
        if self.run_id is not None and self._resumed and not self._acked:
            try:
                if self._post(f"/runs/{self.run_id}/tasks", {"rows": []}) is None:
                    return None
                return self.run_id
            except UserError:  # not there any more (another database, removed): a new run
                self.run_id, self._resumed = None, False
        if self.run_id is None:
            answer = self._post("/runs", self.registration)
            if answer is None:
                return None
            self.run_id = int(answer["id"])
        return self.run_id

    # -- the thread -----------------------------------------------------------------------------
    def observe(self, running: Mapping[int, tuple[str | None, str | None]]) -> None:
        """The tasks running now (task -> (host, pool)); called from the run's progress hook."""
        self._running = dict(running)

    def start(self) -> RunReporter:
        self._thread = threading.Thread(target=self._loop, name="run-reporter", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        wait = self.period
        while not self._stop.wait(wait):
            t0 = time.monotonic()
            with contextlib.suppress(Exception):  # (reporting never ends the run; the next period retries)
                self.flush()
            wait = max(self.period, 20 * (time.monotonic() - t0))

    def _changed(self) -> list[dict[str, Any]]:
        out = []
        for tid, r in store_rows(self.store_path, self._running).items():
            before = self._acked.get(tid)
            if before is None and r["status"] == "queued" and not self._resumed:
                continue  # a task never reported counts as queued on the service already
            if before != r:
                out.append(r)
        return out

    def flush(self) -> bool:
        """Send the rows changed since the last acknowledged batch; whether everything was sent."""
        with self._lock:
            if self.register() is None:
                return False
            try:
                changed = self._changed()
            except sqlite3.Error:  # the store is being closed, or not made yet: later
                return False
            self.unreported = len(changed)
            if not changed and time.monotonic() - self._last_sent < ALIVE_S:
                return True
            for batch in _batches(changed) or [[]]:
                if self._post(f"/runs/{self.run_id}/tasks", {"rows": batch}) is None:
                    return False
                self._last_sent = time.monotonic()
                for r in batch:
                    self._acked[r["task"]] = r
                self.unreported -= len(batch)
            return True

    def close(self, state: str) -> dict[str, Any]:
        """Stop the thread, send what is left and the run's end (``done``, ``failed`` or ``stopped``);
        where the run is on the service and how many task rows could not be sent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        ended = False
        try:
            self._running = {}
            self.flush()
            if self.run_id is not None and not self._down:
                ended = self._post(f"/runs/{self.run_id}/finish", {"state": state}) is not None
        except UserError as exc:
            self.notice(exc.message)
        finally:
            self._http.close()
        if self.unreported or not ended:
            self.notice(f"the run service at {self.url} did not get all of this run: {self.unreported:,} "
                        f"task rows unsent{'' if ended else ', and not its end'}")
        return {"url": self.url, "run": self.run_id, "unreported": self.unreported, "ended": ended}


def _batches(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``rows`` in batches of at most BATCH_ROWS rows and about BATCH_BYTES of JSON."""
    out: list[list[dict[str, Any]]] = []
    size = 0
    for r in rows:
        n = len(json.dumps(r)) + 2
        if not out or len(out[-1]) >= BATCH_ROWS or size + n > BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(r)
        size += n
    return out
