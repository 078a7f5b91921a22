"""The long-term store: `Store`, one user's memories behind every call, and `MemoryStore`, its SQLite file.

Read `put`, `get`, `delete`, `search` and `transaction` first: every argument is checked against the
store's `Limits`, then the operation runs on the backend (db.py for SQLite), a write in one
transaction. Proposals, conversations, vectors, reading back (records, users, traces, health) and
identity are methods of the same class, kept in their own modules (proposals.py, sessions.py,
embeddings.py, browse.py, identity.py) so this one stays the lesson.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Literal, Self

from ..clock import Clock, iso, utc_now
from ..errors import ValidationError
from ..limits import DEFAULT_LIMITS, Limits
from ..semantic import Embedder, embedding_text
from .backend import Backend
from .browse import StoreBrowse
from .db import SqliteDatabase
from .embeddings import StoreEmbeddings
from .identity import StoreIdentity
from .proposals import StoreProposals
from .readonly import ReadOnlyDatabase
from .recorded_limits import adopt as adopt_limits
from .sessions import StoreSessions
from .statements import RECORD_SQL, SQLITE_STATEMENTS, Record, prune_history, put_read_args, to_record
from .targets import check_sqlite_target


class Store(StoreProposals, StoreSessions, StoreEmbeddings, StoreBrowse, StoreIdentity):
    """A user-scoped long-term memory: the type to annotate with wherever a store of either backend is accepted.

    Every method behaves the same on SQLite and on PostgreSQL: one row per (user, kind, key);
    revisions and an append-only event history; quotas and the size cap checked inside each write's
    transaction. Where the backends differ, the difference is a method of the backend (`Backend`,
    backend.py), never an override here.

    `Store` is not opened itself: use `MemoryStore(path)` (a SQLite file), `PostgresStore(url)` (the
    `postgres` extra) or `open_store(target)` (either).

    Example:
        >>> with open_store(tmp / "memory.sqlite3") as store:            # doctest: +SKIP
        ...     isinstance(store, Store), store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        (True, 1)
    """

    fts_min_user_rows: int = 1000
    """How many records a user holds before a search may ask the trigram index instead of scanning
    that user's rows (0: always the index; a huge number: never). Answers are the same either way;
    docs/design/store.md says how the threshold was chosen and when the index is kept."""

    # -- the lesson: one transaction, and the four operations ---------------------------------------

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A write transaction: `BEGIN IMMEDIATE` (PostgreSQL: `BEGIN`, and each write takes its user's
        lock first), commit on success, roll back on any exception and re-raise it.

        The write lock is taken at BEGIN, not at the first write, so a check made inside the
        transaction still holds when the write happens: no other writer slips in between. The
        store's methods may run inside it, from the same thread, and commit or roll back with it; a
        nested transaction (each `put` opens one) is a savepoint, undone alone when it fails.

        Raises:
            StoreError: the database stayed locked past the busy timeout, or the write failed.
            LockedError (PostgreSQL): the block met another writer in a lock cycle and was rolled
                back whole; run it again.

        Example:
            >>> with store.transaction():                                  # doctest: +SKIP
            ...     store.put("alice", "s1", "preference", "drink", "tea")
            ...     store.put("alice", "s1", "preference", "food", "rice")  # both or neither
        """
        # The backend's own context manager, handed out as it is: a generator around it would cost
        # every write another frame to enter and leave.
        return self._db.transaction()

    def _check_identity(self, user: str, kind: str, key: str) -> None:
        self.limits.check_id("user", user)
        self.limits.check_kind(kind)
        self.limits.check_key(key)

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
        # The vector is made before the write lock is taken (a model call inside it would hold
        # every other writer back) and written inside the same transaction as the value.
        vector = self._embed([embedding_text(key, value)])[0] if self.embedder is not None else None
        sql = self._db.statements
        with self.transaction() as conn:
            self._db.lock_user(conn, user, creating=True)
            now = iso(self._clock())
            row = conn.execute(sql.select_for_put, put_read_args(user, kind, key)).fetchone()
            if row["id"] is not None and row["value"] == value:
                return to_record(row)
            # "Newest first" is by this number, taken holding the write lock: commit order across
            # threads and processes, whatever the clock says.
            seq = self._db.take_sequence(conn)
            if row["id"] is None:
                self._db.check_quotas(conn, user, counts=(row["user_records"], row["total_records"]))
                revision, created, action, old_value = (row["last_revision"] or 0) + 1, now, "create", None
                conn.execute(
                    sql.insert_memory,
                    (user, kind, key, value, session, revision, now, now, key.casefold(), value.casefold(), seq),
                )
            else:
                # A clock that stepped back must not make a record updated before it was created.
                now = max(now, row["updated_at"])
                revision, created, action, old_value = row["revision"] + 1, row["created_at"], "update", row["value"]
                conn.execute(sql.update_memory, (value, value.casefold(), session, revision, now, seq, user, kind, key))
            conn.execute(
                sql.insert_event,
                (user, kind, key, action, revision, session, old_value, value, confirmation, now),
            )
            if vector is not None:
                self._write_vector(conn, vector, user, kind, key, value)
            prune_history(conn, sql, user, self.limits.max_events_per_user)
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
        sql = self._db.statements
        with self.transaction() as conn:
            self._db.lock_user(conn, user, creating=False)
            now = iso(self._clock())
            row = conn.execute(sql.select_current, (user, kind, key)).fetchone()
            if row is None:
                return False
            conn.execute(sql.delete_memory, (user, kind, key))
            self._db.take_sequence(conn)  # the event's id (SQLite), and the commit's number
            conn.execute(
                sql.insert_event,
                (user, kind, key, "delete", row["revision"], session, row["value"], None, confirmation, now),
            )
            # Here, not in each caller: the CLI, the inspector, the agent's tool and any program
            # delete through this method, and the next request of any process sees the mark.
            conn.execute(sql.retire_history, (user, now))
            prune_history(conn, sql, user, self.limits.max_events_per_user)
        return True

    def search(self, user: str, query: str = "", limit: int = 5, kind: str | None = None) -> list[Record]:
        """Memories of `user` whose key or value contains `query`, newest first (in commit order: each
        write takes the next number of the store's sequence, whatever the clock says).

        The rule is a literal, case-insensitive substring match: both sides are compared after
        Python's `str.casefold()`, and `%`, `_`, quotes and the like are plain characters. An empty
        query returns the most recently updated records.

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
        return self._db.search(user, query, limit, kind, self.fts_min_user_rows)

    # -- a key's history ---------------------------------------------------------------------------

    def history(self, user: str, kind: str, key: str) -> list[dict[str, Any]]:
        """How the value under (kind, key) changed, oldest first, and on whose say-so.

        A user keeps at most `Limits.max_events_per_user` events: past it, each write removes the
        user's oldest ones (never the newest event of a key the user holds), so a long history
        begins with its newest events, not at revision 1.
        """
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

    # -- forgetting ---------------------------------------------------------------------------------

    def forget_user(self, user: str) -> dict[str, int]:
        """Remove every trace of `user` from the store: records, event history, conversations
        (archived turns and agent session items) and proposals.

        Returns:
            How many rows of each were removed; `transcript` counts the archived turns and the
            agent session items together: both are what the user said and was told.
        """
        self.limits.check_id("user", user)
        with self.transaction() as conn:
            self._db.lock_proposals(conn, user)
            self._db.lock_user(conn, user, creating=False)
            counts = {
                "records": conn.execute("DELETE FROM memories WHERE user_id = ?", (user,)).rowcount,
                "events": conn.execute("DELETE FROM memory_events WHERE user_id = ?", (user,)).rowcount,
                "transcript": conn.execute("DELETE FROM transcript WHERE user_id = ?", (user,)).rowcount
                + conn.execute("DELETE FROM agent_items WHERE user_id = ?", (user,)).rowcount,
                "proposals": conn.execute("DELETE FROM proposals WHERE user_id = ?", (user,)).rowcount,
            }
            conn.execute(self._db.statements.forget_retired, (user,))
            # The store's own window (memkit.window.store_window) is a table of this store too:
            # whoever forgets through the store alone leaves no recent turn behind.
            conn.execute("DELETE FROM window_turns WHERE user_id = ?", (user,))
        return counts

    # -- opening, and what this store is ------------------------------------------------------------

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError(
            "Store is the façade over either backend and is not opened itself: use "
            "MemoryStore(path) for a SQLite file, PostgresStore(url) for PostgreSQL, "
            "or open_store(target) for either")

    def _start(self, db: Backend, limits: Limits | None, clock: Clock, read_only: bool,
               embedder: Embedder | None) -> None:
        """Take `db` (opened by the constructor) and adopt its limits; `db` is closed if that fails."""
        self._db, self.read_only, self._clock = db, read_only, clock
        self.embedder = embedder
        """The embedding model writes and searches by meaning use (None: literal search only)."""
        try:
            self.limits = adopt_limits(db, limits, read_only)
            if not read_only:
                db.fit_search_index(self.fts_min_user_rows)
        except BaseException:
            db.close()
            raise

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class MemoryStore(Store):
    """A user-scoped long-term memory in a SQLite file: a `Store` over a `SqliteDatabase` (db.py).
    This class only opens it: every method is `Store`'s.

    Threads may share one store: the connection is opened with `check_same_thread=False` and every
    operation holds the store's lock, so calls from several threads run one at a time. Processes
    each open their own store on the same file; SQLite's locks (WAL, `busy_timeout`) coordinate them.

    Args:
        path: the database file. A missing one is built beside, with the current schema, and linked
            into place whole; an existing one must be a memkit database, or it is refused and left
            untouched. Its folder must exist and be writable (WAL keeps `-wal` and `-shm` beside it);
            a symbolic link, or a leftover `-wal`/`-shm` of another database, is refused (files.py).
        limits: the bounds to enforce (see `Limits`). Without them, the limits the store recorded
            when it was made (`memkit limits`); a new store records the limits it is made with.
        synchronous: `"FULL"` (default) waits for each commit to reach the disk; `"NORMAL"` may lose
            the last commits before a power cut (not a process crash), never consistency.
        clock: where timestamps come from (tests pass a `FakeClock`).
        check_integrity: run `PRAGMA quick_check` when opening an existing file (cost grows with size).
        read_only: read the file without changing it (readonly.py); every write raises `ReadOnlyError`.
        embedder: an embedding model (`memkit.semantic.load_embedder()`, the `semantic` extra) for
            retrieval by meaning: every write then keeps the record's vector in the same transaction.

    Raises:
        StoreError: the file is not a memkit database, is damaged, newer, read-only or locked, or a
            `-wal`/`-shm` beside it is not its own. Every file is left as it was found.

    Example:
        >>> with MemoryStore(tmp / "memory.sqlite3") as store:          # doctest: +SKIP
        ...     store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        1
    """

    _statements = SQLITE_STATEMENTS

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        clock: Clock = utc_now,
        check_integrity: bool = True,
        read_only: bool = False,
        embedder: Embedder | None = None,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValidationError(f"synchronous is {synchronous!r}; use 'FULL' or 'NORMAL'")
        check_sqlite_target(path)
        opening, where = limits or DEFAULT_LIMITS, Path(path)
        database = ReadOnlyDatabase(where, opening, synchronous, check_integrity) if read_only \
            else SqliteDatabase(where, opening, synchronous, check_integrity)
        self._start(database, limits, clock, read_only, embedder)
