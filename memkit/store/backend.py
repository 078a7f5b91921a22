"""What `Store` asks of a database: the `Backend` protocol, and the two refusals both keep.

`Store` (store.py) and the modules it runs through see a database only through `Backend`, which
`SqliteDatabase` (db.py; `ReadOnlyDatabase` in readonly.py) and `PostgresDatabase`
(postgres/backend.py) implement. Where the two differ, the difference is a method here, never an
override in `Store`. Every statement the shared modules run uses `?` placeholders and standard SQL.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from collections.abc import Sequence

from ..errors import LockedError, QuotaError
from ..limits import Limits
from .statements import SQLITE_STATEMENTS, Record, Statements

if TYPE_CHECKING:
    import sqlite3
    import threading

    import numpy

    from ..clock import Clock
    from ..semantic import Embedder


class Backend(Protocol):
    """One database of a store, as `Store` and the shared modules use it."""

    @property
    def name(self) -> str: ...  # "sqlite" or "postgres"
    @property
    def path(self) -> Path | None: ...  # the SQLite file (None on PostgreSQL)
    @property
    def location(self) -> str: ...  # the file's path, or PostgreSQL's host, port, database, schema (no password)
    @property
    def read_only(self) -> bool: ...  # every write is refused
    @property
    def how(self) -> str: ...  # rw, ro, immutable, snapshot, read-only transactions
    @property
    def file_version(self) -> int | None: ...  # the file's own schema version, where it can differ (a snapshot)
    @property
    def limits(self) -> Limits: ...  # what its checks enforce (`use_limits` changes them)
    @property
    def statements(self) -> Statements: ...  # the SQL of the writes and record reads

    @property
    def connection(self) -> Any:
        """A connection for inspection (inside this thread's `transaction()`, that transaction's)."""

    def close(self) -> None:
        """Close every connection. Safe to call twice."""

    def use_limits(self, limits: Limits) -> None:
        """Enforce `limits` from now on."""

    def fit_search_index(self, fts_min_user_rows: int) -> None:
        """Keep the search index where some user can reach `fts_min_user_rows` records (at open)."""

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A write transaction (a savepoint when nested); commit on success, roll back on error."""

    def reading(self) -> contextlib.AbstractContextManager[Any]:
        """A consistent read snapshot for reads of several statements."""

    def fetch(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """Run one read statement and return its rows (they read by name and by position)."""

    def take_sequence(self, conn: Any, count: int = 1) -> int:
        """Take the next `count` numbers of the store's sequence (inside a transaction); the last."""

    def lock_user(self, conn: Any, user: str, creating: bool) -> None:
        """Hold `user`'s write lock until the transaction ends, before reading their rows."""

    def lock_proposals(self, conn: Any, user: str) -> None:
        """Hold `user`'s proposal lock until the transaction ends (taken before `lock_user`)."""

    def check_quotas(self, conn: Any, user: str, adding: int = 1,
                     counts: tuple[int | None, int] | None = None) -> None:
        """Refuse (QuotaError) `adding` new records of `user` past a quota (see `refuse_past_quotas`)."""

    def check_size(self, conn: Any) -> None:
        """Refuse (QuotaError) a write that grew the database past its cap (see `refuse_past_size`)."""

    def changed(self, conn: Any, sql: str, rows: list[tuple[Any, ...]]) -> int:
        """Run `sql` for every row (inside a transaction); return how many rows it changed."""

    def settings(self, conn: Any) -> dict[str, Any]:
        """The first keys of `health()`: where the database is and how it is set up."""

    def db_bytes(self, conn: Any) -> int:
        """The database's size as its cap counts it."""

    def size_consistent(self, conn: Any) -> bool:
        """Whether a size the backend counts (PostgreSQL's shards) agrees with what the rows measure."""

    def search(self, user: str, query: str, limit: int, kind: str | None, fts_min_user_rows: int) -> list[Record]:
        """The literal search rule (search.py) on this database."""

    def search_many(self, user: str, queries: Sequence[str], limit: int, kinds: Sequence[str],
                    fts_min_user_rows: int) -> dict[tuple[str, str], list[Record]]:
        """`search` for every query and kind, in one pass."""

    def encode_vector(self, vector: numpy.ndarray) -> Any:
        """A vector as this database stores it (bytes, or `real[]`)."""

    def search_by_meaning(self, user: str, vector: numpy.ndarray, model: str, dim: int, limit: int,
                          kind: str | None, min_similarity: float) -> list[Record]:
        """`user`'s records ranked by similarity to `vector` (embeddings.py; pgvector where used)."""


class StorePart:
    """What the parts of `Store` (proposals.py, sessions.py, embeddings.py, browse.py, identity.py) use
    of it, declared here so that no part imports store.py (tests/test_layers.py)."""

    _db: Backend
    limits: Limits
    read_only: bool
    embedder: Embedder | None
    _clock: Clock
    fts_min_user_rows: int

    if TYPE_CHECKING:
        def transaction(self) -> contextlib.AbstractContextManager[Any]: ...
        def _check_identity(self, user: str, kind: str, key: str) -> None: ...
        def put(self, user: str, session: str, kind: str, key: str, value: str, *,
                confirmation: str | None = None) -> Record: ...
        def delete(self, user: str, kind: str, key: str, *, session: str | None = None,
                   confirmation: str | None = None) -> bool: ...


class SqlitePart:
    """What the parts of `SqliteDatabase` (db.py) use of it, declared once for all of them."""

    if TYPE_CHECKING:
        path: Path
        limits: Limits
        lock: threading.RLock
        page_size: int
        _wal_path: str

        @property
        def connection(self) -> sqlite3.Connection: ...
        def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]: ...
        def reading(self) -> contextlib.AbstractContextManager[sqlite3.Connection]: ...
        def fetch(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]: ...
        def locked_error(self) -> LockedError: ...
        def user_records(self, user: str) -> int: ...
        @staticmethod
        def _cap_wal(conn: sqlite3.Connection, limits: Limits, page_size: int) -> None: ...


