"""The ``skylease`` console entry: ``skylease run`` goes to the warm service when one is up
(:mod:`skylease.service.warm`), everything else (and ``run`` when no service can be used) to the CLI
in this process; a run here that executed its tasks then starts the service for the next ones.

This is also the service's own entry (:func:`serve_main`): the one module that knows both the CLI
and the service, so that neither imports the other. Kept light: it imports nothing heavy before it
knows which way to go.
"""

from __future__ import annotations

import sys

#: The warm service's process: a new interpreter running :func:`serve_main`.
SERVE_COMMAND = (sys.executable, "-c", "from skylease.launch import serve_main; serve_main()")


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] != ["run"]:
        from skylease.cli import console_main

        console_main()
        return
    from skylease.service import warm

    code = warm.warm_run(argv)
    if code is None:  # no service: run here
        warm.set_title(warm.run_title(argv))
        from skylease.cli import main as cli_main

        code = cli_main(argv)
        warm.start_after_run(argv, code, SERVE_COMMAND)
    sys.exit(code)


def serve_main() -> None:
    """``SERVE_COMMAND FD SOCKET``: the warm service, on the listening socket FD bound at SOCKET."""
    import socket
    from pathlib import Path

    from skylease.service.warm import serve_forever

    serve_forever(socket.socket(fileno=int(sys.argv[1])), Path(sys.argv[2]), _prepare, _run_command)


def _prepare() -> None:
    """In the service, before it serves: import the CLI and build its click command once."""
    from skylease.cli import click_command

    click_command()


def _run_command(argv: list[str]) -> int:
    """In a run's process forked from the service: the CLI, with consoles made for the client's
    terminal and environment (those made at import describe the service's /dev/null)."""
    from rich.console import Console

    import skylease.cli as cli

    cli.out, cli.err = Console(), Console(stderr=True)
    return cli.main(argv)
