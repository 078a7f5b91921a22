"""The SQL statements the SQLite store runs for its writes and record reads, public as one value.

`MemoryStore.statements()` hands out `SQLITE_STATEMENTS`, so a benchmark (bench/contenders.py's raw
limit) runs exactly the statements the store runs and follows a schema change without copying it.
Only `memkit/store/` knows the schema: a change to these statements is a change inside it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from typing import Any

Record = dict[str, Any]
"""A memory as the kit hands it out: kind, key, value, source_session, revision, created_at, updated_at."""


@dataclasses.dataclass(frozen=True)
class Statements:
    """The store's write statements and the record columns, with `?` placeholders in the order given.

    Attributes:
        record_columns: the columns of a record, in `Record` order (kind, key, value, source_session,
            revision, created_at, updated_at); `to_record` reads a row of them.
        select_current: (user, kind, key) -> the row's id, value, revision, or no row.
        select_for_put: `put_read_args(user, kind, key)` -> one row: the current record's id, `record_columns` and
            seq (all NULL when there is none), the user's and the store's quota counters, and the
            highest revision in the key's event history: everything a put reads, in one statement.
        last_revision: (user, kind, key) -> the highest revision the event history holds (or NULL).
        take_sequence: (count) -> the last of the next `count` numbers of the store's sequence. Every
            write transaction takes at least one (the store does it before COMMIT when nothing did).
        insert_memory: (user, kind, key, value, session, revision, created_at, updated_at,
            key folded, value folded, seq); the folds are Python's `str.casefold()` of key and value,
            `seq` a number taken from the sequence ("newest first" is by seq).
        update_memory: (value, value folded, session, revision, updated_at, seq, id).
        delete_memory: (id).
        insert_event: (user, kind, key, action, revision, session, old_value, new_value,
            confirmation, at); `action` is create, update or delete.
        count_events: (user) -> how many history events the user has.
        prune_events: (user, user, count) -> removes the user's `count` oldest events, never the
            newest event of a key the user holds (`Limits.max_events_per_user`).
        retire_history: (user, at): the user's recent history up to `at` is retired (a delete
            happened then); a later time replaces an earlier one, never the other way round.
        user_records: (user) -> the user's quota counter (no row for a user without records).
        total_records: () -> the store's total counter.
        store_id: () -> the store's own random id, made once with its schema.
    """

    record_columns: str
    take_sequence: str
    select_current: str
    select_for_put: str
    last_revision: str
    insert_memory: str
    update_memory: str
    delete_memory: str
    insert_event: str
    count_events: str
    prune_events: str
    retire_history: str
    user_records: str
    total_records: str
    store_id: str


SQLITE_STATEMENTS = Statements(
    record_columns="kind, memory_key, value, source_session, revision, created_at, updated_at",
    take_sequence="UPDATE store_meta SET sequence = sequence + ? RETURNING sequence",
    select_current="SELECT id, value, revision FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
    select_for_put=(
        "SELECT m.id, m.kind, m.memory_key, m.value, m.source_session, m.revision, m.created_at, m.updated_at, m.seq,"
        " (SELECT records FROM user_counts WHERE user_id = ?) AS user_records,"
        " (SELECT records FROM total_count) AS total_records,"
        " (SELECT max(revision) FROM memory_events WHERE user_id = ? AND kind = ? AND memory_key = ?)"
        " AS last_revision"
        " FROM (SELECT 1) AS one LEFT JOIN memories m ON m.user_id = ? AND m.kind = ? AND m.memory_key = ?"
    ),
    last_revision="SELECT max(revision) FROM memory_events WHERE user_id = ? AND kind = ? AND memory_key = ?",
    insert_memory=(
        "INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision,"
        " created_at, updated_at, key_fold, value_fold, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ),
    update_memory=(
        "UPDATE memories SET value = ?, value_fold = ?, source_session = ?, revision = ?,"
        " updated_at = ?, seq = ? WHERE id = ?"
    ),
    delete_memory="DELETE FROM memories WHERE id = ?",
    insert_event=(
        "INSERT INTO memory_events (user_id, kind, memory_key, action, revision, session_id,"
        " old_value, new_value, confirmation, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ),
    count_events="SELECT count(*) FROM memory_events WHERE user_id = ?",
    prune_events=(
        "DELETE FROM memory_events WHERE id IN (SELECT id FROM memory_events WHERE user_id = ? AND id NOT IN ("
        "SELECT max(e.id) FROM memory_events e JOIN memories m ON m.user_id = e.user_id AND m.kind = e.kind"
        " AND m.memory_key = e.memory_key WHERE e.user_id = ? GROUP BY e.kind, e.memory_key)"
        " ORDER BY id LIMIT ?)"
    ),
    retire_history=(
        "INSERT INTO history_retired (user_id, at) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET"
        " at = CASE WHEN excluded.at > history_retired.at THEN excluded.at ELSE history_retired.at END"
    ),
    user_records="SELECT records FROM user_counts WHERE user_id = ?",
    total_records="SELECT records FROM total_count",
    store_id="SELECT database_id FROM store_meta",
)
"""The statements of the SQLite backend."""

PG_STATEMENTS: Statements = dataclasses.replace(
    SQLITE_STATEMENTS,
    # The numbers come from a sequence (no row lock); with other sessions taking numbers at the
    # same moment they need not be consecutive, but the last is the highest this session was given.
    take_sequence="SELECT coalesce(max(nextval('memkit_seq')), (SELECT last_value FROM memkit_seq))"
                  " FROM generate_series(1, ?)",
    store_id="SELECT database_id FROM memkit_meta",
)
"""The statements of the PostgreSQL backend: SQLite's (standard SQL), but for `take_sequence` and `store_id`."""

RECORD_SQL = SQLITE_STATEMENTS.record_columns


def to_record(row: sqlite3.Row) -> Record:
    """A row selected with `record_columns`, as a `Record`."""
    return {
        "kind": row["kind"],
        "key": row["memory_key"],
        "value": row["value"],
        "source_session": row["source_session"],
        "revision": row["revision"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def put_read_args(user: str, kind: str, key: str) -> tuple[str, ...]:
    """The parameters of `select_for_put`, which names the key three times.

    Plain `?` placeholders (not SQLite's numbered `?1`), so the PostgreSQL backend runs the same
    statement through its adapter.
    """
    return (user, user, kind, key, user, kind, key)


def prune_history(conn: Any, user: str, max_events: int) -> int:
    """Inside a write transaction: remove `user`'s oldest history events past `max_events`; return how many.

    The newest event of every key the user holds stays, so each current record keeps the event
    that says who set its value. One statement on either backend (`?` placeholders).
    """
    count = int(conn.execute(SQLITE_STATEMENTS.count_events, (user,)).fetchone()[0])
    if count <= max_events:
        return 0
    conn.execute(SQLITE_STATEMENTS.prune_events, (user, user, count - max_events))
    return count - max_events
