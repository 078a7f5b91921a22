"""The SQLite schema: an append-only list of steps, the runner that applies them, the check at open.

Step N brings a file to `PRAGMA user_version = N`. Never edit a step that has shipped: add a new one.
Each step runs with its version bump in one transaction (`migrate`), so a crash leaves a file at the
old version or the new one. What a file at version N must hold is derived from the steps themselves
(`expected_objects`), so the check at open cannot drift from the schema.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from ..errors import StoreError

SEARCH_INDEX_TRIGGERS: list[str] = [
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
]
"""The triggers that keep the trigram index (`memories_fts`) up to date, as step 1 made them.

From step 5 on, a file has them only where its store's limits let a user reach the size at which
search asks the index (`search.fit_index`); elsewhere the index stays empty and no write touches it.
With them a put writes about twice the pages (a new index segment per transaction)."""

DROP_SEARCH_INDEX: list[str] = [
    "DROP TRIGGER memories_fts_insert",
    "DROP TRIGGER memories_fts_delete",
    "DROP TRIGGER memories_fts_update",
    "INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')",
]
"""Stop keeping the trigram index and empty it (step 5, and `drop_search_index`)."""

MIGRATIONS: list[list[str]] = [
    # 1: memories, their event history, quota counters, the search index, the transcript archive.
    # (Step 5 makes the index's triggers optional: see SEARCH_INDEX_TRIGGERS.)
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
        *SEARCH_INDEX_TRIGGERS,
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
    # 3: the database's own facts, in one row: a random id, made once, and a sequence that only grows.
    # Every write transaction takes the next number (`SqliteDatabase.transaction`), so every commit
    # writes this row, and every WAL memkit writes carries the id of its own database: a WAL found
    # beside another database is recognised and refused (`files.check_wal`).
    [
        """CREATE TABLE store_meta (
            only INTEGER PRIMARY KEY CHECK (only = 1),
            database_id TEXT NOT NULL,
            sequence INTEGER NOT NULL CHECK (sequence >= 0)
        )""",
        "INSERT INTO store_meta VALUES (1, lower(hex(randomblob(16))), 0)",
    ],
    # 4: "newest first" is commit order: each record write takes the next number of the sequence,
    # kept in `seq`, so a clock that steps back cannot reorder records. Existing rows are numbered
    # in the order step 1 kept them in (updated_at, then id).
    [
        "ALTER TABLE memories ADD COLUMN seq INTEGER NOT NULL DEFAULT 0",
        """UPDATE memories SET seq = ranked.n FROM (
            SELECT id, row_number() OVER (ORDER BY updated_at, id) AS n FROM memories
        ) AS ranked WHERE ranked.id = memories.id""",
        "UPDATE store_meta SET sequence = (SELECT count(*) FROM memories)",
        "CREATE INDEX memories_by_user_seq ON memories (user_id, seq)",
        "DROP INDEX memories_by_user_time",
    ],
    # 5: the trigram index is kept only where it can be used. With the default limits no user can
    # reach the size at which search asks it (fts_min_user_rows), yet every write kept it up to date.
    # The table stays; its triggers go, and it is emptied. A store adds them back at open where its
    # limits need the index (search.fit_index); search answers the same with or without it.
    list(DROP_SEARCH_INDEX),
    # 6: a delete retires the user's recent history. Every delete records when it
    # happened here, in the same transaction; a request's recent history leaves out the turns of the
    # window from before it (`History.view`), whichever process or window holds them.
    [
        """CREATE TABLE history_retired (
            user_id TEXT PRIMARY KEY,
            at TEXT NOT NULL
        ) WITHOUT ROWID""",
    ],
    # 7: the store's own limits, one row per `Limits` field (store_limits.py). Recorded when the
    # store is made, or at the first write open of an older store; every open that passes no limits
    # of its own uses them. `memkit limits --set` changes them, never below what is stored.
    [
        "CREATE TABLE store_limits (name TEXT PRIMARY KEY, value INTEGER NOT NULL CHECK (value >= 1)) WITHOUT ROWID",
    ],
    # 8: what the model proposed and a person has not yet approved or rejected: one row per
    # proposal, kept apart from the memories (a proposal is never a memory until a person approves it;
    # see proposals.py). AUTOINCREMENT: an id is never reused, so an old id named on a command line
    # can never approve a newer proposal. `base_event` is the id of the key's newest event when the
    # proposal was made (NULL when the key had none): any write or delete of the key since adds an
    # event, so an approval compares the two and refuses a stale proposal.
    [
        """CREATE TABLE proposals (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('put', 'delete')),
            kind TEXT NOT NULL CHECK (kind IN ('preference', 'episode')),
            memory_key TEXT NOT NULL,
            value TEXT,
            base_value TEXT,
            base_revision INTEGER,
            base_event INTEGER,
            status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            decided_at TEXT,
            decided_by TEXT,
            CHECK ((action = 'put') = (value IS NOT NULL))
        )""",
        "CREATE INDEX proposals_by_user ON proposals (user_id, status, id)",
    ],
    # 9: retrieval by meaning: one vector per record, kept beside it, with the model that
    # made it and its dimension (a vector of another model is stale, never compared). Keyed by the
    # record's id and carrying its user, so a search by meaning reads one user's vectors through
    # the index and never another's. A vector belongs to the value it was made from: a change of
    # the value or a delete removes it in the same statement (the triggers), and the store's put
    # writes the new one in the same transaction; a write without an embedder leaves the record
    # without one (counted as missing until `reindex`), never with a wrong one.
    [
        """CREATE TABLE memory_embeddings (
            memory_id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL CHECK (dim >= 1),
            vector BLOB NOT NULL CHECK (length(vector) = 4 * dim)
        )""",
        "CREATE INDEX memory_embeddings_by_user ON memory_embeddings (user_id, model)",
        """CREATE TRIGGER memory_embeddings_stale AFTER UPDATE OF value ON memories BEGIN
            DELETE FROM memory_embeddings WHERE memory_id = old.id;
        END""",
        """CREATE TRIGGER memory_embeddings_gone AFTER DELETE ON memories BEGIN
            DELETE FROM memory_embeddings WHERE memory_id = old.id;
        END""",
    ],
    # 10: the items of openai-agents sessions (`MemkitSession`), kept whole: one row per
    # item as JSON text, numbered per user and session in the order they were added. Apart from the
    # transcript archive on purpose: a framework's session pops and clears its items; the archive
    # never changes a kept turn.
    [
        """CREATE TABLE agent_items (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            position INTEGER NOT NULL CHECK (position >= 1),
            item TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, session_id, position)
        ) WITHOUT ROWID""",
    ],
    # 11: window places: where this store's short-term windows live. A window notes its place the
    # first time it is opened on the store (`MemoryStore.note_window`): a workspace's redis-server
    # folder, or a Redis server named without its password. forget_user reaches every one of them,
    # wherever and in whatever shell it runs (`memkit.forgetting`).
    [
        """CREATE TABLE window_places (
            place TEXT PRIMARY KEY,
            noted_at TEXT NOT NULL
        )""",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)
"""The `user_version` a file has once every step has run."""

CORE_TABLES = ("memories", "memory_events", "user_counts", "total_count", "transcript")
"""The tables of step 1, checked column by column at open; a file at any version must have them."""


@functools.cache
def _scratch(version: int) -> tuple[frozenset[tuple[str, str]], dict[str, frozenset[str]]]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for steps in MIGRATIONS[:version]:
            for statement in steps:
                conn.execute(statement)
        columns = {table: frozenset(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
                   for table in CORE_TABLES}
        return frozenset(_objects(conn)), columns
    finally:
        conn.close()


def expected_objects(version: int = SCHEMA_VERSION) -> frozenset[tuple[str, str]]:
    """(type, name) of every table, index and trigger the first `version` steps make, SQLite's own excluded.

    Read from a scratch in-memory database built by the migrations themselves, so the check at open
    cannot drift from the schema: a file missing the search index or a counting trigger is refused,
    not silently used with wrong quotas or search results.
    """
    return _scratch(version)[0]


def expected_columns(version: int = SCHEMA_VERSION) -> dict[str, frozenset[str]]:
    """The columns of each core table after the first `version` steps, read from the same scratch database."""
    return _scratch(version)[1]


def database_id(conn: sqlite3.Connection) -> str | None:
    """The database's id (step 3), or None for a file made before it."""
    try:
        row = conn.execute("SELECT database_id FROM store_meta").fetchone()
    except sqlite3.OperationalError:
        return None
    return str(row[0]) if row else None


