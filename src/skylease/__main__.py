"""``python -m skylease``: the same CLI as the ``skylease`` command."""

from skylease.cli import console_main

console_main()
