"""One PostgreSQL database of a store: its connection pool, transactions and reads, the per-user
lock, and the quota and size checks made inside each write.

Writers run READ COMMITTED transactions and take row locks in one order: their user's counter row,
then one shard of the store-wide counters (`counters.settle`). Why this order cannot deadlock, and
why row locks rather than SERIALIZABLE with retries (measured): docs/design/postgres.md. A
connection the server dropped is replaced before a transaction begins, so service resumes after a
restart; no message carries the connection string's password.
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import TYPE_CHECKING, Any
from collections.abc import Iterator, Sequence

import psycopg
from psycopg import errors as pg_errors

from ...errors import LockedError, ReadOnlyError, StoreError
from ...limits import Limits
from .. import embeddings, search
from . import counters, vectors
from .connection import PgConnection, Row, connect, password_of, scrub, with_settings
from .pool import PgPool, closed_error, unreachable_error
from .schema import check_schema_name, open_schema, read_version
from ..statements import Record, Statements
from .statements import PG_STATEMENTS

if TYPE_CHECKING:
    import numpy

PROPOSAL_LOCK_CLASS = 0x6D6D70
"""The first key of a user's proposal lock ("mmp"; the second: a hash of the schema and the user)."""

_BEGIN_SETTLING = "BEGIN; SET LOCAL memkit_tx.settles = on"
"""A write transaction: its counting triggers leave the store-wide counts to it (`counters.settle`)."""

_LOCK_ERRORS = (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected, pg_errors.SerializationFailure)


