"""MemoryStore: the long-term memory in one SQLite file, every read and write bound to one user.

One long-lived connection per store. Writes run in `BEGIN IMMEDIATE` transactions, so the quota
check, the write and the size check see one consistent database and racing writers in other
processes wait their turn instead of both passing a check. WAL lets readers go on while a writer works.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Sequence

from .clock import Clock, iso, utc_now
from .errors import QuotaError, StoreError, ValidationError
from .limits import DEFAULT_LIMITS, KINDS, Limits, check_text
from .transcript import TURN_ROLES
from .migrations import EXPECTED_TABLES, MIGRATIONS, SCHEMA_VERSION, expected_objects

Record = dict[str, Any]
"""A memory as the kit hands it out: kind, key, value, source_session, revision, created_at, updated_at."""

SQLITE_MAGIC = b"SQLite format 3\x00"
EXPORT_FORMAT = "memkit-export"
EXPORT_FORMAT_VERSION = 1

_RECORD_SQL = "kind, memory_key, value, source_session, revision, created_at, updated_at"
_INSERT_MEMORY = (
    "INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision,"
    " created_at, updated_at, key_fold, value_fold) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_EVENT = (
    "INSERT INTO memory_events (user_id, kind, memory_key, action, revision, session_id,"
    " old_value, new_value, confirmation, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def seal_bundle(lines: Iterable[dict[str, Any]]) -> str:
    """Export bundle text: one JSON line per item (sorted keys, UTF-8 kept), then their SHA-256.

    `export_user` writes bundles with it, and `import_records` checks the same checksum. The
    checksum finds damage, not forgery: anyone can seal an edited bundle again.
    """
    body = "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines)
    digest = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()
    return body + json.dumps({"type": "checksum", "sha256": digest}) + "\n"


def sqlite_uri(path: str | os.PathLike[str], mode: str) -> str:
    """A `file:` URI for sqlite3 (`mode` ro, rw or rwc); the path is quoted, so '?' or '#' in it stay plain."""
    return "file:" + urllib.parse.quote(str(Path(path).absolute())) + f"?mode={mode}"


def _is_busy(exc: sqlite3.Error) -> bool:
    """SQLite reports a lock held past the busy timeout only in the message ("database is locked")."""
    return "locked" in str(exc) or "busy" in str(exc)


def _record(row: sqlite3.Row) -> Record:
    return {
        "kind": row["kind"],
        "key": row["memory_key"],
        "value": row["value"],
        "source_session": row["source_session"],
        "revision": row["revision"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


class MemoryStore:
    """A user-scoped long-term memory in a SQLite file.

    Threads may share one store: the connection is opened with `check_same_thread=False` and every
    operation holds the store's lock, so calls from several threads run one at a time. Processes
    each open their own store on the same file; SQLite's locks (WAL, `busy_timeout`) coordinate them.

    Args:
        path: the database file. If it does not exist it is built beside, with the current schema,
            and linked into place whole (so no process ever sees it half-made); an existing file must
            be a memkit database, or the store refuses it and leaves it untouched. Its folder must
            exist and be writable (WAL keeps `-wal` and `-shm` files beside it); a symbolic link is
            refused.
        limits: the bounds to enforce (see `Limits`); raise them for large experiments.
        synchronous: `"FULL"` (default) makes each commit durable through a power cut: it waits for
            the WAL to reach the disk. `"NORMAL"` skips that wait in WAL mode: the database stays
            consistent, but the last commits before a power cut (not a process crash) may be lost.
        clock: where timestamps come from (tests pass a `FakeClock`).
        check_integrity: run `PRAGMA quick_check` when opening an existing file (cost grows with size).

    Raises:
        StoreError: the file is not a memkit database, is damaged, newer, read-only or locked.

    Example:
        >>> with MemoryStore(tmp / "memory.sqlite3") as store:          # doctest: +SKIP
        ...     store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        1
    """

    fts_min_user_rows: int = 1000
    """How many of a user's rows a search scans before it may turn to the trigram index.

    A user with fewer records is searched by a scan of their own rows alone: newest first, stopping
    at `limit` matches, so its cost is bounded by the user's size, whatever the size of the store.
    For a user with at least this many records (and a query of 3+ characters) the newest this-many
    rows are scanned first, and the index is asked only when they hold fewer than `limit` matches.
    The index covers every user's rows, so its cost grows with how common the term is in the whole
    store; a term that a user's newest rows rarely contain is, by the same token, rare enough to
    ask it for. `bench/RESULTS.md` has the measurements; 0 means "always the index", a huge
    number "never"."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        limits: Limits = DEFAULT_LIMITS,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        clock: Clock = utc_now,
        check_integrity: bool = True,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValidationError(f"synchronous is {synchronous!r}; use 'FULL' or 'NORMAL'")
        self.path = Path(path)
        self.limits = limits
        self.synchronous = synchronous
        self._clock = clock
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._conn = self._open(check_integrity)

    # -- opening -----------------------------------------------------------------------------------

    def _open(self, check_integrity: bool) -> sqlite3.Connection:
        path = self.path
        if self._inspect_file(path):
            self._create(path)
        else:
            self._inspect_schema(path, check_integrity)
        uri = sqlite_uri(path, "rw")
        try:
            conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False,
                timeout=self.limits.busy_timeout_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path}: {exc}") from None
        conn.row_factory = sqlite3.Row
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.limits.busy_timeout_ms)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(f"{path} could not be switched to WAL mode (it stays in {mode!r} mode)")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            self._migrate(conn)
        except sqlite3.OperationalError as exc:
            conn.close()
            if _is_busy(exc):
                raise self._locked_error() from None
            raise StoreError(f"cannot use {path}: {exc}; the file was left as it was") from None
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{path} is damaged or not a database ({exc}); memkit left it as it was") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _inspect_schema(self, path: Path, check_integrity: bool) -> None:
        """Check an existing file on a connection of its own before the store's connection opens it.

        When a `-wal` file sits beside the database, the check reads through a read-only connection:
        closing the last read-write one would checkpoint that WAL into the file, changing a file
        memkit may be about to refuse. Without one, a read-write connection leaves the file as it
        was and removes the `-wal`/`-shm` it made (a read-only one would leave a `-shm` behind).
        """
        mode = "ro" if Path(f"{path}-wal").exists() else "rw"
        uri = sqlite_uri(path, mode)
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None,
                                   timeout=self.limits.busy_timeout_ms / 1000)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path}: {exc}") from None
        try:
            self._check_schema(conn, path, check_integrity)
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise self._locked_error() from None
            raise StoreError(f"cannot use {path}: {exc}; the file was left as it was") from None
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path} is damaged or not a database ({exc}); memkit left it as it was") from None
        finally:
            conn.close()

    def _create(self, path: Path) -> None:
        """Make a new database beside `path`, complete with its schema, and link it into place.

        Built aside, so `path` never exists half-made: a process that opens it at the same moment
        (or after a crash during creation) sees no file or a whole memkit database, never an empty
        file it would rightly refuse. `os.link` fails if another process linked its copy first; then
        that one is used and ours is dropped.
        """
        partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.creating")
        try:
            partial.unlink(missing_ok=True)  # a leftover of a crashed process that had our pid
            try:
                conn = sqlite3.connect(str(partial), isolation_level=None)
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    self._migrate(conn)
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

    @staticmethod
    def _inspect_file(path: Path) -> bool:
        """Refuse what SQLite should not be pointed at; return True when the file is still to be made."""
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
        MemoryStore._check_length(path, header)
        return False

    @staticmethod
    def _check_length(path: Path, header: bytes) -> None:
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

    @staticmethod
    def _check_schema(conn: sqlite3.Connection, path: Path, check_integrity: bool) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        # Any table, view, index or trigger, not only tables: a file holding only another program's
        # views is still theirs, and the migrations must not be run into it.
        objects = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master")
            if not row[0].startswith("sqlite_")
        }
        if check_integrity:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise StoreError(f"{path} is corrupt (quick_check: {problems[0]}); memkit left it as it was")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path} has schema version {version}, newer than this memkit knows ({SCHEMA_VERSION}); "
                "upgrade memkit to open it. The file was not changed"
            )
        if version < 0:
            raise StoreError(f"{path} has a malformed schema version ({version}); memkit left it as it was")
        application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if version == 0 and application_id != 0:
            raise StoreError(
                f"{path} is marked as another program's file (application_id {application_id}); "
                "memkit left it as it was"
            )
        if version == 0 and objects:
            raise StoreError(
                f"{path} holds tables of another program ({', '.join(sorted(objects)[:5])}) and no memkit "
                "schema version; memkit left it as it was"
            )
        if version >= 1:  # a memkit file at this or an older version: it must hold what its steps made
            present = {
                (row[0], row[1]) for row in conn.execute("SELECT type, name FROM sqlite_master")
                if not row[1].startswith("sqlite_")
            }
            missing_objects = sorted(expected_objects(version) - present)
            if missing_objects:
                names = ", ".join(f"{kind} {name!r}" for kind, name in missing_objects[:5])
                raise StoreError(
                    f"{path} says schema version {version} but lacks {names}; "
                    "it is malformed and memkit left it as it was"
                )
            for table, expected in EXPECTED_TABLES.items():
                columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                if not expected <= columns:
                    missing = ", ".join(sorted(expected - columns))
                    raise StoreError(
                        f"{path} says schema version {version} but table {table!r} lacks {missing}; "
                        "it is malformed and memkit left it as it was"
                    )

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        """Run the missing steps, each with its version bump in one transaction.

        The version is read again after `BEGIN IMMEDIATE`: another process may have run the step
        while this one waited for the lock, and running it twice would fail half-way.
        """
        if conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
            return  # the common case takes no write lock, so opening works while another writes
        while True:
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version >= SCHEMA_VERSION:
                    conn.execute("COMMIT")
                    return
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {version + 1}")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # -- connection life ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.path)!r})"

    @property
    def connection(self) -> sqlite3.Connection:
        """The store's connection, for read-only inspection (notebooks, health checks)."""
        if self._conn is None:
            raise StoreError(f"the store for {self.path} is closed")
        return self._conn

    def _locked_error(self) -> StoreError:
        return StoreError(
            f"{self.path} is locked by another writer and stayed locked past the busy timeout "
            f"({self.limits.busy_timeout_ms} ms); nothing was written. Try again later"
        )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: `BEGIN IMMEDIATE`, commit on success, roll back on any exception.

        Taking the write lock at BEGIN (not at the first write) means a check made inside the
        transaction still holds when the write happens: no other writer can slip in between.

        The store's methods may be called inside it, from the same thread, and then commit or roll
        back together with it. A nested transaction (each `put` opens one) is a savepoint: when it
        fails, only its own writes are undone and the error reaches the outer block.

        Raises:
            StoreError: the database stayed locked past the busy timeout, or the write failed.

        Example:
            >>> with store.transaction():                                  # doctest: +SKIP
            ...     store.put("alice", "s1", "preference", "drink", "tea")
            ...     store.put("alice", "s1", "preference", "food", "rice")  # both or neither
        """
        with self._lock:
            conn = self.connection
            if conn.in_transaction:
                yield from self._savepoint(conn)
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise self._locked_error() if _is_busy(exc) else StoreError(
                    f"cannot write to {self.path}: {exc}"
                ) from None
            try:
                yield conn
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"write to {self.path} failed and was rolled back: {exc}") from exc
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(f"commit to {self.path} failed and was rolled back: {exc}") from exc

    def _savepoint(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        # Only this thread can be inside the outer transaction: it holds the store's lock throughout.
        conn.execute("SAVEPOINT memkit_nested")
        try:
            yield conn
        except BaseException as exc:
            conn.execute("ROLLBACK TO memkit_nested")
            conn.execute("RELEASE memkit_nested")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"write to {self.path} failed and was rolled back: {exc}") from exc
            raise
        conn.execute("RELEASE memkit_nested")

    def _fetch(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Run one read statement under the store's lock and return its rows.

        One statement in autocommit mode is already a consistent snapshot of its own, so it needs
        no BEGIN/COMMIT around it; those two statements cost as much again as an indexed read
        (measured in bench/RESULTS.md). Inside this thread's `transaction()` it reads through it.
        """
        with self._lock:
            try:
                return self.connection.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"read from {self.path} failed: {exc}") from exc

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A consistent read snapshot (a deferred transaction) under the store's lock, for reads of
        several statements that must agree (export, health); one statement needs only `_fetch`.

        Inside this thread's `transaction()` it reads through that transaction, so it sees the
        writes made so far instead of failing to begin a second one.
        """
        with self._lock:
            conn = self.connection
            try:
                if conn.in_transaction:
                    yield conn
                    return
                conn.execute("BEGIN")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"read from {self.path} failed: {exc}") from exc

    # -- checks inside write transactions ------------------------------------------------------------

    def _check_quotas(self, conn: sqlite3.Connection, user: str, adding: int = 1) -> None:
        row = conn.execute("SELECT records FROM user_counts WHERE user_id = ?", (user,)).fetchone()
        mine = row[0] if row else 0
        if mine + adding > self.limits.max_records_per_user:
            raise QuotaError(
                f"user {user!r} has {mine} records; the per-user quota is {self.limits.max_records_per_user}. "
                "Update an existing key or delete one first"
            )
        total = conn.execute("SELECT records FROM total_count").fetchone()[0]
        if total + adding > self.limits.max_records_total:
            raise QuotaError(
                f"the store holds {total} records; the global quota is {self.limits.max_records_total}"
            )

    def _check_size(self, conn: sqlite3.Connection) -> None:
        """Measure after the write, inside the transaction: an over-cap write is rolled back whole."""
        size = self._db_bytes(conn)
        if size > self.limits.max_db_bytes:
            raise QuotaError(
                f"the write would grow the database to {size} bytes; the cap is {self.limits.max_db_bytes} bytes"
            )

    @staticmethod
    def _db_bytes(conn: sqlite3.Connection) -> int:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        return pages * conn.execute("PRAGMA page_size").fetchone()[0]

    def _check_identity(self, user: str, kind: str, key: str) -> None:
        self.limits.check_id("user", user)
        self.limits.check_kind(kind)
        self.limits.check_key(key)

    # -- the memory API ----------------------------------------------------------------------------------

    def put(self, user: str, session: str, kind: str, key: str, value: str, *,
            confirmation: str | None = None) -> Record:
        """Create or update one memory of `user`.

        An update raises the revision by one; writing the value a key already holds changes nothing
        (so a retried write is not counted twice). Keys already present may be updated at quota.

        Args:
            user: whose memory this is (chosen by the trusted caller, never by the model).
            session: the session the value came from (kept as `source_session`).
            kind: `preference` or `episode`.
            key: 1-64 of `[a-z][a-z0-9_.:-]`.
            value: 1-512 code points, not blank, no NUL, no lone surrogate.
            confirmation: what allowed the write (kept in the event history); at most 512 code points.

        Returns:
            The record as stored.

        Raises:
            ValidationError: an argument broke a rule. QuotaError: a quota or the size cap.
            StoreError: the database is locked or failed. In every case nothing was written.
        """
        self._check_identity(user, kind, key)
        self.limits.check_id("session", session)
        self.limits.check_value(value)
        if confirmation is not None:
            self.limits.check_confirmation(confirmation)
        with self.transaction() as conn:
            # The time is read holding the write lock, so updated_at follows commit order even
            # across threads and processes, and "newest first" means what it says.
            now = iso(self._clock())
            row = conn.execute(
                f"SELECT id, {_RECORD_SQL} FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
                (user, kind, key),
            ).fetchone()
            if row is not None and row["value"] == value:
                return _record(row)
            if row is None:
                self._check_quotas(conn, user)
                last = conn.execute(
                    "SELECT max(revision) FROM memory_events WHERE user_id = ? AND kind = ? AND memory_key = ?",
                    (user, kind, key),
                ).fetchone()[0]
                revision, created, action, old_value = (last or 0) + 1, now, "create", None
                conn.execute(
                    _INSERT_MEMORY,
                    (user, kind, key, value, session, revision, now, now, key.casefold(), value.casefold()),
                )
            else:
                revision, created, action, old_value = row["revision"] + 1, row["created_at"], "update", row["value"]
                conn.execute(
                    "UPDATE memories SET value = ?, value_fold = ?, source_session = ?, revision = ?,"
                    " updated_at = ? WHERE id = ?",
                    (value, value.casefold(), session, revision, now, row["id"]),
                )
            conn.execute(
                _INSERT_EVENT,
                (user, kind, key, action, revision, session, old_value, value, confirmation, now),
            )
            self._check_size(conn)
        return {"kind": kind, "key": key, "value": value, "source_session": session,
                "revision": revision, "created_at": created, "updated_at": now}

    def get(self, user: str, kind: str, key: str) -> Record | None:
        """The record of `user` under (kind, key), or None."""
        self._check_identity(user, kind, key)
        rows = self._fetch(
            f"SELECT {_RECORD_SQL} FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
            (user, kind, key),
        )
        return _record(rows[0]) if rows else None

    def delete(self, user: str, kind: str, key: str, *, session: str | None = None,
               confirmation: str | None = None) -> bool:
        """Delete one memory of `user`; True if it existed. The event history keeps the deletion.

        Args:
            session: the session that asked for the deletion, kept in the event (None if unknown).
            confirmation: what allowed the deletion, kept in the event; at most 512 code points.

        Raises:
            ValidationError: an argument broke a rule. StoreError: the database is locked or failed.
        """
        self._check_identity(user, kind, key)
        if session is not None:
            self.limits.check_id("session", session)
        if confirmation is not None:
            self.limits.check_confirmation(confirmation)
        with self.transaction() as conn:
            now = iso(self._clock())
            row = conn.execute(
                "SELECT id, value, revision FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
                (user, kind, key),
            ).fetchone()
            if row is None:
                return False
            conn.execute("DELETE FROM memories WHERE id = ?", (row["id"],))
            conn.execute(
                _INSERT_EVENT, (user, kind, key, "delete", row["revision"], session, row["value"], None, confirmation, now)
            )
        return True

    def search(self, user: str, query: str = "", limit: int = 5, kind: str | None = None) -> list[Record]:
        """Memories of `user` whose key or value contains `query`, newest first.

        The rule is a literal, case-insensitive substring match: both sides are compared after
        Python's `str.casefold()`, and `%`, `_`, quotes and the like are plain characters. An empty
        query returns the most recently updated records. Large users (see `fts_min_user_rows`) are
        searched through the trigram index, which gives the same results.

        Args:
            user: whose memories to search.
            query: at most 256 code points; may be empty.
            limit: 1 to `Limits.max_search_limit` results.
            kind: only this kind, or both when None.

        Raises:
            ValidationError: a bad user, query or kind, or a limit out of range (refused, not clamped).
        """
        self.limits.check_id("user", user)
        self.limits.check_query(query)
        self.limits.check_limit(limit)
        if kind is not None:
            self.limits.check_kind(kind)
        folded = query.casefold()
        kind_sql, kind_args = ("AND kind = ?", (kind,)) if kind else ("", ())
        newest = "ORDER BY updated_at DESC, id DESC"
        if not folded:
            return [_record(row) for row in self._fetch(
                f"SELECT {_RECORD_SQL} FROM memories WHERE user_id = ? {kind_sql} {newest} LIMIT ?",
                (user, *kind_args, limit),
            )]
        match = "(instr(key_fold, ?) > 0 OR instr(value_fold, ?) > 0)"
        with self._lock:
            if len(folded) < 3 or self._user_records(user) < self.fts_min_user_rows:
                # The user's rows through the (user_id, updated_at) index, newest first: SQLite stops
                # at the `limit`-th match, and never reads another user's rows.
                rows = self._fetch(
                    f"SELECT {_RECORD_SQL} FROM memories WHERE user_id = ? {kind_sql} AND {match} {newest} LIMIT ?",
                    (user, *kind_args, folded, folded, limit),
                )
                return [_record(row) for row in rows]
            if self.fts_min_user_rows > 0:
                # A large user: the newest rows first. If they hold `limit` matches, those are the
                # answer (every other match is older); only otherwise is the index worth asking.
                rows = self._fetch(
                    f"SELECT {_RECORD_SQL} FROM (SELECT * FROM memories WHERE user_id = ? {kind_sql} "
                    f"{newest} LIMIT ?) WHERE {match} {newest} LIMIT ?",
                    (user, *kind_args, self.fts_min_user_rows, folded, folded, limit),
                )
                if len(rows) == limit:
                    return [_record(row) for row in rows]
            # CROSS JOIN fixes the order: the index query runs once, then rows are fetched by id and
            # filtered by user. With a plain JOIN SQLite walked the user's rows and ran the MATCH
            # again for each of them, which was slower than a scan by two orders of magnitude.
            rows = self._fetch(
                f"SELECT {_RECORD_SQL} FROM memories_fts CROSS JOIN memories m ON m.id = memories_fts.rowid"
                f" WHERE memories_fts MATCH ? AND m.user_id = ? {kind_sql.replace('kind', 'm.kind')}"
                " ORDER BY m.updated_at DESC, m.id DESC LIMIT ?",
                ('"' + folded.replace('"', '""') + '"', user, *kind_args, limit),
            )
            return [_record(row) for row in rows]

    def search_many(self, user: str, queries: Sequence[str], limit: int = 5,
                    kinds: Sequence[str] = KINDS) -> dict[tuple[str, str], list[Record]]:
        """`search(user, query, limit, kind)` for every query and kind, in one pass.

        What retrieval needs: a few terms, each in both kinds. Sixteen searches that each scan the
        user's rows cost sixteen scans (and a miss scans all of them); here the user's rows are read
        once, newest first, and matched against every query inside SQLite. A user with `fts_min_user_rows` or more
        records is searched query by query instead, so the trigram index can serve them.

        Returns:
            `{(query, kind): records}`, exactly what `search` returns for each pair.

        Raises:
            ValidationError: a bad user, query, kind or limit (as `search`).
        """
        self.limits.check_id("user", user)
        for query in queries:
            self.limits.check_query(query)
        self.limits.check_limit(limit)
        for kind in kinds:
            self.limits.check_kind(kind)
        unique = list(dict.fromkeys(queries))
        if not unique or not kinds:
            return {(q, k): [] for q in queries for k in kinds}
        with self._lock:
            if self._user_records(user) >= self.fts_min_user_rows:
                return {(q, k): self.search(user, q, limit, k) for q in unique for k in kinds}
            # One pass over the user's rows, newest first: the rows that match any query, each
            # with one flag per query; the first `limit` flagged rows of a kind are that search's
            # answer. (Measured against one ranked statement per pair with row_number(): faster,
            # because each row is read and matched once.) An empty query matches every row, as
            # an empty search does: instr(x, '') is 1.
            match = [f"(instr(key_fold, ?{n}) > 0 OR instr(value_fold, ?{n}) > 0)" for n in range(2, len(unique) + 2)]
            kind_params = ", ".join(f"?{n}" for n in range(len(unique) + 2, len(unique) + 2 + len(kinds)))
            rows = self._fetch(
                f"SELECT {_RECORD_SQL}, {', '.join(match)} FROM memories"
                f" WHERE user_id = ?1 AND kind IN ({kind_params}) AND ({' OR '.join(match)})"
                " ORDER BY updated_at DESC, id DESC",
                (user, *(q.casefold() for q in unique), *kinds),
            )
        found: dict[tuple[str, str], list[Record]] = {(q, k): [] for q in unique for k in kinds}
        for row in rows:
            for n, query in enumerate(unique, start=7):  # the flags follow the 7 record columns
                hits = found[(query, row["kind"])]
                if row[n] and len(hits) < limit:
                    hits.append(_record(row))
        return found

    def _user_records(self, user: str) -> int:
        rows = self._fetch("SELECT records FROM user_counts WHERE user_id = ?", (user,))
        return rows[0][0] if rows else 0

    def records(self, user: str, kind: str | None = None) -> list[Record]:
        """Every record of `user` (bounded by the per-user quota), by kind then key."""
        self.limits.check_id("user", user)
        if kind is not None:
            self.limits.check_kind(kind)
        rows = self._fetch(
            f"SELECT {_RECORD_SQL} FROM memories WHERE user_id = ? AND (? IS NULL OR kind = ?)"
            " ORDER BY kind, memory_key",
            (user, kind, kind),
        )
        return [_record(row) for row in rows]

    def users(self) -> dict[str, int]:
        """Users that have records, with their record counts, by user id."""
        return {row[0]: row[1] for row in self._fetch("SELECT user_id, records FROM user_counts ORDER BY user_id")}

    def history(self, user: str, kind: str, key: str) -> list[dict[str, Any]]:
        """How the value under (kind, key) changed, oldest first, and on whose say-so."""
        self._check_identity(user, kind, key)
        rows = self._fetch(
            "SELECT action, revision, session_id, old_value, new_value, confirmation, at FROM memory_events"
            " WHERE user_id = ? AND kind = ? AND memory_key = ? ORDER BY id",
            (user, kind, key),
        )
        return [
            {"action": r["action"], "revision": r["revision"], "session": r["session_id"],
             "old_value": r["old_value"], "new_value": r["new_value"],
             "confirmation": r["confirmation"], "at": r["at"]}
            for r in rows
        ]

    def forget_user(self, user: str) -> dict[str, int]:
        """Remove every trace of `user`: records, event history and archived transcript.

        Returns:
            How many rows of each were removed.
        """
        self.limits.check_id("user", user)
        with self.transaction() as conn:
            counts = {
                "records": conn.execute("DELETE FROM memories WHERE user_id = ?", (user,)).rowcount,
                "events": conn.execute("DELETE FROM memory_events WHERE user_id = ?", (user,)).rowcount,
                "transcript": conn.execute("DELETE FROM transcript WHERE user_id = ?", (user,)).rowcount,
            }
        return counts

    # -- export and import ---------------------------------------------------------------------------

    def export_user(self, user: str, path: str | os.PathLike[str] | None = None) -> str:
        """A portable bundle of `user`'s records and their history, as JSON Lines.

        The first line is a header (format, schema version, user, counts); then one line per record
        and per event; the last line is the SHA-256 of all the lines before it. The bundle has no
        timestamp of its own, so exporting the same data twice gives the same bytes.

        Args:
            user: whose memory to export.
            path: when given, the bundle is also written there (through a temporary file and a rename).

        Returns:
            The bundle text.

        Raises:
            OSError: `path` could not be written (no partial file is left behind).
        """
        self.limits.check_id("user", user)
        with self._reading() as conn:
            records = conn.execute(
                f"SELECT {_RECORD_SQL} FROM memories WHERE user_id = ? ORDER BY kind, memory_key", (user,)
            ).fetchall()
            events = conn.execute(
                "SELECT kind, memory_key, action, revision, session_id, old_value, new_value, confirmation, at"
                " FROM memory_events WHERE user_id = ? ORDER BY id",
                (user,),
            ).fetchall()
        lines = [{"format": EXPORT_FORMAT, "format_version": EXPORT_FORMAT_VERSION,
                  "schema_version": SCHEMA_VERSION, "user": user,
                  "records": len(records), "events": len(events)}]
        lines += [{"type": "record", **_record(row)} for row in records]
        lines += [{"type": "event", "kind": e["kind"], "key": e["memory_key"], "action": e["action"],
                   "revision": e["revision"], "session": e["session_id"], "old_value": e["old_value"],
                   "new_value": e["new_value"], "confirmation": e["confirmation"], "at": e["at"]}
                  for e in events]
        text = seal_bundle(lines)
        if path is not None:
            target = Path(path)
            partial = target.with_name(target.name + ".partial")
            try:
                # Bytes, not text mode: the checksum covers "\n" line ends, which text mode may translate.
                partial.write_bytes(text.encode("utf-8"))
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
        return text

    def import_records(self, bundle: str | os.PathLike[str], *, user: str | None = None) -> dict[str, int]:
        """Load a bundle made by `export_user`, all or nothing.

        The records and their event history arrive exactly as exported (revisions, sessions,
        timestamps, confirmations); the import itself adds no event. The CLI asks for `--confirm`.

        Args:
            bundle: the bundle text (a `str`), or a `pathlib.Path` to a bundle file.
            user: import under this user id instead of the one in the bundle.

        Returns:
            How many records and events were imported.

        Raises:
            ValidationError: the bundle is malformed, truncated, its checksum or version is wrong, or
                an entry breaks a limit. StoreError: the user already has data. QuotaError: it
                would not fit. In every case nothing was imported.
        """
        if isinstance(bundle, os.PathLike):
            try:
                text: object = Path(bundle).read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ValidationError(f"cannot read the bundle file {os.fspath(bundle)}: {exc}") from None
        else:
            text = bundle
        if not isinstance(text, str):
            raise ValidationError(f"bundle must be text or a path, not {type(text).__name__}")
        header, records, events = self._parse_bundle(text)
        target = self.limits.check_id("user", user if user is not None else header["user"])
        with self.transaction() as conn:
            held = conn.execute(
                "SELECT (SELECT count(*) FROM memories WHERE user_id = ?) + "
                "(SELECT count(*) FROM memory_events WHERE user_id = ?)", (target, target)
            ).fetchone()[0]
            if held:
                raise StoreError(
                    f"user {target!r} already has memory in this store; forget_user first, or import with another user id"
                )
            self._check_quotas(conn, target, adding=len(records))
            conn.executemany(
                _INSERT_MEMORY,
                [(target, r["kind"], r["key"], r["value"], r["source_session"], r["revision"],
                  r["created_at"], r["updated_at"], r["key"].casefold(), r["value"].casefold()) for r in records],
            )
            conn.executemany(
                _INSERT_EVENT,
                [(target, e["kind"], e["key"], e["action"], e["revision"], e["session"], e["old_value"],
                  e["new_value"], e["confirmation"], e["at"]) for e in events],
            )
            self._check_size(conn)
        return {"records": len(records), "events": len(events)}

    def _parse_bundle(self, text: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        # Split on "\n" only: JSON escapes it inside strings, but not U+2028, U+0085 and the other
        # characters str.splitlines() also breaks at, which a value may hold.
        if not text.endswith("\n"):
            raise ValidationError("bundle does not end with a newline; it may be truncated")
        lines = text[:-1].split("\n")
        if len(lines) < 2:
            raise ValidationError("bundle is empty or has no checksum line")
        parsed = []
        for number, line in enumerate(lines, start=1):
            try:
                parsed.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValidationError(f"bundle line {number} is not JSON ({exc.msg}); it may be truncated") from None
            except (ValueError, RecursionError) as exc:
                # JSON that Python will not decode: a number of over 4300 digits, or very deep nesting.
                raise ValidationError(f"bundle line {number} cannot be decoded: {str(exc)[:120]}") from None
        body, footer = "".join(line + "\n" for line in lines[:-1]), parsed[-1]
        if not isinstance(footer, dict) or footer.get("type") != "checksum":
            raise ValidationError("bundle has no checksum line at its end; it may be truncated")
        if footer.get("sha256") != hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest():
            raise ValidationError("bundle checksum does not match its content; it was changed or damaged")
        header = parsed[0]
        if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
            raise ValidationError("bundle does not start with a memkit export header")
        if header.get("format_version") != EXPORT_FORMAT_VERSION:
            raise ValidationError(
                f"bundle format version {header.get('format_version')!r} is not {EXPORT_FORMAT_VERSION}; "
                "use the memkit that made it"
            )
        if header.get("schema_version") != SCHEMA_VERSION:
            raise ValidationError(
                f"bundle was made with schema version {header.get('schema_version')!r}; "
                f"this memkit imports version {SCHEMA_VERSION}"
            )
        self.limits.check_id("bundle user", header.get("user"))
        records = [item for item in parsed[1:-1] if isinstance(item, dict) and item.get("type") == "record"]
        events = [item for item in parsed[1:-1] if isinstance(item, dict) and item.get("type") == "event"]
        counts = (header.get("records"), header.get("events"))
        if (len(records) + len(events) != len(parsed) - 2 or any(isinstance(n, bool) for n in counts)
                or counts != (len(records), len(events))):
            raise ValidationError("bundle line counts do not match its header")
        seen: set[tuple[str, str]] = set()
        for item in records:
            self._check_bundle_entry(item, ("kind", "key", "value", "source_session", "revision",
                                            "created_at", "updated_at", "type"))
            self.limits.check_kind(item["kind"])
            self.limits.check_key(item["key"])
            self.limits.check_value(item["value"])
            self.limits.check_id("source_session", item["source_session"])
            self._check_bundle_time(item, "created_at", "updated_at")
            if (item["kind"], item["key"]) in seen:
                raise ValidationError(f"bundle holds {item['kind']} {item['key']!r} twice")
            seen.add((item["kind"], item["key"]))
        for item in events:
            self._check_bundle_entry(item, ("kind", "key", "action", "revision", "session", "old_value",
                                            "new_value", "confirmation", "at", "type"))
            if item["action"] not in ("create", "update", "delete"):
                raise ValidationError(f"bundle event action {item['action']!r} is unknown")
            # Events go into the history as they are, so they meet the same rules as live writes.
            self.limits.check_kind(item["kind"])
            self.limits.check_key(item["key"])
            if item["session"] is not None:
                self.limits.check_id("event session", item["session"])
            for name in ("old_value", "new_value"):
                if item[name] is not None:
                    self.limits.check_value(item[name])
            if item["confirmation"] is not None:
                self.limits.check_confirmation(item["confirmation"])
            self._check_bundle_time(item, "at")
        return header, records, events

    @staticmethod
    def _check_bundle_entry(item: dict[str, Any], fields: tuple[str, ...]) -> None:
        if set(item) != set(fields):
            raise ValidationError(f"bundle entry has fields {sorted(item)}; expected {sorted(fields)}")
        revision = item["revision"]
        # At most 2**63 - 1: SQLite's INTEGER; a larger one would fail half-way through the import.
        if not isinstance(revision, int) or isinstance(revision, bool) or not 1 <= revision < 2**63:
            raise ValidationError(f"bundle entry revision {revision!r} is not a positive 64-bit integer")
        for name, value in item.items():
            if value is not None and not isinstance(value, str) and name != "revision":
                raise ValidationError(f"bundle field {name!r} is a {type(value).__name__}, not text")

    @staticmethod
    def _check_bundle_time(item: dict[str, Any], *names: str) -> None:
        for name in names:
            moment = item[name]
            if not isinstance(moment, str) or not moment or len(moment) > 64:
                raise ValidationError(f"bundle field {name!r} is {moment!r}; expected a timestamp")
            check_text(name, moment)

    # -- transcript archive (turns that left the short-term window) -----------------------------------

    def archive_turns(self, user: str, session: str, turns: Iterable[dict[str, Any]]) -> int:
        """Keep turns of a session that left its short-term window; a turn already kept is skipped.

        Keyed by (user, session, turn number), so archiving the same turn twice (a retry after a
        crash) stores it once.

        Args:
            turns: dicts with `turn` (int >= 1), `role` (user, assistant, tool), `content`, `at`.

        Returns:
            How many turns were newly archived.

        Raises:
            ValidationError: a turn is malformed; nothing of this call was archived.
            QuotaError: the database would pass its size cap; nothing was archived.
        """
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        rows = []
        try:
            turns = list(turns)
        except TypeError:
            raise ValidationError(f"turns must be a list of turn dicts, not {type(turns).__name__}") from None
        for t in turns:
            if not isinstance(t, dict):
                raise ValidationError(f"a turn must be a dict with turn, role, content, at; got {type(t).__name__}")
            number, role, content, at = t.get("turn"), t.get("role"), t.get("content"), t.get("at")
            if not isinstance(number, int) or isinstance(number, bool) or number < 1:
                raise ValidationError(f"turn number {number!r} is not a positive integer")
            if role not in TURN_ROLES:
                raise ValidationError(f"turn role {role!r} is unknown; use one of {', '.join(TURN_ROLES)}")
            if not isinstance(content, str) or not isinstance(at, str):
                raise ValidationError("turn content and at must be strings")
            check_text("turn content", content)
            rows.append((user, session, number, role, content, at))
        with self.transaction() as conn:
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO transcript (user_id, session_id, turn, role, content, at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            added = conn.total_changes - before
            self._check_size(conn)
        return added

    def archived_turns(self, user: str, session: str) -> list[dict[str, Any]]:
        """The archived turns of one session of `user`, in turn order."""
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        rows = self._fetch(
            "SELECT turn, role, content, at FROM transcript WHERE user_id = ? AND session_id = ? ORDER BY turn",
            (user, session),
        )
        return [dict(row) for row in rows]

    def last_archived_turn(self, user: str, session: str) -> int:
        """The highest archived turn number of one session of `user` (0 if none), read from the key alone."""
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        rows = self._fetch("SELECT max(turn) FROM transcript WHERE user_id = ? AND session_id = ?", (user, session))
        return rows[0][0] or 0

    # -- operations ---------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """What an operator asks first, in one call.

        Returns:
            schema version, journal mode, synchronous, busy timeout, file size against the cap,
            records in all and per user (the 50 largest users) against the quotas, and whether the
            quota counters (the total and every user's) agree with the rows.
        """
        with self._reading() as conn:
            per_user = dict(conn.execute(
                "SELECT user_id, records FROM user_counts ORDER BY records DESC, user_id LIMIT 50"
            ).fetchall())
            total = conn.execute("SELECT records FROM total_count").fetchone()[0]
            users = conn.execute("SELECT count(*) FROM user_counts").fetchone()[0]
            db_bytes = self._db_bytes(conn)
            synchronous = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
                conn.execute("PRAGMA synchronous").fetchone()[0]
            ]
            return {
                "path": str(self.path),
                "sqlite_version": sqlite3.sqlite_version,
                "schema_version": conn.execute("PRAGMA user_version").fetchone()[0],
                "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
                "synchronous": synchronous,
                "busy_timeout_ms": conn.execute("PRAGMA busy_timeout").fetchone()[0],
                "db_bytes": db_bytes,
                "max_db_bytes": self.limits.max_db_bytes,
                "records_total": total,
                "max_records_total": self.limits.max_records_total,
                "users": users,
                "records_per_user": per_user,
                "max_records_per_user": self.limits.max_records_per_user,
                "counters_consistent": counters_consistent(conn),
            }


def counters_consistent(conn: sqlite3.Connection) -> bool:
    """Whether the quota counters (the total and every user's) agree with the rows: the one check.

    Per-user counters drift independently of the total (the quota check reads them), so they are
    compared with the rows both ways: a missing, extra or wrong counter all show.
    """
    total = conn.execute("SELECT records FROM total_count").fetchone()[0]
    counted = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    drifted = conn.execute(
        "SELECT (SELECT count(*) FROM (SELECT user_id, count(*) FROM memories GROUP BY user_id"
        "                              EXCEPT SELECT user_id, records FROM user_counts))"
        "     + (SELECT count(*) FROM (SELECT user_id, records FROM user_counts"
        "                              EXCEPT SELECT user_id, count(*) FROM memories GROUP BY user_id))"
    ).fetchone()[0]
    return bool(total == counted and not drifted)


def inspect_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read-only checks of a memkit file on a connection of its own: integrity and the quota counters.

    Used after a crash, before any store opens the file (opening could repair or migrate it).

    Returns:
        `integrity` ("ok" or SQLite's first complaint), `records` (rows in memories),
        `counted` (what the total counter says) and `counters_consistent` (bool).
    """
    with contextlib.closing(sqlite3.connect(sqlite_uri(path, "ro"), uri=True)) as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        records = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        counted = conn.execute("SELECT records FROM total_count").fetchone()[0]
        consistent = counters_consistent(conn)
    return {"integrity": integrity, "records": records, "counted": counted, "counters_consistent": consistent}


def fingerprint(store: MemoryStore) -> dict[str, Any]:
    """Row counts and a SHA-256 of every memory and event row: equal fingerprints, unchanged database.

    The digest covers the content of every user's records and events, read in one snapshot on a
    read-only connection of its own (WAL lets it read beside the store's connection), so it does
    not depend on how SQLite laid the pages out, and the store's own connection is not touched.
    """
    from .jsonutil import canonical_json

    with contextlib.closing(sqlite3.connect(sqlite_uri(store.path, "ro"), uri=True, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        memories = conn.execute(
            "SELECT user_id, kind, memory_key, value, source_session, revision, created_at, updated_at"
            " FROM memories ORDER BY user_id, kind, memory_key").fetchall()
        events = conn.execute(
            "SELECT id, user_id, kind, memory_key, action, revision, session_id, old_value, new_value,"
            " confirmation, at FROM memory_events ORDER BY id").fetchall()
        conn.execute("COMMIT")
    digest = hashlib.sha256(canonical_json([[list(r) for r in memories], [list(r) for r in events]]).encode())
    return {"memories": len(memories), "events": len(events), "sha256": digest.hexdigest()[:16]}
