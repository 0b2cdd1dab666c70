"""A run reported to a ``skylease serve`` service (``--report URL``, else the ``--qos`` service):
registered before any work (a refused token stops the run there), told which tasks run where
while it runs, and told how it ended. A resumed run continues its run on the same service.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skylease.experiments.run_options import RunOptions
from skylease.runtime.credentials import option_warning, token_for


def start_reporter(opts: RunOptions, job_spec: str, job: Any, store_path: Path, store: Any, remote: Any,
                   notice: Callable[[str], None]) -> Any:
    """The run's reporter to the service of ``--report`` (else of ``--qos``, linked to its bag),
    registered; None without either. A resumed run continues its run on the same service."""
    if opts.report is not None:
        url, token, option = opts.report.strip(), opts.report_token, "--report-token"
    elif opts.qos is not None:
        url, token, option = opts.qos.strip(), opts.qos_token, "--qos-token"
    else:
        return None
    from skylease.runtime.runs.reporter import RunReporter  # (pydantic: only for a run reported)

    given = token is not None and opts.report is not None  # (--qos-token is warned about with the bag)
    token = token_for(url, token, option)
    before = (store.meta().get("report") or {}) if store is not None else {}
    run_id = before.get("run") if before.get("url") == url.rstrip("/") else None
    bot = remote.bot if remote is not None and url.rstrip("/") == remote.url else None
    command = " ".join(["skylease run", shlex.quote(job_spec), "--out", shlex.quote(str(opts.out))])
    reporter = RunReporter(url, token, store_path, name=Path(str(job.source)).name or job_spec,
                           command=command, n_tasks=len(job.tasks), bot=bot, run_id=run_id, notice=notice)
    if reporter.register() is not None:
        notice(f"run {reporter.run_id} reported to {reporter.url}/runs/{reporter.run_id}")
    if given:  # (once registered: a refusal stays one line)
        notice(f"warning: {option_warning(option)}")
    return reporter


def observing(reporter: Any, on_progress: Callable[[Any], None] | None) -> Callable[[Any], None]:
    """The run's progress hook, also telling the reporter which tasks run where."""
    def hook(env: Any) -> None:
        reporter.observe({h.task: (str(h.id), h.pool) for h in env.hosts() if h.task is not None})
        if on_progress is not None:
            on_progress(env)
    return hook


def close_reporter(reporter: Any, store: Any, outcome: str) -> dict[str, Any]:
    """The run's end said to the service: done (every task ok), stopped (interrupted) or failed."""
    counts = store.counts()
    state = "stopped" if outcome == "interrupted" else \
        "done" if outcome == "done" and counts["left"] == 0 and counts["failed"] == 0 else "failed"
    report = reporter.close(state)
    if report["run"] is not None:  # (registered late, when the service came back)
        store.set_meta({"report": {"url": report["url"], "run": report["run"]}})
    return report

