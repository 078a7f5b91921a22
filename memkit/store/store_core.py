"""The store façade's core: the state every part of `Store` shares, and what they all use.

`Store` (facade.py) is one class over either backend (`Backend`, backend.py), opened by
`MemoryStore` (SQLite) or `PostgresStore` (PostgreSQL); its methods are grouped by concept in parts
that each extend `StoreCore`: store_records.py (records, their history, search literal and by
meaning, forgetting), store_proposals.py (extending the records part: an approval writes through
`put` and `delete`) and store_sessions.py (conversations, window places, export and import). This
module holds the open store's state, its limits, transactions, identity (`path`, `location`,
`files()`, `store_id`) and the embedder the parts write vectors with.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ..clock import Clock
from ..errors import ValidationError
from ..limits import Limits
from ..semantic import Embedder
from . import embeddings, health
from .backend import Backend
from .statements import Statements
from .recorded_limits import has_table as has_limits_table, limits_from, record as record_limits
from .recorded_limits import recorded as recorded_limits

if TYPE_CHECKING:
    import numpy

SQLITE_FILE_SUFFIXES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database file while it is in use (or after a crash)."""


class StoreCore:
    """What every part of the façade shares: the backend, the limits, the clock, the embedder."""

    _db: Backend
    limits: Limits
    read_only: bool
    synchronous: str
    embedder: Embedder | None
    _clock: Clock
    _statements: ClassVar[Statements]  # each constructor's own: SQLite's or PostgreSQL's
    _store_id: str | None = None

    fts_min_user_rows: int = 1000
    """How many of a user's rows a search scans before it may turn to the trigram index.

    A user with fewer records is searched by a scan of their own rows alone: newest first, stopping
    at `limit` matches, so its cost is bounded by the user's size, whatever the size of the store.
    For a user with at least this many records (and a query of 3+ characters) the newest this-many
    rows are scanned first, and the index is asked only when they hold fewer than `limit` matches.
    The index covers every user's rows, so its cost grows with how common the term is in the whole
    store; a term that a user's newest rows rarely contain is, by the same token, rare enough to
    ask it for. `bench/RESULTS.md` has the measurements; 0 means "always the index", a huge
    number "never".

    The index is kept up to date only where it can be used: at open, the store keeps it if its
    `max_records_per_user` reaches this threshold (or a user already holds that many records) and
    stops keeping it otherwise (`search.fit_index`). Lowering the threshold on an open store builds
    the index at the first search that needs it."""

    def _start(self, db: Backend, limits: Limits | None, synchronous: str, clock: Clock, read_only: bool,
               embedder: Embedder | None) -> None:
        """Take `db` (opened by the constructor) and adopt its limits; `db` is closed if that fails."""
        self._db, self.synchronous, self.read_only, self._clock = db, synchronous, read_only, clock
        self.embedder = embedder
        """The embedding model writes and searches by meaning use (None: literal search only)."""
        try:
            self.limits = self._own_limits(limits)
            if not read_only:
                db.fit_search_index(self.fts_min_user_rows)
        except BaseException:
            db.close()
            raise

    def _own_limits(self, given: Limits | None) -> Limits:
        """The limits this open enforces: `given`, else the ones the store recorded (store_limits.py).

        A store that has recorded none yet (new, or made before the table) records `given` (or the
        defaults) now, unless it is open read-only.
        """
        values = recorded_limits(self._db.fetch("SELECT name, value FROM store_limits")) \
            if has_limits_table(self._db.connection) else None
        chosen = given if given is not None else limits_from(values or {})
        if not values and values is not None and not self.read_only:
            with self._db.transaction() as conn:
                record_limits(conn, chosen)
        self._db.use_limits(chosen)
        return chosen

    @classmethod
    def statements(cls) -> Statements:
        """The SQL this store runs for its writes, record reads and searches: `SQLITE_STATEMENTS` or
        `PG_STATEMENTS` (`memkit.store.statements` says where they differ).

        Public so that a benchmark can run exactly the store's statements on its schema, and follow
        a schema change without copying SQL (bench/contenders.py's raw limit does).

        Raises:
            TypeError: asked of the façade `Store` itself, which runs whichever backend's it opens.
        """
        statements: Statements | None = getattr(cls, "_statements", None)
        if statements is None:
            raise TypeError(f"{cls.__name__} runs whichever backend's SQL it is opened on: ask "
                            "MemoryStore.statements() (SQLite) or PostgresStore.statements() (PostgreSQL)")
        return statements

    # -- what this store is ------------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        """The SQLite file (None on PostgreSQL, which has no file of the store's own)."""
        return self._db.path

    @property
    def location(self) -> str:
        """Which store this is, as a text: the SQLite file's path, or PostgreSQL's host, port, database
        and schema (no user, no password), whatever the URL's spelling. The CLI names the workspace
        window of a PostgreSQL store after it."""
        return self._db.location

    def files(self) -> list[Path]:
        """The store's own files: the SQLite file and the `-wal`, `-shm` and `-journal` names beside
        it (whether they exist now or not); none on PostgreSQL. A command must never write over them."""
        path = self._db.path
        return [] if path is None else [path, *(path.with_name(path.name + s) for s in SQLITE_FILE_SUFFIXES)]

    @property
    def store_id(self) -> str:
        """The store's own random id, made once with its schema (SQLite: `store_meta`; PostgreSQL:
        `memkit_meta`). A short-term window's Redis keys carry it, so two stores on one Redis server
        never read, archive or forget each other's turns (`memkit.window.protocol`)."""
        if self._store_id is None:
            self._store_id = str(self._db.fetch(self._db.statements.store_id)[0][0])
        return self._store_id

    @property
    def opened(self) -> dict[str, Any]:
        """How this store reads its database: read_only, how (`rw`, `ro`, `immutable`, `snapshot`:
        an older schema read from a migrated copy in memory) and the file's own schema version."""
        return {"read_only": self.read_only, "how": self._db.how, "file_version": self._db.file_version}

    # -- connection life ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._db.location!r})"

    @property
    def connection(self) -> Any:
        """The store's connection, for read-only inspection (notebooks, health checks)."""
        return self._db.connection

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A write transaction: `BEGIN IMMEDIATE` (PostgreSQL: `BEGIN`, and each write takes its user's
        row lock first), commit on success, roll back on any exception.

        Taking the write lock at BEGIN (not at the first write) means a check made inside the
        transaction still holds when the write happens: no other writer can slip in between.

        The store's methods may be called inside it, from the same thread, and then commit or roll
        back together with it. A nested transaction (each `put` opens one) is a savepoint: when it
        fails, only its own writes are undone and the error reaches the outer block.

        Raises:
            StoreError: the database stayed locked past the busy timeout, or the write failed.
            LockedError (PostgreSQL): a block of several writes that already holds a counter shard
                met another writer rebalancing the shards (at a quota's or the size cap's edge):
                rolled back whole rather than wait in a cycle, nothing written; run the block again.
                Also a deadlock with another transaction, broken by PostgreSQL: the same remedy.

        Example:
            >>> with store.transaction():                                  # doctest: +SKIP
            ...     store.put("alice", "s1", "preference", "drink", "tea")
            ...     store.put("alice", "s1", "preference", "food", "rice")  # both or neither
        """
        # The backend's own context manager, handed out as it is: a generator around it would cost
        # every write another frame to enter and leave.
        return self._db.transaction()

    def _check_identity(self, user: str, kind: str, key: str) -> None:
        self.limits.check_id("user", user)
        self.limits.check_kind(kind)
        self.limits.check_key(key)

    # -- operations ---------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """What an operator asks first, in one call.

        Returns:
            schema version, journal mode, synchronous, busy timeout, file size against the cap,
            records in all and per user (the 50 largest users) against the quotas, and whether the
            quota counters (the total and every user's) agree with the rows. On SQLite first `path`
            and `sqlite_version`; on PostgreSQL first `url` (masked), `schema`, `server_version`,
            and also `synchronous_commit`, `search_index` (`"pg_trgm"` or `"scan"`) and `pool_size`,
            `journal_mode` always `"wal"` and `db_bytes` in whole 8 KiB pages.
        """
        return health.health(self._db)

    # -- vectors (their stored format is the backend's: bytes on SQLite, real[] on PostgreSQL) ------------

    def _need_embedder(self, doing: str) -> Embedder:
        if self.embedder is None:
            raise ValidationError(
                f"{doing} needs an embedding model: open the store with "
                "embedder=memkit.semantic.load_embedder() (pip install 'memkit[semantic]')")
        return self.embedder

    def _embed(self, texts: list[str]) -> numpy.ndarray:
        embedder = self._need_embedder("embedding")
        vectors = embedder.embed(texts)
        if getattr(vectors, "shape", None) != (len(texts), embedder.dim):
            raise ValidationError(f"embedder {embedder.name!r} returned vectors of shape "
                                  f"{getattr(vectors, 'shape', None)}; expected ({len(texts)}, {embedder.dim})")
        return vectors

    def _write_vector(self, conn: Any, vector: numpy.ndarray, user: str, kind: str, key: str, value: str) -> int:
        embedder = self._need_embedder("embedding")
        stored = self._db.encode_vector(vector)
        return embeddings.write(conn, embedder.name, embedder.dim, stored, user, kind, key, value)

