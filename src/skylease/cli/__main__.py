"""``python -m skylease.cli``: the same command as ``skylease``."""

from skylease.cli import console_main

console_main()
