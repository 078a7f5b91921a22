"""PostgreSQL's part in the schema (the core's `schema.py` runs the steps of `steps.py` here), and its search index.

The store's tables live in one PostgreSQL schema (a namespace; `public` unless chosen), its version
in the one-row table `memkit_meta`. Each step runs in one transaction under an advisory lock, so
concurrent openers run it once; the check at open reads the version and the objects under the same
lock. The trigram indexes (`pg_trgm`) are no step: made at open where the server has the extension;
searches answer the same without.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable, Iterator

import psycopg

from ...errors import StoreError, ValidationError
from .connection import PgConnection
from ..schema import SchemaPart, check_schema, frozen, migrate
from .steps import PG_MIGRATIONS

LOCK_CLASS = 0x6D6D6B  # "mmk": the first key of memkit's advisory locks (the second: the namespace)

_KIND_ORDER = ("table", "view", "sequence", "function", "type", "index", "trigger")  # what a reader recognizes first
PG_SCHEMA_VERSION = len(PG_MIGRATIONS)
"""The version a namespace has once every step has run: SQLite's `SCHEMA_VERSION`, step for step."""

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


@functools.cache
def expected_objects(version: int = PG_SCHEMA_VERSION) -> frozenset[tuple[str, str]]:
    """(kind, name) of every table, index, function, trigger and sequence the first `version` steps
    leave behind, read from their own `CREATE` and `DROP` statements."""
    objects: set[tuple[str, str]] = set()
    for statements in PG_MIGRATIONS[:version]:
        for statement in statements:
            for verb, kind, name in _DDL.findall(statement):
                (objects.add if verb == "CREATE" else objects.discard)((kind.lower(), name))
    return frozenset(objects)


def check_schema_name(schema: object) -> str:
    """Check a PostgreSQL schema name for the store: 1-63 of `[a-z0-9_]`, not starting with a digit."""
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise ValidationError(
            f"schema {schema!r} is not allowed; use 1-63 lower-case letters, digits and '_', "
            "starting with a letter or '_' (and not 'pg_')"
        )
    return schema


def read_version(conn: PgConnection, schema: str) -> int:
    """The namespace's schema version: 0 when it or its `memkit_meta` table does not exist."""
    if conn.value("SELECT to_regclass(?)", (f'"{schema}".memkit_meta',)) is None:
        return 0
    row = conn.execute(f'SELECT schema_version FROM "{schema}".memkit_meta').fetchone()
    return -1 if row is None else int(row[0])


@contextlib.contextmanager
def schema_lock(conn: PgConnection, schema: str) -> Iterator[None]:
    """Hold the namespace's advisory lock (a session lock, taken outside any transaction).

    Taken before `BEGIN`, not inside: a transaction begun after the wait sees the catalog as the
    previous holder committed it, where one already open could still hold it in its caches.

    Raises:
        StoreError: another process held the lock (creating, migrating or indexing the schema) past
            the session's `lock_timeout` (the store's busy timeout).
    """
    try:
        conn.execute("SELECT pg_advisory_lock(?, hashtext(?))", (LOCK_CLASS, schema))
    except psycopg.errors.LockNotAvailable:
        raise StoreError(
            f"schema {schema!r} is being created, migrated or indexed by another process, which held it past "
            "the busy timeout; nothing was changed. Open it again once that process is done (or raise "
            "busy_timeout_ms)") from None
    try:
        yield
    finally:
        if not conn.broken:
            conn.execute("SELECT pg_advisory_unlock(?, hashtext(?))", (LOCK_CLASS, schema))


