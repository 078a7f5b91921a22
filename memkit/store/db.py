"""One SQLite database of a store: its long-lived connection, its lock, transactions and reads.

Writes run in `BEGIN IMMEDIATE` transactions, so a quota check, the write and the size check see
one consistent database and racing writers in other processes wait their turn instead of both
passing a check. WAL lets readers go on while a writer works.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path
from typing import Any, Literal
from collections.abc import Iterator

from ..errors import LockedError, StoreError
from ..limits import Limits
from .backend import SqliteDuties, refuse_past_quotas, refuse_past_size
from .embeddings import SqliteVectors
from .files import FileChecks, check_path, check_wal, create_file, is_busy, remove_dead_partials, sqlite_uri
from .health import SqliteHealth
from .schema import SqliteSchema, migrate
from .search_index import TrigramIndex
from .statements import SQLITE_STATEMENTS, Statements
from .turns import WriterTurns
from .wal import WalCap


class SqliteDatabase(FileChecks, TrigramIndex, WalCap, SqliteHealth, SqliteVectors, SqliteDuties):
    """The store's SQLite file behind one connection (`check_same_thread=False`) and one lock: the
    SQLite `Backend` (backend.py). Read `_open`, `transaction`, `fetch` and the checks inside a write;
    the rest lives apart, each part in the module of its concept: an existing file's checks
    (files.py), the search index (search_index.py), the `-wal`'s cap (wal.py), health's answers
    (health.py), vectors (embeddings.py), the rest of `Backend` (backend.py).

    Every use of the connection holds the lock (an `RLock`), so threads sharing a store run one at a
    time; other processes open their own connection, and SQLite's locks coordinate them.

    Raises:
        StoreError: (when opening) the file is not a memkit database, is damaged, newer or read-only.
        LockedError: another writer held the database locked past the busy timeout.
    """

    name = "sqlite"
    read_only = False
    how = "rw"
    file_version: int | None = None
    statements: Statements = SQLITE_STATEMENTS

    def __init__(self, path: Path, limits: Limits, synchronous: Literal["FULL", "NORMAL"],
                 check_integrity: bool) -> None:
        self.path: Path = path
        self._wal_path = f"{path}-wal"  # stat'ed twice a write: a str, not a new Path each time (7 µs)
        self.limits = limits
        self.synchronous = synchronous
        self.lock = threading.RLock()
        self._stamped = False  # this transaction has taken a number of the sequence already
        self._oversized = False  # this transaction was refused by the size cap
        self.no_wait = False  # a write that must not wait for another writer's turn (search_index.py)
        self._conn: sqlite3.Connection | None = None
        self._conn = self._open(check_integrity)
        self._turns = WriterTurns.for_folder(path)
        self.page_size: int = self._conn.execute("PRAGMA page_size").fetchone()[0]
        """Fixed for the file's life (WAL cannot change it), so the size check reads only page_count."""

    # -- opening: the connection's configuration, in one place --------------------------------------

    def _open(self, check_integrity: bool) -> sqlite3.Connection:
        path = self.path
        missing = check_path(path)
        remove_dead_partials(path)
        if missing:
            create_file(path)
        else:
            check_wal(path)
            self._inspect_schema(check_integrity)
        try:
            conn = sqlite3.connect(
                sqlite_uri(path, "rw"), uri=True, isolation_level=None, check_same_thread=False,
                timeout=self.limits.busy_timeout_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path}: {exc}") from None
        conn.row_factory = sqlite3.Row
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.limits.busy_timeout_ms)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(f"{path} could not be switched to WAL mode (it stays in {mode!r} mode)")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            self._cap_wal(conn, self.limits, conn.execute("PRAGMA page_size").fetchone()[0])
            migrate(SqliteSchema(conn))
        except sqlite3.Error as exc:
            conn.close()
            raise self._open_error(exc) from None
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                self._turns.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The open connection; StoreError once closed."""
        if self._conn is None:
            raise StoreError(f"the store for {self.path} is closed")
        return self._conn

    def locked_error(self) -> LockedError:
        """The error for a write lock another connection held past the busy timeout."""
        return LockedError(
            f"{self.path} is locked by another writer and stayed locked past the busy timeout "
            f"({self.limits.busy_timeout_ms} ms); nothing was written. Try again later"
        )

    # -- transactions and reads ----------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """`BEGIN IMMEDIATE`, commit on success, roll back on any exception and re-raise it.

        Nested (this thread is already inside one): a savepoint, so a failure undoes only its own
        writes and the error reaches the outer block. Writers of the file first take their turn
        (turns.py: a queue in the kernel, so that writers of several processes all progress).
        """
        with self.lock:
            conn = self.connection
            if conn.in_transaction:
                yield from self._savepoint(conn)
                return
            with self._turns.turn(0 if self.no_wait else self.limits.busy_timeout_ms / 1000) as ours:
                yield from self._write(conn, waited_out=not ours)

    def _write(self, conn: sqlite3.Connection, waited_out: bool) -> Iterator[sqlite3.Connection]:
        if self._wal_bytes() > self.limits.max_db_bytes:
            self._shrink_wal(conn)  # no reader in the way: the log is written back and cut to nothing
        try:
            if waited_out:  # the busy timeout went on waiting for the turn: SQLite's lock gets one try
                conn.execute("PRAGMA busy_timeout = 0")
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self.locked_error() if is_busy(exc) else StoreError(f"cannot write to {self.path}: {exc}") from None
        finally:
            if waited_out:
                conn.execute(f"PRAGMA busy_timeout = {int(self.limits.busy_timeout_ms)}")
        try:
            self._check_wal()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._stamped = self._oversized = False
        changes = conn.total_changes
        try:
            yield conn
            if conn.total_changes != changes and not self._stamped:
                self.take_sequence(conn)  # every commit writes store_meta: see schema step 3
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if self._oversized:
                self._shrink_wal(conn)
            if isinstance(exc, sqlite3.Error):
                raise self._error(exc, f"write to {self.path} failed and was rolled back") from exc
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise self._error(exc, f"commit to {self.path} failed and was rolled back") from exc
        if self._oversized:  # a nested write was refused by the cap, the rest committed
            self._shrink_wal(conn)

    def _savepoint(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        # Only this thread can be inside the outer transaction: it holds the store's lock throughout.
        stamped = self._stamped
        conn.execute("SAVEPOINT memkit_nested")
        try:
            yield conn
        except BaseException as exc:
            self._stamped = stamped  # a number it took is given back with its writes
            conn.execute("ROLLBACK TO memkit_nested")
            conn.execute("RELEASE memkit_nested")
            if isinstance(exc, sqlite3.Error):
                raise self._error(exc, f"write to {self.path} failed and was rolled back") from exc
            raise
        conn.execute("RELEASE memkit_nested")

    def take_sequence(self, conn: sqlite3.Connection, count: int = 1) -> int:
        """Take the next `count` numbers of the store's sequence (inside a transaction); return the last.
        Taken holding the write lock, they follow commit order, whatever the clock says."""
        self._stamped = True
        return int(conn.execute(SQLITE_STATEMENTS.take_sequence, (count,)).fetchone()[0])

    def _error(self, exc: sqlite3.Error, what: str) -> StoreError:
        """`what` failed with `exc`: a LockedError when another connection held the lock."""
        return (LockedError if is_busy(exc) else StoreError)(f"{what}: {exc}")

    def fetch(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Run one read statement under the lock and return its rows (inside this thread's
        `transaction()`, through it). One statement is a consistent snapshot of its own: no BEGIN."""
        with self.lock:
            try:
                return self.connection.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._error(exc, f"read from {self.path} failed") from exc

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A consistent read snapshot (a deferred transaction) under the lock, for reads of several
        statements that must agree (export, health); inside this thread's `transaction()`, that one."""
        with self.lock:
            conn = self.connection
            try:
                if conn.in_transaction:
                    yield conn
                    return
                conn.execute("BEGIN")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise self._error(exc, f"read from {self.path} failed") from exc

    # -- checks inside a write transaction -----------------------------------------------------------

    def check_quotas(self, conn: sqlite3.Connection, user: str, adding: int = 1,
                     counts: tuple[int | None, int] | None = None) -> None:
        """Refuse (QuotaError) `adding` new records of `user` past the per-user or the global quota
        (`counts`: the user's and the store's counters, when the caller read them in this transaction)."""
        if counts is None:
            row = conn.execute(SQLITE_STATEMENTS.user_records, (user,)).fetchone()
            counts = (row[0] if row else 0, conn.execute(SQLITE_STATEMENTS.total_records).fetchone()[0])
        refuse_past_quotas(self.limits, user, counts[0] or 0, counts[1], adding)

    def check_size(self, conn: sqlite3.Connection) -> None:
        """Measure after the write, inside the transaction: an over-cap write is rolled back whole."""
        size = conn.execute("PRAGMA page_count").fetchone()[0] * self.page_size
        if size > self.limits.max_db_bytes:
            self._oversized = True  # the WAL pages it spilled are cut back after the rollback
        refuse_past_size(self.limits, size)