class PostgresDatabase:
    """The store's tables in one PostgreSQL schema, reached through a connection pool: the
    PostgreSQL `Backend` (backend.py).

    Args and Raises: as `PostgresStore`'s (store.py), `conninfo` being its `url` (or a libpq
    key=value string), and a malformed memkit schema refused as a newer one is.
    """

    search_index: bool = False
    """Whether searches may use the trigram index (the server has `pg_trgm`); set at open."""
    name = "postgres"
    path = None
    file_version = None
    statements: Statements = PG_STATEMENTS
    vector_schema: str | None = None
    """Where pgvector's `vector` type lives, if the server has it and the store uses it (None: Python)."""

    def __init__(self, conninfo: str, limits: Limits, synchronous: str, schema: str, pool_size: int,
                 create: bool = True, read_only: bool = False) -> None:
        self.limits = limits
        self.read_only = read_only
        self.how = "read-only transactions" if read_only else "rw"
        self.schema = check_schema_name(schema)
        self.pool_size = pool_size
        self._secret = password_of(conninfo)
        self.where = scrub(conninfo, self._secret)
        """The connection string with its password masked: what every message shows."""
        self._wait_s = max(limits.busy_timeout_ms / 1000, 0.1)
        settings = (f"-c search_path={self.schema} -c lock_timeout={int(limits.busy_timeout_ms)}"
                    f" -c synchronous_commit={'on' if synchronous == 'FULL' else 'off'}")
        if read_only:  # the server itself refuses every write of this store's sessions
            settings += " -c default_transaction_read_only=on"
        try:
            self._conninfo = with_settings(conninfo, settings, connect_timeout=max(2, math.ceil(self._wait_s)))
        except psycopg.Error as exc:
            raise StoreError(f"{self.where} is not a valid PostgreSQL URL: {self._text(exc)}") from None
        self.location = ""
        """host, port, dbname and schema: which store this is, whatever the URL's spelling (as the
        server reports them; the host is its address, or the Unix socket's folder)."""
        self._local = threading.local()
        self._pool: PgPool | None = None
        self._inspector: psycopg.Connection[Row] | None = self._open_first(create)
        try:
            self._pool = PgPool(self._conninfo, pool_size, self._wait_s, self.where, f"memkit-{self.schema}",
                                self._text, lambda: self.limits.busy_timeout_ms)
        except BaseException:
            self.close()
            raise

    # -- opening -----------------------------------------------------------------------------------

    def _open_first(self, create: bool) -> psycopg.Connection[Row]:
        """Connect once, check the schema, migrate it, make the search index: the pool comes after."""
        try:
            raw = connect(self._conninfo)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to {self.where}: {self._text(exc)}. Check the URL and that the server is running"
            ) from None
        conn = PgConnection(raw)
        try:
            self.search_index = open_schema(conn, self.where, self.schema, create, self.read_only)
            host, port, dbname = conn.execute(
                "SELECT host(inet_server_addr()), current_setting('port'), current_database()").fetchall()[0]
            self.location = f"host={host or raw.info.host} port={port} dbname={dbname} schema={self.schema}"
        except psycopg.Error as exc:
            raw.close()
            raise StoreError(f"cannot use schema {self.schema!r} of {self.where}: {self._text(exc)}") from None
        except BaseException:
            raw.close()
            raise
        return raw

    # -- connection life ---------------------------------------------------------------------------

    def use_limits(self, limits: Limits) -> None:
        """Enforce `limits` from now on (the store's recorded ones, read after opening)."""
        self.limits = limits

    def close(self) -> None:
        """Close the pool and the inspection connection. Safe to call twice."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        inspector, self._inspector = self._inspector, None
        if inspector is not None:
            inspector.close()

    @property
    def connection(self) -> PgConnection:
        """This thread's transaction connection inside `transaction()`; else a connection for inspection."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            return current
        if self._inspector is None:
            raise closed_error(self.where)
        if self._inspector.broken:
            try:
                self._inspector = connect(self._conninfo)
            except psycopg.Error as exc:
                raise unreachable_error(self.where, self._text(exc)) from None
        return PgConnection(self._inspector)

    def _text(self, exc: BaseException) -> str:
        return scrub(" ".join(str(exc).split()), self._secret)

    def _error(self, exc: psycopg.Error, doing: str, nested: bool = False) -> StoreError:
        if isinstance(exc, pg_errors.DeadlockDetected):  # not a wait that timed out: PostgreSQL broke a cycle
            undone = ("this block was rolled back to its savepoint, and the transaction around it is rolled back "
                      "whole when this error leaves it" if nested else "it was rolled back whole")
            return LockedError(
                f"{self.where}: a deadlock with another transaction (each waited for a lock the other held); "
                f"PostgreSQL stopped this one and {undone}: nothing was written. Running it again is safe")
        if isinstance(exc, _LOCK_ERRORS):
            return LockedError(
                f"{self.where} is locked by another writer and stayed locked past the busy timeout "
                f"({self.limits.busy_timeout_ms} ms); nothing was written. Try again later"
            )
        return StoreError(f"{doing} {self.where} failed: {self._text(exc)}")

    def _borrow(self) -> PgConnection:
        if self._pool is None:
            raise closed_error(self.where)
        return self._pool.get()

    def _give_back(self, conn: PgConnection) -> None:
        if self._pool is not None:
            self._pool.put(conn)
        else:
            conn.raw.close()

    # -- transactions and reads ----------------------------------------------------------------------

    def _begun(self, statement: str) -> PgConnection:
        """A pooled connection on which `statement` (a BEGIN) ran. A connection the server dropped
        (it restarted) fails at once and is replaced: nothing was sent on it yet."""
        for attempt in range(self.pool_size + 1):
            conn = self._borrow()
            try:
                conn.execute(statement)
                return conn
            except psycopg.Error as exc:
                self._give_back(conn)
                if not conn.broken or attempt == self.pool_size:
                    raise self._error(exc, "beginning a transaction on") from None
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """`BEGIN`, commit on success, roll back on any exception and re-raise it.

        Nested (this thread is already inside one): a savepoint, so a failure undoes only its own
        writes and the error reaches the outer block. A read-only store refuses before it begins
        (`ReadOnlyError`, as on SQLite); its sessions are read-only on the server too.
        """
        if self.read_only:
            raise ReadOnlyError(f"{self.where} (schema {self.schema}) is open read-only; nothing was written. "
                                "Open it for writing (PostgresStore(url), or the inspector's edit=True) to change it")
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield from self._savepoint(current)
            return
        with self._held(_BEGIN_SETTLING) as conn:
            try:
                yield conn
                if conn.settled_at != conn.sent:  # a statement since the last settle: a delete's, say
                    counters.settle(conn, self.limits, self.schema, self.where, check_size=False)
            except BaseException as exc:
                self._rollback(conn)
                if isinstance(exc, psycopg.Error) and conn.broken:  # COMMIT was never sent: the server rolls back
                    raise StoreError(
                        f"lost the connection to {self.where} in the middle of a write ({self._text(exc)}); "
                        "it was not committed: nothing was written"
                    ) from exc
                if isinstance(exc, psycopg.Error):
                    raise self._error(exc, "write to") from exc
                raise
            try:
                conn.execute("COMMIT")
            except psycopg.Error as exc:
                if conn.broken:  # the COMMIT may have reached the server: say so, never "nothing written"
                    raise StoreError(
                        f"the connection to {self.where} was lost while committing ({self._text(exc)}); "
                        "the write may or may not have been made: read it back before retrying"
                    ) from exc
                self._rollback(conn)
                if isinstance(exc, pg_errors.DeadlockDetected):
                    raise self._error(exc, "commit to") from exc
                error = LockedError if isinstance(exc, _LOCK_ERRORS) else StoreError
                raise error(f"commit to {self.where} failed and was rolled back: {self._text(exc)}") from exc

    @contextlib.contextmanager
    def _held(self, begin: str) -> Iterator[PgConnection]:
        """A pooled connection that ran `begin`: this thread's until the block ends, then given back."""
        conn = self._begun(begin)
        self._local.conn = conn
        try:
            yield conn
        finally:
            self._local.conn = None
            self._give_back(conn)

    def _savepoint(self, conn: PgConnection) -> Iterator[PgConnection]:
        conn.execute("SAVEPOINT memkit_nested")
        try:
            yield conn
        except BaseException as exc:
            if not conn.broken:
                conn.execute("ROLLBACK TO SAVEPOINT memkit_nested")
                conn.execute("RELEASE SAVEPOINT memkit_nested")
            if isinstance(exc, psycopg.Error):
                raise self._error(exc, "write to", nested=True) from exc
            raise
        conn.execute("RELEASE SAVEPOINT memkit_nested")

    def _rollback(self, conn: PgConnection) -> None:
        if not conn.broken:
            conn.execute("ROLLBACK")

    def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        """Run one read statement and return its rows (inside this thread's `transaction()`, through it).

        Outside a transaction it runs alone in autocommit mode (one statement is a consistent
        snapshot of its own); a connection the server dropped is replaced and the read run again.
        """
        current = getattr(self._local, "conn", None)
        if current is not None:
            try:
                return current.execute(sql, args).fetchall()
            except psycopg.Error as exc:
                raise self._error(exc, "read from") from exc
        for attempt in range(self.pool_size + 1):
            conn = self._borrow()
            try:
                return conn.execute(sql, args).fetchall()
            except psycopg.Error as exc:
                if not conn.broken or attempt == self.pool_size:
                    raise self._error(exc, "read from") from exc
            finally:
                self._give_back(conn)
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def reading(self) -> Iterator[PgConnection]:
        """A consistent read snapshot (REPEATABLE READ, READ ONLY) for reads of several statements
        that must agree (export, health); inside this thread's `transaction()`, that transaction."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self._held("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") as conn:
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                self._rollback(conn)
                if isinstance(exc, psycopg.Error):
                    raise self._error(exc, "read from") from exc
                raise

    # -- locks and checks inside write transactions -------------------------------------------------

    def lock_user(self, conn: PgConnection, user: str, creating: bool) -> None:
        """Lock `user`'s counter row until the transaction ends (`counters.lock_user`)."""
        counters.lock_user(conn, user, creating, self.where)

    def take_sequence(self, conn: PgConnection, count: int = 1) -> int:
        """Take the next `count` numbers of the store's sequence (inside a transaction); return the last.

        Taken holding the writer's user lock, so within a user they follow commit order.
        """
        return int(conn.value(PG_STATEMENTS.take_sequence, (count,)))

    def lock_proposals(self, conn: PgConnection, user: str) -> None:
        """A transaction-scoped advisory lock, taken before the user's counter row (so the lock order
        above gains a first step and no cycle): a user with no records has no counter row to lock,
        and making one for a proposal would count a user who holds nothing."""
        conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (PROPOSAL_LOCK_CLASS, f"{self.schema}/{user}"))

    def user_records(self, user: str) -> int:
        """The user's quota counter: how many records they hold."""
        rows = self.fetch(self.statements.user_records, (user,))
        return int(rows[0][0]) if rows else 0

    def check_quotas(self, conn: PgConnection, user: str, adding: int = 1,
                     counts: tuple[int | None, int] | None = None) -> None:
        """Refuse (QuotaError) `adding` new records of `user` past the per-user quota now, and past
        the global quota when the write settles (`counters.check_quotas`). `counts` (the counters
        a caller read without locking them) is not used: the figures that count are the ones read
        under the row locks."""
        counters.check_quotas(conn, self.limits, user, adding, self.where)

    def check_size(self, conn: PgConnection) -> None:
        """Settle the write's counts into a shard, refusing (QuotaError) past the global quota (if
        `check_quotas` asked) or the size cap: inside the transaction, so a refused write is rolled
        back whole. The figures are exact (`counters.settle`)."""
        counters.settle(conn, self.limits, self.schema, self.where, check_size=True)

    def changed(self, conn: PgConnection, sql: str, rows: list[tuple[Any, ...]]) -> int:
        """Run `sql` for every row (multi-row inserts); return how many rows it changed."""
        return conn.executemany(sql, rows)

    # -- what the Store asks of this database -------------------------------------------------------

    def settings(self, conn: PgConnection) -> dict[str, Any]:
        """The first keys of `health()`: the masked URL, the schema, the server and the settings that
        matter (`journal_mode` is always `"wal"`: PostgreSQL always writes ahead)."""
        setting = {name: value for name, value in conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN"
            " ('lock_timeout', 'synchronous_commit', 'server_version')")}
        return {
            "url": self.where,
            "schema": self.schema,
            "server_version": setting["server_version"],
            "schema_version": read_version(conn, self.schema),
            "journal_mode": "wal",
            "synchronous": "FULL" if setting["synchronous_commit"] == "on" else "NORMAL",
            "synchronous_commit": setting["synchronous_commit"],
            "busy_timeout_ms": int(setting["lock_timeout"]),
            "search_index": "pg_trgm" if self.search_index else "scan",
            "pool_size": self.pool_size,
        }

    def db_bytes(self, conn: PgConnection) -> int:
        """The store's size as the cap counts it (`db_bytes`)."""
        return counters.db_bytes(conn)

    def size_consistent(self, conn: PgConnection) -> bool:
        """Whether the size counter (the sum of the shards' bytes) is what the stored rows measure now,
        each row's text form plus its 24-byte header, as the size triggers count them."""
        counted, real = conn.execute(
            f"SELECT (SELECT sum(bytes) FROM memkit_shards), {counters.MEASURED_BYTES_SQL}").fetchall()[0]
        return bool(counted == real)

    def fit_search_index(self, fts_min_user_rows: int) -> None:
        """Nothing to do: the trigram index was made (where the server has `pg_trgm`) at open."""

    def search(self, user: str, query: str, limit: int, kind: str | None, fts_min_user_rows: int) -> list[Record]:
        """The literal search rule, by a scan or the `pg_trgm` index (search.py)."""
        return search.search(self, PG_STATEMENTS.search, user, query, limit, kind, fts_min_user_rows)

    def search_many(self, user: str, queries: Sequence[str], limit: int, kinds: Sequence[str],
                    fts_min_user_rows: int) -> dict[tuple[str, str], list[Record]]:
        """`search` for every query and kind (search.py)."""
        return search.search_many(self, PG_STATEMENTS.search, user, queries, limit, kinds, fts_min_user_rows)

    def encode_vector(self, vector: numpy.ndarray) -> list[float]:
        """A vector as PostgreSQL keeps it: `real[]`."""
        return [float(x) for x in vector]

    def search_by_meaning(self, user: str, vector: numpy.ndarray, model: str, dim: int, limit: int,
                          kind: str | None, min_similarity: float) -> list[Record]:
        """Ranked in SQL by pgvector where the store uses it, else in Python (as on SQLite)."""
        if self.vector_schema is not None:
            return vectors.rank(self, self.vector_schema, user, vector, model, dim, limit, kind, min_similarity)
        return embeddings.rank_in_python(self, user, vector, model, dim, limit, kind, min_similarity,
                                         vectors.decode, vectors.VECTOR_SQL)
