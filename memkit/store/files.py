"""The SQLite files of a store on disk: what is checked before SQLite is pointed at them, and creation.

A new database is built beside its path and linked into place whole, so no process ever sees it
half-made; an existing file is checked (kind, mode, header, length) before any connection opens it,
so a file memkit refuses is left exactly as it was found.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import tempfile
import threading
import urllib.parse
from pathlib import Path

from ..errors import StoreError
from .backend import SqlitePart
from .schema import SqliteSchema, check_schema, database_id, meta_root_page, migrate
from .wal import WalLog, file_size

SQLITE_MAGIC = b"SQLite format 3\x00"

PRIVATE_FILE_MODE = 0o600
"""The mode of every file the store creates (databases, their -wal and -shm, exported bundles)."""


def sqlite_uri(path: str | os.PathLike[str], mode: str) -> str:
    """A `file:` URI for sqlite3 (`mode` ro, rw or rwc); the path is quoted, so '?' or '#' in it stay plain."""
    return "file:" + urllib.parse.quote(str(Path(path).absolute())) + f"?mode={mode}"


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds a lock (SQLITE_BUSY or SQLITE_LOCKED),
    decided by the error code's primary part (its low byte), never by the message text."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def sidecars(path: Path) -> list[Path]:
    """The `-wal` and `-shm` files beside `path` that exist now."""
    return [p for p in (Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]


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
    # Looked for before the database itself: a creator links a whole file into place before its
    # connection makes a -wal, so a -wal seen first means the database was there too.
    left = " and ".join(p.name for p in sidecars(path))
    if not path.exists():
        if left:
            raise StoreError(
                f"{path} does not exist, but {left} beside it are left from a database that "
                "was there before (deleted after a writer was killed?); a new database would take its last "
                f"commits from them. Move or remove {left} (or put that database back) and "
                "open again; memkit left every file as it was"
            )
        return True
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a database file")
    if not path.is_file():
        raise StoreError(f"{path} is not a regular file")
    if not path.stat().st_mode & stat.S_IWUSR:
        raise StoreError(f"{path} is read-only; memkit needs to write to it (copy it, or change its mode)")
    with path.open("rb") as handle:
        header = handle.read(100)
    check_header(path, header, "not a memkit database; remove it or choose another path", "; memkit left it as it was")
    return False


def check_header(path: Path, header: bytes, empty: str, foreign: str = "") -> None:
    """Refuse (StoreError) a file by its first 100 bytes (`header`) and its length: empty, not SQLite,
    shorter than a header, or cut short. `empty` and `foreign` end the messages for an empty file
    and for one of another kind.

    Cut short: SQLite reads missing bytes of its last page as zeros, so a cut inside it passes
    `quick_check` and silently loses the end of a record; so the length must be whole pages, at least
    as many as the header counts. Not while a non-empty `-wal` is beside it: it completes the file.
    """
    if not header:
        raise StoreError(f"{path} is empty (0 bytes), {empty}")
    if not header.startswith(SQLITE_MAGIC):
        raise StoreError(f"{path} is not a SQLite database (it starts with {header[:16]!r}){foreign}")
    if len(header) < 100:
        raise StoreError(f"{path} is truncated ({len(header)} bytes, shorter than a SQLite header)")
    if file_size(f"{path}-wal"):
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


def check_wal(path: Path) -> None:
    """Refuse a `-wal` beside `path` that holds commits of another database.

    Every memkit commit writes the database's `store_meta` row, which carries its id: the id is read
    from the main file alone (`immutable`: no lock, no file made), and each committed version of that
    row's page in the WAL as bytes (wal.py). A version without the id is another database's, which
    the next checkpoint would write into this file for good. Files before step 3 are left to SQLite.

    Raises:
        StoreError: the WAL is another database's (its page size or id differs). No file is changed.
    """
    wal = Path(f"{path}-wal")
    if not file_size(wal):
        return
    try:
        with contextlib.closing(sqlite3.connect(sqlite_uri(path, "ro") + "&immutable=1", uri=True)) as conn:
            own_id, page, page_size = (database_id(conn), meta_root_page(conn),
                                       conn.execute("PRAGMA page_size").fetchone()[0])
    except sqlite3.Error:
        return  # the schema check that follows names what is wrong with the file itself
    if own_id is None or page is None:
        return
    try:
        log = WalLog(wal)
        foreign = log.valid and log.page_size != page_size
        foreign = foreign or any(own_id.encode("ascii") not in version for version in log.committed_versions(page))
    except FileNotFoundError:
        return  # another process's last connection closed meanwhile: it checkpointed the WAL and removed it
    if foreign:
        raise StoreError(
            f"{wal.name} beside {path} is not its write-ahead log: it holds commits of another database "
            f"(copied or left there from elsewhere); opening would mix them into {path.name}. Move "
            f"{wal.name} (and {path.name}-shm) away from it and open again; memkit left every file as it was"
        )


class FileChecks(SqlitePart):
    """`SqliteDatabase`'s checks of an existing file before its connection opens it (db.py)."""

    def _inspect_schema(self, check_integrity: bool) -> None:
        """Check the schema on a connection of its own: read-only when a `-wal` is beside the file
        (closing the last read-write connection would checkpoint that WAL into a file memkit may be
        about to refuse); else read-write, which removes the `-wal`/`-shm` it made (a read-only one
        would leave a `-shm` behind)."""
        path = self.path
        mode = "ro" if Path(f"{path}-wal").exists() else "rw"
        try:
            conn = sqlite3.connect(sqlite_uri(path, mode), uri=True, isolation_level=None,
                                   timeout=self.limits.busy_timeout_ms / 1000)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path}: {exc}") from None
        try:
            check_schema(SqliteSchema(conn, path, check_integrity))
        except sqlite3.Error as exc:
            raise self._open_error(exc) from None
        finally:
            conn.close()

    def _open_error(self, exc: sqlite3.Error) -> StoreError:
        if isinstance(exc, sqlite3.OperationalError):
            if is_busy(exc):
                return self.locked_error()
            return StoreError(f"cannot use {self.path}: {exc}; the file was left as it was")
        return StoreError(f"{self.path} is damaged or not a database ({exc}); memkit left it as it was")