def meta_root_page(conn: sqlite3.Connection) -> int | None:
    """The page that holds the `store_meta` row (a one-row table fits its root page), or None before step 3."""
    row = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'store_meta'").fetchone()
    return int(row[0]) if row else None


SEARCH_INDEX_OBJECTS = frozenset(("trigger", name) for name in
                                  ("memories_fts_insert", "memories_fts_delete", "memories_fts_update"))
"""What `SEARCH_INDEX_TRIGGERS` makes: a file at version 5 or later has all of them or none."""


def has_search_index(conn: sqlite3.Connection) -> bool:
    """Whether the file keeps the trigram index up to date (its triggers are there)."""
    names = [name for _, name in SEARCH_INDEX_OBJECTS]
    found = conn.execute(f"SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN "
                         f"({', '.join('?' * len(names))})", names).fetchone()[0]
    return bool(found)


def build_search_index(conn: sqlite3.Connection) -> None:
    """Add the triggers and fill the index from the memories (inside the caller's write transaction)."""
    for statement in SEARCH_INDEX_TRIGGERS:
        conn.execute(statement)
    conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")


def drop_search_index(conn: sqlite3.Connection) -> None:
    """Drop the triggers and empty the index, as step 5 does (inside the caller's write transaction)."""
    for statement in DROP_SEARCH_INDEX:
        conn.execute(statement)


