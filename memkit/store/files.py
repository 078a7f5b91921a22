"""The SQLite files of a store on disk: what is checked before SQLite is pointed at them, and creation.

A new database is built beside its path and linked into place whole, so no process ever sees it
half-made; an existing file is checked (kind, mode, header, length) before any connection opens it,
so a file memkit refuses is left exactly as it was found.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import urllib.parse
from pathlib import Path

from ..errors import StoreError
from .schema import migrate

SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_uri(path: str | os.PathLike[str], mode: str) -> str:
    """A `file:` URI for sqlite3 (`mode` ro, rw or rwc); the path is quoted, so '?' or '#' in it stay plain."""
    return "file:" + urllib.parse.quote(str(Path(path).absolute())) + f"?mode={mode}"


def check_path(path: Path) -> bool:
    """Refuse what SQLite should not be pointed at; return True when the file is still to be made.

    Raises:
        StoreError: a symbolic link, a missing or read-only folder, a directory or other non-file,
            a read-only, empty, foreign, truncated or cut-short file. Nothing is changed.
    """
    if path.is_symlink():
        raise StoreError(
            f"{path} is a symbolic link; open the file it points to ({os.path.realpath(path)}) "
            "so that its -wal and -shm files sit beside it"
        )
    folder = path.parent
    if not folder.is_dir():
        raise StoreError(f"the folder {folder} does not exist; create it first")
    # Mode bits, not os.access: root may write anything, but a file marked read-only means "keep".
    if not folder.stat().st_mode & stat.S_IWUSR:
        raise StoreError(
            f"the folder {folder} is read-only; SQLite in WAL mode writes {path.name}-wal and "
            f"{path.name}-shm beside the database"
        )
    if not path.exists():
        return True
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a database file")
    if not path.is_file():
        raise StoreError(f"{path} is not a regular file")
    if not path.stat().st_mode & stat.S_IWUSR:
        raise StoreError(f"{path} is read-only; memkit needs to write to it (copy it, or change its mode)")
    with path.open("rb") as handle:
        header = handle.read(100)
    if not header:
        raise StoreError(f"{path} is empty (0 bytes), not a memkit database; remove it or choose another path")
    if not header.startswith(SQLITE_MAGIC):
        raise StoreError(f"{path} is not a SQLite database (it starts with {header[:16]!r}); memkit left it as it was")
    if len(header) < 100:
        raise StoreError(f"{path} is truncated ({len(header)} bytes, shorter than a SQLite header)")
    check_length(path, header)
    return False


def check_length(path: Path, header: bytes) -> None:
    """Refuse a file cut short: SQLite reads missing bytes of its last page as zeros.

    A cut inside the last page (a copy that stopped early, a full disk) passes `quick_check`
    and silently loses the end of a record, so the length is checked against the header: whole
    pages, and at least as many as the header counts. Skipped while a non-empty `-wal` file is
    beside it: a crashed checkpoint may have left the file short, and the WAL completes it.
    """
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if not (512 <= page_size <= 65536 and page_size & (page_size - 1) == 0):
        return  # not a page size at all: SQLite itself reports the file as damaged
    size = path.stat().st_size
    pages = int.from_bytes(header[28:32], "big")
    counted = pages > 0 and header[24:28] == header[92:96]  # SQLite's rule for a valid page count
    if size % page_size or (counted and size < pages * page_size):
        expected = f"{pages} pages of {page_size} bytes" if counted else f"whole pages of {page_size} bytes"
        raise StoreError(
            f"{path} is truncated or damaged: it holds {size} bytes, but its header says {expected}; "
            "memkit left it as it was"
        )


def create_file(path: Path) -> None:
    """Make a new database beside `path`, complete with its schema, and link it into place.

    Built aside, so `path` never exists half-made: a process that opens it at the same moment
    (or after a crash during creation) sees no file or a whole memkit database, never an empty
    file it would rightly refuse. `os.link` fails if another process linked its copy first; then
    that one is used and ours is dropped.

    Raises:
        StoreError: the new database could not be built.
    """
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.creating")
    try:
        partial.unlink(missing_ok=True)  # a leftover of a crashed process that had our pid
        try:
            conn = sqlite3.connect(str(partial), isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                migrate(conn)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot create {path}: {exc}") from None
        try:
            os.link(partial, path)
        except FileExistsError:
            pass  # another process created it first: open that one
        except OSError:
            # A file system without hard links: rename instead, still never over an existing file.
            if not path.exists():
                os.rename(partial, path)
    finally:
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            leftover.unlink(missing_ok=True)
