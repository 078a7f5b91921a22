"""What an inspector browses beyond the records: deleted keys, sessions, a record's write number.

`StoreBrowse` is a part of `Store` (store.py inherits it). Standard SQL with `?` placeholders,
filtered by user: it runs on both backends.
"""

from __future__ import annotations

from typing import Any

from .backend import StorePart


class StoreBrowse(StorePart):
    """`Store`'s browsing: deleted_keys, sessions, write_number (what they use of `Store` is declared
    here, so this module never imports store.py)."""

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
        (An event id is no such proof: SQLite reuses the highest rowid once its row is deleted.)
        """
        self._check_identity(user, kind, key)
        rows = self._db.fetch("SELECT seq FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?",
                              (user, kind, key))
        return int(rows[0][0]) if rows else None
