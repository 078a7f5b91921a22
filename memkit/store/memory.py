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
from typing import TYPE_CHECKING, Any, Literal
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ..clock import Clock, iso, utc_now
from ..errors import ApprovalError, ValidationError
from ..limits import DEFAULT_LIMITS, KINDS, Limits
from ..transcript import Turn
from ..semantic import DEFAULT_MIN_SIMILARITY, Embedder, embedding_text, from_bytes, similarities, to_bytes
from . import agent_items, archive, browse, embeddings, health, proposals, search
from . import bundle as bundle_format
from .db import SqliteDatabase
from .readonly import ReadOnlyDatabase
from .store_limits import has_table as has_limits_table, limits_from, record as record_limits, recorded as recorded_limits
from .targets import check_sqlite_target
from .proposals import Proposal
from .statements import (RECORD_SQL, SQLITE_STATEMENTS as SQL, Record, Statements, prune_history, put_read_args,
                         to_record)

if TYPE_CHECKING:
    import numpy


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
        limits: the bounds to enforce (see `Limits`); raise them for large experiments. Without
            them, the limits the store recorded when it was made (`memkit limits`); a new store
            records the limits it is made with. The size cap
            bounds the `-wal` file too (checkpoints, `journal_size_limit`, a truncation after a
            write the cap refused).
        synchronous: `"FULL"` (default) makes each commit durable through a power cut: it waits for
            the WAL to reach the disk. `"NORMAL"` skips that wait in WAL mode: the database stays
            consistent, but the last commits before a power cut (not a process crash) may be lost.
        clock: where timestamps come from (tests pass a `FakeClock`).
        check_integrity: run `PRAGMA quick_check` when opening an existing file (cost grows with size).
        read_only: read the file without changing it (store/readonly.py): no write, no migration,
            no `-wal`/`-shm` made; a read-only file or folder opens; an older schema is read from a
            migrated copy in memory. Every write raises `ReadOnlyError`.
        embedder: an embedding model (`memkit.semantic.load_embedder()`, the `semantic` extra) for
            retrieval by meaning: every write then keeps the record's vector, made by this model, in
            the same transaction, and `search_by_meaning` and `reindex` use it. Without one, writes
            keep no vector (a changed value loses its old one) and literal search works as always.

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
        self.embedder = embedder
        """The embedding model writes and searches by meaning use (None: literal search only)."""
        self.path = Path(path)
        self.synchronous = synchronous
        self.read_only = read_only
        self._clock = clock
        opening = limits or DEFAULT_LIMITS
        if read_only:
            self._db: SqliteDatabase = ReadOnlyDatabase(self.path, opening, synchronous, check_integrity)
        else:
            self._db = SqliteDatabase(self.path, opening, synchronous, check_integrity)
        try:
            self.limits = self._own_limits(limits)
            if not read_only:
                search.fit_index(self._db, self.limits, self.fts_min_user_rows)
        except BaseException:
            self._db.close()
            raise

    def _own_limits(self, given: Limits | None) -> Limits:
        """The limits this open enforces: `given`, else the ones the store recorded (store_limits.py).

        A store that has recorded none yet (new, or made before the table) records `given` (or the
        defaults) now, unless it is open read-only.
        """
        values = recorded_limits(self._db.fetch("SELECT name, value FROM store_limits")) \
            if has_limits_table(self._db.connection) else None
        chosen = given if given is not None else limits_from(values or {})
        if not values and values is not None and not self.read_only:
            with self._db.transaction() as conn:
                record_limits(conn, chosen)
        self._db.use_limits(chosen)
        return chosen

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

    def __enter__(self) -> MemoryStore:
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
        # The vector is made before the write lock is taken (a model call inside it would hold
        # every other writer back) and written inside the same transaction as the value.
        vector = self._embed([embedding_text(key, value)])[0] if self.embedder is not None else None
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
            if vector is not None:
                self._write_vector(conn, vector, user, kind, key, value)
            prune_history(conn, user, self.limits.max_events_per_user)
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
            # Here, not in each caller: the CLI, the inspector, the agent's tool and any program
            # delete through this method, and the next request of any process sees the mark.
            conn.execute(SQL.retire_history, (user, now))
            prune_history(conn, user, self.limits.max_events_per_user)
        return True

    def retired_before(self, user: str) -> str | None:
        """When `user`'s recent history was last retired (the time of their last delete), or None.

        A deleted value may sit in the conversation's recent turns, in a window of this process, of
        another one, or in Redis. Every delete records its time here, in its own transaction, and
        `History.view` leaves out the turns from before it: the next request carries neither the
        record nor the exchanges that spoke of it, whichever process deleted it. The turns stay in
        the window and its archive (the transcript is a record, not a request); `forget_user`
        removes them.

        The comparison is by time: a window whose clock runs behind the store's (another host) hides
        newer turns until its clock passes the delete, never shows older ones.
        """
        self.limits.check_id("user", user)
        rows = self._db.fetch("SELECT at FROM history_retired WHERE user_id = ?", (user,))
        return str(rows[0][0]) if rows else None

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

    def search_by_meaning(self, user: str, query: str, limit: int = 5, kind: str | None = None,
                          min_similarity: float = DEFAULT_MIN_SIMILARITY) -> list[Record]:
        """Memories of `user` whose meaning is close to `query`, most similar first.

        The user filter comes first: the vectors read are `user`'s alone (through their index),
        and only they are ranked; a global nearest-neighbour search filtered afterwards could rank
        another user's records above theirs and drop them, or hand them out. Only vectors of this
        store's embedder are compared (`embedding_status` counts the others as stale).

        Args:
            user: whose memories to search.
            query: 1 to 256 code points, not blank.
            limit: 1 to `Limits.max_search_limit` results.
            kind: only this kind, or both when None.
            min_similarity: the least cosine similarity a hit needs, from -1 to 1.

        Returns:
            Records as `search` returns them, each with its `similarity` (rounded to 4 places).

        Raises:
            ValidationError: a bad argument, or a store opened without an embedder (the message says how).
        """
        self.limits.check_id("user", user)
        self.limits.check_query(query)
        if not query.strip():
            raise ValidationError("query is blank; a search by meaning needs some text")
        self.limits.check_limit(limit)
        if kind is not None:
            self.limits.check_kind(kind)
        if isinstance(min_similarity, bool) or not isinstance(min_similarity, (int, float)) \
                or not -1.0 <= min_similarity <= 1.0:
            raise ValidationError(f"min_similarity is {min_similarity!r}; use a number from -1 to 1")
        embedder = self._need_embedder("search by meaning")
        vector = self._embed([query])[0]
        return self._search_by_meaning(user, vector, embedder.name, embedder.dim, limit, kind, float(min_similarity))

    def embedding_status(self, user: str) -> dict[str, Any]:
        """How many of `user`'s records have a vector of this store's embedder.

        Returns:
            model, dim, records, current (a vector of this model), stale (of another model: not
            compared until `reindex`), missing (none: written without an embedder).

        Raises:
            ValidationError: a bad user, or a store opened without an embedder.
        """
        self.limits.check_id("user", user)
        embedder = self._need_embedder("embedding status")
        with self._db.reading() as conn:
            return embeddings.status(conn, user, embedder.name, embedder.dim)

    def embedding_models(self) -> dict[str, int]:
        """The models whose vectors the store keeps, with how many each (an empty dict: none).

        Needs no embedder: a command that writes asks it to know which model keeps a store's
        vectors current (`memkit put` on a store searched by meaning).
        """
        rows = self._db.fetch("SELECT model, count(*) FROM memory_embeddings GROUP BY model ORDER BY count(*) DESC, model")
        return {str(row[0]): int(row[1]) for row in rows}

    def reindex(self, user: str | None = None, *, batch: int | None = None) -> dict[str, Any]:
        """Make the vectors that are missing or stale (of another model) with this store's embedder.

        For a new model, or records written without an embedder. The vectors are made outside the
        write lock and written in one transaction (all or nothing), each only if its record still
        holds the value it was made from (a put meanwhile keeps its own vector). Safe to run again:
        a record with a current vector is left alone.

        Args:
            user: only this user's records (all users when None).
            batch: write this many records per transaction instead (1 to 1000), for stores too
                large to hold every vector in memory at once; a failure then keeps the batches
                written before it.

        Returns:
            model, dim, embedded (vectors written), skipped (records changed meanwhile).

        Raises:
            ValidationError: a bad argument, or a store opened without an embedder.
        """
        if user is not None:
            self.limits.check_id("user", user)
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 1000):
            raise ValidationError(f"batch is {batch!r}; use 1 to 1000 records per transaction, or None for one")
        embedder = self._need_embedder("reindex")
        with self._db.reading() as conn:
            todo = embeddings.to_embed(conn, embedder.name, embedder.dim, user)
        written = 0
        batch = batch or max(len(todo), 1)
        for start in range(0, len(todo), batch):
            part = todo[start:start + batch]
            vectors = self._embed([embedding_text(key, value) for _, _, key, value in part])
            with self.transaction() as conn:
                # The users' write locks first (in one order): on PostgreSQL a put of the same record
                # then either committed before (its value is what the write below compares) or waits.
                for owner in sorted({owner for owner, _, _, _ in part}):
                    self._lock_user(conn, owner, creating=False)
                for (owner, kind, key, value), vector in zip(part, vectors):
                    written += self._write_vector(conn, vector, owner, kind, key, value)
                self._db.check_size(conn)
        return {"model": embedder.name, "dim": embedder.dim, "embedded": written, "skipped": len(todo) - written}

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

    def deleted_keys(self, user: str) -> list[dict[str, Any]]:
        """`user`'s keys whose history ends in a delete, newest first (see `store.browse`)."""
        self.limits.check_id("user", user)
        return browse.deleted_keys(self._db, user)

    def sessions(self, user: str) -> list[dict[str, Any]]:
        """`user`'s sessions with archived turns: turns, first and last time (see `store.browse`)."""
        self.limits.check_id("user", user)
        return browse.sessions(self._db, user)

    def write_number(self, user: str, kind: str, key: str) -> int | None:
        """The sequence number of the record's last write, None without a record: two reads of one key
        with the same number saw the same write (see `store.browse.write_number`)."""
        self._check_identity(user, kind, key)
        return browse.write_number(self._db, user, kind, key)

    @property
    def opened(self) -> dict[str, Any]:
        """How this store reads its database: read_only, how (`rw`, `ro`, `immutable`, `snapshot`:
        an older schema read from a migrated copy in memory) and the file's own schema version."""
        return {"read_only": self.read_only, "how": getattr(self._db, "how", "rw"),
                "file_version": getattr(self._db, "file_version", None)}

    # -- proposals: what the model proposed, waiting for a person (see memkit.store.proposals) ----

    def propose_put(self, user: str, session: str, kind: str, key: str, value: str) -> Proposal:
        """Keep a save the model proposed until a person approves or rejects it. Nothing is saved.

        The proposal is made against the record as it is now (its value and revision); approving
        it later is refused if the record changed meanwhile. The same proposal made again while the
        first still waits returns that first one.

        Returns:
            The proposal (see `memkit.store.proposals.to_proposal` for its keys), `new` added: False
            when the same one was already waiting.

        Raises:
            ValidationError: an argument broke a rule, or the key already holds exactly this value.
            QuotaError: the user has `Limits.max_pending_proposals_per_user` proposals waiting, or
                the size cap. StoreError: the database is locked or failed. Nothing was kept.
        """
        self._check_identity(user, kind, key)
        self.limits.check_id("session", session)
        self.limits.check_value(value)
        return self._propose(user, session, "put", kind, key, value)

    def propose_delete(self, user: str, session: str, kind: str, key: str) -> Proposal:
        """Keep a delete the model proposed until a person approves or rejects it. Nothing is deleted.

        Raises:
            ValidationError: an argument broke a rule, or there is no such record to delete.
            QuotaError, StoreError: as `propose_put`. Nothing was kept.
        """
        self._check_identity(user, kind, key)
        self.limits.check_id("session", session)
        return self._propose(user, session, "delete", kind, key, None)

    def _propose(self, user: str, session: str, action: proposals.Action, kind: str, key: str,
                 value: str | None) -> Proposal:
        with self.transaction() as conn:
            self._lock_proposals(conn, user)
            proposal, new = proposals.make(conn, self.limits, user, session, action, kind, key, value,
                                           self._clock())
            if new:
                self._db.check_size(conn)
        return {**proposal, "new": new}

    def proposals(self, user: str, *, pending_only: bool = True) -> list[Proposal]:
        """`user`'s proposals, oldest first: those waiting for a person (expired and stale ones
        included and marked, since a person may want to reject them), or with `pending_only=False`
        also the decided ones the store still keeps.

        Each has `id`, `action`, `kind`, `key`, `value` (None for a delete), `against_value` and
        `against_revision` (the record it was proposed against), `stale`, `session`, `status`,
        `expired`, `created_at`, `expires_at`, `age_seconds`, `decided_at`, `decided_by`.
        """
        self.limits.check_id("user", user)
        with self._db.reading() as conn:
            return proposals.listing(conn, user, self._clock(), pending_only)

    def approve(self, user: str, proposal_id: int, *, origin: str) -> dict[str, Any]:
        """Apply one waiting proposal of `user`, exactly as proposed, and mark it approved.

        The change runs as `put` or `delete` would, inside the same transaction as the check (the
        quotas and the size cap included); its event records `proposal#ID approved via ORIGIN` as
        its confirmation. Two approvals of one proposal, from any processes, apply it once.

        Args:
            user: whose proposal (a proposal of another user is refused as unknown).
            proposal_id: as `proposals(user)` lists it.
            origin: where the person approved it (`cli`, `chat-terminal`, `inspector`, ...): an id
                of 1-64 letters, digits, `_`, `.`, `-`.

        Returns:
            `{"proposal": the proposal now approved, "record": the record saved}` for a save,
            `{"proposal": ..., "deleted": True}` for a delete.

        Raises:
            ProposalError: (an ApprovalError) unknown or another user's id, already approved or
                rejected, expired, or the record changed since the proposal was made; its `reason`
                says which. ValidationError: a bad argument.
            QuotaError: the save would pass a quota or the size cap. StoreError: locked or failed.
            In every case nothing was changed and the proposal still waits (unless decided before).
        """
        self.limits.check_id("user", user)
        proposals.check_id(proposal_id)
        self.limits.check_id("origin", origin)
        with self.transaction() as conn:
            self._lock_proposals(conn, user)
            self._lock_user(conn, user, creating=True)
            now = self._clock()
            proposal = proposals.waiting(conn, user, proposal_id, now, "approve")
            confirmation = proposals.confirmation_of(proposal, origin)
            outcome: dict[str, Any]
            if proposal["action"] == "put":
                record = self.put(user, proposal["session"], proposal["kind"], proposal["key"], proposal["value"],
                                  confirmation=confirmation)
                outcome = {"record": record}
            else:
                deleted = self.delete(user, proposal["kind"], proposal["key"], session=proposal["session"],
                                      confirmation=confirmation)
                if not deleted:  # cannot happen: the delete would have added an event, and stale says so
                    raise ApprovalError(f"proposal {proposal_id}: nothing to delete; nothing was changed")
                outcome = {"deleted": True}
            proposals.decide(conn, proposal_id, "approved", now, origin)
            decided = proposals.fetch(conn, user, proposal_id, now)
        return {"proposal": decided, **outcome}

    def reject(self, user: str, proposal_id: int, *, origin: str) -> Proposal:
        """Mark one waiting proposal of `user` rejected; memory is not touched.

        An expired or stale proposal may be rejected (it clears the list); a decided one may not.

        Returns:
            The proposal, now rejected.

        Raises:
            ProposalError: unknown or another user's id, or already approved or rejected.
            ValidationError: a bad argument. Nothing was changed.
        """
        self.limits.check_id("user", user)
        proposals.check_id(proposal_id)
        self.limits.check_id("origin", origin)
        with self.transaction() as conn:
            self._lock_proposals(conn, user)
            now = self._clock()
            proposals.waiting(conn, user, proposal_id, now, "reject")
            proposals.decide(conn, proposal_id, "rejected", now, origin)
            decided = proposals.fetch(conn, user, proposal_id, now)
        assert decided is not None
        return decided

    # -- forgetting ---------------------------------------------------------------------------------

    def forget_user(self, user: str) -> dict[str, int]:
        """Remove every trace of `user`: records, event history, conversations (archived turns and
        agent session items) and proposals.

        Returns:
            How many rows of each were removed; `transcript` counts the archived turns and the
            items of the user's openai-agents sessions (`agent_items`) together: both are what
            the user said and was told.
        """
        self.limits.check_id("user", user)
        with self.transaction() as conn:
            self._lock_proposals(conn, user)
            self._lock_user(conn, user, creating=False)
            counts = {
                "records": conn.execute("DELETE FROM memories WHERE user_id = ?", (user,)).rowcount,
                "events": conn.execute("DELETE FROM memory_events WHERE user_id = ?", (user,)).rowcount,
                "transcript": conn.execute("DELETE FROM transcript WHERE user_id = ?", (user,)).rowcount
                + conn.execute("DELETE FROM agent_items WHERE user_id = ?", (user,)).rowcount,
                "proposals": proposals.forget(conn, user),
            }
            conn.execute("DELETE FROM history_retired WHERE user_id = ?", (user,))
        return counts

    def traces(self, user: str) -> dict[str, int]:
        """How many rows of `user` the store holds: records, events, transcript (archived turns and
        agent session items), proposals; all 0 once forgotten."""
        self.limits.check_id("user", user)
        row = self._db.fetch(
            "SELECT (SELECT count(*) FROM memories WHERE user_id = ?), (SELECT count(*) FROM memory_events"
            " WHERE user_id = ?), (SELECT count(*) FROM transcript WHERE user_id = ?)"
            " + (SELECT count(*) FROM agent_items WHERE user_id = ?),"
            " (SELECT count(*) FROM proposals WHERE user_id = ?)", (user, user, user, user, user))[0]
        return {"records": row[0], "events": row[1], "transcript": row[2], "proposals": row[3]}

    # -- where this store's windows are --------------------------------------------------------------

    _ID_SQL = "SELECT database_id FROM store_meta"

    @property
    def store_id(self) -> str:
        """The store's own random id, made once with its schema (SQLite: `store_meta`; PostgreSQL:
        `memkit_meta`). A short-term window's Redis keys carry it, so two stores on one Redis server
        never read, archive or forget each other's turns (`memkit.window.protocol`)."""
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

        Proposals are not exported: a proposal is a question to a person about this store's
        records, not memory; an approved one is in the bundle as the change it made, its event
        naming it (`proposal#ID approved via ...`). Waiting ones stay here (`proposals(user)`).

        Args:
            user: whose memory to export.
            path: when given, the bundle is also written there, mode 0600, through a private
                temporary file beside it and a rename (`files.write_private`): a link planted at
                any name memkit uses is never written through.

        Returns:
            The bundle text.

        Raises:
            StoreError: `path` is a symbolic link or a folder (refused; nothing written).
            OSError: `path` could not be written (no partial file is left behind).
        """
        self.limits.check_id("user", user)
        return bundle_format.export_user(self._db, user, path)

    def import_records(self, bundle: str | os.PathLike[str], *, user: str | None = None) -> dict[str, int]:
        """Load a bundle made by `export_user`, all or nothing.

        The records and their event history arrive exactly as exported (revisions, sessions,
        timestamps, confirmations); the import itself adds no event. The CLI asks for `--confirm`.
        Bundles carry no proposals, so none is imported; a proposal already waiting here for the
        target user was made against the records as they were, so once the import brings that key
        a history it is stale and its approval is refused.

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

    # -- items of openai-agents sessions (memkit.integrations.openai_agents) ---------------------------

    def add_agent_items(self, user: str, session: str, items: Sequence[str]) -> int:
        """Add items (each an item's JSON text) after the session's last one, all or none.

        Returns:
            The number of the last item added (items are numbered 1, 2, ... per user and session).

        Raises:
            ValidationError: an item is not text memkit can keep. QuotaError: the size cap.
            StoreError: the database is locked or failed. In every case nothing was added.
        """
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        checked = agent_items.check_items(items)
        with self.transaction() as conn:
            # Not creating a lock row: on PostgreSQL that would leave a user without records counted
            # at 0. Two adds racing on one session then meet at the primary key, and one is refused.
            self._lock_user(conn, user, creating=False)
            return agent_items.append(self._db, conn, user, session, checked, iso(self._clock()))

    def agent_items(self, user: str, session: str, limit: int | None = None) -> list[str]:
        """The JSON texts of a session's items in the order added; with `limit`, the last `limit`."""
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise ValidationError(f"limit is {limit!r}; give a number of items, 0 or more, or None for all")
        return agent_items.read(self._db, user, session, limit)

    def pop_agent_item(self, user: str, session: str) -> str | None:
        """Remove and return the JSON text of the session's last item (None if it has none)."""
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        with self.transaction() as conn:
            self._lock_user(conn, user, creating=False)
            return agent_items.pop(conn, user, session)

    def clear_agent_items(self, user: str, session: str) -> int:
        """Remove every item of the session; returns how many were removed."""
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        with self.transaction() as conn:
            self._lock_user(conn, user, creating=False)
            return agent_items.clear(conn, user, session)

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

    def _lock_proposals(self, conn: Any, user: str) -> None:
        """Hold `user`'s proposal lock until the transaction ends, before `_lock_user`: proposing,
        approving, rejecting and forgetting of one user then run one at a time.

        Nothing to do on SQLite: `BEGIN IMMEDIATE` already holds the one write lock of the file.
        """

    def _search(self, user: str, query: str, limit: int, kind: str | None) -> list[Record]:
        return search.search(self._db, SQL.search, user, query, limit, kind, self.fts_min_user_rows)

    def _search_many(self, user: str, queries: Sequence[str], limit: int,
                     kinds: Sequence[str]) -> dict[tuple[str, str], list[Record]]:
        return search.search_many(self._db, SQL.search, user, queries, limit, kinds, self.fts_min_user_rows)

    def _archive_rows(self, rows: list[tuple[Any, ...]]) -> int:
        return archive.archive_rows(self._db, rows)

    # -- retrieval by meaning (the vectors' format differs: bytes here, real[] on PostgreSQL) ----------

    def _need_embedder(self, doing: str) -> Embedder:
        if self.embedder is None:
            raise ValidationError(
                f"{doing} needs an embedding model: open the store with "
                "embedder=memkit.semantic.load_embedder() (pip install 'memkit[semantic]')")
        return self.embedder

    def _embed(self, texts: list[str]) -> numpy.ndarray:
        embedder = self._need_embedder("embedding")
        vectors = embedder.embed(texts)
        if getattr(vectors, "shape", None) != (len(texts), embedder.dim):
            raise ValidationError(f"embedder {embedder.name!r} returned vectors of shape "
                                  f"{getattr(vectors, 'shape', None)}; expected ({len(texts)}, {embedder.dim})")
        return vectors

    _vector_sql = "e.vector"
    """How a search reads a stored vector (PostgreSQL reads its `real[]` in binary form)."""

    def _encode_vector(self, vector: numpy.ndarray) -> Any:
        return to_bytes(vector)

    def _decode_vector(self, stored: Any, dim: int) -> numpy.ndarray:
        return from_bytes(stored, dim)

    def _write_vector(self, conn: Any, vector: numpy.ndarray, user: str, kind: str, key: str, value: str) -> int:
        embedder = self._need_embedder("embedding")
        return embeddings.write(conn, embedder.name, embedder.dim, self._encode_vector(vector), user, kind, key, value)

    def _search_by_meaning(self, user: str, vector: numpy.ndarray, model: str, dim: int, limit: int,
                           kind: str | None, min_similarity: float) -> list[Record]:
        # The user's own vectors (bounded by the quota), then the ranking, in Python.
        with self._db.reading() as conn:
            records, vectors = embeddings.user_vectors(conn, user, model, dim, kind, self._decode_vector,
                                                       self._vector_sql)
        return embeddings.rank(records, similarities(vector, vectors), min_similarity, limit)
