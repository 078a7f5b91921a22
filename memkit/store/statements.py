"""The SQL statements the store runs for its writes, record reads and searches, public as one value.

`MemoryStore.statements()` hands out `SQLITE_STATEMENTS` (PostgreSQL's forms: postgres/statements.py),
so a benchmark (bench/contenders.py) runs exactly the statements the store runs and follows a schema
change without copying it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from typing import Any

Record = dict[str, Any]
"""A memory as the kit hands it out: kind, key, value, source_session, revision, created_at, updated_at."""

RECORD_SQL = "kind, memory_key, value, source_session, revision, created_at, updated_at"
"""The columns of a record, in `Record` order (`Statements.record_columns`)."""

_NEWEST = "ORDER BY seq DESC"


@dataclasses.dataclass(frozen=True)
class SearchSql:
    """The search rule's statements on one backend (search.py runs them): each reads the record
    columns of one user's rows, newest first (by `seq`); `kind` is "" or "AND kind = ?", whose
    argument follows the user's; the caller folds the query (`key_fold`/`value_fold` are folded)."""

    match: str  # a plain substring test of both folds: (folded, folded)
    index_sql: str  # the match through the trigram index: a template of `{columns}` and `{kind}`
    index_terms: Callable[[str], tuple[str, ...]]  # the index's arguments for a folded query

    def newest(self, kind: str = "") -> str:
        """(user, [kind,] limit) -> the user's newest rows (an empty query)."""
        return f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? {kind} {_NEWEST} LIMIT ?"

    def scan(self, kind: str = "") -> str:
        """(user, [kind,] folded, folded, limit) -> the matches, by the user's rows newest first."""
        return f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? {kind} AND {self.match} {_NEWEST} LIMIT ?"

    def recent(self, kind: str = "") -> str:
        """(user, [kind,] window, folded, folded, limit) -> the matches among the user's `window` newest rows."""
        return (f"SELECT {RECORD_SQL} FROM (SELECT * FROM memories WHERE user_id = ? {kind} {_NEWEST} LIMIT ?)"
                f" AS newest WHERE {self.match} {_NEWEST} LIMIT ?")

    def indexed(self, kind: str = "") -> str:
        """(user, [kind,] `index_terms(folded)`..., limit) -> the matches, through the trigram index."""
        return self.index_sql.format(columns=RECORD_SQL, kind=kind)

    def flagged(self, queries: int, kinds: int) -> str:
        """(folded, folded for each query, user, each kind) -> the user's rows of those kinds that match
        any query, newest first, each with one flag per query (`m0`, `m1`, ...)."""
        flags = ", ".join(f"{self.match} AS m{n}" for n in range(queries))
        return (f"SELECT * FROM (SELECT {RECORD_SQL}, seq, {flags} FROM memories"
                f" WHERE user_id = ? AND kind IN ({', '.join('?' * kinds)})) AS flagged"
                f" WHERE {' OR '.join(f'm{n}' for n in range(queries))} {_NEWEST}")


def fts_phrase(folded: str) -> tuple[str]:
    """An FTS5 query that matches `folded` as one literal phrase (double quotes doubled)."""
    return ('"' + folded.replace('"', '""') + '"',)


SQLITE_SEARCH = SearchSql(
    match="(instr(key_fold, ?) > 0 OR instr(value_fold, ?) > 0)",
    # CROSS JOIN fixes the order: the index query runs once, then rows are fetched by id and
    # filtered by user. With a plain JOIN SQLite walked the user's rows and ran the MATCH again
    # for each of them, which was slower than a scan by two orders of magnitude.
    index_sql=("SELECT {columns} FROM memories_fts CROSS JOIN memories m ON m.id = memories_fts.rowid"
               " WHERE m.user_id = ? {kind} AND memories_fts MATCH ? ORDER BY m.seq DESC LIMIT ?"),
    index_terms=fts_phrase,
)
"""Search on SQLite: `instr` (a plain substring test) and the FTS5 trigram index over both folds."""

