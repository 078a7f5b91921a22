"""One way to open either backend: a path opens SQLite; a PostgreSQL URL (any spelling) or a libpq
`key=value` string opens PostgreSQL (see `targets`: another URL scheme is refused, never taken for a
file name, and no message shows a password). The core's one way into the `store.postgres` wing."""

from __future__ import annotations

import os
from typing import Any

from .store import MemoryStore, Store
from .targets import is_database_url, masked, postgres_conninfo

__all__ = ["is_database_url", "masked", "open_store", "postgres_store_class"]


def postgres_store_class() -> type[Store]:
    """`PostgresStore`, imported on first use: psycopg is an optional extra (`postgres`)."""
    from .postgres.store import PostgresStore

    return PostgresStore


def open_store(target: str | os.PathLike[str], **options: Any) -> Store:
    """Open the long-term store at `target`, on whichever backend it names.

    Args:
        target: a path (SQLite: a `MemoryStore`), or a PostgreSQL database (a `PostgresStore`, which
            needs the `postgres` extra): `postgresql://`, `postgres://`, `postgresql+psycopg://` in
            any letter case, or a `key=value` connection string.
        options: passed on: `limits`, `synchronous`, `clock` and `read_only` for both;
            `check_integrity` for SQLite; `schema`, `pool_size` and `create` for PostgreSQL.

    Raises:
        StoreError: the store cannot be opened (see `MemoryStore` and `PostgresStore`), or `target`
            is a URL of another scheme (its password masked in the message).
        ImportError: a URL was given and psycopg is not installed.

    Example:
        >>> with open_store("memory.sqlite3") as store:                                # doctest: +SKIP
        ...     store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        1
    """
    conninfo = postgres_conninfo(target)
    if conninfo is not None:
        return postgres_store_class()(conninfo, **options)
    return MemoryStore(target, **options)
