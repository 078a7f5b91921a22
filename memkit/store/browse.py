"""Reading a store back beyond get and search: several searches at once (retrieval's, reading the
user's rows once), a user's records, the users, what a user leaves (traces), health, and what an
inspector browses (deleted keys, sessions, a record's write number).

`StoreBrowse` is a part of `Store` (store.py inherits it). Standard SQL with `?` placeholders,
filtered by user: it runs on both backends.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

from . import health
from ..limits import KINDS
from .backend import StorePart
from .statements import RECORD_SQL, Record, to_record


class StoreBrowse(StorePart):
    """`Store`'s reading back: search_many, records, users, traces, health, deleted_keys, sessions,
    write_number (what they use of `Store` is declared in backend.py, so this module never imports
    store.py)."""

    def search_many(self, user: str, queries: Sequence[str], limit: int = 5,
                    kinds: Sequence[str] = KINDS) -> dict[tuple[str, str], list[Record]]:
        """`{(query, kind): search(user, query, limit, kind)}` for every query and kind, reading the
        user's rows once (what retrieval needs: a few terms, each in both kinds). Checks as `search`."""
        self.limits.check_id("user", user)
        for query in queries:
            self.limits.check_query(query)
        self.limits.check_limit(limit)
        for kind in kinds:
            self.limits.check_kind(kind)
        return self._db.search_many(user, queries, limit, kinds, self.fts_min_user_rows)

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
        return {row[0]: row[1] for row in self._db.fetch(
            "SELECT user_id, records FROM user_counts WHERE records > 0 ORDER BY user_id")}

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

    def health(self) -> dict[str, Any]:
        """What an operator asks first, in one call: settings, size against the cap, records against
        the quotas, and whether the quota counters agree with the rows (`health.health`)."""
        return health.health(self._db)

    def deleted_keys(self, user: str) -> list[dict[str, Any]]:
        """The keys of `user` whose history ends in a delete (and hold no record now), newest first.

        Each: kind, key, the value it held, its last revision, when it was deleted, and how many
        events its history has.
        """
        self.limits.check_id("user", user)
        rows = self._db.fetch(
            "SELECT e.kind, e.memory_key, e.old_value, e.revision, e.at, counts.n FROM memory_events e"
            " JOIN (SELECT kind, memory_key, max(id) AS last, count(*) AS n FROM memory_events WHERE user_id = ?"
            "       GROUP BY kind, memory_key) AS counts ON counts.last = e.id"
            " WHERE e.action = 'delete' AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.user_id = ?"
            "       AND m.kind = e.kind AND m.memory_key = e.memory_key)"
            " ORDER BY e.id DESC",
            (user, user),
        )
        return [{"kind": r[0], "key": r[1], "value": r[2], "revision": r[3], "deleted_at": r[4], "events": r[5]}
                for r in rows]

    def sessions(self, user: str) -> list[dict[str, Any]]:
        """`user`'s sessions with archived turns: turns, first and last turn time; latest first."""
        self.limits.check_id("user", user)
        rows = self._db.fetch(
            "SELECT session_id, count(*), min(at), max(at) FROM transcript WHERE user_id = ?"
            " GROUP BY session_id ORDER BY max(at) DESC, session_id",
            (user,),
        )
        return [{"session": r[0], "turns": r[1], "first": r[2], "last": r[3]} for r in rows]

    def write_number(self, user: str, kind: str, key: str) -> int | None:
        """The store's sequence number of the record's last write (None without a record): two reads
        of one key with the same number saw the same write.

        The sequence only grows, and no forget or delete rewinds it: a key forgotten and written
        again, even at revision 1 with the same value at the same clock reading, has another number.
        """
        self._check_identity(user, kind, key)
        rows = self._db.fetch("SELECT seq FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
                              (user, kind, key))
        return int(rows[0][0]) if rows else None
