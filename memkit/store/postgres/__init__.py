"""PostgreSQL for the store (the `postgres` extra): the same `Store`, on a server database.

`PostgresStore` opens it; `start_embedded_postgres()` starts a server of its own in a temporary
folder. psycopg is imported only when this package is used, never by the SQLite core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .server import EmbeddedPostgres, start_embedded_postgres

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["EmbeddedPostgres", "PostgresStore", "start_embedded_postgres"]


def __getattr__(name: str) -> object:
    """`PostgresStore` on first use: importing it imports psycopg."""
    if name == "PostgresStore":
        from .store import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
