"""SQLite's trigram index for search: when it is kept, built and asked. An optimisation, kept apart.

Search answers are the same with or without the index (tests/store/test_store_search.py checks every
path), so a reader of the store can skip this module: it only makes a large user's search fast. The
index costs about half the pages a put writes, so a store keeps it only where a user can reach
`Store.fts_min_user_rows` records; docs/design/store.md has the measurements.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

from ..errors import LockedError
from . import search
from .backend import SqlitePart
from .schema import build_search_index, drop_search_index, has_search_index
from .statements import SQLITE_STATEMENTS, Record, SearchSql


class TrigramIndex(SqlitePart):
    """`SqliteDatabase`'s search methods (`Backend.fit_search_index`, `search`, `search_many`) and its
    FTS5 trigram index, built when first needed and never waited for."""

    search_index = True  # SQLite may always ask it: `_indexed` builds it when it is missing
    _reach: int | None = None
    """The most records a user of this store can hold (the quota, or more if one held more at open):
    a search threshold above it always scans, without reading the user's count first. None: unknown
    (a read-only open), so the count is read. Answers are the same either way, only the cost differs."""

    def fit_search_index(self, fts_min_user_rows: int) -> None:
        """Keep the index where some user can reach, or holds, `fts_min_user_rows` records; stop keeping
        it elsewhere (at open). Triggers keep it on every write, so a store that cannot use it drops it."""
        biggest = self.fetch("SELECT max(records) FROM user_counts")[0][0] or 0  # held before the quota shrank
        self._reach = max(self.limits.max_records_per_user, biggest)
        needed = self._reach >= fts_min_user_rows
        present = has_search_index(self.connection)
        if present != needed:
            self._change_index(build=not present)

    def _change_index(self, build: bool) -> None:
        """Build or drop the index in one transaction, if the write lock is free right now.

        Never waits: opening a store (or searching) must not fail because another process holds the
        write lock. Left as it is, the next open decides again, and search meanwhile scans.
        """
        with self.lock:
            self.connection.execute("PRAGMA busy_timeout = 0")
            self.no_wait = True  # nor for another writer's turn (turns.py)
            try:
                with self.transaction() as conn:
                    present = has_search_index(conn)  # again under the write lock: another store may have done it
                    if build and not present:
                        build_search_index(conn)
                    elif present and not build:
                        drop_search_index(conn)
            except LockedError:
                pass
            finally:
                self.no_wait = False
                self.connection.execute(f"PRAGMA busy_timeout = {int(self.limits.busy_timeout_ms)}")

    def _indexed(self, sql: SearchSql, args: tuple[Any, ...], scan_args: tuple[Any, ...], kind: str) -> list[Any]:
        if not has_search_index(self.connection):
            self._change_index(build=True)  # the threshold was lowered after open: build it now
        # One snapshot for the check and the query: another store may drop the index (its triggers
        # and its content, in one transaction) at any moment, and an empty index would find nothing.
        with self.reading() as conn:
            if not has_search_index(conn):  # it could not be built (the write lock was taken): scan
                return conn.execute(sql.scan(kind), scan_args).fetchall()
            return conn.execute(sql.indexed(kind), args).fetchall()

    def search(self, user: str, query: str, limit: int, kind: str | None, fts_min_user_rows: int) -> list[Record]:
        """The literal search rule (search.py), by a scan or the index."""
        return search.search(self, SQLITE_STATEMENTS.search, user, query, limit, kind,
                             self._threshold(fts_min_user_rows), self.lock, self._indexed)

    def search_many(self, user: str, queries: Sequence[str], limit: int, kinds: Sequence[str],
                    fts_min_user_rows: int) -> dict[tuple[str, str], list[Record]]:
        """`search` for every query and kind, in one pass (search.py)."""
        return search.search_many(self, SQLITE_STATEMENTS.search, user, queries, limit, kinds,
                                  self._threshold(fts_min_user_rows), self.lock, self._indexed)

    def _threshold(self, fts_min_user_rows: int) -> int:
        """`fts_min_user_rows`, or `search.NEVER` when no user of this store can reach it (`_reach`)."""
        return search.NEVER if self._reach is not None and fts_min_user_rows > self._reach else fts_min_user_rows
