"""MemoryStore: the long-term memory in one SQLite file, every read and write bound to one user.

The façade of the store package: it checks every argument against its `Limits`, then runs the
operation on its `SqliteDatabase` (db.py) through the modules that own each concept: search.py,
bundle.py (export and import), archive.py (the transcript archive), health.py.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Mapping, Sequence

from ..clock import Clock, iso, utc_now
from ..errors import ValidationError
from ..limits import DEFAULT_LIMITS, KINDS, Limits
from ..transcript import Turn
from . import archive, health, search
from . import bundle as bundle_format
from .db import SqliteDatabase
from .statements import RECORD_SQL, SQLITE_STATEMENTS as SQL, Record, Statements, put_read_args, to_record


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
            refused. A new database is never made beside a leftover `-wal` or `-shm` (they would
            bring back the commits of the database that was deleted), an existing one never opened
            with a `-wal` of another database; half-made files of creators that died are removed.
        limits: the bounds to enforce (see `Limits`); raise them for large experiments. The size cap
            bounds the `-wal` file too (checkpoints, `journal_size_limit`, a truncation after a
            write the cap refused).
        synchronous: `"FULL"` (default) makes each commit durable through a power cut: it waits for
            the WAL to reach the disk. `"NORMAL"` skips that wait in WAL mode: the database stays
            consistent, but the last commits before a power cut (not a process crash) may be lost.
        clock: where timestamps come from (tests pass a `FakeClock`).
        check_integrity: run `PRAGMA quick_check` when opening an existing file (cost grows with size).

    Raises:
        StoreError: the file is not a memkit database, is damaged, newer, read-only or locked, or a
            `-wal`/`-shm` beside it is not its own. Every file is left as it was found.

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
    number "never".

    The index is kept up to date only where it can be used: at open, the store keeps it if its
    `max_records_per_user` reaches this threshold (or a user already holds that many records) and
    stops keeping it otherwise (`search.fit_index`). Lowering the threshold on an open store builds
    the index at the first search that needs it."""

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
        self._db = SqliteDatabase(self.path, limits, synchronous, check_integrity)
        try:
            search.fit_index(self._db, limits, self.fts_min_user_rows)
        except BaseException:
            self._db.close()
            raise

    @staticmethod
    def statements() -> Statements:
        """The SQL this store runs for its writes and record reads (see `memkit.store.statements`).

        Public so that a benchmark can run exactly the store's statements on its schema, and follow
        a schema change without copying SQL (bench/contenders.py's raw limit does).
        """
        return SQL

    # -- connection life ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        self._db.close()

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.path)!r})"

    @property
    def connection(self) -> sqlite3.Connection:
        """The store's connection, for read-only inspection (notebooks, health checks)."""
        return self._db.connection

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
        with self._db.transaction() as conn:
            yield conn

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
            self._lock_user(conn, user, creating=True)
            now = iso(self._clock())
            row = conn.execute(SQL.select_for_put, put_read_args(user, kind, key)).fetchone()
            if row["id"] is not None and row["value"] == value:
                return to_record(row)
            # "Newest first" is by this number, taken holding the write lock: commit order across
            # threads and processes, whatever the clock says.
            seq = self._db.take_sequence(conn)
            if row["id"] is None:
                self._db.check_quotas(conn, user, counts=(row["user_records"], row["total_records"]))
                last = row["last_revision"]
                revision, created, action, old_value = (last or 0) + 1, now, "create", None
                conn.execute(
                    SQL.insert_memory,
                    (user, kind, key, value, session, revision, now, now, key.casefold(), value.casefold(), seq),
                )
            else:
                # A clock that stepped back must not make a record updated before it was created.
                now = max(now, row["updated_at"])
                revision, created, action, old_value = row["revision"] + 1, row["created_at"], "update", row["value"]
                conn.execute(SQL.update_memory, (value, value.casefold(), session, revision, now, seq, row["id"]))
            conn.execute(
                SQL.insert_event,
                (user, kind, key, action, revision, session, old_value, value, confirmation, now),
            )
            self._db.check_size(conn)
        return {"kind": kind, "key": key, "value": value, "source_session": session,
                "revision": revision, "created_at": created, "updated_at": now}

    def get(self, user: str, kind: str, key: str) -> Record | None:
        """The record of `user` under (kind, key), or None."""
        self._check_identity(user, kind, key)
        rows = self._db.fetch(
            f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
            (user, kind, key),
        )
        return to_record(rows[0]) if rows else None

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
            self._lock_user(conn, user, creating=False)
            now = iso(self._clock())
            row = conn.execute(SQL.select_current, (user, kind, key)).fetchone()
            if row is None:
                return False
            conn.execute(SQL.delete_memory, (row["id"],))
            conn.execute(
                SQL.insert_event, (user, kind, key, "delete", row["revision"], session, row["value"], None, confirmation, now)
            )
        return True

    def search(self, user: str, query: str = "", limit: int = 5, kind: str | None = None) -> list[Record]:
        """Memories of `user` whose key or value contains `query`, newest first (in commit order:
        each write takes the next number of the store's sequence, so a clock that steps back cannot
        reorder them).

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
        return self._search(user, query, limit, kind)

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
        return self._search_many(user, queries, limit, kinds)

    def records(self, user: str, kind: str | None = None) -> list[Record]:
        """Every record of `user` (bounded by the per-user quota), by kind then key."""
        self.limits.check_id("user", user)
        if kind is not None:
            self.limits.check_kind(kind)
        rows = self._db.fetch(
            f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? AND (? IS NULL OR kind = ?)"
            " ORDER BY kind, memory_key",
            (user, kind, kind),
        )
        return [to_record(row) for row in rows]

    def users(self) -> dict[str, int]:
        """Users that have records, with their record counts, by user id."""
        return {row[0]: row[1] for row in self._db.fetch("SELECT user_id, records FROM user_counts ORDER BY user_id")}

    def history(self, user: str, kind: str, key: str) -> list[dict[str, Any]]:
        """How the value under (kind, key) changed, oldest first, and on whose say-so."""
        self._check_identity(user, kind, key)
        rows = self._db.fetch(
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
            self._lock_user(conn, user, creating=False)
            counts = {
                "records": conn.execute("DELETE FROM memories WHERE user_id = ?", (user,)).rowcount,
                "events": conn.execute("DELETE FROM memory_events WHERE user_id = ?", (user,)).rowcount,
                "transcript": conn.execute("DELETE FROM transcript WHERE user_id = ?", (user,)).rowcount,
            }
        return counts

    def traces(self, user: str) -> dict[str, int]:
        """How many rows of `user` the store holds: records, events, transcript (all 0 once forgotten)."""
        self.limits.check_id("user", user)
        row = self._db.fetch(
            "SELECT (SELECT count(*) FROM memories WHERE user_id = ?), (SELECT count(*) FROM memory_events"
            " WHERE user_id = ?), (SELECT count(*) FROM transcript WHERE user_id = ?)", (user, user, user))[0]
        return {"records": row[0], "events": row[1], "transcript": row[2]}

    # -- where this store's windows are --------------------------------------------------------------

    _ID_SQL = "SELECT database_id FROM store_meta"

    @property
    def store_id(self) -> str:
        """The store's own random id, made once with its schema (SQLite: `store_meta`; PostgreSQL:
        `memkit_meta`). A short-term window's Redis keys carry it, so two stores on one Redis server
        never read, archive or forget each other's turns (`memkit.window.keys`)."""
        cached = getattr(self, "_store_id", None)
        if cached is None:
            cached = self._store_id = str(self._db.fetch(self._ID_SQL)[0][0])
        return cached

    def note_window(self, place: str) -> bool:
        """Record that a short-term window of this store lives at `place` (a JSON description made by
        `memkit.window.places`), so that forgetting a user reaches it later from any directory or
        shell. A place already known costs one read and no write.

        Returns:
            True if the place was new.
        """
        if not isinstance(place, str) or not place or len(place) > 4096:
            raise ValidationError("a window place is a non-empty text of at most 4096 characters")
        if self._db.fetch("SELECT 1 FROM window_places WHERE place = ?", (place,)):
            return False
        with self.transaction() as conn:
            return conn.execute("INSERT INTO window_places (place, noted_at) VALUES (?, ?) ON CONFLICT (place) "
                                "DO NOTHING", (place, iso(self._clock()))).rowcount == 1

    def window_places(self) -> list[str]:
        """Every place a short-term window of this store was opened at (see `note_window`), oldest first."""
        return [str(row[0]) for row in self._db.fetch("SELECT place FROM window_places ORDER BY noted_at, place")]

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
        return bundle_format.export_user(self._db, user, path)

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
        header, records, events = bundle_format.parse_bundle(bundle_format.read_bundle(bundle), self.limits)
        target = self.limits.check_id("user", user if user is not None else header["user"])
        return bundle_format.import_bundle(self._db, target, records, events)

    # -- transcript archive (turns that left the short-term window) -----------------------------------

    def archive_turns(self, user: str, session: str, turns: Iterable[Mapping[str, Any]]) -> int:
        """Keep turns of a session that left its short-term window; a turn already kept is skipped.

        Keyed by (user, session, turn number), so archiving the same turn twice (a retry after a
        crash) stores it once; the same number with other content is a conflict, never skipped.

        Args:
            turns: dicts with `turn` (int >= 1), `role` (user, assistant, tool), `content`, `at`.

        Returns:
            How many turns were newly archived.

        Raises:
            ValidationError: a turn is malformed; nothing of this call was archived.
            QuotaError: the database would pass its size cap; nothing was archived.
            ArchiveConflictError: a turn number is already archived with other content (a
                StoreError naming the numbers); nothing was archived.
        """
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        return self._archive_rows(archive.turn_rows(user, session, turns))

    def archived_turns(self, user: str, session: str) -> list[Turn]:
        """The archived turns of one session of `user`, in turn order."""
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        return archive.archived_turns(self._db, user, session)

    def last_archived_turn(self, user: str, session: str) -> int:
        """The highest archived turn number of one session of `user` (0 if none), read from the key alone."""
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        return archive.last_archived_turn(self._db, user, session)

    # -- operations ---------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """What an operator asks first, in one call.

        Returns:
            schema version, journal mode, synchronous, busy timeout, file size against the cap,
            records in all and per user (the 50 largest users) against the quotas, and whether the
            quota counters (the total and every user's) agree with the rows.
        """
        return health.health(self._db)

    # -- where the backends differ (PostgresStore, in pg_store.py, overrides these) -------------------

    def _lock_user(self, conn: Any, user: str, creating: bool) -> None:
        """Hold `user`'s write lock until the transaction ends, before reading their rows.

        Nothing to do on SQLite: `BEGIN IMMEDIATE` already holds the one write lock of the file.
        """

    def _search(self, user: str, query: str, limit: int, kind: str | None) -> list[Record]:
        return search.search(self._db, user, query, limit, kind, self.fts_min_user_rows)

    def _search_many(self, user: str, queries: Sequence[str], limit: int,
                     kinds: Sequence[str]) -> dict[tuple[str, str], list[Record]]:
        return search.search_many(self._db, user, queries, limit, kinds, self.fts_min_user_rows)

    def _archive_rows(self, rows: list[tuple[Any, ...]]) -> int:
        return archive.archive_rows(self._db, rows)
