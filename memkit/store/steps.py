"""The store's schema, read top to bottom: an append-only list of named steps (SQLite's SQL).

Step N brings a file to `PRAGMA user_version = N`; `schema.py` runs each step with its version bump
in one transaction, and derives from the steps what a file at version N must hold. Never edit a step
that has shipped: append one. PostgreSQL runs the same steps in its own SQL
(`memkit/store/postgres/steps.py`), so version N names the same records on both backends. More on
why the steps are as they are: docs/design/schema.md.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Step:
    """One schema step: what it brings (`name`) and its SQL statements, run in order."""

    name: str
    statements: list[str]


APPEND_ONLY = """CREATE TRIGGER memory_events_append_only BEFORE UPDATE ON memory_events BEGIN
            SELECT RAISE(ABORT, 'memory_events is append-only: events are never changed');
        END"""
"""Step 2's trigger (and step 15's, which rebuilds the table)."""

VECTOR_TRIGGERS = [
    """CREATE TRIGGER memory_embeddings_stale AFTER UPDATE OF value ON memories BEGIN
            DELETE FROM memory_embeddings WHERE memory_id = old.id;
        END""",
    """CREATE TRIGGER memory_embeddings_gone AFTER DELETE ON memories BEGIN
            DELETE FROM memory_embeddings WHERE memory_id = old.id;
        END""",
]
"""Step 9's triggers (and step 15's): a vector goes with the value it was made from."""

STEPS: list[Step] = [
    # 1: a memory is one row of `memories`, and there is at most one row per (user, kind, key): the
    # UNIQUE constraint makes a second put of a key update that row (revision + 1), never add one.
    # Every create, update and delete also appends a row to `memory_events`, with the old value, the
    # new one and the confirmation that allowed it: the history a person can audit (step 2 makes it
    # append-only). `key_fold`/`value_fold` hold str.casefold() of key and value, so SQL sees what
    # the search rule sees. Bookkeeping follows: record counts kept by triggers (a quota check is
    # one indexed read, not a count(*)), the trigram search index (see step 5), and the transcript
    # archive, which keeps each turn that left the live window, once.
    Step("memories, their event history, quota counters, the search index, the transcript archive", [
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
        """CREATE TABLE transcript (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            turn INTEGER NOT NULL CHECK (turn >= 1),
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, session_id, turn)
        ) WITHOUT ROWID""",
    ]),
    # 2: the history is append-only in the database itself; a DELETE stays (forget_user needs it).
    Step("the event history refuses an UPDATE", [
        APPEND_ONLY,
    ]),
    # 3: a sequence that only grows, in one row with the database's random id. Every write
    # transaction takes a number, so every WAL memkit writes carries its database's id, and a WAL
    # beside another database is refused (`files.check_wal`).
    Step("the store's sequence and the database's id", [
        """CREATE TABLE store_meta (
            only INTEGER PRIMARY KEY CHECK (only = 1),
            database_id TEXT NOT NULL,
            sequence INTEGER NOT NULL CHECK (sequence >= 0)
        )""",
        "INSERT INTO store_meta VALUES (1, lower(hex(randomblob(16))), 0)",
    ]),
    # 4: "newest first" is commit order (`seq`, from the sequence): a clock that steps back cannot
    # reorder records.
    Step("records numbered in commit order", [
        "ALTER TABLE memories ADD COLUMN seq INTEGER NOT NULL DEFAULT 0",
        """UPDATE memories SET seq = ranked.n FROM (
            SELECT id, row_number() OVER (ORDER BY updated_at, id) AS n FROM memories
        ) AS ranked WHERE ranked.id = memories.id""",
        "UPDATE store_meta SET sequence = (SELECT count(*) FROM memories)",
        "CREATE INDEX memories_by_user_seq ON memories (user_id, seq)",
        "DROP INDEX memories_by_user_time",
    ]),
    # 5: a store adds the index's triggers back at open only where search may ask it
    # (search_index.py); search answers the same with or without it.
    Step("SQLite's trigram index kept only where it can be used", [
        "DROP TRIGGER memories_fts_insert",
        "DROP TRIGGER memories_fts_delete",
        "DROP TRIGGER memories_fts_update",
        "INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')",
    ]),
    # 6: a request's recent history leaves out the turns from before the user's last delete
    # (`History.view`), whichever process or window holds them.
    Step("a delete retires the user's recent history", [
        """CREATE TABLE history_retired (
            user_id TEXT PRIMARY KEY,
            at TEXT NOT NULL
        ) WITHOUT ROWID""",
    ]),
    # 7: every open that passes no limits of its own uses the store's (recorded_limits.py).
    Step("the store's own limits", [
        "CREATE TABLE store_limits (name TEXT PRIMARY KEY, value INTEGER NOT NULL CHECK (value >= 1)) WITHOUT ROWID",
    ]),
    # 8: proposals, apart from the memories (proposals.py). AUTOINCREMENT: an old id named on a
    # command line never approves a newer proposal. `base_event`: the key's newest event id then; a
    # write or delete since adds one, and approval refuses it.
    Step("proposals awaiting a person's decision", [
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
    ]),
    # 9: retrieval by meaning (embeddings.py). Another model's vector is stale, never compared; the
    # triggers remove a vector with its value, so a record has no vector rather than a wrong one.
    Step("one vector per record, for retrieval by meaning", [
        """CREATE TABLE memory_embeddings (
            memory_id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL CHECK (dim >= 1),
            vector BLOB NOT NULL CHECK (length(vector) = 4 * dim)
        )""",
        "CREATE INDEX memory_embeddings_by_user ON memory_embeddings (user_id, model)",
        *VECTOR_TRIGGERS,
    ]),
    # 10: openai-agents session items (`MemkitSession`), apart from the transcript on purpose: a
    # framework's session pops and clears its items; the archive never changes a kept turn.
    Step("the items of openai-agents sessions", [
        """CREATE TABLE agent_items (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            position INTEGER NOT NULL CHECK (position >= 1),
            item TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, session_id, position)
        ) WITHOUT ROWID""",
    ]),
    # 11: where this store's short-term windows live (`Store.note_window`), so forget_user reaches
    # every one (`memkit.forgetting`).
    Step("window places (and PostgreSQL's database id)", [
        """CREATE TABLE window_places (
            place TEXT PRIMARY KEY,
            noted_at TEXT NOT NULL
        )""",
    ]),
    # 12: the store-wide count joins the sequence in `store_meta`, which every write transaction
    # already writes: a put of a new key or a delete dirties one page fewer.
    Step("SQLite's record count beside the sequence", [
        "ALTER TABLE store_meta ADD COLUMN records INTEGER NOT NULL DEFAULT 0",
        "UPDATE store_meta SET records = (SELECT records FROM total_count)",
        "DROP TRIGGER memories_count_insert",
        "DROP TRIGGER memories_count_delete",
        """CREATE TRIGGER memories_count_insert AFTER INSERT ON memories BEGIN
            INSERT INTO user_counts VALUES (new.user_id, 1)
                ON CONFLICT (user_id) DO UPDATE SET records = records + 1;
            UPDATE store_meta SET records = records + 1;
        END""",
        """CREATE TRIGGER memories_count_delete AFTER DELETE ON memories BEGIN
            UPDATE user_counts SET records = records - 1 WHERE user_id = old.user_id;
            DELETE FROM user_counts WHERE user_id = old.user_id AND records <= 0;
            UPDATE store_meta SET records = records - 1;
        END""",
        "DROP TABLE total_count",
    ]),
    # 13: nothing to do on SQLite (PostgreSQL splits its store-wide counters into shards): the step
    # keeps version N the same on both backends.
    Step("PostgreSQL's store-wide counters split into shards", []),
    # 14: the store's own short-term window (`memkit.window.store_window`), beside the transcript, so
    # one transaction moves a turn from one to the other exactly once.
    Step("the store's own short-term window", [
        """CREATE TABLE window_turns (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            turn INTEGER NOT NULL CHECK (turn >= 1),
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            PRIMARY KEY (user_id, session_id, turn)
        ) WITHOUT ROWID""",
    ]),
    # 15: each table a write touches is kept in the order it is looked up in (one page each, not a
    # table page and an index page); ids from the sequence. Why, and the cost: docs/design/schema.md.
    Step("records and their history clustered by key, ids from the sequence, the retire mark beside the count", [
        *(f"DROP TRIGGER IF EXISTS memories_fts_{change}" for change in ("insert", "delete", "update")),
        "INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')",  # step 5: index and triggers go together
        """CREATE TABLE memories_by_key (id INTEGER NOT NULL, user_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('preference', 'episode')), memory_key TEXT NOT NULL,
            value TEXT NOT NULL, source_session TEXT NOT NULL, revision INTEGER NOT NULL CHECK (revision >= 1),
            created_at TEXT NOT NULL, updated_at TEXT NOT NULL, key_fold TEXT NOT NULL, value_fold TEXT NOT NULL,
            seq INTEGER NOT NULL, PRIMARY KEY (user_id, kind, memory_key)) WITHOUT ROWID""",
        "INSERT INTO memories_by_key SELECT id, user_id, kind, memory_key, value, source_session, revision,"
        " created_at, updated_at, key_fold, value_fold, seq FROM memories",
        "DROP TABLE memories",
        "ALTER TABLE memories_by_key RENAME TO memories",
        "DROP INDEX memory_events_by_key",  # the table of that name holds its order now
        """CREATE TABLE memory_events_by_key (id INTEGER NOT NULL, user_id TEXT NOT NULL, kind TEXT NOT NULL,
            memory_key TEXT NOT NULL, action TEXT NOT NULL CHECK (action IN ('create', 'update', 'delete')),
            revision INTEGER NOT NULL, session_id TEXT, old_value TEXT, new_value TEXT, confirmation TEXT,
            at TEXT NOT NULL, PRIMARY KEY (user_id, kind, memory_key, id)) WITHOUT ROWID""",
        "INSERT INTO memory_events_by_key SELECT id, user_id, kind, memory_key, action, revision, session_id,"
        " old_value, new_value, confirmation, at FROM memory_events",
        "DROP TABLE memory_events",
        "ALTER TABLE memory_events_by_key RENAME TO memory_events",
        # numbers already given as rowids are never given again
        "UPDATE store_meta SET sequence = max(sequence, (SELECT coalesce(max(id), 0) FROM memories),"
        " (SELECT coalesce(max(id), 0) FROM memory_events))",
        "ALTER TABLE user_counts ADD COLUMN retired_at TEXT",
        "INSERT INTO user_counts (user_id, records, retired_at) SELECT user_id, 0, at FROM history_retired WHERE true"
        " ON CONFLICT (user_id) DO UPDATE SET retired_at = excluded.retired_at",
        "DROP TABLE history_retired",
        "CREATE VIEW history_retired AS SELECT user_id, retired_at AS at FROM user_counts WHERE retired_at IS NOT NULL",
        APPEND_ONLY, *VECTOR_TRIGGERS,
        """CREATE TRIGGER memories_count_insert AFTER INSERT ON memories BEGIN
            INSERT INTO user_counts (user_id, records) VALUES (new.user_id, 1)
                ON CONFLICT (user_id) DO UPDATE SET records = records + 1;
            UPDATE store_meta SET records = records + 1;
        END""",
        """CREATE TRIGGER memories_count_delete AFTER DELETE ON memories BEGIN
            UPDATE user_counts SET records = records - 1 WHERE user_id = old.user_id;
            DELETE FROM user_counts WHERE user_id = old.user_id AND records <= 0 AND retired_at IS NULL;
            UPDATE store_meta SET records = records - 1;
        END""",
    ]),
]
"""Every step, in order: step N is `STEPS[N - 1]`. Append a step here, and its PostgreSQL form to
`memkit/store/postgres/steps.py`."""
