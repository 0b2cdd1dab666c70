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


class AppServer:
    """``app`` served by uvicorn on 127.0.0.1 in a thread of this process (``config``: more of
    uvicorn's settings): its base URL, the uvicorn server, and the records logged meanwhile."""

    def __init__(self, app, timeout: float = 20.0, **config) -> None:
        self.records = Records()
        self._loggers = [logging.getLogger(name) for name in ("skylease.service", "uvicorn.error")]
        for lg in self._loggers:
            lg.addHandler(self.records)
        self.timeout = timeout
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(),
                                                    log_level="warning", lifespan="off", **config))
        self.url = f"http://127.0.0.1:{self.server.config.port}"
        self._thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)

    def stop(self) -> float:
        """Stop it as SIGTERM does (``should_exit``); the seconds it took. Fails if it does not stop."""
        t = time.monotonic()
        self.server.should_exit = True
        self._thread.join(self.timeout)
        for lg in self._loggers:
            lg.removeHandler(self.records)
        assert not self._thread.is_alive(), "the test server did not stop"
        return time.monotonic() - t

    @property
    def running(self) -> bool:
        return self._thread.is_alive()


@contextlib.contextmanager
def serving(app, timeout: float = 20.0) -> Iterator[tuple[str, Records]]:
    """``app`` served by uvicorn on 127.0.0.1 (its base URL) until the block ends, and the records
    logged meanwhile."""
    srv = AppServer(app, timeout)
    try:
        yield srv.url, srv.records
    finally:
        if srv.running:
            srv.stop()
