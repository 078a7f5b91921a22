"""What an operator asks of a store's file: its settings and quotas, the counter check, a fingerprint.

`counters_consistent` is the one check that the quota counters agree with the rows; `health`,
`inspect_file` (after a crash, before any store opens the file) and the lab all use it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..jsonutil import canonical_json
from .backend import SqlitePart
from .files import sqlite_uri
from .statements import total_records_sql, user_counts_sql

if TYPE_CHECKING:
    from .backend import Backend
    from .identity import StoreIdentity


_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

USER_TABLES = ("memories", "memory_events", "transcript", "agent_items", "proposals")
"""The tables of users' data `health` counts: records, their history, archived turns, openai-agents
session items, proposals (each row is one user's; `Store.forget_user` removes them)."""


class SqliteHealth(SqlitePart):
    """`SqliteDatabase`'s answers to `health` (the `Backend` methods `settings`, `db_bytes`,
    `size_consistent`; db.py)."""

    def settings(self, conn: sqlite3.Connection) -> dict[str, Any]:
        """The first keys of `health()`: the file, SQLite's version and the pragmas that matter."""
        return {
            "path": str(self.path),
            "sqlite_version": sqlite3.sqlite_version,
            "schema_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
            "synchronous": _SYNCHRONOUS[conn.execute("PRAGMA synchronous").fetchone()[0]],
            "busy_timeout_ms": conn.execute("PRAGMA busy_timeout").fetchone()[0],
        }

    def db_bytes(self, conn: sqlite3.Connection) -> int:
        """The file's size as the cap counts it: pages times page size, the WAL's pages included."""
        return int(conn.execute("PRAGMA page_count").fetchone()[0] * self.page_size)

    def size_consistent(self, conn: sqlite3.Connection) -> bool:
        """Always: SQLite's size is measured (pages), never counted."""
        return True


def health(db: Backend) -> dict[str, Any]:
    """Settings, size against the cap, records against the quotas, and the counter check, in one snapshot.

    The first keys are the backend's (`Backend.settings`): SQLite's `path` and `sqlite_version`,
    PostgreSQL's `url` (masked), `schema`, `server_version`, `synchronous_commit`, `search_index` and
    `pool_size`; then on both `schema_version`, `journal_mode`, `synchronous`, `busy_timeout_ms`, and
    the size, records per user (the 50 largest) and in all against their limits, `counters_consistent`;
    then `rows` (each table of users' data: what `forget_user` removes) and `session_items_per_user`
    (openai-agents session items of the 50 users with most).
    """
    limits = db.limits
    with db.reading() as conn:
        per_user = {row[0]: row[1] for row in conn.execute(
            "SELECT user_id, records FROM user_counts WHERE records > 0 ORDER BY records DESC, user_id LIMIT 50")}
        items_per_user = {row[0]: int(row[1]) for row in conn.execute(
            "SELECT user_id, count(*) FROM agent_items GROUP BY user_id ORDER BY count(*) DESC, user_id LIMIT 50")}
        return {
            **db.settings(conn),
            "db_bytes": db.db_bytes(conn),
            "max_db_bytes": limits.max_db_bytes,
            "records_total": conn.execute(db.statements.total_records).fetchone()[0],
            "max_records_total": limits.max_records_total,
            "users": conn.execute("SELECT count(*) FROM user_counts WHERE records > 0").fetchone()[0],
            "records_per_user": per_user,
            "max_records_per_user": limits.max_records_per_user,
            "counters_consistent": counters_consistent(conn) and db.size_consistent(conn),
            "rows": {table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) for table in USER_TABLES},
            "session_items_per_user": items_per_user,
        }


def counters_consistent(conn: Any) -> bool:
    """Whether the quota counters (the total and every user's) agree with the rows, on either backend.
    Per-user counters are compared with the rows both ways: a missing, extra or wrong one all show."""
    total = conn.execute(total_records_sql(conn)).fetchone()[0]
    counted = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    counters = user_counts_sql(conn)
    drifted = conn.execute(
        "SELECT (SELECT count(*) FROM (SELECT user_id, count(*) FROM memories GROUP BY user_id"
        f"                              EXCEPT {counters}) AS missing)"
        f"     + (SELECT count(*) FROM ({counters}"
        "                              EXCEPT SELECT user_id, count(*) FROM memories GROUP BY user_id) AS extra)"
    ).fetchone()[0]
    return bool(total == counted and not drifted)


def inspect_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read-only checks of a memkit file on a connection of its own, after a crash, before any store
    opens it (opening could repair or migrate it): `integrity` ("ok" or SQLite's first complaint),
    `records` (rows in memories), `counted` (the total counter) and `counters_consistent`."""
    with contextlib.closing(sqlite3.connect(sqlite_uri(path, "ro"), uri=True)) as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        records = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        counted = conn.execute(total_records_sql(conn)).fetchone()[0]
        consistent = counters_consistent(conn)
    return {"integrity": integrity, "records": records, "counted": counted, "counters_consistent": consistent}


def fingerprint(store: StoreIdentity) -> dict[str, Any]:
    """Row counts and a SHA-256 of every memory and event row: equal fingerprints, unchanged database.

    The digest covers the content of every record and event, read in one snapshot on a read-only
    connection of its own, so it does not depend on how SQLite laid the pages out.

    Raises:
        ValidationError: the store is not a SQLite file (a PostgreSQL store has none to read).
    """
    if store.path is None:
        raise ValidationError(f"fingerprint reads a SQLite file; {store.location} is a PostgreSQL store")
    with contextlib.closing(sqlite3.connect(sqlite_uri(store.path, "ro"), uri=True, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        memories = conn.execute(
            "SELECT user_id, kind, memory_key, value, source_session, revision, created_at, updated_at"
            " FROM memories ORDER BY user_id, kind, memory_key").fetchall()
        events = conn.execute(
            "SELECT id, user_id, kind, memory_key, action, revision, session_id, old_value, new_value,"
            " confirmation, at FROM memory_events ORDER BY id").fetchall()
        conn.execute("COMMIT")
    digest = hashlib.sha256(canonical_json([[list(r) for r in memories], [list(r) for r in events]]).encode())
    return {"memories": len(memories), "events": len(events), "sha256": digest.hexdigest()[:16]}
