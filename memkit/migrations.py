"""The schema as an append-only list of steps; step N brings a file to `PRAGMA user_version = N`.

Never edit a step that has shipped: add a new one. Each step runs with its version bump in one
transaction (see `MemoryStore._migrate`), so a crash leaves a file at the old version or the new one.
"""

from __future__ import annotations

import functools
import sqlite3

MIGRATIONS: list[list[str]] = [
    # 1: memories, their event history, quota counters, the search index, the transcript archive.
    [
        # One row per (user, kind, key). `key_fold`/`value_fold` hold the case-folded text the
        # search rule compares (Python's str.casefold), so SQL and FTS see exactly what the rule sees.
        """CREATE TABLE memories (
            id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('preference', 'episode')),
            memory_key TEXT NOT NULL,
            value TEXT NOT NULL,
            source_session TEXT NOT NULL,
            revision INTEGER NOT NULL CHECK (revision >= 1),
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            key_fold TEXT NOT NULL,
            value_fold TEXT NOT NULL,
            UNIQUE (user_id, kind, memory_key)
        )""",
        "CREATE INDEX memories_by_user_time ON memories (user_id, updated_at)",
        # Append-only: every create, update and delete, with the confirmation that allowed it
        # (an import brings the exported events with it).
        """CREATE TABLE memory_events (
            id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            memory_key TEXT NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('create', 'update', 'delete')),
            revision INTEGER NOT NULL,
            session_id TEXT,
            old_value TEXT,
            new_value TEXT,
            confirmation TEXT,
            at TEXT NOT NULL
        )""",
        "CREATE INDEX memory_events_by_key ON memory_events (user_id, kind, memory_key, id)",
        # Quota counters kept by triggers, so a quota check is one indexed read, not a count(*).
        "CREATE TABLE user_counts (user_id TEXT PRIMARY KEY, records INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE TABLE total_count (only INTEGER PRIMARY KEY CHECK (only = 1), records INTEGER NOT NULL)",
        "INSERT INTO total_count VALUES (1, 0)",
        """CREATE TRIGGER memories_count_insert AFTER INSERT ON memories BEGIN
            INSERT INTO user_counts VALUES (new.user_id, 1)
                ON CONFLICT (user_id) DO UPDATE SET records = records + 1;
            UPDATE total_count SET records = records + 1;
        END""",
        """CREATE TRIGGER memories_count_delete AFTER DELETE ON memories BEGIN
            UPDATE user_counts SET records = records - 1 WHERE user_id = old.user_id;
            DELETE FROM user_counts WHERE user_id = old.user_id AND records <= 0;
            UPDATE total_count SET records = records - 1;
        END""",
        # Trigram index over the folded text: substring search that stays fast on large stores.
        """CREATE VIRTUAL TABLE memories_fts USING fts5 (
            key_fold, value_fold, content = 'memories', content_rowid = 'id',
            tokenize = 'trigram case_sensitive 1'
        )""",
        """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, key_fold, value_fold) VALUES (new.id, new.key_fold, new.value_fold);
        END""",
        """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, key_fold, value_fold)
                VALUES ('delete', old.id, old.key_fold, old.value_fold);
        END""",
        """CREATE TRIGGER memories_fts_update AFTER UPDATE OF key_fold, value_fold ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, key_fold, value_fold)
                VALUES ('delete', old.id, old.key_fold, old.value_fold);
            INSERT INTO memories_fts (rowid, key_fold, value_fold) VALUES (new.id, new.key_fold, new.value_fold);
        END""",
        # Short-term turns that left the live window (Redis or in-process), kept exactly once.
        """CREATE TABLE transcript (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            turn INTEGER NOT NULL CHECK (turn >= 1),
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, session_id, turn)
        ) WITHOUT ROWID""",
    ],
    # 2: the event history is append-only in the database itself, not only by convention. An UPDATE
    # is refused; a DELETE stays possible, because forget_user must remove a user's history too.
    [
        """CREATE TRIGGER memory_events_append_only BEFORE UPDATE ON memory_events BEGIN
            SELECT RAISE(ABORT, 'memory_events is append-only: events are never changed');
        END""",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)
"""The `user_version` a file has once every step has run."""

EXPECTED_TABLES: dict[str, set[str]] = {
    "memories": {"id", "user_id", "kind", "memory_key", "value", "source_session", "revision",
                 "created_at", "updated_at", "key_fold", "value_fold"},
    "memory_events": {"id", "user_id", "kind", "memory_key", "action", "revision", "session_id",
                      "old_value", "new_value", "confirmation", "at"},
    "user_counts": {"user_id", "records"},
    "total_count": {"only", "records"},
    "transcript": {"user_id", "session_id", "turn", "role", "content", "at"},
}
"""Tables and columns a file at any version must have (no step after the first adds columns);
checked at open to refuse foreign files."""


@functools.cache
def expected_objects(version: int = SCHEMA_VERSION) -> frozenset[tuple[str, str]]:
    """(type, name) of every table, index and trigger the first `version` steps make, SQLite's own excluded.

    Read from a scratch in-memory database built by the migrations themselves, so the check at open
    cannot drift from the schema: a file missing the search index or a counting trigger is refused,
    not silently used with wrong quotas or search results.
    """
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for steps in MIGRATIONS[:version]:
            for statement in steps:
                conn.execute(statement)
        return frozenset(
            (row[0], row[1]) for row in conn.execute("SELECT type, name FROM sqlite_master")
            if not row[1].startswith("sqlite_")
        )
    finally:
        conn.close()
