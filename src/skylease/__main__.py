"""``python -m skylease``: the same command as ``skylease``."""

from skylease.launch import main

main()
