"""PostgresStore: the same long-term memory, its tables in a PostgreSQL database; a constructor, no
more. Where PostgreSQL differs (opening, the per-user and proposal locks, search, the archive's
insert count, health's settings, pgvector), the difference lives in backend.py and the modules beside it.
"""

from __future__ import annotations

from typing import Literal

from ...clock import Clock, utc_now
from ...errors import ValidationError
from ...limits import DEFAULT_LIMITS, Limits
from ...semantic import Embedder
from ..store import Store
from .vectors import ensure_pgvector
from .backend import PostgresDatabase
from .statements import PG_STATEMENTS


class PostgresStore(Store):
    """A user-scoped long-term memory in a PostgreSQL database: the shared `Store`, with its promises,
    over a `PostgresDatabase` (backend.py). This class only opens it: every method is `Store`'s.

    One row per (user, kind, key); revisions and the append-only event history; quotas and the size
    cap checked inside each write's transaction, exact however many connections and processes
    race (see `memkit.store.postgres.backend` for the locks); the same search rule, export bundles, archive
    and `forget_user`. Threads may share one store: each borrows a connection from its pool.

    Args:
        url: a `postgresql://user:password@host:port/dbname` URL (the password never appears in a
            message; `repr` and `health` show it as `***`).
        limits: the bounds to enforce (see `Limits`); `busy_timeout_ms` is also how long a write
            waits for another's lock, and a call for a connection, before it fails.
        synchronous: `"FULL"` (default): `synchronous_commit = on`, each commit durable on return.
            `"NORMAL"`: `off`; the last commits before a server crash may be lost, never half-made.
        clock: where timestamps come from (tests pass a `FakeClock`).
        schema: the PostgreSQL schema (namespace) for the store's tables, made if missing: several
            stores can share a database. A schema holding another program's objects is refused.
        pool_size: the most connections this store opens at once.
        create: make the store's tables where the schema has none (default); False refuses instead
            (a read-only command must not create anything).
        read_only: every write raises `ReadOnlyError` (as on SQLite) before it begins, and its
            sessions are read-only on the server too (`default_transaction_read_only`); nothing is
            created or migrated (an older schema is refused, not changed).
        embedder: as `MemoryStore`'s. Given one, the store uses pgvector where the server has it
            (installing the extension if it may), so a search by meaning ranks the user's vectors
            in SQL; elsewhere it ranks them in Python, as on SQLite. The answers are the same.

    Raises:
        StoreError: the URL is malformed, the server cannot be reached, or the schema holds another
            program's objects or a newer memkit schema (left unchanged).

    Example:
        >>> with PostgresStore("postgresql://memkit@db.internal/memkit") as store:   # doctest: +SKIP
        ...     store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        1
    """

    _statements = PG_STATEMENTS

    def __init__(
        self,
        url: str,
        *,
        limits: Limits | None = None,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        clock: Clock = utc_now,
        schema: str = "public",
        pool_size: int = 4,
        create: bool = True,
        read_only: bool = False,
        embedder: Embedder | None = None,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValidationError(f"synchronous is {synchronous!r}; use 'FULL' or 'NORMAL'")
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or not 1 <= pool_size <= 100:
            raise ValidationError(f"pool_size is {pool_size!r}; use 1 to 100 connections")
        database = PostgresDatabase(url, limits or DEFAULT_LIMITS, synchronous, schema, pool_size,
                                    create and not read_only, read_only=read_only)
        self._pg = database
        self.url = database.where
        """The database's URL, its password masked."""
        self.schema = database.schema
        self._start(database, limits, clock, read_only, embedder)
        if embedder is not None:
            try:
                database.vector_schema = ensure_pgvector(database)
            except BaseException:
                database.close()
                raise

    @property
    def vector_schema(self) -> str | None:
        """Where pgvector's `vector` type lives, if the server has it and this store uses it (None:
        searches by meaning rank in Python). A benchmark may set it to None to time that path."""
        return self._pg.vector_schema

    @vector_schema.setter
    def vector_schema(self, schema: str | None) -> None:
        self._pg.vector_schema = schema

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r}, schema={self.schema!r})"
