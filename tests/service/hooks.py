"""A webhook receiver for the tests: a stdlib HTTP server on a free loopback port, in a thread,
that answers each POST with the next status of ``statuses`` (then 200) and keeps what it got."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Got:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int


class Receiver:
    def __init__(self, statuses: tuple[int, ...] = ()) -> None:
        self.statuses = list(statuses)
        self.got: list[Got] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.lock:
                    status = outer.statuses.pop(0) if outer.statuses else 200
                    outer.got.append(Got(self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                                         status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:  # (quiet)
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def received(self) -> list[Got]:
        with self.lock:
            return list(self.got)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
