"""The long-term store: user-scoped memories in one SQLite file, or in a PostgreSQL database.

`Store` is the one façade, over either backend; `MemoryStore` opens it on a SQLite file and
`PostgresStore` on PostgreSQL (neither is the other; each has its own `__init__` and `__repr__` and
overrides no operation of `Store`); `open_store` opens either from a path or a `postgresql://` URL.
Each concept lives in one module:

- `backend`: the `Backend` protocol, what the façade and the shared modules ask of a database
  (transactions, reads, the per-user lock, the quota and size checks, identity), and the quota and
  size refusals both backends raise.
- `facade`: `Store`, made of parts by concept: `store_core` (state, limits, transactions,
  identity: `path`, `location`, `files()`, `store_id`), `store_records` (records, history, search
  literal and by meaning, forgetting), `store_proposals`, `store_sessions` (the transcript
  archive, agent items, window places, export and import).
- `steps`: the schema, declared once: an append-only list of steps, each in its SQLite and PostgreSQL form.
- `schema`: one runner and one check at open for either backend, what a version holds derived from the steps.
- `statements`: each backend's write statements and search SQL (`Statements`), public through
  `MemoryStore.statements()` and `PostgresStore.statements()`.
- `search`: the literal, case-folded substring rule on either backend, by scan or a trigram index
  (SQLite's FTS5, kept only where the limits can use it; PostgreSQL's `pg_trgm`).
- `bundle`: the export bundle format (JSON Lines, a JSON Schema per line, a SHA-256).
- `archive`: the transcript archive of turns that left the short-term window.
- `health`: `health()`, the one counter check, `inspect_file`, `fingerprint`.
- `proposals`: saves and deletes the model proposed, kept until a person approves or rejects them.
- `embeddings`: each record's vector (retrieval by meaning), written in the write's transaction and
  read one user at a time, ranked in Python (or by pgvector on PostgreSQL).
- `store_limits`: the limits a store records (table `store_limits`) and every open uses.
- `browse`: what an inspector reads beyond records: deleted keys, sessions, a record's write number.
- `agent_items`: the items of openai-agents sessions.
- `peers`: other frameworks' memory files (openai-agents, LangGraph, mem0), recognised and read only.
- `targets`: what a target names: a SQLite path, or PostgreSQL in any spelling (passwords masked).
- `opening`: `open_store`, for a path or any PostgreSQL spelling.

SQLite:

- `memory`: `MemoryStore`, which opens a `SqliteDatabase` (or a `ReadOnlyDatabase`) under the façade.
- `db`: the SQLite backend: one connection, its lock, `transaction()`, reads, the checks.
- `readonly`: reading a file without changing it (`MemoryStore(path, read_only=True)`): `mode=ro` or
  `immutable=1`, an older schema from a migrated copy in memory, every write refused.
- `files`: the files on disk: checks before SQLite is pointed at them (a leftover or foreign `-wal`
  refused), creation beside and linking into place, half-made files of dead creators removed.
- `wal`: reading a `-wal` file as bytes (SQLite's format), to tell whose commits it holds.

PostgreSQL (psycopg and psycopg_pool are imported only when a URL is opened):

- `postgres`: the PostgreSQL backend: transactions, the per-user lock, the quota and size checks.
- `pg_counters`: its counters: each user's row (their lock, the per-user quota) and the store-wide
  counts in shards (the global quota and the size cap; step 13's statements), settled by each write.
- `pg_pool`: its connection pool (a connection of its own when the pool is slow).
- `pg_connection`: a psycopg connection that runs the store's `?` SQL; passwords masked in messages.
- `pg_schema`: PostgreSQL's part in the schema runner and check (version, lock, catalog), the
  optional `pg_trgm` index.
- `pg_vectors`: pgvector where the server has it; `real[]` read fast where it has not.
- `pg_store`: `PostgresStore`, which opens a `PostgresDatabase` under the façade.
- `start_embedded_postgres()` (from `memkit.servers.postgres`): a server of its own in a temporary folder.

All SQL and every backend-specific rule live here; a schema change touches only this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .backend import Backend
from .bundle import EXPORT_FORMAT, EXPORT_FORMAT_VERSION, LINE_SCHEMAS, seal_bundle
from .db import SqliteDatabase, is_busy
from ..servers.postgres import EmbeddedPostgres, start_embedded_postgres
from .facade import Store
from .files import SQLITE_MAGIC, sqlite_uri
from .health import counters_consistent, fingerprint, inspect_file
from .memory import MemoryStore
from .opening import is_database_url, open_store
from .proposals import Proposal
from .schema import MIGRATIONS, SCHEMA_VERSION, expected_columns, expected_objects
from .statements import SQLITE_STATEMENTS, Record, Statements

if TYPE_CHECKING:  # imported on first use (see __getattr__): psycopg is an optional extra
    from .pg_store import PostgresStore

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
        from .pg_store import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
