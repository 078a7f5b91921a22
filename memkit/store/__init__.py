"""The long-term store: user-scoped memories in one SQLite file, or in a PostgreSQL database.

`Store` is the one façade, over either backend; `MemoryStore` opens it on a SQLite file and
`PostgresStore` on PostgreSQL (neither is the other; each has its own `__init__` and `__repr__` and
overrides no operation of `Store`); `open_store` opens either from a path or a `postgresql://` URL.
Each concept lives in one module, whose docstring says what it owns:

- both backends: `backend` (the `Backend` protocol), `facade` and its parts by concept
  (`store_core`, `store_records`, `store_proposals`, `store_sessions`), `steps` (the schema,
  declared once), `schema` (its one runner and check), `statements`, `search`, `bundle`,
  `archive`, `health`, `proposals`, `embeddings`, `store_limits`, `browse`, `agent_items`, `peers`
  (other frameworks' memory files), `targets` and `opening`.
- SQLite: `memory` (`MemoryStore`), `db` (the backend), `readonly`, `files`, `wal`.
- PostgreSQL (psycopg and psycopg_pool are imported only when a URL is opened): `postgres` (the
  backend), `pg_counters`, `pg_pool`, `pg_connection`, `pg_schema`, `pg_vectors`, `pg_store`
  (`PostgresStore`); `start_embedded_postgres()` (from `memkit.store.postgres.server`) starts a server
  of its own in a temporary folder.

All SQL and every backend-specific rule live here; a schema change touches only this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .backend import Backend
from .bundle import EXPORT_FORMAT, EXPORT_FORMAT_VERSION, LINE_SCHEMAS, seal_bundle
from .db import SqliteDatabase, is_busy
from .postgres.server import EmbeddedPostgres, start_embedded_postgres
from .facade import Store
from .files import SQLITE_MAGIC, sqlite_uri
from .health import counters_consistent, fingerprint, inspect_file
from .memory import MemoryStore
from .opening import is_database_url, open_store
from .proposals import Proposal
from .schema import MIGRATIONS, SCHEMA_VERSION, expected_columns, expected_objects
from .statements import SQLITE_STATEMENTS, Record, Statements

if TYPE_CHECKING:  # imported on first use (see __getattr__): psycopg is an optional extra
    from .postgres.store import PostgresStore

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_FORMAT_VERSION",
    "LINE_SCHEMAS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_MAGIC",
    "SQLITE_STATEMENTS",
    "Backend",
    "EmbeddedPostgres",
    "MemoryStore",
    "PostgresStore",
    "Proposal",
    "Record",
    "SqliteDatabase",
    "Statements",
    "Store",
    "counters_consistent",
    "expected_columns",
    "expected_objects",
    "fingerprint",
    "inspect_file",
    "is_busy",
    "is_database_url",
    "open_store",
    "seal_bundle",
    "sqlite_uri",
    "start_embedded_postgres",
]


def __getattr__(name: str) -> object:
    """`PostgresStore` on first use: importing it imports psycopg (the `postgres` extra)."""
    if name == "PostgresStore":
        from .postgres.store import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
