"""PostgreSQL's form of each schema step of `memkit/store/steps.py`, in the same order.

Step N here makes the same tables and columns as SQLite's step N, so version N names the same records
on both backends. The forms differ where PostgreSQL does: identity ids, PL/pgSQL triggers for the
counters, and a `"C"` collation on every text column, so text compares and sorts byte by byte, as
SQLite does. Never edit a step that has shipped: append one here whenever one is appended there (an
empty list where PostgreSQL has nothing to do). `schema.PgSchema` runs them.
"""

from __future__ import annotations

from .counters import MEASURED_BYTES_SQL, PENDING, SHARD_LOCK_CLASS, SHARDS


def _size_triggers(*tables: str) -> list[str]:
    """The triggers that keep the size counter (`store_size`, step 1) counting every row of `tables`."""
    return [f"""CREATE TRIGGER {table}_size_{event.lower()} AFTER {event} ON {table}
        REFERENCING {transition} FOR EACH STATEMENT EXECUTE FUNCTION memkit_size_change()"""
            for table in tables
            for event, transition in (("INSERT", "NEW TABLE AS new_rows"), ("DELETE", "OLD TABLE AS old_rows"),
                                      ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"))]


def _counting_functions(create: str, add_records: str, add_bytes: str) -> list[str]:
    """The counting triggers' functions (insert, delete, size), made by step 1 and replaced by step 13:
    they differ only in where a change goes (`add_records` and `add_bytes`, given the change as `{}`):
    step 1 adds it to the one-row counters, step 13 hands it to `memkit_count_change`."""
    head = f"{create} {{}}() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$"
    return [f"""{head.format("memkit_count_insert")}
        DECLARE
            added integer := (SELECT count(*) FROM new_rows);
        BEGIN
            IF added > 0 THEN
                INSERT INTO user_counts AS c SELECT user_id, count(*) FROM new_rows GROUP BY user_id
                    ON CONFLICT (user_id) DO UPDATE SET records = c.records + EXCLUDED.records;
                {add_records.format("added")};
            END IF;
            RETURN NULL;
        END $$""", f"""{head.format("memkit_count_delete")}
        DECLARE
            removed integer := (SELECT count(*) FROM old_rows);
        BEGIN
            IF removed > 0 THEN
                UPDATE user_counts AS c SET records = c.records - gone.records
                    FROM (SELECT user_id, count(*) AS records FROM old_rows GROUP BY user_id) AS gone
                    WHERE c.user_id = gone.user_id;
                DELETE FROM user_counts WHERE records <= 0 AND user_id IN (SELECT user_id FROM old_rows);
                {add_records.format("-removed")};
            END IF;
            RETURN NULL;
        END $$""", f"""{head.format("memkit_size_change")}
        DECLARE
            change bigint := 0;
        BEGIN
            IF TG_OP <> 'DELETE' THEN
                change := change + (SELECT coalesce(sum(24 + octet_length(r::text)), 0) FROM new_rows AS r);
            END IF;
            IF TG_OP <> 'INSERT' THEN
                change := change - (SELECT coalesce(sum(24 + octet_length(r::text)), 0) FROM old_rows AS r);
            END IF;
            {add_bytes.format("change")};
            RETURN NULL;
        END $$"""]


_COUNT_INSERT, _COUNT_DELETE, _SIZE_CHANGE = _counting_functions(
    "CREATE FUNCTION", "UPDATE total_count SET records = records + ({})",
    "IF {0} <> 0 THEN UPDATE store_size SET bytes = bytes + {0}; END IF")


PG_MIGRATIONS: list[list[str]] = [
    # 1: memories, their event history, the quota counters and the size counter, the transcript
    # archive, and `memkit_meta`, which holds the version. The counting triggers run once per
    # statement over its transition table and write only when it changed something; the size
    # counter adds each row's text form plus a 24-byte header (docs/design/postgres.md: why). The
    # trigram index is no step (`schema.ensure_search_index`).
    [
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
        _COUNT_INSERT,
        _COUNT_DELETE,
        """CREATE TRIGGER memories_count_insert AFTER INSERT ON memories
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memkit_count_insert()""",
        """CREATE TRIGGER memories_count_delete AFTER DELETE ON memories
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memkit_count_delete()""",
        'CREATE TABLE store_size ("only" integer PRIMARY KEY CHECK ("only" = 1), bytes bigint NOT NULL)',
        "INSERT INTO store_size VALUES (1, 0)",
        _SIZE_CHANGE,
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
    ],
    # 2: the event history refuses an UPDATE.
    [
        """CREATE FUNCTION memkit_refuse_event_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'memory_events is append-only: events are never changed';
        END $$""",
        """CREATE TRIGGER memory_events_append_only BEFORE UPDATE ON memory_events
            FOR EACH ROW EXECUTE FUNCTION memkit_refuse_event_change()""",
    ],
    # 3: the store's sequence; it takes no lock, so writers of different users never wait at it.
    [
        "CREATE SEQUENCE memkit_seq",
    ],
    # 4: records numbered in commit order (within a user).
    [
        "ALTER TABLE memories ADD COLUMN seq bigint NOT NULL DEFAULT 0",
        """UPDATE memories SET seq = ranked.n FROM (
            SELECT id, row_number() OVER (ORDER BY updated_at, id) AS n FROM memories
        ) AS ranked WHERE ranked.id = memories.id""",
        "SELECT setval('memkit_seq', greatest((SELECT count(*) FROM memories), 1), EXISTS (SELECT FROM memories))",
        "CREATE INDEX memories_by_user_seq ON memories (user_id, seq)",
        "DROP INDEX memories_by_user_time",
    ],
    # 5: nothing to do: the pg_trgm indexes are ordinary GIN indexes that search plans around.
    [],
    # 6: a delete retires the user's recent history.
    [
        """CREATE TABLE history_retired (
            user_id text COLLATE "C" PRIMARY KEY,
            at text COLLATE "C" NOT NULL
        )""",
    ],
    # 7: the store's own limits.
    [
        "CREATE TABLE store_limits (name text PRIMARY KEY, value bigint NOT NULL CHECK (value >= 1))",
    ],
    # 8: proposals awaiting a person's decision.
    [
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
    ],
    # 9: one vector per record, as `real[]`, so a search with pgvector ranks in SQL.
    [
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
    ],
    # 10: the items of openai-agents sessions.
    [
        """CREATE TABLE agent_items (
            user_id text COLLATE "C" NOT NULL,
            session_id text COLLATE "C" NOT NULL,
            position bigint NOT NULL CHECK (position >= 1),
            item text COLLATE "C" NOT NULL,
            at text COLLATE "C" NOT NULL,
            PRIMARY KEY (user_id, session_id, position)
        )""",
        *_size_triggers("agent_items"),
    ],
    # 11: window places, and the store's id (SQLite's is step 3's): window keys carry it.
    [
        "ALTER TABLE memkit_meta ADD COLUMN database_id text COLLATE \"C\" NOT NULL"
        " DEFAULT replace(gen_random_uuid()::text, '-', '')",
        'CREATE TABLE window_places (place text COLLATE "C" PRIMARY KEY, noted_at text COLLATE "C" NOT NULL)',
    ],
    # 12: nothing to do: PostgreSQL keeps its counters where they are.
    [],
    # 13: the store-wide counters split into shards, so writers of different users commit side by
    # side (`counters.settle`; docs/design/postgres.md). `total_count` and `store_size` stay, as views
    # of the shards' sums with the columns the tables had.
    [
        """CREATE TABLE memkit_shards (
            shard integer PRIMARY KEY CHECK (shard >= 0),
            records bigint NOT NULL,
            bytes bigint NOT NULL,
            records_cap bigint,
            records_allowed bigint,
            bytes_cap bigint,
            bytes_allowed bigint
        )""",
        f"""INSERT INTO memkit_shards (shard, records, bytes)
            SELECT s, CASE WHEN s = 0 THEN (SELECT records FROM total_count) ELSE 0 END,
                      CASE WHEN s = 0 THEN {MEASURED_BYTES_SQL} ELSE 0 END
            FROM generate_series(0, {SHARDS - 1}) AS s""",
        f"""CREATE FUNCTION memkit_count_change(records_change bigint, bytes_change bigint) RETURNS void
            LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        BEGIN
            IF records_change = 0 AND bytes_change = 0 THEN
                RETURN;
            END IF;
            IF current_setting('memkit_tx.settles', true) = 'on' THEN
                IF records_change <> 0 THEN
                    PERFORM set_config('memkit_tx.pending_records',
                                       ({PENDING.format('records')} + records_change)::text, true);
                END IF;
                IF bytes_change <> 0 THEN
                    PERFORM set_config('memkit_tx.pending_bytes',
                                       ({PENDING.format('bytes')} + bytes_change)::text, true);
                END IF;
                RETURN;
            END IF;
            PERFORM pg_advisory_xact_lock({SHARD_LOCK_CLASS}, hashtext(current_schema()));
            PERFORM 1 FROM memkit_shards ORDER BY shard FOR UPDATE;
            UPDATE memkit_shards SET records = records + CASE WHEN shard = 0 THEN records_change ELSE 0 END,
                                     bytes = bytes + CASE WHEN shard = 0 THEN bytes_change ELSE 0 END,
                                     records_allowed = NULL, bytes_allowed = NULL;
        END $$""",
        f"""CREATE FUNCTION memkit_settle(quota_records bigint, quota_bytes bigint, check_bytes boolean,
            OUT pending_records bigint,
            OUT pending_bytes bigint, OUT pending_checking bigint, OUT held_shard integer, OUT taken_shard integer)
            LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        BEGIN
            pending_records := {PENDING.format('records')};
            pending_bytes := {PENDING.format('bytes')};
            pending_checking := {PENDING.format('checking')};
            held_shard := nullif(current_setting('memkit_tx.shard', true), '')::integer;
            IF pending_records = 0 AND pending_bytes = 0 AND pending_checking = 0 THEN
                RETURN;
            END IF;
            BEGIN
                UPDATE memkit_shards AS s SET records = s.records + pending_records, bytes = s.bytes + pending_bytes
                    WHERE s.shard = (
                        SELECT f.shard FROM memkit_shards AS f
                        WHERE ((pending_records <= 0 AND pending_checking = 0)
                               OR (f.records_cap = quota_records AND f.records + pending_records <= f.records_allowed))
                          AND ((pending_bytes <= 0 AND NOT check_bytes)
                               OR (f.bytes_cap = quota_bytes AND f.bytes + pending_bytes <= f.bytes_allowed))
                        ORDER BY (f.shard + {SHARDS} - pg_backend_pid() % {SHARDS}) % {SHARDS}
                        LIMIT 1 FOR UPDATE SKIP LOCKED)
                    RETURNING s.shard INTO taken_shard;
                IF taken_shard IS NULL THEN
                    RAISE EXCEPTION 'no free shard takes the change' USING ERRCODE = 'MK001';
                END IF;
            EXCEPTION WHEN SQLSTATE 'MK001' THEN
                RETURN;
            END;
            PERFORM set_config('memkit_tx.pending_records', '0', true),
                    set_config('memkit_tx.pending_bytes', '0', true),
                    set_config('memkit_tx.pending_checking', '0', true),
                    set_config('memkit_tx.shard', taken_shard::text, true);
        END $$""",
        *_counting_functions("CREATE OR REPLACE FUNCTION", "PERFORM memkit_count_change({}, 0)",
                             "PERFORM memkit_count_change(0, {})"),
        "DROP TABLE total_count",
        'CREATE VIEW total_count AS SELECT 1 AS "only", sum(records)::integer AS records FROM memkit_shards',
        "DROP TABLE store_size",
        'CREATE VIEW store_size AS SELECT 1 AS "only", sum(bytes)::bigint AS bytes FROM memkit_shards',
    ],
    # 14: the table of the store's own short-term window (`memkit.window.store_window`), so version 14
    # names the same tables on both backends. A PostgreSQL store's chat keeps its window in Redis, so
    # it stays empty here; no size triggers (step 13 fixed the tables the size counter measures).
    [
        """CREATE TABLE window_turns (
            user_id text COLLATE "C" NOT NULL,
            session_id text COLLATE "C" NOT NULL,
            turn bigint NOT NULL CHECK (turn >= 1),
            role text COLLATE "C" NOT NULL,
            content text COLLATE "C" NOT NULL,
            at text COLLATE "C" NOT NULL,
            expires_at text COLLATE "C" NOT NULL,
            PRIMARY KEY (user_id, session_id, turn)
        )""",
    ],
    # 15: nothing to do: SQLite clusters its records and their history by key and numbers them from
    # its sequence, so that a write dirties fewer pages; PostgreSQL's heap tables and their indexes
    # stay as they are (its ids come from their identity columns), and version 15 names the same
    # records on both backends.
    [],
]
"""PostgreSQL's statements of each step: `PG_MIGRATIONS[N - 1]` brings a namespace to version N."""
