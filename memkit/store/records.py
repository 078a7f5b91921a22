"""The façade's records: write, read, delete, search (literal and by meaning), browse and forget one
user's memories.

Part of `Store`, the façade (see store_core.py): every argument is checked against the store's `Limits`,
then the operation runs on its backend, in one transaction for a write. The vectors' SQL is
embeddings.py's; a search by meaning is ranked by the backend (in Python, or by pgvector).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

from ..clock import iso
from ..errors import ValidationError
from ..limits import KINDS
from ..semantic import DEFAULT_MIN_SIMILARITY, embedding_text
from . import browse, embeddings, proposals
from .statements import RECORD_SQL, Record, prune_history, put_read_args, to_record
from .store_core import StoreCore


class StoreRecords(StoreCore):
    """`Store`'s records: put, get, delete, search, search_by_meaning, reindex, records, history,
    forget_user, ..."""

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
                last = row["last_revision"]
                revision, created, action, old_value = (last or 0) + 1, now, "create", None
                conn.execute(
                    sql.insert_memory,
                    (user, kind, key, value, session, revision, now, now, key.casefold(), value.casefold(), seq),
                )
            else:
                # A clock that stepped back must not make a record updated before it was created.
                now = max(now, row["updated_at"])
                revision, created, action, old_value = row["revision"] + 1, row["created_at"], "update", row["value"]
                conn.execute(sql.update_memory, (value, value.casefold(), session, revision, now, seq, row["id"]))
            conn.execute(
                sql.insert_event,
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
        sql = self._db.statements
        with self.transaction() as conn:
            self._db.lock_user(conn, user, creating=False)
            now = iso(self._clock())
            row = conn.execute(sql.select_current, (user, kind, key)).fetchone()
            if row is None:
                return False
            conn.execute(sql.delete_memory, (row["id"],))
            conn.execute(
                sql.insert_event,
                (user, kind, key, "delete", row["revision"], session, row["value"], None, confirmation, now),
            )
            # Here, not in each caller: the CLI, the inspector, the agent's tool and any program
            # delete through this method, and the next request of any process sees the mark.
            conn.execute(sql.retire_history, (user, now))
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
        return self._db.search(user, query, limit, kind, self.fts_min_user_rows)

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
        return self._db.search_many(user, queries, limit, kinds, self.fts_min_user_rows)


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
        return self._db.search_by_meaning(user, vector, embedder.name, embedder.dim, limit, kind, float(min_similarity))

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
        rows = self._db.fetch(
            "SELECT model, count(*) FROM memory_embeddings GROUP BY model ORDER BY count(*) DESC, model")
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
                    self._db.lock_user(conn, owner, creating=False)
                for (owner, kind, key, value), vector in zip(part, vectors, strict=True):
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
            self._db.lock_proposals(conn, user)
            self._db.lock_user(conn, user, creating=False)
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

