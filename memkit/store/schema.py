"""The schema's runner: one check at open and one migration over a backend's steps.

Each step runs with its version bump in one transaction (`migrate`), so a crash leaves a store at the
old version or the new one. What a store at version N must hold is derived from the steps
(`expected_objects`, `expected_columns`), so the check at open cannot drift from the schema. A
backend takes part through a small `SchemaPart` (its steps, version, objects, columns, lock):
SQLite's is here (`SqliteSchema`, the steps of `steps.py`), PostgreSQL's in `postgres/schema.py`.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .steps import STEPS

Steps = tuple[tuple[str, ...], ...]
"""A backend's statements of each step: `steps[N - 1]` brings a store to version N."""

SEARCH_INDEX_TRIGGERS: list[str] = [statement for statement in STEPS[0].statements
                                    if statement.startswith("CREATE TRIGGER memories_fts_")]
"""The triggers that keep the trigram index up to date, as step 1 made them; from step 5 on, only where
search may ask the index (`search_index.py`): with them a put writes about twice the pages."""

SEARCH_INDEX_LOOKUP = "CREATE UNIQUE INDEX memories_by_id ON memories (id)"
"""From step 15 on, kept with the triggers: the index's matches are fetched from `memories` by id."""

DROP_SEARCH_INDEX: list[str] = STEPS[4].statements
"""Stop keeping the trigram index and empty it (step 5, and `schema.drop_search_index`)."""

MIGRATIONS: list[list[str]] = [step.statements for step in STEPS]
"""SQLite's statements of each step: `MIGRATIONS[N - 1]` brings a file to `PRAGMA user_version = N`."""

SCHEMA_VERSION = len(STEPS)
"""The version a store has once every step has run (on PostgreSQL too: version N names the same
records on both backends, so an export bundle of version N imports into either)."""

_CREATES_TABLE = re.compile(r"\s*CREATE TABLE (\w+) \((.*)\)(?: WITHOUT ROWID)?\s*$", re.S)
_ADDS_COLUMN = re.compile(r"ALTER TABLE (\w+) ADD COLUMN (\w+)")
_DROPS_TABLE = re.compile(r"\s*DROP TABLE (\w+)\s*$")
_RENAMES_TABLE = re.compile(r"\s*ALTER TABLE (\w+) RENAME TO (\w+)\s*$")
_CREATES_VIEW = re.compile(r"\s*CREATE VIEW (\w+) AS SELECT (.*?) FROM \w+(?:\s+WHERE\s.*)?\s*$", re.S)
_INNERMOST = re.compile(r"\([^()]*\)")
_CONSTRAINTS = ("PRIMARY", "UNIQUE", "CHECK", "CONSTRAINT", "FOREIGN")


def _created_columns(statement: str) -> tuple[str, list[str]] | None:
    """(table, columns) of a `CREATE TABLE`, or of a `CREATE VIEW v AS SELECT a AS x, ... FROM t [WHERE ...]`
    (a view that stands in for a table it replaced, as on PostgreSQL at step 13 and SQLite's
    `history_retired` at step 15, is checked like it); else None."""
    match = _CREATES_TABLE.match(statement) or _CREATES_VIEW.match(statement)
    if match is None:
        return None
    body = match[2]
    while (flat := _INNERMOST.sub("", body)) != body:  # what is in parentheses: types, checks, keys
        body = flat
    parts = [part.split() for part in body.split(",") if part.split()]
    if match.re is _CREATES_VIEW:
        return match[1], [words[-1].strip('"') for words in parts]
    names = [words[0].strip('"') for words in parts]
    return match[1], [name for name in names if name.upper() not in _CONSTRAINTS]


def frozen(steps: Sequence[Sequence[str]]) -> Steps:
    """`steps` as tuples: what `SchemaPart.steps` holds, and what the caches below are keyed by."""
    return tuple(tuple(statements) for statements in steps)


@functools.cache
def _columns(steps: Steps, version: int) -> tuple[tuple[str, frozenset[str]], ...]:
    columns: dict[str, list[str]] = {}
    for statements in steps[:version]:
        for statement in statements:
            created = _created_columns(statement)
            if created is not None:
                columns[created[0]] = created[1]
            for table, column in _ADDS_COLUMN.findall(statement):
                columns[table].append(column)
            dropped = _DROPS_TABLE.match(statement)
            if dropped is not None:
                del columns[dropped[1]]
            renamed = _RENAMES_TABLE.match(statement)
            if renamed is not None:
                columns[renamed[2]] = columns.pop(renamed[1])
    return tuple((table, frozenset(names)) for table, names in columns.items())


def expected_columns(version: int = SCHEMA_VERSION,
                     steps: Sequence[Sequence[str]] = MIGRATIONS) -> dict[str, frozenset[str]]:
    """The columns of every table the first `version` of `steps` (SQLite's by default) create, read
    from their `CREATE TABLE`, `ADD COLUMN`, `DROP TABLE`, `RENAME TO` and `CREATE VIEW` statements."""
    return dict(_columns(frozen(steps), version))


