"""The PostgreSQL schema: an append-only list of steps, the runner, the check at open, the search index.

The tables, columns and rules are SQLite's (`schema.py`), so the store's SQL and its export bundles
are the same on both; what differs is written the PostgreSQL way: identity ids, PL/pgSQL triggers
that keep the quota counters and the size counter, and a `"C"` collation on every text column, so
text compares and sorts byte by byte, as SQLite does.

The store's tables live in one PostgreSQL schema (a namespace; `public` unless chosen), and its
version in the one-row table `memkit_meta`. Step N brings the namespace to version N; each step and
its version bump run in one transaction, under an advisory lock, so concurrent openers run a
step once and a crash leaves the old version or the new one (PostgreSQL's DDL is transactional).

The trigram indexes (`pg_trgm`) are no step: they exist only where the server has the extension, so
they are made at open where they can be and are absent elsewhere; searches give the same answers
either way.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator

import psycopg

from ..errors import StoreError, ValidationError
from .pg_connection import PgConnection

# Counter triggers run once per statement, over its transition table: a counter row updated once
# per row of a bulk insert would pile up row versions inside one transaction (thousands of rows
# took minutes). Each writes only when its statement changed something, so a writer that changes
# nothing takes no counter row lock. The store writes one user per statement; the counting trigger
# sorts before the size trigger, so locks are taken in the documented order (user, total, size).
_SIZE_TRIGGERS = [
    f"""CREATE TRIGGER {table}_size_{event.lower()} AFTER {event} ON {table}
        REFERENCING {transition} FOR EACH STATEMENT EXECUTE FUNCTION memkit_size_change()"""
    for table in ("memories", "memory_events", "transcript")
    for event, transition in (("INSERT", "NEW TABLE AS new_rows"), ("DELETE", "OLD TABLE AS old_rows"),
                              ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"))
]

PG_MIGRATIONS: list[list[str]] = [
    # 1: memories, their event history, quota and size counters, the transcript archive.
    [
        'CREATE TABLE memkit_meta ("only" integer PRIMARY KEY CHECK ("only" = 1), schema_version integer NOT NULL)',
        # One row per (user, kind, key); key_fold/value_fold hold Python's str.casefold() of key and value.
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
        # Quota counters kept by triggers, so a quota check is one indexed read. A writer locks
        # its user's row before it reads anything (see postgres.py): the per-user lock.
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
        # The size counter: every stored row counts its text form's bytes plus the 24-byte header
        # PostgreSQL gives each row (the text form, not pg_column_size: a row must take away on
        # delete exactly what it added on insert). Changed in the writing transaction, so the size
        # cap is exact however many writers race.
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
        *_SIZE_TRIGGERS,
    ],
    # 2: the event history is append-only in the database itself. An UPDATE is refused; a DELETE
    # stays possible, because forget_user must remove a user's history too.
    [
        """CREATE FUNCTION memkit_refuse_event_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'memory_events is append-only: events are never changed';
        END $$""",
        """CREATE TRIGGER memory_events_append_only BEFORE UPDATE ON memory_events
            FOR EACH ROW EXECUTE FUNCTION memkit_refuse_event_change()""",
    ],
    # 3: the store's own sequence, a number that only grows. (SQLite's step 3 keeps it in a row
    # every commit writes, with the database's id, so that a WAL file is recognised; PostgreSQL
    # needs no such row, and a sequence takes no lock: writers of different users never wait at it.)
    [
        "CREATE SEQUENCE memkit_seq",
    ],
    # 4: "newest first" is commit order within a user: each record write takes the next number of
    # memkit_seq holding its user's lock, kept in `seq`, so a clock that steps back cannot reorder
    # records. Existing rows are numbered in the order step 1 kept them in (updated_at, then id).
    [
        "ALTER TABLE memories ADD COLUMN seq bigint NOT NULL DEFAULT 0",
        """UPDATE memories SET seq = ranked.n FROM (
            SELECT id, row_number() OVER (ORDER BY updated_at, id) AS n FROM memories
        ) AS ranked WHERE ranked.id = memories.id""",
        "SELECT setval('memkit_seq', greatest((SELECT count(*) FROM memories), 1), EXISTS (SELECT FROM memories))",
        "CREATE INDEX memories_by_user_seq ON memories (user_id, seq)",
        "DROP INDEX memories_by_user_time",
    ],
    # 5: SQLite's step 5 keeps its FTS5 trigram index only where a store's limits can use it.
    # PostgreSQL's pg_trgm indexes are ordinary GIN indexes that search plans around: nothing to do,
    # but the version moves with SQLite's, so version 5 names the same schema on both.
    [],
    # 6: a delete retires the user's recent history (SQLite's step 6): when the user's last
    # delete happened, written in the delete's transaction.
    [
        """CREATE TABLE history_retired (
            user_id text COLLATE "C" PRIMARY KEY,
            at text COLLATE "C" NOT NULL
        )""",
    ],
    # 7: the store's own limits (store_limits.py), as SQLite's step 7.
    [
        "CREATE TABLE store_limits (name text PRIMARY KEY, value bigint NOT NULL CHECK (value >= 1))",
    ],
    # 8: SQLite's proposals table (see schema.py), counted by the size trigger like every
    # stored row. An identity id is never reused.
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
        *[f"""CREATE TRIGGER proposals_size_{event.lower()} AFTER {event} ON proposals
            REFERENCING {transition} FOR EACH STATEMENT EXECUTE FUNCTION memkit_size_change()"""
          for event, transition in (("INSERT", "NEW TABLE AS new_rows"), ("DELETE", "OLD TABLE AS old_rows"),
                                    ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"))],
    ],
    # 9: retrieval by meaning, as SQLite's step: one vector per record with its model and
    # dimension, keyed by the record's id, carrying its user; removed when the value changes or the
    # record goes. A `real[]` here (not bytes), so that where the server has pgvector a search can
    # cast it to `vector` and rank in SQL; the size counter counts the vectors too.
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
        *(f"""CREATE TRIGGER memory_embeddings_size_{event.lower()} AFTER {event} ON memory_embeddings
            REFERENCING {transition} FOR EACH STATEMENT EXECUTE FUNCTION memkit_size_change()"""
          for event, transition in (("INSERT", "NEW TABLE AS new_rows"), ("DELETE", "OLD TABLE AS old_rows"),
                                    ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"))),
    ],
    # 10: the items of openai-agents sessions (`MemkitSession`), as SQLite's step; their
    # bytes count toward the size cap like every other table's.
    [
        """CREATE TABLE agent_items (
            user_id text COLLATE "C" NOT NULL,
            session_id text COLLATE "C" NOT NULL,
            position bigint NOT NULL CHECK (position >= 1),
            item text COLLATE "C" NOT NULL,
            at text COLLATE "C" NOT NULL,
            PRIMARY KEY (user_id, session_id, position)
        )""",
        *(f"""CREATE TRIGGER agent_items_size_{event.lower()} AFTER {event} ON agent_items
            REFERENCING {transition} FOR EACH STATEMENT EXECUTE FUNCTION memkit_size_change()"""
          for event, transition in (("INSERT", "NEW TABLE AS new_rows"), ("DELETE", "OLD TABLE AS old_rows"),
                                    ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"))),
    ],
    # 11: window places, as SQLite's step, and the store's own id, which SQLite keeps in `store_meta`
    # (step 3): window keys carry it, so two stores on one Redis never share a window.
    [
        "ALTER TABLE memkit_meta ADD COLUMN database_id text COLLATE \"C\" NOT NULL"
        " DEFAULT replace(gen_random_uuid()::text, '-', '')",
        'CREATE TABLE window_places (place text COLLATE "C" PRIMARY KEY, noted_at text COLLATE "C" NOT NULL)',
    ],
]

PG_SCHEMA_VERSION = len(PG_MIGRATIONS)
"""The version a namespace has once every step has run. Kept equal to SQLite's `SCHEMA_VERSION`
(tests/test_postgres.py checks): version N names the same records on both backends, and an export
bundle of version N imports into either. A SQLite step gets its PostgreSQL counterpart, even when
PostgreSQL has nothing to do for it."""

PG_EXPECTED_TABLES: dict[str, set[str]] = {
    "memories": {"id", "user_id", "kind", "memory_key", "value", "source_session", "revision",
                 "created_at", "updated_at", "key_fold", "value_fold"},
    "memory_events": {"id", "user_id", "kind", "memory_key", "action", "revision", "session_id",
                      "old_value", "new_value", "confirmation", "at"},
    "user_counts": {"user_id", "records"},
    "total_count": {"only", "records"},
    "transcript": {"user_id", "session_id", "turn", "role", "content", "at"},
    "memkit_meta": {"only", "schema_version"},
    "store_size": {"only", "bytes"},
}
"""Tables and columns of step 1 (SQLite's, and the two only PostgreSQL has); `expected_columns`
adds what later steps add. tests/test_postgres.py checks them against what the steps make."""

_ADDS_COLUMN = re.compile(r"ALTER TABLE (\w+) ADD COLUMN (\w+)")
_CREATES_TABLE = re.compile(r"\s*CREATE TABLE (\w+) \((.*)\)\s*$", re.S)
_CONSTRAINTS = ("PRIMARY", "UNIQUE", "CHECK", "CONSTRAINT", "FOREIGN")


def _created_columns(statement: str) -> tuple[str, set[str]] | None:
    """(table, columns) of a `CREATE TABLE t (...)` statement, or None for any other statement."""
    match = _CREATES_TABLE.match(statement)
    if match is None:
        return None
    parts, depth, current = [], 0, ""
    for char in match[2]:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return match[1], {p.split()[0] for p in parts if p.split() and p.split()[0].upper() not in _CONSTRAINTS}


def expected_columns(version: int = PG_SCHEMA_VERSION) -> dict[str, set[str]]:
    """The columns each table has after the first `version` steps (step 1's, the tables later steps
    create, and every ADD COLUMN since)."""
    columns = {table: set(names) for table, names in PG_EXPECTED_TABLES.items()}
    for number, steps in enumerate(PG_MIGRATIONS[:version], start=1):
        for statement in steps:
            created = _created_columns(statement) if number > 1 else None
            if created is not None:
                columns[created[0]] = created[1]
            for table, column in _ADDS_COLUMN.findall(statement):
                columns[table].add(column)
    return columns

LOCK_CLASS = 0x6D6D6B  # "mmk": the first key of memkit's advisory locks (the second: the namespace)

_KIND_ORDER = ("table", "view", "sequence", "function", "type", "index", "trigger")  # what a reader recognizes first
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_DDL = re.compile(r"(CREATE|DROP) (TABLE|INDEX|FUNCTION|TRIGGER|SEQUENCE) (\w+)")

_OBJECTS = """
    SELECT CASE c.relkind WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view'
                          WHEN 'm' THEN 'view' WHEN 'c' THEN 'type' ELSE 'table' END, c.relname
        FROM pg_class c WHERE c.relnamespace = ?::regnamespace AND NOT EXISTS (
            SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                         AND d.deptype = 'e')
    UNION ALL
    SELECT 'function', p.proname FROM pg_proc p WHERE p.pronamespace = ?::regnamespace AND NOT EXISTS (
            SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                                         AND d.deptype = 'e')
    UNION ALL
    SELECT 'trigger', t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = ?::regnamespace AND NOT t.tgisinternal
"""


def check_schema_name(schema: object) -> str:
    """Check a PostgreSQL schema name for the store: 1-63 of `[a-z0-9_]`, not starting with a digit."""
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise ValidationError(
            f"schema {schema!r} is not allowed; use 1-63 lower-case letters, digits and '_', "
            "starting with a letter or '_' (and not 'pg_')"
        )
    return schema


@functools.cache
def expected_objects(version: int = PG_SCHEMA_VERSION) -> frozenset[tuple[str, str]]:
    """(kind, name) of every table, index, function, sequence and trigger the first `version` steps
    leave behind.

    Read from the steps' own `CREATE` and `DROP` statements, so the check at open cannot drift from them.
    """
    objects: set[tuple[str, str]] = set()
    for steps in PG_MIGRATIONS[:version]:
        for statement in steps:
            for verb, kind, name in _DDL.findall(statement):
                (objects.add if verb == "CREATE" else objects.discard)((kind.lower(), name))
    return frozenset(objects)


def _objects(conn: PgConnection, schema: str) -> set[tuple[str, str]]:
    return {(row[0], row[1]) for row in conn.execute(_OBJECTS, (schema, schema, schema))}


def read_version(conn: PgConnection, schema: str) -> int:
    """The namespace's schema version: 0 when it or its `memkit_meta` table does not exist."""
    if conn.value("SELECT to_regclass(?)", (f'"{schema}".memkit_meta',)) is None:
        return 0
    row = conn.execute(f'SELECT schema_version FROM "{schema}".memkit_meta').fetchone()
    return -1 if row is None else int(row[0])


def check_schema(conn: PgConnection, where: str, schema: str) -> int:
    """Refuse a namespace that is not a sound memkit schema at this or an older version; return its version.

    Raises:
        StoreError: another program's objects, a newer or malformed memkit schema. Nothing is changed.
        psycopg.Error: reading the catalog failed (the caller names the database and the cause).
    """
    if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = ?", (schema,)).fetchone() is None:
        return 0
    objects = _objects(conn, schema)
    version = read_version(conn, schema)
    if version == 0:
        if objects:
            shown = sorted(objects, key=lambda o: (_KIND_ORDER.index(o[0]) if o[0] in _KIND_ORDER else 9, o[1]))
            names = ", ".join(f"{kind} {name!r}" for kind, name in shown[:5])
            raise StoreError(
                f"schema {schema!r} of {where} holds objects of another program ({names}) and no memkit "
                "schema version; memkit left it as it was. Use a database of its own, or another schema="
            )
        return 0
    if version > PG_SCHEMA_VERSION:
        raise StoreError(
            f"schema {schema!r} of {where} has memkit schema version {version}, newer than this memkit "
            f"knows ({PG_SCHEMA_VERSION}); upgrade memkit to open it. Nothing was changed"
        )
    if version < 1:
        raise StoreError(f"schema {schema!r} of {where} has a malformed memkit_meta table; memkit left it as it was")
    missing = sorted(expected_objects(version) - objects)
    if missing:
        names = ", ".join(f"{kind} {name!r}" for kind, name in missing[:5])
        raise StoreError(
            f"schema {schema!r} of {where} says version {version} but lacks {names}; "
            "it is malformed and memkit left it as it was"
        )
    columns: dict[str, set[str]] = {}
    for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = ?", (schema,)):
        columns.setdefault(table, set()).add(column)
    for table, expected in expected_columns(version).items():
        if not expected <= columns.get(table, set()):
            absent = ", ".join(sorted(expected - columns.get(table, set())))
            raise StoreError(
                f"schema {schema!r} of {where} says version {version} but table {table!r} lacks {absent}; "
                "it is malformed and memkit left it as it was"
            )
    return version


@contextlib.contextmanager
def schema_lock(conn: PgConnection, schema: str) -> Iterator[None]:
    """Hold the namespace's advisory lock (a session lock, taken outside any transaction).

    Taken before `BEGIN`, not inside: a transaction begun after the wait sees the catalog as the
    previous holder committed it, where one already open could still hold it in its caches.
    """
    conn.execute("SELECT pg_advisory_lock(?, hashtext(?))", (LOCK_CLASS, schema))
    try:
        yield
    finally:
        if not conn.broken:
            conn.execute("SELECT pg_advisory_unlock(?, hashtext(?))", (LOCK_CLASS, schema))


def migrate(conn: PgConnection, schema: str) -> None:
    """Run the missing steps (creating the namespace first if need be), each with its version bump
    in one transaction, holding the namespace's advisory lock.

    The version is read again once the lock is held: another process may have run the steps while
    this one waited, and running one twice would fail half-way.
    """
    if read_version(conn, schema) >= PG_SCHEMA_VERSION:
        return  # the common case takes no lock
    with schema_lock(conn, schema):
        while (version := read_version(conn, schema)) < PG_SCHEMA_VERSION:
            conn.execute("BEGIN")
            try:
                if version == 0:
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                for statement in PG_MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute(
                    'INSERT INTO memkit_meta VALUES (1, ?) ON CONFLICT ("only") DO UPDATE SET schema_version = ?',
                    (version + 1, version + 1),
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")


SEARCH_INDEXES = ("memories_trgm_key", "memories_trgm_value")
"""The trigram indexes: one per folded column, so a search's OR is two cheap index scans (one
index over both columns is costed as a scan of all of it), and `fastupdate` off, so an index
never carries a pending list that every search would have to read (the planner then avoids it)."""


def has_search_index(conn: PgConnection, schema: str) -> bool:
    """Whether the namespace has the trigram indexes over the folded key and value."""
    return all(conn.value("SELECT to_regclass(?)", (f'"{schema}".{name}',)) is not None for name in SEARCH_INDEXES)


def ensure_search_index(conn: PgConnection, schema: str) -> bool:
    """Make the trigram index where the server has `pg_trgm` (installing the extension if it may);
    return whether the index exists. Without it, searches scan the user's rows (bounded by the quota).
    """
    if has_search_index(conn, schema):
        return True
    if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'").fetchone() is None:
        return False
    with schema_lock(conn, schema):
        if has_search_index(conn, schema):
            return True  # made by another opener while this one waited
        conn.execute("BEGIN")
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")  # trusted: a database owner may install it
            where = conn.value(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                " WHERE e.extname = 'pg_trgm'")
            for name, column in zip(SEARCH_INDEXES, ("key_fold", "value_fold")):
                conn.execute(f'CREATE INDEX IF NOT EXISTS {name} ON memories USING gin ({column} "{where}".gin_trgm_ops)'
                             " WITH (fastupdate = off)")
        except psycopg.Error:
            conn.execute("ROLLBACK")  # no privilege to install it: searches scan instead
            return False
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return True
