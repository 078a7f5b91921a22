"""The commands that change a store's own settings: `migrate` (its schema) and `limits`.

Neither happens by accident: opening a database to look at it never migrates it (the inspector
reads an older file as it is), and a store's limits are recorded in it (`store_limits`) and used by
every open. Both commands report what was and what is; each change needs `--confirm`.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

from ..errors import StoreError
from ..limits import DEFAULT_LIMITS
from ..store import SCHEMA_VERSION, MemoryStore, Store, open_store
from ..store.recorded_limits import (LIMIT_NAMES, check_floors, floors, has_table, limits_in_range, parse_settings,
                                  recorded as recorded_limits, write as write_limits)
from .options import CliError, database_url, db_path, missing_database, require_confirm
from .output import emit

OLDER_PROGRAM = ("a memkit older than this one refuses the migrated store as 'newer than this memkit "
                 "knows' and leaves it unchanged; upgrade every program that opens it")


def _file_version(args: argparse.Namespace) -> tuple[str, int]:
    """Where the store is (as it may be printed) and its schema version, read without changing it."""
    url = database_url(args)
    if url is not None:
        from ..store.postgres.connection import PgConnection, connect, scrub, password_of
        from ..store.postgres.schema import read_version

        try:
            raw = connect(url)
        except Exception as exc:  # psycopg's errors: the message is scrubbed of the password
            raise StoreError(f"cannot connect to {scrub(url, password_of(url))}: "
                             f"{scrub(str(exc), password_of(url))}") from None
        try:
            return scrub(url, password_of(url)), read_version(PgConnection(raw, pooled=False), "public")
        finally:
            raw.close()
    path, _ = db_path(args)
    if not path.exists():
        raise missing_database(path)
    with MemoryStore(path, read_only=True, limits=DEFAULT_LIMITS) as store:  # its own may be out of range
        return str(path), int(store.opened["file_version"] or SCHEMA_VERSION)


def cmd_migrate(args: argparse.Namespace) -> None:
    """Bring a store to this memkit's schema version, on purpose (`--confirm`), saying from which to which."""
    where, before = _file_version(args)
    if before == 0:
        raise CliError(f"{where} holds no memkit store; nothing to migrate (a write creates one)")
    if before >= SCHEMA_VERSION:
        emit({"db": where, "from_version": before, "to_version": before, "migrated": False})
        return
    require_confirm(args, f"migrate (from schema version {before} to {SCHEMA_VERSION}; afterwards {OLDER_PROGRAM})")
    url = database_url(args)
    target: Any = url if url is not None else db_path(args)[0]
    options = {"create": False} if url is not None else {}
    with open_store(target, **options) as store:  # a write open runs the missing steps
        after = store.health()["schema_version"]
    emit({"db": where, "from_version": before, "to_version": after, "migrated": True, "note": OLDER_PROGRAM},
         committed=f"{where} migrated from schema version {before} to {after}")


def _open_for_limits(args: argparse.Namespace, writing: bool) -> Store:
    """The store, opened to read its limits, or to change them: then with its recorded limits that are
    in range (a limit out of range, edited by hand, refuses every other open: `--set` mends it)."""
    url = database_url(args)
    if url is None:
        path, _ = db_path(args)
        if not path.exists():
            raise missing_database(path)
    target: Any = url if url is not None else path
    opener: Any = functools.partial(open_store, create=False) if url is not None else MemoryStore
    if not writing:
        return opener(target, read_only=True)
    with opener(target, read_only=True, limits=DEFAULT_LIMITS) as peek:  # read-only: this open writes nothing
        found = recorded_limits(peek.connection.execute("SELECT name, value FROM store_limits").fetchall())
    return opener(target, limits=limits_in_range(found))


def cmd_limits(args: argparse.Namespace) -> None:
    """Show the limits the store recorded, and what it holds against them; with `--set name=value`
    (repeatable) and `--confirm`, change them, never below what it holds."""
    changes = parse_settings(args.set) if args.set else {}
    if changes:
        require_confirm(args, f"limits --set {' '.join(args.set)}")
        where, version = _file_version(args)
        if version < SCHEMA_VERSION:  # opening it for writing would migrate it: only `migrate` does that
            raise CliError(f"{where} is at schema version {version}, older than this memkit's {SCHEMA_VERSION}; "
                           "nothing changed. Migrate it first (memkit migrate --db ... --confirm)")
    with _open_for_limits(args, writing=bool(changes)) as store:
        size = int(store.health()["db_bytes"])
        if changes:
            with store.transaction() as conn:
                check_floors(changes, floors(conn, size))
                write_limits(conn, changes)
        conn = store.connection
        recorded = recorded_limits(conn.execute("SELECT name, value FROM store_limits").fetchall()) \
            if has_table(conn) else {}
        held = floors(conn, size)
    # A limit newer than the store (no row of its own) applies its default: shown, and named as such.
    defaults = [name for name in LIMIT_NAMES if name not in recorded] if recorded else []
    report = {"limits": {name: recorded.get(name, getattr(store.limits, name) if recorded else None)
                         for name in LIMIT_NAMES},
              "recorded": bool(recorded), "not_recorded": defaults, "holds": held, "changed": changes}
    emit(report, committed=f"limits changed: {changes}" if changes else None)
