"""Reading a SQLite file without changing it: no write, no migration, no file made or changed beside it.

`connect_read_only` chooses by the sidecars found beside the file: with a `-wal` and a `-shm`,
`mode=ro&readonly_shm=1` (it reads through both, writes neither); with a `-wal` alone (a killed
writer's folder copied or restored file by file), a private copy of the file and its `-wal`, read
into memory (SQLite would make a `-shm` to read that `-wal` in place); with no `-wal`, `immutable=1`
(no lock, no file made). `ReadOnlyDatabase` reopens when another process starts writing the file.
A file of an older schema is read from a migrated copy in memory. docs/design/store.md says why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from ..errors import ReadOnlyError, StoreError
from .db import SqliteDatabase
from .files import check_header, check_wal, sqlite_uri
from .schema import SCHEMA_VERSION, SqliteSchema, check_schema, migrate
from .wal import file_size

OPEN_ATTEMPTS = 3
"""How often a read-only open looks again when the sidecars changed under it (a writer opening or
closing the file at that moment): then the way to read it changes too."""


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
    """A connection that reads `path` and its committed `-wal` and can change nothing, and how it
    reads: `ro` (through the -wal and -shm, which it never writes), `copy` (a private copy of a -wal
    without its -shm, in memory) or `immutable` (no -wal: the file alone, no lock). No file is made
    or changed beside `path`, whoever may write its folder. StoreError (with SQLite's reason) if the
    file cannot be read.
    """
    check_readable(path)
    for attempt in range(OPEN_ATTEMPTS):
        seen = has_wal, has_shm = _sidecars_of(path)
        try:
            if has_wal and has_shm:
                return _connect(sqlite_uri(path, "ro") + "&readonly_shm=1", timeout_s), "ro"
            if has_wal and file_size(f"{path}-wal"):
                return _private_copy(path), "copy"
            return _connect(sqlite_uri(path, "ro") + "&immutable=1", timeout_s), "immutable"
        except (sqlite3.Error, OSError) as exc:
            if attempt + 1 == OPEN_ATTEMPTS or _sidecars_of(path) == seen:
                raise StoreError(f"cannot read {path}: {exc}; it was left as it was") from None
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _connect(uri: str, timeout_s: float) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout_s)
    try:
        conn.execute("PRAGMA query_only = 1")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def _sidecars_of(path: Path) -> tuple[bool, bool]:
    return Path(f"{path}-wal").exists(), Path(f"{path}-shm").exists()


def _private_copy(path: Path) -> sqlite3.Connection:
    """`path` and its `-wal` (no `-shm` beside them), read from a copy in a private temporary folder
    into memory; the folder is removed before this returns, and the originals are only read.

    No writer has the file open (a writer keeps a -shm beside it), so the two copies agree; they
    are copied again if either file changed meanwhile. SQLite recovers the copy's WAL, committed
    transactions only, as it would the original's.
    """
    wal = Path(f"{path}-wal")
    with tempfile.TemporaryDirectory(prefix="memkit-read-") as scratch:
        copy = Path(scratch) / "copy.sqlite3"
        for _ in range(OPEN_ATTEMPTS):
            before = _stamp(path)
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, f"{copy}-wal")
            if _stamp(path) == before:
                break
        else:
            raise OSError(f"{path} kept changing while it was copied; read it again")
        source = sqlite3.connect(str(copy), isolation_level=None)
        memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        try:
            source.backup(memory)
            memory.execute("PRAGMA query_only = 1")
        except BaseException:
            memory.close()
            raise
        finally:
            source.close()
    return memory


def _stamp(path: Path) -> tuple[object, ...]:
    """What changes when another process writes `path`: its size and mtime, and its sidecars'."""
    def seen(file: str | Path) -> tuple[int, int] | None:
        try:
            info = os.stat(file)
        except FileNotFoundError:
            return None
        return info.st_mtime_ns, info.st_size

    return seen(path), seen(f"{path}-wal"), seen(f"{path}-shm") is not None


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
        """Reopen an `immutable` connection or a `copy` when another process has written the file since."""
        if self.how not in ("immutable", "copy") or self._conn is None:
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
