"""Search, on either backend: a literal, case-folded substring rule, by a scan of one user's rows or a trigram index.

The rule: a record matches when its key or value contains the query after Python's `str.casefold()`
on both sides; `%`, `_`, quotes and the like are plain characters. Every path below gives exactly
the rule's answer, newest first: by `seq`, the number each record write takes from the store's
sequence (commit order, not the clock). The SQL is the backend's `SearchSql` (statements.py); what
differs besides is the index: SQLite's FTS5 index is kept only where the store's limits can use it
(`fit_index`) and built when first needed, PostgreSQL's `pg_trgm` indexes exist where the server
has the extension (`PostgresDatabase.search_index`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Union, cast

from ..errors import LockedError
from ..limits import Limits
from .db import SqliteDatabase
from .schema import build_search_index, drop_search_index, has_search_index
from .statements import Record, SearchSql, to_record

if TYPE_CHECKING:
    from .postgres.backend import PostgresDatabase


Searched = Union["SqliteDatabase", "PostgresDatabase"]
"""The backends' databases search runs on: where they differ (SQLite's one locked connection and its
on-demand index; PostgreSQL's pool and its `pg_trgm` index made at open), `isinstance` says which."""


def index_needed(db: SqliteDatabase, limits: Limits, fts_min_user_rows: int) -> bool:
    """Whether any user can reach, or holds, the size at which `search` asks SQLite's trigram index."""
    if limits.max_records_per_user >= fts_min_user_rows:
        return True
    biggest = db.fetch("SELECT max(records) FROM user_counts")[0][0]  # users the quota has since shrunk under
    return biggest is not None and biggest >= fts_min_user_rows


def fit_index(db: SqliteDatabase, limits: Limits, fts_min_user_rows: int) -> None:
    """Keep SQLite's trigram index where `index_needed`, stop keeping it elsewhere (at open).

    The index is kept by triggers on every write, at about half the pages a put writes, so a store
    whose users can never reach `fts_min_user_rows` records does not keep it. Search answers do not
    depend on it: every path gives the rule's answer (tests/store/test_store_search.py checks them all).
    """
    present = has_search_index(db.connection)
    if present != index_needed(db, limits, fts_min_user_rows):
        _change_index(db, build=not present)


def _change_index(db: SqliteDatabase, build: bool) -> None:
    """Build or drop the index in one transaction, if the write lock is free right now.

    Never waits: the index is an optimisation, and opening a store (or searching) must not fail
    because another process holds the write lock. Left as it is, the next open decides again, and
    search meanwhile answers by the scan.
    """
    conn = db.connection
    with db.lock:
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            with db.transaction() as conn:
                present = has_search_index(conn)  # again under the write lock: another store may have done it
                if build and not present:
                    build_search_index(conn)
                elif present and not build:
                    drop_search_index(conn)
        except LockedError:
            pass
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(db.limits.busy_timeout_ms)}")


def _records(rows: Iterable[Any]) -> list[Record]:
    return [to_record(cast(Any, row)) for row in rows]  # PostgreSQL's Row reads by name, as sqlite3.Row does


def _held(db: Searched) -> contextlib.AbstractContextManager[Any]:
    """SQLite's store lock (one connection, shared by threads); PostgreSQL's connections are pooled."""
    return db.lock if isinstance(db, SqliteDatabase) else contextlib.nullcontext()


def _may_index(db: Searched) -> bool:
    """SQLite builds its index when first needed; PostgreSQL has one where the server has `pg_trgm`."""
    return isinstance(db, SqliteDatabase) or db.search_index


def _indexed(db: Searched, sql: SearchSql, args: tuple[Any, ...], scan_args: tuple[Any, ...],
             kind: str) -> list[Any]:
    if not isinstance(db, SqliteDatabase):
        return db.fetch(sql.indexed(kind), args)
    if not has_search_index(db.connection):
        _change_index(db, build=True)  # the threshold was lowered after open: build it now
    # One snapshot for the check and the query: another store may drop the index (its triggers
    # and its content, in one transaction) at any moment, and an empty index would find nothing.
    with db.reading() as conn:
        if not has_search_index(conn):  # it could not be built (the write lock was taken): scan
            return conn.execute(sql.scan(kind), scan_args).fetchall()
        return conn.execute(sql.indexed(kind), args).fetchall()


def search(db: Searched, sql: SearchSql, user: str, query: str, limit: int, kind: str | None,
           fts_min_user_rows: int) -> list[Record]:
    """The records of `user` that match `query` (already checked), newest first, at most `limit`.

    `db` is the backend's database (`SqliteDatabase`, `PostgresDatabase`) and `sql` its `SearchSql`.
    A user with fewer than `fts_min_user_rows` records (or a query under 3 characters, or a store
    without an index) is searched by a scan of their own rows alone; a larger one by their newest
    rows first, then the index.
    """
    folded = query.casefold()
    kind_sql, kind_args = ("AND kind = ?", (kind,)) if kind else ("", ())
    if not folded:
        return _records(db.fetch(sql.newest(kind_sql), (user, *kind_args, limit)))
    scan_args = (user, *kind_args, folded, folded, limit)
    with _held(db):
        if len(folded) < 3 or not _may_index(db) or db.user_records(user) < fts_min_user_rows:
            # The user's rows through the (user_id, seq) index, newest first: the database stops
            # at the `limit`-th match, and never reads another user's rows.
            return _records(db.fetch(sql.scan(kind_sql), scan_args))
        if fts_min_user_rows > 0:
            # A large user: the newest rows first. If they hold `limit` matches, those are the
            # answer (every other match is older); only otherwise is the index worth asking.
            rows = db.fetch(sql.recent(kind_sql), (user, *kind_args, fts_min_user_rows, folded, folded, limit))
            if len(rows) == limit:
                return _records(rows)
        args = (user, *kind_args, *sql.index_terms(folded), limit)
        return _records(_indexed(db, sql, args, scan_args, kind_sql))


def search_many(db: Searched, sql: SearchSql, user: str, queries: Sequence[str], limit: int, kinds: Sequence[str],
                fts_min_user_rows: int) -> dict[tuple[str, str], list[Record]]:
    """`search` for every (query, kind) pair (all already checked), in one pass over the user's rows.

    The rows that match any query come back newest first, each with one flag per query; the first
    `limit` flagged rows of a kind answer that pair. (Measured against one ranked statement per
    pair with row_number(): faster, because each row is read and matched once.) An empty query
    matches every row, as an empty search does. A large user of a store with an index is searched
    pair by pair instead, so the index can serve them.
    """
    unique = list(dict.fromkeys(queries))
    if not unique or not kinds:
        return {(q, k): [] for q in queries for k in kinds}
    with _held(db):
        if _may_index(db) and db.user_records(user) >= fts_min_user_rows:
            return {(q, k): search(db, sql, user, q, limit, k, fts_min_user_rows) for q in unique for k in kinds}
        rows = db.fetch(sql.flagged(len(unique), len(kinds)),
                        (*(fold for q in unique for fold in (q.casefold(), q.casefold())), user, *kinds))
    found: dict[tuple[str, str], list[Record]] = {(q, k): [] for q in unique for k in kinds}
    for row in rows:
        for n, query in enumerate(unique):
            hits = found[(query, row["kind"])]
            if row[f"m{n}"] and len(hits) < limit:
                hits.append(to_record(cast(Any, row)))
    return found
