"""PostgresStore: the same long-term memory, its tables in a PostgreSQL database.

The façade is `MemoryStore`'s: every argument check, the write logic and the SQL of records,
history, export, import and the archive's reads are shared (the SQL runs through `PgConnection`).
This class overrides only what differs: opening, the per-user lock, search, the archive's insert
and `health`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast
from collections.abc import Sequence

from ..clock import Clock, utc_now
from ..errors import StoreError, ValidationError
from ..limits import DEFAULT_LIMITS, Limits
from ..semantic import Embedder
from . import archive, search
from .db import SqliteDatabase
from .memory import MemoryStore
from .pg_connection import PgConnection
from .pg_schema import LOCK_CLASS, read_version
from .postgres import PG_STATEMENTS, PostgresDatabase, db_bytes
from .statements import RECORD_SQL, Record, Statements, to_record
from .store_limits import limits_from, record as record_limits, recorded as recorded_limits


PROPOSAL_LOCK_CLASS = 0x6D6D70
"""The first key of a user's proposal lock ("mmp"; the second: a hash of the schema and the user)."""

if TYPE_CHECKING:
    import numpy


class PostgresStore(MemoryStore):
    """A user-scoped long-term memory in a PostgreSQL database, with `MemoryStore`'s promises.

    One row per (user, kind, key); revisions and the append-only event history; quotas and the size
    cap checked inside each write's transaction, exact however many connections and processes
    race (see `memkit.store.postgres` for the locks); the same search rule, export bundles, archive
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
        self.synchronous = synchronous
        self.read_only = read_only
        self._clock = clock
        self._pg = PostgresDatabase(url, limits or DEFAULT_LIMITS, synchronous, schema, pool_size,
                                    create and not read_only, read_only=read_only)
        self.url = self._pg.where
        """The database's URL, its password masked."""
        self.schema = self._pg.schema
        # The shared façade code uses only what both databases offer (transaction, fetch, reading,
        # the quota and size checks); the shared modules are annotated with the SQLite class.
        self._db = cast(SqliteDatabase, self._pg)
        try:
            self.limits = self._pg_limits(limits)
        except BaseException:
            self._pg.close()
            raise
        self.embedder = embedder
        self.vector_schema: str | None = None
        """Where pgvector's `vector` type lives, if the server has it and this store uses it (None: Python)."""
        if embedder is not None:
            try:
                self.vector_schema = ensure_pgvector(self._pg)
            except BaseException:
                self._pg.close()
                raise

    def _pg_limits(self, given: Limits | None) -> Limits:
        """As `MemoryStore._own_limits`: `given`, else the recorded ones; a store without any records
        `given` (or the defaults) unless open read-only."""
        values = recorded_limits(self._pg.fetch("SELECT name, value FROM store_limits"))
        chosen = given if given is not None else limits_from(values)
        if not values and not self.read_only:
            with self._pg.transaction() as conn:
                record_limits(conn, chosen)
        self._pg.limits = chosen
        return chosen

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r}, schema={self.schema!r})"

    _ID_SQL = "SELECT database_id FROM memkit_meta"

    @property
    def location(self) -> str:
        """Which store this is, whatever the URL's spelling: `host`, `port`, `dbname` and `schema`
        (no user, no password). The CLI names the workspace window of this store after it."""
        return self._pg.location

    @staticmethod
    def statements() -> Statements:
        """The SQL this store runs for its writes and record reads: SQLite's, but for
        `take_sequence` (a PostgreSQL sequence). `?` placeholders, as everywhere in the store."""
        return PG_STATEMENTS

    @property
    def connection(self) -> PgConnection:  # type: ignore[override]  # the PostgreSQL one
        """A connection for read-only inspection (inside `transaction()`: that transaction's)."""
        return self._pg.connection

    # -- what differs from SQLite --------------------------------------------------------------------

    def _lock_user(self, conn: Any, user: str, creating: bool) -> None:
        self._pg.lock_user(conn, user, creating)

    def _lock_proposals(self, conn: Any, user: str) -> None:
        # A transaction-scoped advisory lock, taken before the user's counter row (so the lock order
        # of postgres.py gains a first step and no cycle): a user with no records has no counter row
        # to lock, and making one for a proposal would count a user who holds nothing.
        conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (PROPOSAL_LOCK_CLASS, f"{self.schema}/{user}"))

    def _search(self, user: str, query: str, limit: int, kind: str | None) -> list[Record]:
        return search.search(self._pg, PG_STATEMENTS.search, user, query, limit, kind, self.fts_min_user_rows)

    def _search_many(self, user: str, queries: Sequence[str], limit: int,
                     kinds: Sequence[str]) -> dict[tuple[str, str], list[Record]]:
        return search.search_many(self._pg, PG_STATEMENTS.search, user, queries, limit, kinds, self.fts_min_user_rows)

    def _encode_vector(self, vector: numpy.ndarray) -> Any:
        return [float(x) for x in vector]  # real[]

    # The Python path reads each vector as `array_send`'s bytes: a third of the time psycopg takes
    # to turn a real[] into a list of Python floats (64 vectors of 256: about 2 ms against 6).
    _vector_sql = "array_send(e.vector)"

    def _decode_vector(self, stored: Any, dim: int) -> numpy.ndarray:
        import numpy

        # array_send: ndim, has-nulls flag, element type, then (length, lower bound) per dimension,
        # all big-endian int32; then each element as its length (4) and its float4.
        blob = bytes(stored)
        header = numpy.frombuffer(blob, dtype=">i4", count=5) if len(blob) >= 20 else None
        if header is None or header[0] != 1 or header[1] != 0 or header[3] != dim or len(blob) != 20 + 8 * dim:
            raise ValidationError(f"a stored vector is not a one-dimensional array of {dim} numbers")
        return numpy.frombuffer(blob, dtype=">f4", offset=20)[1::2].astype(numpy.float32)

    def _search_by_meaning(self, user: str, vector: numpy.ndarray, model: str, dim: int, limit: int,
                           kind: str | None, min_similarity: float) -> list[Record]:
        if self.vector_schema is None:
            return super()._search_by_meaning(user, vector, model, dim, limit, kind, min_similarity)
        # pgvector: the user's rows first (WHERE user_id through the vectors' index), ranked by
        # cosine distance in SQL; no approximate index, which would rank the whole table first.
        vec = f'"{self.vector_schema}".vector'
        distance = f'OPERATOR("{self.vector_schema}".<=>)'  # cosine distance, wherever pgvector lives
        columns = ", ".join("m." + c.strip() for c in RECORD_SQL.split(","))
        rows = self._pg.fetch(
            f"SELECT * FROM (SELECT {columns}, m.seq, 1 - (e.vector::{vec} {distance} ?::{vec}) AS similarity"
            " FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id"
            " WHERE e.user_id = ? AND e.model = ? AND e.dim = ? AND m.user_id = ?"
            " AND (?::text IS NULL OR m.kind = ?)) AS ranked"
            " WHERE similarity >= ? ORDER BY round(similarity::numeric, 4) DESC, seq DESC LIMIT ?",
            ("[" + ",".join(repr(float(x)) for x in vector) + "]", user, model, dim, user, kind, kind,
             min_similarity, limit),
        )
        return [{**to_record(cast(Any, row)), "similarity": round(float(row["similarity"]), 4)} for row in rows]

    def _archive_rows(self, rows: list[tuple[Any, ...]]) -> int:
        with self._pg.transaction() as conn:
            added = conn.executemany(
                "INSERT INTO transcript (user_id, session_id, turn, role, content, at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                rows,
            )
            archive.refuse_conflicts(conn, rows, added)
            self._pg.check_size(conn)
        return added

    def health(self) -> dict[str, Any]:
        """What an operator asks first, in one call (one snapshot).

        Returns:
            The keys of `MemoryStore.health` with PostgreSQL's values: `journal_mode` is `"wal"`
            (PostgreSQL always writes ahead), `synchronous` is `"FULL"` or `"NORMAL"` as
            `synchronous_commit` is on or off, `busy_timeout_ms` is the session's `lock_timeout`,
            `db_bytes` counts the stored rows in whole 8 KiB pages; plus `url` (masked), `schema`,
            `server_version`, `synchronous_commit`, `search_index` (`"pg_trgm"` or `"scan"`) and
            `pool_size`.
        """
        limits = self.limits
        with self._pg.reading() as conn:
            setting = {name: value for name, value in conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN"
                " ('lock_timeout', 'synchronous_commit', 'server_version')")}
            per_user = {row[0]: row[1] for row in conn.execute(
                "SELECT user_id, records FROM user_counts ORDER BY records DESC, user_id LIMIT 50")}
            return {
                "url": self.url,
                "schema": self.schema,
                "server_version": setting["server_version"],
                "schema_version": read_version(conn, self.schema),
                "journal_mode": "wal",
                "synchronous": "FULL" if setting["synchronous_commit"] == "on" else "NORMAL",
                "synchronous_commit": setting["synchronous_commit"],
                "busy_timeout_ms": int(setting["lock_timeout"]),
                "search_index": "pg_trgm" if self._pg.search_index else "scan",
                "pool_size": self._pg.pool_size,
                "db_bytes": db_bytes(conn),
                "max_db_bytes": limits.max_db_bytes,
                "records_total": conn.value("SELECT records FROM total_count"),
                "max_records_total": limits.max_records_total,
                "users": conn.value("SELECT count(*) FROM user_counts"),
                "records_per_user": per_user,
                "max_records_per_user": limits.max_records_per_user,
                "counters_consistent": counters_consistent(conn),
            }


