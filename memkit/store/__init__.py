"""The long-term store: user-scoped memories in one SQLite file.

`MemoryStore` is the façade; each concept lives in one module:

- `db`: the SQLite database behind one connection: its lock, `transaction()`, reads, the quota and size checks.
- `files`: the files on disk: checks before SQLite is pointed at them (a leftover or foreign `-wal`
  refused), creation beside and linking into place, half-made files of dead creators removed.
- `wal`: reading a `-wal` file as bytes (SQLite's format), to tell whose commits it holds.
- `schema`: `MIGRATIONS` (append-only), the runner, and the check at open derived from them.
- `statements`: the write statements, public through `MemoryStore.statements()`.
- `search`: the literal, case-folded substring rule, by scan or the FTS5 trigram index.
- `bundle`: the export bundle format (JSON Lines, a JSON Schema per line, a SHA-256).
- `archive`: the transcript archive of turns that left the short-term window.
- `health`: `health()`, the one counter check, `inspect_file`, `fingerprint`.

All SQL and every SQLite-specific rule live here (db, files, wal, schema, statements, search); a schema
change touches only this package. A second backend sits beside them with its own modules.
"""

from __future__ import annotations

from .bundle import EXPORT_FORMAT, EXPORT_FORMAT_VERSION, LINE_SCHEMAS, seal_bundle
from .db import SqliteDatabase, is_busy
from .files import SQLITE_MAGIC, sqlite_uri
from .health import counters_consistent, fingerprint, inspect_file
from .memory import MemoryStore
from .schema import MIGRATIONS, SCHEMA_VERSION, expected_columns, expected_objects
from .statements import SQLITE_STATEMENTS, Record, Statements

__all__ = [
    "MemoryStore", "Record", "Statements", "SQLITE_STATEMENTS", "SqliteDatabase", "is_busy",
    "SCHEMA_VERSION", "MIGRATIONS", "expected_columns", "expected_objects",
    "EXPORT_FORMAT", "EXPORT_FORMAT_VERSION", "LINE_SCHEMAS", "seal_bundle",
    "SQLITE_MAGIC", "sqlite_uri", "counters_consistent", "fingerprint", "inspect_file",
]