TOTAL_IN_META_STEP = 12
"""The schema step from which SQLite keeps the store-wide record count in `store_meta` (steps.py)."""

INSERT_MEMORY_COLUMNS = ("INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision,"
                         " created_at, updated_at, key_fold, value_fold, seq)")
INSERT_EVENT_COLUMNS = ("INSERT INTO memory_events (user_id, kind, memory_key, action, revision, session_id,"
                        " old_value, new_value, confirmation, at)")
"""The columns `insert_memory` and `insert_event` take, in order (SQLite adds the id from the sequence:
a put's record and event take the put's number, which the caller took just before; see steps.py, 15)."""


def select_for_put(total_table: str) -> str:
    """`Statements.select_for_put`, reading the store-wide count from `total_table`."""
    # The key is named three times (`put_read_args`); the counts of the user and of the store ride along.
    return (
        "SELECT m.id, m.kind, m.memory_key, m.value, m.source_session, m.revision, m.created_at, m.updated_at, m.seq,"
        " (SELECT records FROM user_counts WHERE user_id = ?) AS user_records,"
        f" (SELECT records FROM {total_table}) AS total_records,"
        " (SELECT max(revision) FROM memory_events WHERE user_id = ? AND kind = ? AND memory_key = ?)"
        " AS last_revision"
        " FROM (SELECT 1) AS one LEFT JOIN memories m ON m.user_id = ? AND m.kind = ? AND m.memory_key = ?"
    )


@dataclasses.dataclass(frozen=True)
class Statements:
    """The store's write statements and the record columns, with `?` placeholders in the order given.

    Attributes:
        select_for_put: `put_read_args(user, kind, key)` -> one row: the current record's id, its
            columns and seq (all NULL without one), the user's and the store's quota counters and
            the highest revision in the key's history: everything a put reads, in one statement.
        prune_events: (user, user, count) -> removes the user's `count` oldest events, never the
            newest event of a key the user holds.
        retire_history: (user, at): a delete happened at `at` (a later time wins).
        forget_retired: (user,) -> removes the user's retire mark (`forget_user`, once their records are gone).
        insert_event: the columns of `INSERT_EVENT_COLUMNS`; on SQLite the event's id is the
            sequence's current number, so the caller takes a number (`take_sequence`) before each.
        The others' placeholders follow the columns their SQL names, in order.
    """

    record_columns: str
    take_sequence: str
    select_current: str
    select_for_put: str
    insert_memory: str
    update_memory: str
    delete_memory: str
    insert_event: str
    count_events: str
    prune_events: str
    retire_history: str
    forget_retired: str
    user_records: str
    total_records: str
    search: SearchSql
    store_id: str


SQLITE_STATEMENTS = Statements(
    record_columns=RECORD_SQL,
    take_sequence="UPDATE store_meta SET sequence = sequence + ? RETURNING sequence",
    select_current="SELECT id, value, revision FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
    select_for_put=select_for_put("store_meta"),
    insert_memory=INSERT_MEMORY_COLUMNS[:-1] + ", id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
    update_memory=(
        "UPDATE memories SET value = ?, value_fold = ?, source_session = ?, revision = ?,"
        " updated_at = ?, seq = ? WHERE user_id = ? AND kind = ? AND memory_key = ?"
    ),
    delete_memory="DELETE FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
    insert_event=INSERT_EVENT_COLUMNS[:-1] + ", id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                 " (SELECT sequence FROM store_meta))",
    count_events="SELECT count(*) FROM memory_events WHERE user_id = ?",
    # The events kept are found from the user's records (one seek each for its key's newest event), not
    # from a join of every event with the records: 93 against 174 µs at the default bound (256 events,
    # 64 records). coalesce: a record without events (an import may bring one) keeps none, and a NULL
    # in NOT IN would keep every event. The outer `user_id = ?1` keeps the delete in the user's run.
    prune_events=(
        "DELETE FROM memory_events WHERE user_id = ?1 AND id IN (SELECT id FROM memory_events WHERE user_id = ?1"
        " AND id NOT IN (SELECT coalesce((SELECT max(e.id) FROM memory_events e WHERE e.user_id = m.user_id"
        " AND e.kind = m.kind AND e.memory_key = m.memory_key), 0) FROM memories m WHERE m.user_id = ?2)"
        " ORDER BY id LIMIT ?3)"
    ),
    # Beside the user's count (step 15), which the delete has just written: the same page.
    retire_history=(
        "INSERT INTO user_counts (user_id, records, retired_at) VALUES (?, 0, ?) ON CONFLICT (user_id) DO UPDATE SET"
        " retired_at = CASE WHEN user_counts.retired_at > excluded.retired_at THEN user_counts.retired_at"
        " ELSE excluded.retired_at END"
    ),
    forget_retired="DELETE FROM user_counts WHERE user_id = ?",
    user_records="SELECT records FROM user_counts WHERE user_id = ?",
    total_records="SELECT records FROM store_meta",
    store_id="SELECT database_id FROM store_meta",
    search=SQLITE_SEARCH,
)
"""The statements of the SQLite backend."""