def counters_consistent(conn: PgConnection) -> bool:
    """Whether the quota counters (the total and every user's) agree with the rows, both ways
    (PostgreSQL's spelling of `memkit.store.health.counters_consistent`)."""
    total = conn.value("SELECT records FROM total_count")
    counted = conn.value("SELECT count(*) FROM memories")
    drifted = conn.value(
        "SELECT (SELECT count(*) FROM (SELECT user_id, count(*) FROM memories GROUP BY user_id"
        "                              EXCEPT SELECT user_id, records FROM user_counts) AS missing)"
        "     + (SELECT count(*) FROM (SELECT user_id, records FROM user_counts"
        "                              EXCEPT SELECT user_id, count(*) FROM memories GROUP BY user_id) AS extra)"
    )
    return bool(total == counted and not drifted)


def ensure_pgvector(pg: PostgresDatabase) -> str | None:
    """The schema of pgvector's `vector` type, installing the extension where the server offers it
    and this role may; None where it cannot (searches by meaning then rank in Python)."""
    find = ("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'vector'")
    found = pg.fetch(find)
    if found:
        return str(found[0][0])
    if not pg.fetch("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"):
        return None
    try:
        with pg.transaction() as conn:
            # One installer at a time: two concurrent CREATE EXTENSION IF NOT EXISTS can collide.
            conn.execute("SELECT pg_advisory_xact_lock(?, hashtext('pgvector'))", (LOCK_CLASS,))
            try:  # where a DBA puts it (public), not inside one store's schema, which may be dropped
                with pg.transaction() as nested:
                    nested.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            except StoreError:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except StoreError:
        return None  # no privilege to install it: rank in Python
    found = pg.fetch(find)
    return str(found[0][0]) if found else None
