"""The connections of a PostgreSQL store: a `psycopg_pool` pool, borrowed one per thread for a
transaction or a read, and a connection of its own when the pool gives none in time.

The pool keeps the count of the connections out, so a call that waited in vain can tell a busy
store (every connection in its own use: a `LockedError`) from a pool still re-connecting after the
server went away (a connection of its own serves the call, so service resumes as soon as the
server answers). No message carries the password of the connection string.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ...errors import LockedError, StoreError
from .connection import CONNECTION_OPTIONS, PgConnection, Row, connect


def closed_error(where: str) -> StoreError:
    """The error for a call on a closed store."""
    return StoreError(f"the store for {where} is closed")


def unreachable_error(where: str, text: str) -> StoreError:
    """The error for a server that does not answer (`text`: the reason, its password scrubbed)."""
    return StoreError(f"cannot reach the PostgreSQL server at {where} ({text}); nothing was done")


class PgPool:
    """The store's connection pool, opened (waiting for its first connection) when made.

    Args:
        conninfo: the store's connection string (its settings included).
        size: the most connections the pool opens (threads beyond it wait for one).
        wait_s: how long a call waits for a connection.
        where: the masked connection string every message shows.
        name: the pool's name in psycopg_pool's log lines and errors.
        text: how an exception is shown (its password scrubbed).
        busy_ms: the busy timeout now, in milliseconds, for the message of a busy store.

    Raises:
        StoreError: no connection could be opened in time.
    """

    def __init__(self, conninfo: str, size: int, wait_s: float, where: str, name: str,
                 text: Callable[[BaseException], str], busy_ms: Callable[[], int]) -> None:
        self.conninfo, self.size, self.where = conninfo, size, where
        self._text, self._busy_ms = text, busy_ms
        self._counting = threading.Lock()
        self._borrowed = 0  # connections this store has out of its pool (or of its own) right now
        pool: ConnectionPool[psycopg.Connection[Row]] = ConnectionPool(
            conninfo, kwargs=CONNECTION_OPTIONS, min_size=1, max_size=size, open=False,
            timeout=wait_s, reconnect_timeout=wait_s, name=name,
        )
        try:
            pool.open(wait=True, timeout=max(wait_s, 10.0))
        except PoolTimeout:
            pool.close()
            raise StoreError(f"cannot open a connection pool to {where}; the server stopped answering") from None
        self._pool: ConnectionPool[psycopg.Connection[Row]] | None = pool

    def close(self) -> None:
        """Close the pool. Safe to call twice."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def get(self) -> PgConnection:
        """A connection of the pool (or, when it gives none in time, see `_own_connection`)."""
        pool = self._pool
        if pool is None:
            raise closed_error(self.where)
        try:
            conn = PgConnection(pool.getconn())
        except PoolTimeout:
            conn = self._own_connection()
        except PoolClosed:
            raise closed_error(self.where) from None
        with self._counting:
            self._borrowed += 1
        return conn

    def _own_connection(self) -> PgConnection:
        """After the pool gave no connection within the busy timeout: busy (every connection of the
        pool is in this store's use), or the pool is still re-connecting after the server went away.
        Then a connection of its own serves this one call, so service resumes as soon as the server
        answers; if it does not answer, the reason is in the error."""
        with self._counting:
            busy = self._borrowed >= self.size
        if busy:
            raise LockedError(
                f"all {self.size} connections to {self.where} stayed busy past the busy timeout "
                f"({self._busy_ms()} ms); nothing was done. Try again later"
            )
        try:
            return PgConnection(connect(self.conninfo), pooled=False)
        except psycopg.Error as exc:
            raise unreachable_error(self.where, self._text(exc)) from None

    def put(self, conn: PgConnection) -> None:
        """Give back a connection `get` gave (one of its own is closed)."""
        with self._counting:
            self._borrowed -= 1
        pool = self._pool
        if pool is not None and conn.pooled:
            pool.putconn(conn.raw)
        else:
            conn.raw.close()