@functools.cache
def expected_objects(version: int = SCHEMA_VERSION) -> frozenset[tuple[str, str]]:
    """(kind, name) of every table, index and trigger SQLite's first `version` steps leave behind,
    read from a scratch database they build (FTS5 makes tables no statement names), so a file
    missing one is refused at open, not used with wrong quotas or search results."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for statements in MIGRATIONS[:version]:
            for statement in statements:
                conn.execute(statement)
        return frozenset(_sqlite_objects(conn))
    finally:
        conn.close()


class SchemaPart:
    """What one backend gives `check_schema` and `migrate` (the rest is shared): its `steps`, the
    `conn` that runs them, `where` (the store, in messages) and its messages' words."""

    steps: Steps
    conn: Any
    where: str
    newer: str
    malformed: str
    says: str
    begin_sql = "BEGIN"

    @property
    def latest(self) -> int:
        return len(self.steps)

    def read_version(self) -> int:
        """The store's version: 0 for none, negative when malformed."""
        raise NotImplementedError

    def expected_objects(self, version: int) -> frozenset[tuple[str, str]]:
        """(kind, name) of everything a store at `version` must hold (derived from the steps)."""
        raise NotImplementedError

    def write_version(self, version: int) -> None:
        """Record `version` (inside the step's transaction)."""
        raise NotImplementedError

    def objects(self) -> set[tuple[str, str]]:
        """(kind, name) of everything the store's namespace holds, the database's own excluded."""
        raise NotImplementedError

    def columns(self, tables: Iterable[str]) -> dict[str, set[str]]:
        """The columns each of `tables` has (an absent table has none)."""
        raise NotImplementedError

    def refuse_unversioned(self, objects: set[tuple[str, str]]) -> None:
        """Refuse a store without a memkit version that holds another program's objects."""
        raise NotImplementedError

    def check_sound(self) -> None:
        """Refuse a damaged database before anything else is judged (nothing to do by default)."""

    def optional(self, version: int, objects: set[tuple[str, str]]) -> frozenset[tuple[str, str]]:
        """Objects a store at `version` may leave out, but then whole: required once one is there."""
        return frozenset()

    def locked(self) -> AbstractContextManager[None]:
        """Keep other migrators out while `check_schema` reads and `migrate` runs steps."""
        return contextlib.nullcontext()

    def prepare(self, version: int) -> None:
        """Inside the transaction of the step after `version`, before its statements."""


def check_schema(part: SchemaPart) -> int:
    """Refuse a store that is not a sound memkit store at this or an older schema version; return its version.

    Raises:
        StoreError: damaged, newer, another program's, or missing what its version's steps made.
        sqlite3.Error, psycopg.Error: reading the store failed (the caller names it and the cause).
    """
    # Opening an up-to-date store never waits for a migrator (another process building an index or
    # running a long step must not block every open): read without the lock first. Only a version
    # below the current one, or objects that do not match it, are judged again with migrators kept
    # out: read apart, a step committed between the two reads (another process opening the same
    # fresh store) pairs one version with another version's objects, and a sound store would be
    # refused as malformed or as another program's.
    version, present, columns = _read(part)
    if version > part.latest:  # newer than this memkit: refused, whatever a migrator does
        return _judge(part, version, present, columns)
    if version == part.latest:
        with contextlib.suppress(StoreError):
            return _judge(part, version, present, columns)
    with part.locked():
        version, present, columns = _read(part)
    return _judge(part, version, present, columns)


def _read(part: SchemaPart) -> tuple[int, set[tuple[str, str]], dict[str, set[str]]]:
    """The store's version, the objects of its namespace, and the columns its version's tables have."""
    version = part.read_version()
    # Any table, view, index, trigger or function, not only tables: a store holding only another
    # program's views is still theirs, and the migrations must not be run into it.
    present = part.objects()
    part.check_sound()
    columns = part.columns(expected_columns(version, part.steps)) if 0 < version <= part.latest else {}
    return version, present, columns


def _judge(part: SchemaPart, version: int, present: set[tuple[str, str]], columns: dict[str, set[str]]) -> int:
    """`version` if what was read is a sound memkit store at it (see `check_schema`), else StoreError."""
    if version > part.latest:
        raise StoreError(part.newer.format(where=part.where, version=version, known=part.latest))
    if version < 0:
        raise StoreError(part.malformed.format(where=part.where, version=version))
    if version == 0:
        part.refuse_unversioned(present)
        return 0
    says = part.says.format(where=part.where, version=version)
    missing_objects = sorted((part.expected_objects(version) | part.optional(version, present)) - present)
    if missing_objects:
        names = ", ".join(f"{kind} {name!r}" for kind, name in missing_objects[:5])
        raise StoreError(f"{says} but lacks {names}; it is malformed and memkit left it as it was")
    expected = expected_columns(version, part.steps)
    for table, wanted in expected.items():
        if not wanted <= columns.get(table, set()):
            missing = ", ".join(sorted(wanted - columns.get(table, set())))
            raise StoreError(f"{says} but table {table!r} lacks {missing}; "
                             "it is malformed and memkit left it as it was")
    return version


