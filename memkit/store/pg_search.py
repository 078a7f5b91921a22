"""Search on PostgreSQL: SQLite's literal, case-folded substring rule (search.py), by a scan of one
user's rows or, where the server has `pg_trgm`, through the trigram index.

Both databases compare the same text: `key_fold` and `value_fold` hold Python's `str.casefold()`,
written by the store, and the query is folded the same way. The scan tests `strpos(fold, query) > 0`
(a plain substring test, as SQLite's `instr`); the index path tests `fold LIKE '%query%'` with every
`%`, `_` and `\\` escaped, which the GIN index can serve and PostgreSQL then rechecks exactly. The
`"C"` collation makes both byte comparisons. Newest first: by `seq`, commit order within a user.
"""

from __future__ import annotations

from typing import Any, cast
from collections.abc import Iterable, Sequence

from .pg_connection import Row
from .postgres import PostgresDatabase
from .statements import RECORD_SQL, Record, to_record

_NEWEST = "ORDER BY seq DESC"
_MATCH = "(strpos(key_fold, ?) > 0 OR strpos(value_fold, ?) > 0)"
_LIKE = "(key_fold LIKE ? OR value_fold LIKE ?)"


def like_pattern(folded: str) -> str:
    """A LIKE pattern that matches `folded` as a literal substring (backslash is LIKE's escape)."""
    return "%" + folded.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _records(rows: Iterable[Row]) -> list[Record]:
    return [to_record(cast(Any, row)) for row in rows]  # a Row reads by name, as sqlite3.Row does


def search(db: PostgresDatabase, user: str, query: str, limit: int, kind: str | None,
           fts_min_user_rows: int) -> list[Record]:
    """The records of `user` that match `query` (already checked), newest first, at most `limit`.

    Without the index, with a query under 3 characters (no trigram to look up) or for a user with
    fewer than `fts_min_user_rows` records: a scan of the user's rows alone, newest first through
    the (user_id, seq) index, stopping at the `limit`-th match. A larger user: the newest
    rows first, then the index, as on SQLite.
    """
    folded = query.casefold()
    kind_sql, kind_args = ("AND kind = ?", (kind,)) if kind else ("", ())
    if not folded:
        return _records(db.fetch(
            f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? {kind_sql} {_NEWEST} LIMIT ?",
            (user, *kind_args, limit),
        ))
    if not db.search_index or len(folded) < 3 or db.user_records(user) < fts_min_user_rows:
        return _records(db.fetch(
            f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? {kind_sql} AND {_MATCH} {_NEWEST} LIMIT ?",
            (user, *kind_args, folded, folded, limit),
        ))
    if fts_min_user_rows > 0:
        rows = db.fetch(
            f"SELECT {RECORD_SQL} FROM (SELECT * FROM memories WHERE user_id = ? {kind_sql} {_NEWEST} LIMIT ?)"
            f" AS newest WHERE {_MATCH} {_NEWEST} LIMIT ?",
            (user, *kind_args, fts_min_user_rows, folded, folded, limit),
        )
        if len(rows) == limit:
            return _records(rows)
    pattern = like_pattern(folded)
    return _records(db.fetch(
        f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? {kind_sql} AND {_LIKE} {_NEWEST} LIMIT ?",
        (user, *kind_args, pattern, pattern, limit),
    ))


def search_many(db: PostgresDatabase, user: str, queries: Sequence[str], limit: int, kinds: Sequence[str],
                fts_min_user_rows: int) -> dict[tuple[str, str], list[Record]]:
    """`search` for every (query, kind) pair (all already checked), in one pass over the user's rows.

    The rows that match any query come back newest first, each with one flag per query; the first
    `limit` flagged rows of a kind answer that pair. A large user on a server with the index is
    searched pair by pair instead, so the index can serve them.
    """
    unique = list(dict.fromkeys(queries))
    if not unique or not kinds:
        return {(q, k): [] for q in queries for k in kinds}
    if db.search_index and db.user_records(user) >= fts_min_user_rows:
        return {(q, k): search(db, user, q, limit, k, fts_min_user_rows) for q in unique for k in kinds}
    flags = ", ".join(f"{_MATCH} AS m{n}" for n in range(len(unique)))
    rows = db.fetch(
        f"SELECT * FROM (SELECT {RECORD_SQL}, seq, {flags} FROM memories"
        f" WHERE user_id = ? AND kind IN ({', '.join('?' for _ in kinds)})) AS flagged"
        f" WHERE {' OR '.join(f'm{n}' for n in range(len(unique)))} {_NEWEST}",
        (*(fold for q in unique for fold in (q.casefold(), q.casefold())), user, *kinds),
    )
    found: dict[tuple[str, str], list[Record]] = {(q, k): [] for q in unique for k in kinds}
    for row in rows:
        for n, query in enumerate(unique):
            hits = found[(query, row["kind"])]
            if row[f"m{n}"] and len(hits) < limit:
                hits.append(to_record(cast(Any, row)))
    return found