_CREATING = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.(?P<thread>\d+)\.creating(-wal|-shm|-journal)?")


def _alive(pid: int, thread: int) -> bool:
    if pid == os.getpid():
        return thread in {t.ident for t in threading.enumerate()}
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def remove_dead_partials(path: Path) -> list[str]:
    """Remove the half-made databases (`.NAME.PID.THREAD.creating` and its journals) of `path` whose
    creator is no longer alive; return their names. A live creator's files, and those of other
    databases in the folder, are left alone; a pid reused by another live process keeps its file.
    """
    removed = []
    for entry in path.parent.iterdir():
        match = _CREATING.fullmatch(entry.name)
        if match is None or match["name"] != path.name or _alive(int(match["pid"]), int(match["thread"])):
            continue
        with contextlib.suppress(FileNotFoundError):
            entry.unlink()
            removed.append(entry.name)
    return removed


def create_file(path: Path) -> None:
    """Make a new database beside `path`, complete with its schema, and link it into place.

    Built aside, so a process that opens `path` at the same moment (or after a crash) sees no file or
    a whole memkit database, never an empty one it would refuse; if another process linked its copy
    first, that one is used. The file is 0600 whatever the umask, so another user of a shared machine
    cannot read the memory (memkit never changes the mode of a file it did not create).

    Raises:
        StoreError: the new database could not be built.
    """
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.creating")
    try:
        partial.unlink(missing_ok=True)  # a leftover of a crashed process that had our pid
        # Made here, 0600 whatever the umask, before SQLite opens it: SQLite would make it 0644
        # under umask 022, and it gives the -wal and -shm the database file's own mode.
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE))
        os.chmod(partial, PRIVATE_FILE_MODE)  # the umask may have taken bits away, never added: exact 0600
        try:
            conn = sqlite3.connect(str(partial), isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                migrate(SqliteSchema(conn))
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


def write_private(target: Path, data: bytes) -> None:
    """Write `data` to `target` whole: a private temporary file beside it, fsynced, renamed into place.

    `tempfile.mkstemp` makes it (a random name, `O_EXCL | O_NOFOLLOW`, 0600: a bundle holds a user's
    whole memory), so a link planted at a name memkit would use is never written through; a link at
    `target` itself is refused, neither followed nor silently undone.

    Raises:
        StoreError: `target` is a symbolic link or a folder. Nothing was written.
        OSError: the folder cannot be written; no temporary file is left behind.
    """
    if target.is_symlink():
        raise StoreError(
            f"{target} is a symbolic link (to {os.readlink(target)}); memkit never writes through a link. "
            "Remove the link or choose another path; nothing was written"
        )
    if target.is_dir():
        raise StoreError(f"{target} is a folder; give a file path")
    handle, scratch = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(scratch, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise
