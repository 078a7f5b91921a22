"""The store's schema, declared once: an append-only list of steps, each written for SQLite and PostgreSQL.

Step N brings a store to schema version N on either backend, so version N names the same records on
both and an export bundle of version N imports into either. Never edit a step that has shipped: add
one, in both forms (an empty list where a backend has nothing to do). `schema.py` runs the steps and
derives from them what a store at version N holds. The PostgreSQL forms differ where PostgreSQL
does: identity ids, PL/pgSQL triggers for the counters, and a `"C"` collation on every text column,
so text compares and sorts byte by byte, as SQLite does.
"""

from __future__ import annotations

import dataclasses

from .postgres.counters import SHARDS_STEP


@dataclasses.dataclass(frozen=True)
class Step:
    """One schema step: what it brings (`name`) and its statements on each backend, run in order."""

    name: str
    sqlite: list[str]
    postgres: list[str]


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
"""The triggers that keep SQLite's trigram index (`memories_fts`) up to date, as step 1 made them. From
step 5 on, only where the store's limits let a user reach the size at which search asks the index
(`search.fit_index`): with them a put writes about twice the pages (an index segment per transaction)."""

DROP_SEARCH_INDEX: list[str] = [
    "DROP TRIGGER memories_fts_insert",
    "DROP TRIGGER memories_fts_delete",
    "DROP TRIGGER memories_fts_update",
    "INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')",
]
"""Stop keeping SQLite's trigram index and empty it (step 5, and `schema.drop_search_index`)."""