class SqliteDuties(SqlitePart):
    """The rest of `Backend` on SQLite (`SqliteDatabase`, db.py): what a lesson need not show."""

    @property
    def location(self) -> str:
        """The file's path: which store this is."""
        return str(self.path)

    def use_limits(self, limits: Limits) -> None:
        """Enforce `limits` from now on (the store's recorded ones, read after opening)."""
        with self.lock:
            if limits == self.limits:
                return
            self.limits = limits
            conn = self.connection
            conn.execute(f"PRAGMA busy_timeout = {int(limits.busy_timeout_ms)}")
            if not conn.execute("PRAGMA query_only").fetchone()[0]:
                self._cap_wal(conn, limits, self.page_size)

    def user_records(self, user: str) -> int:
        """The user's quota counter: how many records they hold."""
        rows = self.fetch(SQLITE_STATEMENTS.user_records, (user,))
        return rows[0][0] if rows else 0

    def lock_user(self, conn: sqlite3.Connection, user: str, creating: bool) -> None:
        """Nothing to do: `BEGIN IMMEDIATE` already holds the one write lock of the file."""

    def lock_proposals(self, conn: sqlite3.Connection, user: str) -> None:
        """Nothing to do: `BEGIN IMMEDIATE` already holds the one write lock of the file."""

    def changed(self, conn: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> int:
        """Run `sql` for every row; return how many rows it changed (a skipped insert counts 0)."""
        return conn.executemany(sql, rows).rowcount


def refuse_past_quotas(limits: Limits, user: str, mine: int, total: int, adding: int) -> None:
    """Raise QuotaError if `adding` records to `user` (holding `mine`; the store `total`) passes a quota."""
    if mine + adding > limits.max_records_per_user:
        raise QuotaError(
            f"user {user!r} has {mine} records; the per-user quota is {limits.max_records_per_user}. "
            "Update an existing key or delete one first"
        )
    if total + adding > limits.max_records_total:
        raise QuotaError(f"the store holds {total} records; the global quota is {limits.max_records_total}")


def refuse_past_size(limits: Limits, size: int) -> None:
    """Raise QuotaError if a write grew the database to `size` bytes, past the cap."""
    if size > limits.max_db_bytes:
        raise QuotaError(f"the write would grow the database to {size} bytes; the cap is {limits.max_db_bytes} bytes")
