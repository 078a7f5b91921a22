"""The long-term store: user-scoped memories in one SQLite file (the lesson), or in PostgreSQL (a wing).

Start with store.py (`Store`: put, get, delete, search, transaction; `MemoryStore` opens a SQLite
file), then db.py (`SqliteDatabase`: the connection and its transactions) and steps.py (the schema,
step by step). `open_store` opens either backend; the `postgres` sub-package is imported only for a
URL (`PostgresStore` here on first use). A schema change touches only this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import opening
from .backend import Backend
from .bundle import EXPORT_FORMAT, EXPORT_FORMAT_VERSION, LINE_SCHEMAS, seal_bundle
from .db import SqliteDatabase
from .files import SQLITE_MAGIC, is_busy, sqlite_uri
from .health import counters_consistent, fingerprint, inspect_file
from .opening import is_database_url, open_store
from .proposals import Proposal
from .schema import MIGRATIONS, SCHEMA_VERSION, expected_columns, expected_objects
from .statements import SQLITE_STATEMENTS, Record, Statements
from .store import MemoryStore, Store

if TYPE_CHECKING:
    PostgresStore: type[Store]

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_FORMAT_VERSION",
    "LINE_SCHEMAS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_MAGIC",
    "SQLITE_STATEMENTS",
    "Backend",
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
]


def __getattr__(name: str) -> object:
    """`PostgresStore` on first use: importing it imports psycopg (the `postgres` extra)."""
    if name == "PostgresStore":
        return opening.postgres_store_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