def migrate(part: SchemaPart) -> None:
    """Run the missing steps, each with its version bump in one transaction. The version is read again
    inside it, with other migrators kept out: another process may have run the step meanwhile."""
    if part.read_version() >= part.latest:
        return  # the common case takes no lock, so opening works while another writes
    with part.locked():
        while True:
            part.conn.execute(part.begin_sql)
            try:
                version = part.read_version()
                if version >= part.latest:
                    part.conn.execute("COMMIT")
                    return
                part.prepare(version)
                for statement in part.steps[version]:
                    part.conn.execute(statement)
                part.write_version(version + 1)
            except BaseException:
                part.conn.execute("ROLLBACK")
                raise
            part.conn.execute("COMMIT")


def _sqlite_objects(conn: sqlite3.Connection) -> set[tuple[str, str]]:
    return {(row[0], row[1]) for row in conn.execute("SELECT type, name FROM sqlite_master")
            if not row[1].startswith("sqlite_")}


SEARCH_INDEX_OBJECTS = frozenset(("trigger", name) for name in
                                  ("memories_fts_insert", "memories_fts_delete", "memories_fts_update"))
"""What `SEARCH_INDEX_TRIGGERS` makes: a file at version 5 or later has all of them or none."""

LOOKUP_BY_ID_STEP = 15
"""From this step on, `memories` is clustered by key and the trigram index keeps `memories_by_id` too."""

SEARCH_INDEX_LOOKUP_OBJECTS = SEARCH_INDEX_OBJECTS | {("index", "memories_by_id")}
"""What a file at step 15 or later keeps while it keeps the trigram index: all of them or none."""


class SqliteSchema(SchemaPart):
    """SQLite's part: the version is `PRAGMA user_version`; `BEGIN IMMEDIATE` keeps other migrators out."""

    steps = frozen(MIGRATIONS)
    begin_sql = "BEGIN IMMEDIATE"
    newer = ("{where} has schema version {version}, newer than this memkit knows ({known}); "
             "upgrade memkit to open it. The file was not changed")
    malformed = "{where} has a malformed schema version ({version}); memkit left it as it was"
    says = "{where} says schema version {version}"

    def __init__(self, conn: sqlite3.Connection, path: Path | str = "the database",
                 check_integrity: bool = False) -> None:
        self.conn, self.where, self.check_integrity = conn, str(path), check_integrity

    def read_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def write_version(self, version: int) -> None:
        self.conn.execute(f"PRAGMA user_version = {int(version)}")

    def expected_objects(self, version: int) -> frozenset[tuple[str, str]]:
        return expected_objects(version)

    def objects(self) -> set[tuple[str, str]]:
        return _sqlite_objects(self.conn)

    def columns(self, tables: Iterable[str]) -> dict[str, set[str]]:
        return {table: {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")} for table in tables}

    def check_sound(self) -> None:
        if self.check_integrity:
            problems = [row[0] for row in self.conn.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise StoreError(f"{self.where} is corrupt (quick_check: {problems[0]}); memkit left it as it was")

    def refuse_unversioned(self, objects: set[tuple[str, str]]) -> None:
        application_id = self.conn.execute("PRAGMA application_id").fetchone()[0]
        if application_id != 0:
            raise StoreError(
                f"{self.where} is marked as another program's file (application_id {application_id}); "
                "memkit left it as it was"
            )
        if objects:
            names = sorted(name for _, name in objects)
            raise StoreError(
                f"{self.where} holds tables of another program ({', '.join(names[:5])}) and no memkit "
                "schema version; memkit left it as it was"
            )

    def optional(self, version: int, objects: set[tuple[str, str]]) -> frozenset[tuple[str, str]]:
        # The trigram index's upkeep (step 5 on): optional, but whole or not at all.
        kept = SEARCH_INDEX_LOOKUP_OBJECTS if version >= LOOKUP_BY_ID_STEP else SEARCH_INDEX_OBJECTS
        return kept if version >= 5 and objects & kept else frozenset()


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


def has_search_index(conn: sqlite3.Connection) -> bool:
    """Whether the file keeps the trigram index up to date (its triggers are there)."""
    names = [name for _, name in SEARCH_INDEX_OBJECTS]
    found = conn.execute(f"SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN "
                         f"({', '.join('?' * len(names))})", names).fetchone()[0]
    return bool(found)


def build_search_index(conn: sqlite3.Connection) -> None:
    """Add the triggers and the lookup by id, and fill the index from the memories (inside the caller's
    write transaction)."""
    for statement in SEARCH_INDEX_TRIGGERS:
        conn.execute(statement)
    conn.execute(SEARCH_INDEX_LOOKUP)
    conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")


def drop_search_index(conn: sqlite3.Connection) -> None:
    """Drop the triggers and the lookup by id and empty the index, as step 5 does (inside the caller's
    write transaction)."""
    for statement in DROP_SEARCH_INDEX:
        conn.execute(statement)
    conn.execute("DROP INDEX IF EXISTS memories_by_id")
