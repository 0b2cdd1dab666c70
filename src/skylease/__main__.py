"""``python -m skylease``: the same command as ``skylease``."""

from skylease.launch import main

if __name__ == "__main__":  # not when a spawned process imports it (the demo's background process)
    main()
