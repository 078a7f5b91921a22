"""The PostgreSQL schema: an append-only list of steps, the runner, the check at open, the search index.

The tables, columns and rules are SQLite's (`schema.py`), so the store's SQL and its export bundles
are the same on both; what differs is written the PostgreSQL way: identity ids, PL/pgSQL triggers
that keep the quota counters and the size counter, and a `"C"` collation on every text column, so
text compares and sorts byte by byte, as SQLite does.

The store's tables live in one PostgreSQL schema (a namespace; `public` unless chosen), and its
version in the one-row table `memkit_meta`. Step N brings the namespace to version N; each step and
its version bump run in one transaction, holding an advisory lock, so concurrent openers run a
step once and a crash leaves the old version or the new one (PostgreSQL's DDL is transactional).

The trigram index (`pg_trgm`) is no step: it exists only where the server has the extension, so it
is made at open where it can be and is absent elsewhere; searches give the same answers either way.
"""

from __future__ import annotations

import functools
import re

import psycopg

from ..errors import StoreError, ValidationError
from .pg_connection import PgConnection
from .schema import EXPECTED_TABLES

_SIZE_TRIGGER = """CREATE TRIGGER {table}_size AFTER INSERT OR UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION memkit_size()"""

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
        # Newest first within a user, ties by id: read backwards, it serves search without a sort.
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
        # Quota counters kept by a trigger, so a quota check is one indexed read. A writer locks
        # its user's row before it reads anything (see postgres.py): the per-user lock.
        'CREATE TABLE user_counts (user_id text COLLATE "C" PRIMARY KEY, records integer NOT NULL)',
        'CREATE TABLE total_count ("only" integer PRIMARY KEY CHECK ("only" = 1), records integer NOT NULL)',
        "INSERT INTO total_count VALUES (1, 0)",
        """CREATE FUNCTION memkit_count() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO user_counts AS c VALUES (NEW.user_id, 1)
                    ON CONFLICT (user_id) DO UPDATE SET records = c.records + 1;
                UPDATE total_count SET records = records + 1;
            ELSE
                UPDATE user_counts SET records = records - 1 WHERE user_id = OLD.user_id;
                DELETE FROM user_counts WHERE user_id = OLD.user_id AND records <= 0;
                UPDATE total_count SET records = records - 1;
            END IF;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER memories_count AFTER INSERT OR DELETE ON memories
            FOR EACH ROW EXECUTE FUNCTION memkit_count()""",
        # The size counter: the bytes of every stored row as PostgreSQL stores it (pg_column_size),
        # changed in the writing transaction, so the size cap is exact however many writers race.
        'CREATE TABLE store_size ("only" integer PRIMARY KEY CHECK ("only" = 1), bytes bigint NOT NULL)',
        "INSERT INTO store_size VALUES (1, 0)",
        """CREATE FUNCTION memkit_size() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        DECLARE
            change bigint := 0;
        BEGIN
            IF TG_OP <> 'DELETE' THEN
                change := change + pg_column_size(NEW.*);
            END IF;
            IF TG_OP <> 'INSERT' THEN
                change := change - pg_column_size(OLD.*);
            END IF;
            UPDATE store_size SET bytes = bytes + change;
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
        _SIZE_TRIGGER.format(table="memories"),
        _SIZE_TRIGGER.format(table="memory_events"),
        _SIZE_TRIGGER.format(table="transcript"),
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
]

PG_SCHEMA_VERSION = len(PG_MIGRATIONS)
"""The version a namespace has once every step has run."""

PG_EXPECTED_TABLES: dict[str, set[str]] = {
    **EXPECTED_TABLES,
    "memkit_meta": {"only", "schema_version"},
    "store_size": {"only", "bytes"},
}
"""SQLite's tables and columns, and the two that only PostgreSQL has; checked at open."""

LOCK_CLASS = 0x6D6D6B  # "mmk": the first key of memkit's advisory locks (the second: the namespace)

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_CREATES = re.compile(r"CREATE (TABLE|INDEX|FUNCTION|TRIGGER) (\w+)")

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
    """(kind, name) of every table, index, function and trigger the first `version` steps create.

    Read from the steps' own `CREATE` statements, so the check at open cannot drift from them.
    """
    return frozenset(
        (kind.lower(), name) for steps in PG_MIGRATIONS[:version] for statement in steps
        for kind, name in _CREATES.findall(statement)
    )


def _objects(conn: PgConnection, schema: str) -> set[tuple[str, str]]:
    return {(row[0], row[1]) for row in conn.execute(_OBJECTS, (schema, schema, schema))}


def read_version(conn: PgConnection, schema: str) -> int:
    """The namespace's schema version: 0 when it or its `memkit_meta` table does not exist."""
    if conn.execute("SELECT to_regclass(?)", (f'"{schema}".memkit_meta',)).fetchone()[0] is None:
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
            names = ", ".join(f"{kind} {name!r}" for kind, name in sorted(objects)[:5])
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
    for table, expected in PG_EXPECTED_TABLES.items():
        if not expected <= columns.get(table, set()):
            absent = ", ".join(sorted(expected - columns.get(table, set())))
            raise StoreError(
                f"schema {schema!r} of {where} says version {version} but table {table!r} lacks {absent}; "
                "it is malformed and memkit left it as it was"
            )
    return version


def migrate(conn: PgConnection, schema: str) -> None:
    """Run the missing steps (creating the namespace first if need be), each with its version bump
    in one transaction, holding the namespace's advisory lock.

    The version is read again once the lock is held: another process may have run the step while
    this one waited, and running it twice would fail half-way.
    """
    if read_version(conn, schema) >= PG_SCHEMA_VERSION:
        return  # the common case takes no lock
    while True:
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (LOCK_CLASS, schema))
            version = read_version(conn, schema)
            if version >= PG_SCHEMA_VERSION:
                conn.execute("COMMIT")
                return
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


def has_search_index(conn: PgConnection, schema: str) -> bool:
    """Whether the namespace has the trigram index over the folded key and value."""
    return conn.execute("SELECT to_regclass(?)", (f'"{schema}".memories_trgm',)).fetchone()[0] is not None


def ensure_search_index(conn: PgConnection, schema: str) -> bool:
    """Make the trigram index where the server has `pg_trgm` (installing the extension if it may);
    return whether the index exists. Without it, searches scan the user's rows (bounded by the quota).
    """
    if has_search_index(conn, schema):
        return True
    if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'").fetchone() is None:
        return False
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (LOCK_CLASS, schema))
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")  # trusted: a database owner may install it
        where = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'pg_trgm'").fetchone()[0]
        opclass = f'"{where}".gin_trgm_ops'
        conn.execute(f"CREATE INDEX IF NOT EXISTS memories_trgm ON memories USING gin"
                     f" (key_fold {opclass}, value_fold {opclass})")
    except psycopg.Error:
        conn.execute("ROLLBACK")  # no privilege to install it: searches scan instead
        return False
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return True
