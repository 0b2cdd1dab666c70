"""A real uvicorn server on a free loopback port, in a thread of the test's process, serving an app;
and what the service logged meanwhile (to tell that nothing was logged as an error)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Records(logging.Handler):
    """The records of ``skylease.service`` and uvicorn's errors, at WARNING and above."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        fmt = logging.Formatter("%(name)s %(levelname)s %(message)s")
        return "\n".join(fmt.format(r) for r in self.records)


@contextlib.contextmanager
def serving(app, timeout: float = 20.0) -> Iterator[tuple[str, Records]]:
    """``app`` served by uvicorn on 127.0.0.1 (its base URL) until the block ends, and the records
    logged meanwhile."""
    records = Records()
    loggers = [logging.getLogger(name) for name in ("skylease.service", "uvicorn.error")]
    for lg in loggers:
        lg.addHandler(records)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{server.config.port}", records
    finally:
        server.should_exit = True
        thread.join(timeout)
        for lg in loggers:
            lg.removeHandler(records)
