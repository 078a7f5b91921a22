"""Search, on either backend: a literal, case-folded substring rule, by a scan of one user's rows or a trigram index.

The rule: a record matches when its key or value contains the query after Python's `str.casefold()`
on both sides; `%`, `_`, quotes and the like are plain characters. Every path below gives exactly
the rule's answer, newest first by `seq` (commit order, not the clock). The SQL is the backend's
`SearchSql` (statements.py); SQLite's index is search_index.py's, PostgreSQL's is `pg_trgm`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, cast

from .statements import Record, SearchSql, to_record, to_records


class Searched(Protocol):
    """What search reads of a backend's database (`SqliteDatabase`, `PostgresDatabase`)."""

    search_index: bool  # whether it may ask a trigram index (SQLite builds its own when first needed)

    def fetch(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]: ...
    def user_records(self, user: str) -> int: ...


Indexed = Callable[[SearchSql, tuple[Any, ...], tuple[Any, ...], str], list[Any]]
"""(sql, index arguments, scan arguments, kind) -> the rows the index finds."""

_UNLOCKED: AbstractContextManager[Any] = contextlib.nullcontext()
NEVER = sys.maxsize
"""A threshold no user reaches: scan, without reading the user's count (search_index.py passes it)."""


def search(db: Searched, sql: SearchSql, user: str, query: str, limit: int, kind: str | None,
           fts_min_user_rows: int, lock: AbstractContextManager[Any] = _UNLOCKED,
           indexed: Indexed | None = None) -> list[Record]:
    """The records of `user` that match `query` (already checked), newest first, at most `limit`.

    A user with fewer than `fts_min_user_rows` records (or a query under 3 characters, or a store
    without an index) is searched by a scan of their own rows; a larger one by their newest rows
    first, then the index. `lock` is held throughout (SQLite's one connection); `indexed` asks the
    index (SQLite's builds it first when it must).
    """
    folded = query.casefold()
    kind_sql, kind_args = ("AND kind = ?", (kind,)) if kind else ("", ())
    if not folded:
        return to_records(db.fetch(sql.newest(kind_sql), (user, *kind_args, limit)))
    scan_args = (user, *kind_args, folded, folded, limit)
    with lock:
        if (len(folded) < 3 or not db.search_index or fts_min_user_rows == NEVER
                or db.user_records(user) < fts_min_user_rows):
            # The user's rows through the (user_id, seq) index, newest first: the database stops
            # at the `limit`-th match, and never reads another user's rows.
            return to_records(db.fetch(sql.scan(kind_sql), scan_args))
        if fts_min_user_rows > 0:
            # A large user: the newest rows first. If they hold `limit` matches, those are the
            # answer (every other match is older); only otherwise is the index worth asking.
            rows = db.fetch(sql.recent(kind_sql), (user, *kind_args, fts_min_user_rows, folded, folded, limit))
            if len(rows) == limit:
                return to_records(rows)
        args = (user, *kind_args, *sql.index_terms(folded), limit)
        if indexed is None:
            return to_records(db.fetch(sql.indexed(kind_sql), args))
        return to_records(indexed(sql, args, scan_args, kind_sql))


def search_many(db: Searched, sql: SearchSql, user: str, queries: Sequence[str], limit: int, kinds: Sequence[str],
                fts_min_user_rows: int, lock: AbstractContextManager[Any] = _UNLOCKED,
                indexed: Indexed | None = None) -> dict[tuple[str, str], list[Record]]:
    """`search` for every (query, kind) pair (all already checked), in one pass over the user's rows.

    The rows that match any query come back newest first, each with one flag per query; the first
    `limit` flagged rows of a kind answer that pair (docs/design/store.md: each row is read and
    matched once); an empty query matches every row. A large user of a store with an index is
    searched pair by pair, for the index.
    """
    unique = list(dict.fromkeys(queries))
    if not unique or not kinds:
        return {(q, k): [] for q in queries for k in kinds}
    with lock:
        if db.search_index and fts_min_user_rows != NEVER and db.user_records(user) >= fts_min_user_rows:
            return {(q, k): search(db, sql, user, q, limit, k, fts_min_user_rows, lock, indexed)
                    for q in unique for k in kinds}
        rows = db.fetch(sql.flagged(len(unique), len(kinds)),
                        (*(fold for q in unique for fold in (q.casefold(), q.casefold())), user, *kinds))
    found: dict[tuple[str, str], list[Record]] = {(q, k): [] for q in unique for k in kinds}
    for row in rows:
        for n, query in enumerate(unique):
            hits = found[(query, row["kind"])]
            if row[f"m{n}"] and len(hits) < limit:
                hits.append(to_record(cast(Any, row)))
    return found
