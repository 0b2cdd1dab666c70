"""What the service's registries' tables share (SQLAlchemy Core, SQLite or PostgreSQL)."""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["ID", "owned_table"]

#: A 64-bit key that SQLite also makes its row id (autoincrement needs INTEGER there).
ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def owned_table(name: str, metadata: sa.MetaData, *columns: sa.Column) -> sa.Table:
    """A table of things a user owns: an ``id`` key the database assigns, the ``owner``'s user name
    (indexed: a user's list is a lookup), then ``columns``."""
    return sa.Table(name, metadata,
                    sa.Column("id", ID, primary_key=True, autoincrement=True),
                    sa.Column("owner", sa.String(64), nullable=False, index=True),
                    *columns)
