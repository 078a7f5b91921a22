"""Reading a SQLite file without changing it: no write, no migration, no `-wal` or `-shm` made.

`connect_read_only` reads through `mode=ro` when a `-wal` or `-shm` is already beside the file, and
with `immutable=1` (no lock, no file created) when neither is; `ReadOnlyDatabase` reopens when
another process starts writing the file. A file of an older schema is read from a migrated copy in
memory. docs/design/store.md says why each choice.
"""

from __future__ import annotations

import contextlib
import sqlite3
import stat
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from ..errors import ReadOnlyError, StoreError
from .db import SqliteDatabase
from .files import check_header, check_wal, sidecars, sqlite_uri
from .schema import SCHEMA_VERSION, SqliteSchema, check_schema, migrate


def check_readable(path: Path) -> None:
    """Refuse (StoreError), before SQLite opens it, what is not a whole SQLite file: missing, a folder,
    unreadable, empty, not SQLite, truncated. Nothing is changed."""
    if not path.exists():
        raise StoreError(f"there is no database at {path}; nothing was created")
    if not path.is_file():
        raise StoreError(f"{path} is not a regular file")
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except PermissionError:
        raise StoreError(f"{path} cannot be read by this user (mode {stat.filemode(path.stat().st_mode)})") from None
    check_header(path, header, "not a database")


def connect_read_only(path: Path, timeout_s: float = 5.0) -> tuple[sqlite3.Connection, str]:
    """A connection that reads `path` and can change nothing, and how it reads (`ro` or `immutable`);
    StoreError (with SQLite's reason) if the file cannot be opened."""
    check_readable(path)
    how = "ro" if sidecars(path) else "immutable"
    uri = sqlite_uri(path, "ro") + ("&immutable=1" if how == "immutable" else "")
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout_s)
        conn.execute("PRAGMA query_only = 1")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read {path}: {exc}; it was left as it was") from None
    return conn, how


def _stamp(path: Path) -> tuple[int, int, bool]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size, Path(f"{path}-wal").exists()


class ReadOnlyDatabase(SqliteDatabase):
    """A memkit SQLite file opened for reading only: every write is refused with `ReadOnlyError`.
    `how` is `ro`, `immutable` or `snapshot` (an older schema, migrated in a copy in memory)."""

    read_only = True
    how: str = "ro"
    file_version: int | None = SCHEMA_VERSION

    def _open(self, check_integrity: bool) -> sqlite3.Connection:
        path = self.path
        check_readable(path)
        check_wal(path)
        conn, self.how = connect_read_only(path, self.limits.busy_timeout_ms / 1000)
        try:
            check_schema(SqliteSchema(conn, path, check_integrity))
            self.file_version = conn.execute("PRAGMA user_version").fetchone()[0]
            if self.file_version == 0:
                raise StoreError(f"{path} holds no memkit store (an empty SQLite file); it was left as it was")
            if self.file_version < SCHEMA_VERSION:
                conn = self._snapshot(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise self._open_error(exc) from None
        except BaseException:
            conn.close()
            raise
        conn.row_factory = sqlite3.Row
        self._stamp = _stamp(path)
        return conn

    def _snapshot(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        copy = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        try:
            conn.backup(copy)
            migrate(SqliteSchema(copy))
            copy.execute("PRAGMA query_only = 1")
        except BaseException:
            copy.close()
            raise
        finally:
            conn.close()
        self.how = "snapshot"
        return copy

    def _fresh(self) -> None:
        """Reopen an `immutable` connection when another process has started to write the file."""
        if self.how != "immutable" or self._conn is None:
            return
        with contextlib.suppress(FileNotFoundError):
            if _stamp(self.path) == self._stamp:
                return
            conn, self.how = connect_read_only(self.path, self.limits.busy_timeout_ms / 1000)
            conn.row_factory = sqlite3.Row
            self._conn.close()
            self._conn, self._stamp = conn, _stamp(self.path)

    def refused(self) -> ReadOnlyError:
        """The error for a write: names the file and how to open it for writing."""
        return ReadOnlyError(
            f"{self.path} is open read-only; nothing was written. Open it for writing "
            "(MemoryStore(path), or the inspector's edit=True) to change it"
        )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Refused: a read-only store writes nothing (`ReadOnlyError`)."""
        raise self.refused()
        yield self.connection  # pragma: no cover - a generator, never reached

    def fetch(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """As `SqliteDatabase.fetch`, after reopening if another process wrote the file meanwhile."""
        with self.lock:
            self._fresh()
            return super().fetch(sql, args)

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """As `SqliteDatabase.reading`, after reopening if another process wrote the file meanwhile."""
        with self.lock:
            self._fresh()
            with super().reading() as conn:
                yield conn