def _size_triggers(*tables: str) -> list[str]:
    """PostgreSQL: the triggers that keep `store_size` (step 1) counting every row of `tables`."""
    return [f"""CREATE TRIGGER {table}_size_{event.lower()} AFTER {event} ON {table}
        REFERENCING {transition} FOR EACH STATEMENT EXECUTE FUNCTION memkit_size_change()"""
            for table in tables
            for event, transition in (("INSERT", "NEW TABLE AS new_rows"), ("DELETE", "OLD TABLE AS old_rows"),
                                      ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"))]


STEPS: list[Step] = [
    # 1: One row per (user, kind, key); `key_fold`/`value_fold` hold Python's str.casefold() of key
    # and value, so SQL and the index see exactly what the search rule sees. The event history:
    # every create, update and delete, with the confirmation that allowed it. Quota counters kept
    # by triggers make a quota check one indexed read, not a count(*); on PostgreSQL they run once
    # per statement over its transition table (per row, a bulk insert piled up row versions for
    # minutes) and write only when it changed something, and the counting trigger sorts before the
    # size trigger, so locks come in the documented order (user, total, size; postgres.py).
    # PostgreSQL's size counter adds each row's text form plus its 24-byte header in the writing
    # transaction, exact however many writers race (pg_column_size would not take away on delete
    # what it added on insert). SQLite's FTS5 trigram index: see step 5; PostgreSQL's is no step
    # (pg_schema.ensure_search_index). The transcript keeps turns that left the live window, once.
    Step("memories, their event history, quota counters, the search index, the transcript archive", sqlite=[
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
        *SEARCH_INDEX_TRIGGERS,
        """CREATE TABLE transcript (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            turn INTEGER NOT NULL CHECK (turn >= 1),
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, session_id, turn)
        ) WITHOUT ROWID""",
    ], postgres=[
        'CREATE TABLE memkit_meta ("only" integer PRIMARY KEY CHECK ("only" = 1), schema_version integer NOT NULL)',
        """CREATE TABLE memories (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id text COLLATE "C" NOT NULL,
            kind text COLLATE "C" NOT NULL CHECK (kind IN ('preference', 'episode')),
            memory_key text COLLATE "C" NOT NULL,
            value text COLLATE "C" NOT NULL,
            source_session text COLLATE "C" NOT NULL,
            revision bigint NOT NULL CHECK (revision >= 1),
            created_at text COLLATE "C" NOT NULL,
            updated_at text COLLATE "C" NOT NULL,
            key_fold text COLLATE "C" NOT NULL,
            value_fold text COLLATE "C" NOT NULL,
            UNIQUE (user_id, kind, memory_key)
        )""",
        "CREATE INDEX memories_by_user_time ON memories (user_id, updated_at, id)",
        """CREATE TABLE memory_events (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id text COLLATE "C" NOT NULL,
            kind text COLLATE "C" NOT NULL,
            memory_key text COLLATE "C" NOT NULL,
            action text COLLATE "C" NOT NULL CHECK (action IN ('create', 'update', 'delete')),
            revision bigint NOT NULL,
            session_id text COLLATE "C",
            old_value text COLLATE "C",
            new_value text COLLATE "C",
            confirmation text COLLATE "C",
            at text COLLATE "C" NOT NULL
        )""",
        "CREATE INDEX memory_events_by_key ON memory_events (user_id, kind, memory_key, id)",
        'CREATE TABLE user_counts (user_id text COLLATE "C" PRIMARY KEY, records integer NOT NULL)',
        'CREATE TABLE total_count ("only" integer PRIMARY KEY CHECK ("only" = 1), records integer NOT NULL)',
        "INSERT INTO total_count VALUES (1, 0)",
        """CREATE FUNCTION memkit_count_insert() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        DECLARE
            added integer := (SELECT count(*) FROM new_rows);
        BEGIN
            IF added > 0 THEN
                INSERT INTO user_counts AS c SELECT user_id, count(*) FROM new_rows GROUP BY user_id
                    ON CONFLICT (user_id) DO UPDATE SET records = c.records + EXCLUDED.records;
                UPDATE total_count SET records = records + added;
            END IF;
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION memkit_count_delete() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        DECLARE
            removed integer := (SELECT count(*) FROM old_rows);
        BEGIN
            IF removed > 0 THEN
                UPDATE user_counts AS c SET records = c.records - gone.records
                    FROM (SELECT user_id, count(*) AS records FROM old_rows GROUP BY user_id) AS gone
                    WHERE c.user_id = gone.user_id;
                DELETE FROM user_counts WHERE records <= 0 AND user_id IN (SELECT user_id FROM old_rows);
                UPDATE total_count SET records = records - removed;
            END IF;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER memories_count_insert AFTER INSERT ON memories
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memkit_count_insert()""",
        """CREATE TRIGGER memories_count_delete AFTER DELETE ON memories
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memkit_count_delete()""",
        'CREATE TABLE store_size ("only" integer PRIMARY KEY CHECK ("only" = 1), bytes bigint NOT NULL)',
        "INSERT INTO store_size VALUES (1, 0)",
        """CREATE FUNCTION memkit_size_change() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        DECLARE
            change bigint := 0;
        BEGIN
            IF TG_OP <> 'DELETE' THEN
                change := change + (SELECT coalesce(sum(24 + octet_length(r::text)), 0) FROM new_rows AS r);
            END IF;
            IF TG_OP <> 'INSERT' THEN
                change := change - (SELECT coalesce(sum(24 + octet_length(r::text)), 0) FROM old_rows AS r);
            END IF;
            IF change <> 0 THEN
                UPDATE store_size SET bytes = bytes + change;
            END IF;
            RETURN NULL;
        END $$""",
        """CREATE TABLE transcript (
            user_id text COLLATE "C" NOT NULL,
            session_id text COLLATE "C" NOT NULL,
            turn bigint NOT NULL CHECK (turn >= 1),
            role text COLLATE "C" NOT NULL,
            content text COLLATE "C" NOT NULL,
            at text COLLATE "C" NOT NULL,
            PRIMARY KEY (user_id, session_id, turn)
        )""",
        *_size_triggers("memories", "memory_events", "transcript"),
    ]),
    # 2: the event history is append-only in the database itself, not only by convention. An UPDATE
    # is refused; a DELETE stays possible, because forget_user must remove a user's history too.
    Step("the event history refuses an UPDATE", sqlite=[
        """CREATE TRIGGER memory_events_append_only BEFORE UPDATE ON memory_events BEGIN
            SELECT RAISE(ABORT, 'memory_events is append-only: events are never changed');
        END""",
    ], postgres=[
        """CREATE FUNCTION memkit_refuse_event_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'memory_events is append-only: events are never changed';
        END $$""",
        """CREATE TRIGGER memory_events_append_only BEFORE UPDATE ON memory_events
            FOR EACH ROW EXECUTE FUNCTION memkit_refuse_event_change()""",
    ]),
    # 3: a sequence that only grows. SQLite keeps it in one row with the database's random id: every
    # write transaction takes a number (`SqliteDatabase.transaction`), so every WAL memkit writes
    # carries its own database's id, and a WAL beside another database is refused (`files.check_wal`).
    # PostgreSQL's sequence takes no lock: writers of different users never wait at it (id: step 11).
    Step("the store's sequence (and SQLite's database id)", sqlite=[
        """CREATE TABLE store_meta (
            only INTEGER PRIMARY KEY CHECK (only = 1),
            database_id TEXT NOT NULL,
            sequence INTEGER NOT NULL CHECK (sequence >= 0)
        )""",
        "INSERT INTO store_meta VALUES (1, lower(hex(randomblob(16))), 0)",
    ], postgres=[
        "CREATE SEQUENCE memkit_seq",
    ]),
    # 4: "newest first" is commit order (within a user on PostgreSQL): each record write takes the
    # next number of the sequence, kept in `seq`, so a clock that steps back cannot reorder records.
    # Existing rows are numbered in the order step 1 kept them in (updated_at, then id).
    Step("records numbered in commit order", sqlite=[
        "ALTER TABLE memories ADD COLUMN seq INTEGER NOT NULL DEFAULT 0",
        """UPDATE memories SET seq = ranked.n FROM (
            SELECT id, row_number() OVER (ORDER BY updated_at, id) AS n FROM memories
        ) AS ranked WHERE ranked.id = memories.id""",
        "UPDATE store_meta SET sequence = (SELECT count(*) FROM memories)",
        "CREATE INDEX memories_by_user_seq ON memories (user_id, seq)",
        "DROP INDEX memories_by_user_time",
    ], postgres=[
        "ALTER TABLE memories ADD COLUMN seq bigint NOT NULL DEFAULT 0",
        """UPDATE memories SET seq = ranked.n FROM (
            SELECT id, row_number() OVER (ORDER BY updated_at, id) AS n FROM memories
        ) AS ranked WHERE ranked.id = memories.id""",
        "SELECT setval('memkit_seq', greatest((SELECT count(*) FROM memories), 1), EXISTS (SELECT FROM memories))",
        "CREATE INDEX memories_by_user_seq ON memories (user_id, seq)",
        "DROP INDEX memories_by_user_time",
    ]),
    # 5: SQLite's trigram index is kept only where it can be used. With the default limits no user
    # can reach the size at which search asks it (fts_min_user_rows), yet every write kept it up to
    # date. The table stays; its triggers go, and it is emptied. A store adds them back at open where
    # its limits need the index (search.fit_index); search answers the same with or without it.
    # PostgreSQL's pg_trgm indexes are ordinary GIN indexes that search plans around: nothing to do.
    Step("SQLite's trigram index kept only where it can be used", sqlite=list(DROP_SEARCH_INDEX), postgres=[]),
    # 6: a delete retires the user's recent history. Every delete records when it happened here, in
    # the same transaction; a request's recent history leaves out the turns of the window from
    # before it (`History.view`), whichever process or window holds them.
    Step("a delete retires the user's recent history", sqlite=[
        """CREATE TABLE history_retired (
            user_id TEXT PRIMARY KEY,
            at TEXT NOT NULL
        ) WITHOUT ROWID""",
    ], postgres=[
        """CREATE TABLE history_retired (
            user_id text COLLATE "C" PRIMARY KEY,
            at text COLLATE "C" NOT NULL
        )""",
    ]),
    # 7: the store's own limits, one row per `Limits` field (store_limits.py). Recorded when the
    # store is made, or at the first write open of an older store; every open that passes no limits
    # of its own uses them. `memkit limits --set` changes them, never below what is stored.
    Step("the store's own limits", sqlite=[
        "CREATE TABLE store_limits (name TEXT PRIMARY KEY, value INTEGER NOT NULL CHECK (value >= 1)) WITHOUT ROWID",
    ], postgres=[
        "CREATE TABLE store_limits (name text PRIMARY KEY, value bigint NOT NULL CHECK (value >= 1))",
    ]),
    # 8: what the model proposed and a person has not yet approved or rejected, kept apart from the
    # memories (proposals.py). An id is never reused (AUTOINCREMENT, an identity): an old id named on
    # a command line never approves a newer proposal. `base_event` is the key's newest event id when
    # the proposal was made (NULL: none): a write or delete since adds one, and approval refuses it.
    Step("proposals awaiting a person's decision", sqlite=[
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
    ], postgres=[
        """CREATE TABLE proposals (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id text COLLATE "C" NOT NULL,
            session_id text COLLATE "C" NOT NULL,
            action text COLLATE "C" NOT NULL CHECK (action IN ('put', 'delete')),
            kind text COLLATE "C" NOT NULL CHECK (kind IN ('preference', 'episode')),
            memory_key text COLLATE "C" NOT NULL,
            value text COLLATE "C",
            base_value text COLLATE "C",
            base_revision bigint,
            base_event bigint,
            status text COLLATE "C" NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
            created_at text COLLATE "C" NOT NULL,
            expires_at text COLLATE "C" NOT NULL,
            decided_at text COLLATE "C",
            decided_by text COLLATE "C",
            CHECK ((action = 'put') = (value IS NOT NULL))
        )""",
        "CREATE INDEX proposals_by_user ON proposals (user_id, status, id)",
        *_size_triggers("proposals"),
    ]),
    # 9: retrieval by meaning: one vector per record, with the model that made it and its dimension
    # (another model's vector is stale, never compared), keyed by the record's id and carrying its
    # user, so a search reads one user's vectors through the index. A change of the value or a
    # delete removes it in the same statement (the triggers); the store's put writes the new one in
    # its transaction, and a write without an embedder leaves none (missing until `reindex`), never
    # a wrong one. PostgreSQL's `real[]` (not bytes) lets a search with pgvector rank in SQL.
    Step("one vector per record, for retrieval by meaning", sqlite=[
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
    ], postgres=[
        """CREATE TABLE memory_embeddings (
            memory_id bigint PRIMARY KEY,
            user_id text COLLATE "C" NOT NULL,
            model text COLLATE "C" NOT NULL,
            dim integer NOT NULL CHECK (dim >= 1),
            vector real[] NOT NULL CHECK (cardinality(vector) = dim)
        )""",
        "CREATE INDEX memory_embeddings_by_user ON memory_embeddings (user_id, model)",
        """CREATE FUNCTION memkit_embedding_drop() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        BEGIN
            DELETE FROM memory_embeddings WHERE memory_id = OLD.id;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER memory_embeddings_stale AFTER UPDATE OF value ON memories
            FOR EACH ROW EXECUTE FUNCTION memkit_embedding_drop()""",
        """CREATE TRIGGER memory_embeddings_gone AFTER DELETE ON memories
            FOR EACH ROW EXECUTE FUNCTION memkit_embedding_drop()""",
        *_size_triggers("memory_embeddings"),
    ]),
    # 10: the items of openai-agents sessions (`MemkitSession`), whole: one row per item as JSON,
    # numbered per user and session in order added. Apart from the transcript archive on purpose:
    # a framework's session pops and clears its items; the archive never changes a kept turn.
    Step("the items of openai-agents sessions", sqlite=[
        """CREATE TABLE agent_items (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            position INTEGER NOT NULL CHECK (position >= 1),
            item TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (user_id, session_id, position)
        ) WITHOUT ROWID""",
    ], postgres=[
        """CREATE TABLE agent_items (
            user_id text COLLATE "C" NOT NULL,
            session_id text COLLATE "C" NOT NULL,
            position bigint NOT NULL CHECK (position >= 1),
            item text COLLATE "C" NOT NULL,
            at text COLLATE "C" NOT NULL,
            PRIMARY KEY (user_id, session_id, position)
        )""",
        *_size_triggers("agent_items"),
    ]),
    # 11: window places: where this store's short-term windows live (a workspace's redis-server
    # folder, or a Redis server named without its password), noted the first time a window opens on
    # the store (`Store.note_window`), so forget_user reaches every one (`memkit.forgetting`).
    # PostgreSQL gets the store's id here (SQLite's is step 3's): window keys carry it, so two stores
    # on one Redis never share a window.
    Step("window places (and PostgreSQL's database id)", sqlite=[
        """CREATE TABLE window_places (
            place TEXT PRIMARY KEY,
            noted_at TEXT NOT NULL
        )""",
    ], postgres=[
        "ALTER TABLE memkit_meta ADD COLUMN database_id text COLLATE \"C\" NOT NULL"
        " DEFAULT replace(gen_random_uuid()::text, '-', '')",
        'CREATE TABLE window_places (place text COLLATE "C" PRIMARY KEY, noted_at text COLLATE "C" NOT NULL)',
    ]),
    # 12: SQLite's store-wide record count moves into `store_meta`, beside the sequence and the
    # database id. Every write transaction already writes that row (it takes a number of the
    # sequence), so a put of a new key or a delete now dirties one page fewer: the count and the
    # sequence share a page, and `total_count` (a table of one row, a page of its own) goes. The
    # quota check still reads the count inside `BEGIN IMMEDIATE`, and the triggers keep it exact as
    # before. PostgreSQL keeps its counters where they are (its writers take no store-wide row lock
    # for the sequence): nothing to do here.
    Step("SQLite's record count beside the sequence", sqlite=[
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
    ], postgres=[]),
    # 13: PostgreSQL's store-wide counters in shards: writers of different users commit side by side (pg_counters.py).
    Step("PostgreSQL's store-wide counters split into shards", sqlite=[], postgres=[*SHARDS_STEP]),
]
"""Every step, in order: step N is `STEPS[N - 1]`."""
