"""Search in SQLite: a literal, case-folded substring rule, by a scan of one user's rows or the trigram index.

The rule: a record matches when its key or value contains the query after Python's `str.casefold()`
on both sides; `%`, `_`, quotes and the like are plain characters. Every path below gives exactly
the rule's answer, newest first: by `seq`, the number each record write takes from the store's
sequence (commit order, not the clock).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import LockedError
from ..limits import Limits
from .db import SqliteDatabase
from .schema import build_search_index, drop_search_index, has_search_index
from .statements import RECORD_SQL, Record, to_record

_NEWEST = "ORDER BY seq DESC"
_MATCH = "(instr(key_fold, ?) > 0 OR instr(value_fold, ?) > 0)"


def _scan_sql(kind_sql: str) -> str:
    """(user, [kind,] query, query, limit) -> the matching rows of one user, newest first."""
    return f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? {kind_sql} AND {_MATCH} {_NEWEST} LIMIT ?"


def index_needed(db: SqliteDatabase, limits: Limits, fts_min_user_rows: int) -> bool:
    """Whether any user can reach, or holds, the size at which `search` asks the trigram index."""
    if limits.max_records_per_user >= fts_min_user_rows:
        return True
    biggest = db.fetch("SELECT max(records) FROM user_counts")[0][0]  # users the quota has since shrunk under
    return biggest is not None and biggest >= fts_min_user_rows


def fit_index(db: SqliteDatabase, limits: Limits, fts_min_user_rows: int) -> None:
    """Keep the trigram index where `index_needed`, stop keeping it elsewhere (at open).

    The index is kept by triggers on every write, at about half the pages a put writes, so a store
    whose users can never reach `fts_min_user_rows` records does not keep it. Search answers do not
    depend on it: every path gives the rule's answer (tests/test_store_search.py checks them all).
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


def search(db: SqliteDatabase, user: str, query: str, limit: int, kind: str | None,
           fts_min_user_rows: int) -> list[Record]:
    """The records of `user` that match `query` (already checked), newest first, at most `limit`.

    A user with fewer than `fts_min_user_rows` records (or a query under 3 characters) is searched
    by a scan of their own rows alone; a larger one by their newest rows first, then the index.
    """
    folded = query.casefold()
    kind_sql, kind_args = ("AND kind = ?", (kind,)) if kind else ("", ())
    if not folded:
        return [to_record(row) for row in db.fetch(
            f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? {kind_sql} {_NEWEST} LIMIT ?",
            (user, *kind_args, limit),
        )]
    with db.lock:
        if len(folded) < 3 or db.user_records(user) < fts_min_user_rows:
            # The user's rows through the (user_id, seq) index, newest first: SQLite stops
            # at the `limit`-th match, and never reads another user's rows.
            rows = db.fetch(_scan_sql(kind_sql), (user, *kind_args, folded, folded, limit))
            return [to_record(row) for row in rows]
        if fts_min_user_rows > 0:
            # A large user: the newest rows first. If they hold `limit` matches, those are the
            # answer (every other match is older); only otherwise is the index worth asking.
            rows = db.fetch(
                f"SELECT {RECORD_SQL} FROM (SELECT * FROM memories WHERE user_id = ? {kind_sql} "
                f"{_NEWEST} LIMIT ?) WHERE {_MATCH} {_NEWEST} LIMIT ?",
                (user, *kind_args, fts_min_user_rows, folded, folded, limit),
            )
            if len(rows) == limit:
                return [to_record(row) for row in rows]
        if not has_search_index(db.connection):
            _change_index(db, build=True)  # the threshold was lowered after open: build it now
        # One snapshot for the check and the query: another store may drop the index (its triggers
        # and its content, in one transaction) at any moment, and an empty index would find nothing.
        with db.reading() as conn:
            if not has_search_index(conn):  # it could not be built (the write lock was taken): scan
                rows = conn.execute(_scan_sql(kind_sql), (user, *kind_args, folded, folded, limit)).fetchall()
                return [to_record(row) for row in rows]
            # CROSS JOIN fixes the order: the index query runs once, then rows are fetched by id and
            # filtered by user. With a plain JOIN SQLite walked the user's rows and ran the MATCH
            # again for each of them, which was slower than a scan by two orders of magnitude.
            rows = conn.execute(
                f"SELECT {RECORD_SQL} FROM memories_fts CROSS JOIN memories m ON m.id = memories_fts.rowid"
                f" WHERE memories_fts MATCH ? AND m.user_id = ? {kind_sql.replace('kind', 'm.kind')}"
                " ORDER BY m.seq DESC LIMIT ?",
                ('"' + folded.replace('"', '""') + '"', user, *kind_args, limit),
            ).fetchall()
        return [to_record(row) for row in rows]


def search_many(db: SqliteDatabase, user: str, queries: Sequence[str], limit: int, kinds: Sequence[str],
                fts_min_user_rows: int) -> dict[tuple[str, str], list[Record]]:
    """`search` for every (query, kind) pair (all already checked), in one pass over the user's rows."""
    unique = list(dict.fromkeys(queries))
    if not unique or not kinds:
        return {(q, k): [] for q in queries for k in kinds}
    with db.lock:
        if db.user_records(user) >= fts_min_user_rows:
            return {(q, k): search(db, user, q, limit, k, fts_min_user_rows) for q in unique for k in kinds}
        # One pass over the user's rows, newest first: the rows that match any query, each
        # with one flag per query; the first `limit` flagged rows of a kind are that search's
        # answer. (Measured against one ranked statement per pair with row_number(): faster,
        # because each row is read and matched once.) An empty query matches every row, as
        # an empty search does: instr(x, '') is 1.
        match = [f"(instr(key_fold, ?{n}) > 0 OR instr(value_fold, ?{n}) > 0)" for n in range(2, len(unique) + 2)]
        kind_params = ", ".join(f"?{n}" for n in range(len(unique) + 2, len(unique) + 2 + len(kinds)))
        rows = db.fetch(
            f"SELECT {RECORD_SQL}, {', '.join(match)} FROM memories"
            f" WHERE user_id = ?1 AND kind IN ({kind_params}) AND ({' OR '.join(match)})"
            f" {_NEWEST}",
            (user, *(q.casefold() for q in unique), *kinds),
        )
    found: dict[tuple[str, str], list[Record]] = {(q, k): [] for q in unique for k in kinds}
    for row in rows:
        for n, query in enumerate(unique, start=7):  # the flags follow the 7 record columns
            hits = found[(query, row["kind"])]
            if row[n] and len(hits) < limit:
                hits.append(to_record(row))
    return found
