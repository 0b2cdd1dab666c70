"""A server's warnings before a lease's end, from its configuration (docs/decisions/before-end-warnings.md).

``before_end`` (lease seconds; 0: none), ``webhook_prefixes`` (the URL prefixes a lease's
``webhook`` may start with) and ``webhook_secret_file`` (the secret that signs every delivery: the
file's first line, at least 16 characters; other users should not read it, as the database's
password file). Prefixes without a secret, or a secret without prefixes, is a mistake said in one
line: no webhook could be sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skylease.model.errors import UserError
from skylease.model.files import read_text
from skylease.runtime.leases.notices import WarningConfig

__all__ = ["MIN_SECRET_CHARS", "warning_config"]

#: The shortest secret accepted (a guessable secret signs nothing).
MIN_SECRET_CHARS = 16


def warning_config(cfg: Any) -> WarningConfig:
    """The :class:`WarningConfig` of a :class:`~skylease.service.server.ServeConfig`, its secret read
    (UserError naming the key when it cannot be used)."""
    secret = None
    if cfg.webhook_secret_file is not None:
        path = Path(cfg.webhook_secret_file).expanduser()
        try:
            text = read_text(path)
        except UserError as exc:
            raise UserError(exc.message, file=path, line=exc.line, field="webhook_secret_file") from None
        first = text.splitlines()[0].strip() if text.strip() else ""
        if len(first) < MIN_SECRET_CHARS:
            raise UserError(f"its first line must be a secret of {MIN_SECRET_CHARS} characters at least",
                            file=path, line=1, field="webhook_secret_file")
        secret = first.encode()
    if bool(cfg.webhook_prefixes) != (secret is not None):
        given, missing = (("webhook_prefixes", "webhook_secret_file") if secret is None
                          else ("webhook_secret_file", "webhook_prefixes"))
        raise UserError(f"{given} without {missing}: a webhook needs both (the URLs allowed and the "
                        "secret that signs them)", field=given)
    return WarningConfig(before_end=cfg.before_end or None, prefixes=tuple(cfg.webhook_prefixes),
                         secret=secret)
