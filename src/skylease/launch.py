"""The ``skylease`` console entry: ``skylease run`` goes to the warm service when it can
(:mod:`skylease.service.warm`), everything else (and ``run`` when the service cannot be used) to
the CLI in this process. Kept light: it imports nothing heavy before it knows which way to go."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        from skylease.service.warm import warm_run

        code = warm_run(sys.argv[1:])
        if code is not None:
            sys.exit(code)
    from skylease.cli import console_main

    console_main()
