"""The pools file of a bag of tasks run on a test site's hosts (``skylease run --pools``): one pool
``lab`` of every host of the site, reached as root with the site's throwaway key and known hosts."""

from __future__ import annotations

from pathlib import Path


def pools_file(tmp_path: Path, site, *, slots: int = 2, extra_hosts: str = "", extra: str = "") -> Path:
    """``tmp_path/pools.toml``: ``slots`` per host; ``extra_hosts`` appended to the host list (e.g.
    ``, "127.0.0.99"``), ``extra`` lines appended to the pool's table (e.g. ``price = 1``)."""
    hosts = ", ".join(f'"{h.address}"' for h in site.hosts)
    path = tmp_path / "pools.toml"
    path.write_text(f'[pools.lab]\nssh = {{ user = "root", identity_file = "{site.key}", '
                    f'known_hosts = "{site.known_hosts}" }}\n'
                    f'hosts = [{hosts}{extra_hosts}]\nslots = {slots}\n{extra}')
    return path