class PgSchema(SchemaPart):
    """PostgreSQL's part: the version is `memkit_meta`'s row, migrators wait at the namespace's
    advisory lock, and the namespace itself is made with the first step."""

    steps = frozen(PG_MIGRATIONS)
    newer = ("{where} has memkit schema version {version}, newer than this memkit knows ({known}); "
             "upgrade memkit to open it. Nothing was changed")
    malformed = "{where} has a malformed memkit_meta table; memkit left it as it was"
    says = "{where} says version {version}"

    def __init__(self, conn: PgConnection, where: str, schema: str) -> None:
        self.conn, self.schema, self.where = conn, schema, f"schema {schema!r} of {where}"

    def read_version(self) -> int:
        return read_version(self.conn, self.schema)

    def expected_objects(self, version: int) -> frozenset[tuple[str, str]]:
        return expected_objects(version)

    def write_version(self, version: int) -> None:
        self.conn.execute('INSERT INTO memkit_meta VALUES (1, ?) ON CONFLICT ("only") DO UPDATE SET schema_version = ?',
                          (version, version))

    def objects(self) -> set[tuple[str, str]]:
        if self.conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = ?", (self.schema,)).fetchone() is None:
            return set()
        return {(row[0], row[1]) for row in self.conn.execute(_OBJECTS, (self.schema,) * 3)}

    def columns(self, tables: Iterable[str]) -> dict[str, set[str]]:
        columns: dict[str, set[str]] = {}
        for table, column in self.conn.execute("SELECT table_name, column_name FROM information_schema.columns"
                                               " WHERE table_schema = ?", (self.schema,)):
            columns.setdefault(table, set()).add(column)
        return columns

    def refuse_unversioned(self, objects: set[tuple[str, str]]) -> None:
        if objects:
            shown = sorted(objects, key=lambda o: (_KIND_ORDER.index(o[0]) if o[0] in _KIND_ORDER else 9, o[1]))
            names = ", ".join(f"{kind} {name!r}" for kind, name in shown[:5])
            raise StoreError(
                f"{self.where} holds objects of another program ({names}) and no memkit "
                "schema version; memkit left it as it was. Use a database of its own, or another schema="
            )

    def locked(self) -> contextlib.AbstractContextManager[None]:
        return schema_lock(self.conn, self.schema)

    def prepare(self, version: int) -> None:
        if version == 0:
            self.conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')


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
            # Openers of other schemas may install it at the same moment, and IF NOT EXISTS does not
            # guard that (both see none; one fails on the catalog's unique name and would go without
            # the index): installers of the database take turns, the next one seeing it installed.
            conn.execute("SELECT pg_advisory_xact_lock(?, hashtext('pg_trgm'))", (LOCK_CLASS,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")  # trusted: a database owner may install it
            where = conn.value(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                " WHERE e.extname = 'pg_trgm'")
            for name, column in zip(SEARCH_INDEXES, ("key_fold", "value_fold"), strict=True):
                conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON memories"
                             f' USING gin ({column} "{where}".gin_trgm_ops) WITH (fastupdate = off)')
        except psycopg.Error:
            conn.execute("ROLLBACK")  # no privilege to install it: searches scan instead
            return False
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return True


def open_schema(conn: PgConnection, where: str, schema: str, create: bool, read_only: bool) -> bool:
    """The store's schema at open: checked, then migrated and given the search index; read-only,
    never migrated nor indexed: an older schema is refused, not changed.

    Returns:
        Whether searches may use the trigram index.

    Raises:
        StoreError: the schema holds no store and `create` is False (nothing was created), or,
            read-only, an older version; and what `check_schema` and `migrate` raise.
    """
    if check_schema(PgSchema(conn, where, schema)) == 0 and not create:
        raise StoreError(f"schema {schema!r} of {where} holds no memkit store; nothing was created")
    if read_only:
        if read_version(conn, schema) < PG_SCHEMA_VERSION:
            raise StoreError(
                f"schema {schema!r} of {where} is at version {read_version(conn, schema)}, "
                f"older than this memkit's {PG_SCHEMA_VERSION}; it was not changed. Migrate it with "
                "`memkit migrate --db URL --confirm`, or inspect it with an older memkit")
        return has_search_index(conn, schema)
    migrate(PgSchema(conn, where, schema))
    return ensure_search_index(conn, schema)