def _objects(conn: sqlite3.Connection) -> set[tuple[str, str]]:
    return {
        (row[0], row[1]) for row in conn.execute("SELECT type, name FROM sqlite_master")
        if not row[1].startswith("sqlite_")
    }


def check_schema(conn: sqlite3.Connection, path: Path, check_integrity: bool) -> None:
    """Refuse a file that is not a sound memkit database at this or an older schema version.

    Raises:
        StoreError: corrupt, newer, another program's, or missing what its version's steps made.
        sqlite3.Error: reading the file failed (the caller names the file and the cause).
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    # Any table, view, index or trigger, not only tables: a file holding only another program's
    # views is still theirs, and the migrations must not be run into it.
    objects = {name for _, name in _objects(conn)}
    if check_integrity:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise StoreError(f"{path} is corrupt (quick_check: {problems[0]}); memkit left it as it was")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version}, newer than this memkit knows ({SCHEMA_VERSION}); "
            "upgrade memkit to open it. The file was not changed"
        )
    if version < 0:
        raise StoreError(f"{path} has a malformed schema version ({version}); memkit left it as it was")
    application_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if version == 0 and application_id != 0:
        raise StoreError(
            f"{path} is marked as another program's file (application_id {application_id}); "
            "memkit left it as it was"
        )
    if version == 0 and objects:
        raise StoreError(
            f"{path} holds tables of another program ({', '.join(sorted(objects)[:5])}) and no memkit "
            "schema version; memkit left it as it was"
        )
    if version >= 1:  # a memkit file at this or an older version: it must hold what its steps made
        present = _objects(conn)
        made = set(expected_objects(version))
        if version >= 5 and present & SEARCH_INDEX_OBJECTS:
            made |= SEARCH_INDEX_OBJECTS  # the index's upkeep is optional, but whole or not at all
        missing_objects = sorted(made - present)
        if missing_objects:
            names = ", ".join(f"{kind} {name!r}" for kind, name in missing_objects[:5])
            raise StoreError(
                f"{path} says schema version {version} but lacks {names}; "
                "it is malformed and memkit left it as it was"
            )
        for table, expected in expected_columns(version).items():
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if not expected <= columns:
                missing = ", ".join(sorted(expected - columns))
                raise StoreError(
                    f"{path} says schema version {version} but table {table!r} lacks {missing}; "
                    "it is malformed and memkit left it as it was"
                )


def migrate(conn: sqlite3.Connection) -> None:
    """Run the missing steps, each with its version bump in one transaction.

    The version is read again after `BEGIN IMMEDIATE`: another process may have run the step
    while this one waited for the lock, and running it twice would fail half-way.
    """
    if conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
        return  # the common case takes no write lock, so opening works while another writes
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version >= SCHEMA_VERSION:
                conn.execute("COMMIT")
                return
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