def total_records_sql(conn: Any) -> str:
    """The statement that reads the store-wide record count on `conn`'s backend (health, limits).

    SQLite keeps it in `store_meta` from schema step 12 on and in `total_count` before (a file may be
    inspected before a store migrates it); PostgreSQL in `total_count`.
    """
    if isinstance(conn, sqlite3.Connection) and conn.execute("PRAGMA user_version").fetchone()[0] >= TOTAL_IN_META_STEP:
        return SQLITE_STATEMENTS.total_records
    return "SELECT records FROM total_count"


RETIRED_IN_COUNTS_STEP = 15
"""The schema step from which SQLite keeps the retire mark in `user_counts` (steps.py)."""


def user_counts_sql(conn: Any) -> str:
    """(user_id, records) of every user the per-user counters name (health's check). From step 15 a
    SQLite user without records keeps a row while their history is retired: a count, not a user."""
    version = conn.execute("PRAGMA user_version").fetchone()[0] if isinstance(conn, sqlite3.Connection) else 0
    if version >= RETIRED_IN_COUNTS_STEP:
        return "SELECT user_id, records FROM user_counts WHERE records <> 0 OR retired_at IS NULL"
    return "SELECT user_id, records FROM user_counts"


_RECORD_KEYS = {"kind": "kind", "key": "memory_key", "value": "value", "source_session": "source_session",
                "revision": "revision", "created_at": "created_at", "updated_at": "updated_at"}


def to_record(row: sqlite3.Row) -> Record:
    """A row selected with `record_columns`, as a `Record`."""
    return {key: row[column] for key, column in _RECORD_KEYS.items()}


_KEY_OF = {column: key for key, column in _RECORD_KEYS.items()}
_FIELDS = tuple(_KEY_OF[column.strip()] for column in RECORD_SQL.split(","))  # the keys, in RECORD_SQL's order


def to_records(rows: list[Any]) -> list[Record]:
    """Rows selected with exactly `RECORD_SQL`, as `Record`s: SQLite's zipped with the keys in column
    order (twice as fast as reading by name), PostgreSQL's read by name as `to_record` does."""
    if rows and isinstance(rows[0], sqlite3.Row):
        return [dict(zip(_FIELDS, row, strict=True)) for row in rows]
    return [to_record(row) for row in rows]


def put_read_args(user: str, kind: str, key: str) -> tuple[str, ...]:
    """The parameters of `select_for_put`, which names the key three times (plain `?`, not SQLite's
    numbered `?1`, so PostgreSQL runs the same statement through its adapter)."""
    return (user, user, kind, key, user, kind, key)


def prune_history(conn: Any, sql: Statements, user: str, max_events: int) -> int:
    """Inside a write transaction: remove `user`'s oldest history events past `max_events`; return how
    many. The newest event of every key the user holds stays: it says who set the current value."""
    count = int(conn.execute(sql.count_events, (user,)).fetchone()[0])
    if count <= max_events:
        return 0
    conn.execute(sql.prune_events, (user, user, count - max_events))
    return count - max_events
