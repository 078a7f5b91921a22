"""MemoryStore: the long-term memory in a SQLite file; a constructor, no more (`PostgresStore`,
pg_store.py, is its twin on PostgreSQL)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from ..clock import Clock, utc_now
from ..errors import ValidationError
from ..limits import DEFAULT_LIMITS, Limits
from ..semantic import Embedder
from .db import SqliteDatabase
from .facade import Store
from .readonly import ReadOnlyDatabase
from .statements import SQLITE_STATEMENTS
from .targets import check_sqlite_target


class MemoryStore(Store):
    """A user-scoped long-term memory in a SQLite file: the façade (`Store`), with its promises,
    over a `SqliteDatabase` (db.py). This class only opens it: every method is the façade's.

    Threads may share one store: the connection is opened with `check_same_thread=False` and every
    operation holds the store's lock, so calls from several threads run one at a time. Processes
    each open their own store on the same file; SQLite's locks (WAL, `busy_timeout`) coordinate them.

    Args:
        path: the database file. If it does not exist it is built beside, with the current schema,
            and linked into place whole (so no process ever sees it half-made); an existing file must
            be a memkit database, or the store refuses it and leaves it untouched. Its folder must
            exist and be writable (WAL keeps `-wal` and `-shm` files beside it); a symbolic link is
            refused. A new database is never made beside a leftover `-wal` or `-shm` (they would
            bring back the commits of the database that was deleted), an existing one never opened
            with a `-wal` of another database; half-made files of creators that died are removed.
        limits: the bounds to enforce (see `Limits`); raise them for large experiments. Without
            them, the limits the store recorded when it was made (`memkit limits`); a new store
            records the limits it is made with. The size cap
            bounds the `-wal` file too (checkpoints, `journal_size_limit`, a truncation after a
            write the cap refused).
        synchronous: `"FULL"` (default) makes each commit durable through a power cut: it waits for
            the WAL to reach the disk. `"NORMAL"` skips that wait in WAL mode: the database stays
            consistent, but the last commits before a power cut (not a process crash) may be lost.
        clock: where timestamps come from (tests pass a `FakeClock`).
        check_integrity: run `PRAGMA quick_check` when opening an existing file (cost grows with size).
        read_only: read the file without changing it (store/readonly.py): no write, no migration,
            no `-wal`/`-shm` made; a read-only file or folder opens; an older schema is read from a
            migrated copy in memory. Every write raises `ReadOnlyError`.
        embedder: an embedding model (`memkit.semantic.load_embedder()`, the `semantic` extra) for
            retrieval by meaning: every write then keeps the record's vector, made by this model, in
            the same transaction, and `search_by_meaning` and `reindex` use it. Without one, writes
            keep no vector (a changed value loses its old one) and literal search works as always.

    Raises:
        StoreError: the file is not a memkit database, is damaged, newer, read-only or locked, or a
            `-wal`/`-shm` beside it is not its own. Every file is left as it was found.

    Example:
        >>> with MemoryStore(tmp / "memory.sqlite3") as store:          # doctest: +SKIP
        ...     store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        1
    """

    _statements = SQLITE_STATEMENTS

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        clock: Clock = utc_now,
        check_integrity: bool = True,
        read_only: bool = False,
        embedder: Embedder | None = None,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValidationError(f"synchronous is {synchronous!r}; use 'FULL' or 'NORMAL'")
        check_sqlite_target(path)
        opening, where = limits or DEFAULT_LIMITS, Path(path)
        database = ReadOnlyDatabase(where, opening, synchronous, check_integrity) if read_only \
            else SqliteDatabase(where, opening, synchronous, check_integrity)
        self._start(database, limits, synchronous, clock, read_only, embedder)
