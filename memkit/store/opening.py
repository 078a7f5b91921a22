"""One way to open either backend: a path opens SQLite, a `postgresql://` URL opens PostgreSQL."""

from __future__ import annotations

import os
from typing import Any

from .memory import MemoryStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(target: object) -> bool:
    """Whether `target` names a PostgreSQL database (a `postgresql://` or `postgres://` URL)."""
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


def open_store(target: str | os.PathLike[str], **options: Any) -> MemoryStore:
    """Open the long-term store at `target`, on whichever backend it names.

    Args:
        target: a path (SQLite: a `MemoryStore`) or a `postgresql://` URL (a `PostgresStore`,
            which needs the `postgres` extra).
        options: passed on: `limits`, `synchronous` and `clock` for both; `check_integrity` for
            SQLite; `schema`, `pool_size` and `create` for PostgreSQL.

    Raises:
        StoreError: the store cannot be opened (see `MemoryStore` and `PostgresStore`).
        ImportError: a URL was given and psycopg is not installed.

    Example:
        >>> with open_store("memory.sqlite3") as store:                                # doctest: +SKIP
        ...     store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        1
    """
    if is_database_url(target):
        from .pg_store import PostgresStore  # psycopg is an optional extra: imported only for a URL

        return PostgresStore(str(target), **options)
    return MemoryStore(target, **options)
