"""Which store this is: its file and the names beside it, its location, its own id, how it reads.

`StoreIdentity` is a part of `Store` (store.py inherits it); what it uses of `Store` is declared
here, so this module never imports store.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from .backend import StorePart
from .statements import Statements

SQLITE_FILE_SUFFIXES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database file while it is in use (or after a crash)."""


class StoreIdentity(StorePart):
    """`Store`'s identity: path, location, files, store_id, opened, statements."""

    _statements: ClassVar[Statements]  # each constructor's own: SQLite's or PostgreSQL's
    _store_id: str | None = None

    @classmethod
    def statements(cls) -> Statements:
        """The SQL this store runs for its writes, record reads and searches, so a benchmark runs exactly
        the store's statements (bench/contenders.py); TypeError when asked of `Store` itself."""
        statements: Statements | None = getattr(cls, "_statements", None)
        if statements is None:
            raise TypeError(f"{cls.__name__} runs whichever backend's SQL it is opened on: ask "
                            "MemoryStore.statements() (SQLite) or PostgresStore.statements() (PostgreSQL)")
        return statements

    @property
    def path(self) -> Path | None:
        """The SQLite file (None on PostgreSQL, which has no file of the store's own)."""
        return self._db.path

    @property
    def location(self) -> str:
        """Which store this is: the SQLite file's path, or PostgreSQL's host, port, database and schema
        (never a user or a password)."""
        return self._db.location

    def files(self) -> list[Path]:
        """The SQLite file and the `-wal`, `-shm` and `-journal` names beside it, existing or not (none on
        PostgreSQL): a command must never write over them."""
        path = self._db.path
        return [] if path is None else [path, *(path.with_name(path.name + s) for s in SQLITE_FILE_SUFFIXES)]

    @property
    def store_id(self) -> str:
        """The store's own random id, made with its schema. A window's Redis keys carry it, so two
        stores on one Redis server never read, archive or forget each other's turns."""
        if self._store_id is None:
            self._store_id = str(self._db.fetch(self._db.statements.store_id)[0][0])
        return self._store_id

    @property
    def opened(self) -> dict[str, Any]:
        """How this store reads its database: `read_only`, `how` (`rw`, `ro`, `immutable`, `snapshot`:
        an older schema read from a migrated copy in memory) and the file's own schema version."""
        return {"read_only": self.read_only, "how": self._db.how, "file_version": self._db.file_version}

    @property
    def connection(self) -> Any:
        """The store's connection, for read-only inspection (notebooks, health checks)."""
        return self._db.connection

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._db.location!r})"
