"""`Store`'s conversations and transfers: the transcript archive, openai-agents session items, where
the store's windows are, and export and import.

`StoreSessions` is a part of `Store` (store.py inherits it); a turn's checks live in archive.py,
the export bundle's format in bundle.py.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import TYPE_CHECKING, Any
from collections.abc import Iterable, Mapping, Sequence

from ..clock import iso
from ..errors import ValidationError
from ..limits import check_text
from ..semantic import embedding_text
from ..transcript import Turn
from . import bundle as bundle_format
from .agent_items import trim_agent_items
from .archive import ArchiveConflictError, rows_to_insert, trim_oldest, turn_rows
from .backend import StorePart

if TYPE_CHECKING:
    import numpy


class StoreSessions(StorePart):
    """`Store`'s conversations and transfers: archive_turns, agent items, note_window, export_user, ..."""

    if TYPE_CHECKING:  # embeddings.py's, which `Store` inherits beside this part
        def _embed(self, texts: list[str]) -> numpy.ndarray: ...
        def _write_vector(self, conn: Any, vector: numpy.ndarray, user: str, kind: str, key: str,
                          value: str) -> int: ...

    def note_window(self, place: str) -> bool:
        """Record that a short-term window of this store lives at `place` (made by `memkit.window.places`),
        so forgetting a user reaches it from any directory or shell; True if the place was new.

        A known place gets a later `noted_at` (none on a read-only store): forgetting drops a place
        gone for good only if nobody noted it since it was judged gone (`drop_window_place`).
        """
        if not isinstance(place, str) or not place or len(place) > 4096:
            raise ValidationError("a window place is a non-empty text of at most 4096 characters")
        known = self._db.fetch("SELECT noted_at FROM window_places WHERE place = ?", (place,))
        if known and self.read_only:
            return False
        now = iso(self._clock())
        with self.transaction() as conn:
            if conn.execute("INSERT INTO window_places (place, noted_at) VALUES (?, ?) ON CONFLICT (place) "
                            "DO NOTHING", (place, now)).rowcount == 1:
                return True
            # Strictly later than before, even on a clock that stands still (a FakeClock): the
            # change is what tells forgetting that the place was noted again.
            (before,), = conn.execute("SELECT noted_at FROM window_places WHERE place = ?", (place,)).fetchall()
            later = now if now > str(before) else iso(_dt.datetime.fromisoformat(str(before))
                                                          + _dt.timedelta(microseconds=1))
            conn.execute("UPDATE window_places SET noted_at = ? WHERE place = ?", (later, place))
            return False

    def window_places(self) -> list[str]:
        """Every place a short-term window of this store was opened at (see `note_window`), oldest first."""
        return list(self.window_places_noted())

    def window_places_noted(self) -> dict[str, str]:
        """Every recorded window place and when it was last noted (see `note_window`)."""
        return {str(place): str(noted) for place, noted in
                self._db.fetch("SELECT place, noted_at FROM window_places ORDER BY noted_at, place")}

    def drop_window_place(self, place: str, *, noted_at: str | None = None) -> bool:
        """Stop recording `place`, gone for good (`memkit.forgetting.drop_window` checks it no longer
        answers), as a window of this store; True if it was recorded and now is not.

        `noted_at`: drop it only if it was last noted then (`window_places_noted`, read before it was
        judged gone): a window opened there meanwhile noted it again, and it stays.
        """
        with self.transaction() as conn:
            return conn.execute("DELETE FROM window_places WHERE place = ? AND (? IS NULL OR noted_at = ?)",
                                (place, noted_at, noted_at)).rowcount == 1

    def retired_before(self, user: str) -> str | None:
        """When `user`'s recent history was last retired (the time of their last delete), or None.

        A deleted value may sit in recent turns, in any window of any process: `History.view` leaves
        out the turns from before it, so the next request carries neither the record nor the
        exchanges that spoke of it (`forget_user` removes the turns themselves).
        """
        self.limits.check_id("user", user)
        rows = self._db.fetch("SELECT at FROM history_retired WHERE user_id = ?", (user,))
        return str(rows[0][0]) if rows else None

    # -- export and import ---------------------------------------------------------------------------

    def export_user(self, user: str, path: str | os.PathLike[str] | None = None) -> str:
        """A portable bundle of `user`'s records, their history and their openai-agents session items,
        as JSON Lines (what `forget_user` removes, but for proposals and archived turns).

        The format is bundle.py's; the bundle has no timestamp of its own, so exporting the same data
        twice gives the same bytes. Proposals are not exported: a question to a person, not memory (an
        approved one is there as the change it made, its event naming it). `exportable` counts what
        a bundle would carry.

        Args:
            path: when given, the bundle is also written there, mode 0600 (`files.write_private`).

        Raises:
            StoreError: `path` is a symbolic link or a folder (refused; nothing written).
            OSError: `path` could not be written (no partial file is left behind).
        """
        self.limits.check_id("user", user)
        return bundle_format.export_user(self._db, user, path)

    def exportable(self, user: str) -> dict[str, int]:
        """How many records, events and session items of `user` an export would carry (all 0: nothing to
        export), read in one snapshot."""
        self.limits.check_id("user", user)
        row = self._db.fetch("SELECT (SELECT count(*) FROM memories WHERE user_id = ?), (SELECT count(*) FROM"
                             " memory_events WHERE user_id = ?), (SELECT count(*) FROM agent_items WHERE user_id = ?)",
                             (user, user, user))[0]
        return {"records": int(row[0]), "events": int(row[1]), "items": int(row[2])}

    def import_records(self, bundle: str | os.PathLike[str], *, user: str | None = None) -> dict[str, int]:
        """Load a bundle made by `export_user`, all or nothing.

        The records, their history and the session items arrive exactly as exported; the import adds
        no event. A proposal waiting here for the user is then stale for the keys it brings, and refused.

        `bundle`: its text, or a `pathlib.Path` to it; `user`: import under this id instead of the
        bundle's. Returns how many records and events were imported, `items` when the bundle carries
        session items, and `vectors` on a store opened with an embedder: the records' vectors for
        retrieval by meaning, made before the import's transaction and written inside it, as `put` does.

        Raises:
            ValidationError: the bundle is malformed, truncated, its checksum or version is wrong, or
                an entry breaks a limit. StoreError: the user already has records or history (or session
                items, when the bundle brings some). QuotaError: it would not fit. SemanticUnavailableError
                or ValidationError: the embedder failed. In every case nothing was imported.
        """
        header, records, events, items = bundle_format.parse_bundle(bundle_format.read_bundle(bundle), self.limits)
        target = self.limits.check_id("user", user if user is not None else header["user"])
        if self.embedder is None:
            return bundle_format.import_bundle(self._db, target, records, events, items)
        # A model call inside the write lock would hold every other writer back (as in `put`).
        vectors: Any = self._embed([embedding_text(r["key"], r["value"]) for r in records]) if records else []

        def write_vectors(conn: Any) -> int:
            return sum(self._write_vector(conn, vector, target, r["kind"], r["key"], r["value"])
                       for r, vector in zip(records, vectors, strict=True))
        return bundle_format.import_bundle(self._db, target, records, events, items, write_vectors)

    # -- transcript archive (turns that left the short-term window) -----------------------------------

    def archive_turns(self, user: str, session: str, turns: Iterable[Mapping[str, Any]]) -> int:
        """Keep turns of a session that left its short-term window, each once (archive.py); return how
        many were new. `turns`: dicts with `turn` (int >= 1), `role`, `content`, `at`.

        Past `Limits.max_archived_turns_per_user` the user's oldest archived turns go (`trim_oldest`).

        Raises:
            ValidationError: a turn is malformed. QuotaError: the size cap. ArchiveConflictError: a
                turn number is already archived with other content. In every case nothing was archived.
        """
        self._check_session(user, session)
        rows = turn_rows(user, session, turns)
        with self.transaction() as conn:
            self._db.lock_user(conn, user, creating=False)  # PostgreSQL: racing trims see each other's turns
            rows, fresh, held = rows_to_insert(conn, rows, self.limits.max_archived_turns_per_user)
            added = self._db.changed(conn, "INSERT INTO transcript (user_id, session_id, turn, role, content, at)"
                                           " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", rows)
            if added != len(rows):  # a turn was skipped: it was kept before, perhaps with other content
                conflicts = sorted({row[2] for row in rows if tuple(conn.execute(
                    "SELECT role, content, at FROM transcript WHERE user_id = ? AND session_id = ? AND turn = ?",
                    row[:3]).fetchone()) != tuple(row[3:])})
                if conflicts:
                    raise ArchiveConflictError(user, session, conflicts)
            added -= trim_oldest(conn, user, self.limits.max_archived_turns_per_user, fresh, held + added)
            self._db.check_size(conn)
        return added

    def archived_turns(self, user: str, session: str) -> list[Turn]:
        """The archived turns of one session of `user`, in turn order."""
        self._check_session(user, session)
        rows = self._db.fetch(
            "SELECT turn, role, content, at FROM transcript WHERE user_id = ? AND session_id = ? ORDER BY turn",
            (user, session),
        )
        return [Turn(turn=row["turn"], role=row["role"], content=row["content"], at=row["at"]) for row in rows]

    def window_rows(self, user: str, session: str) -> list[Any]:
        """The store's own window of one session (`memkit.window.store_window`): (turn, role, content,
        at, expires_at) rows in turn order, read in one statement (one snapshot, no write lock)."""
        return self._db.fetch("SELECT turn, role, content, at, expires_at FROM window_turns WHERE user_id = ?"
                              " AND session_id = ? ORDER BY turn", (user, session))

    def last_archived_turn(self, user: str, session: str) -> int:
        """The highest archived turn number of one session of `user` (0 if none), read from the key alone."""
        self._check_session(user, session)
        rows = self._db.fetch("SELECT max(turn) FROM transcript WHERE user_id = ? AND session_id = ?", (user, session))
        return int(rows[0][0] or 0)

    # -- items of openai-agents sessions (memkit.integrations.openai_agents) ---------------------------
    # One row per item, its JSON text as given, numbered per (user, session) in the order added.
    # Unlike the archive, a framework's session removes items (`pop_item`, `clear_session`), so a
    # number can be used again after its item was removed.

    def add_agent_items(self, user: str, session: str, items: Sequence[str]) -> int:
        """Add items (each an item's JSON text) after the session's last one, all or none; return the
        number of the last (items are numbered 1, 2, ... per user and session).

        Past `Limits.max_agent_item_chars_per_user` the user's oldest items go, over all their sessions
        (`trim_agent_items`), never one of this call's: a conversation log keeps running, as
        openai-agents' own `SessionSettings.limit` keeps only the latest items.

        Raises:
            ValidationError: an item is not text memkit can keep. QuotaError: this call's items alone
                are past the per-user bound, or the size cap. StoreError: the database is locked or
                failed. In every case nothing was added.
        """
        self._check_session(user, session)
        checked = []
        for number, item in enumerate(items, 1):
            if not isinstance(item, str):
                raise ValidationError(f"item {number} must be JSON text, not {type(item).__name__}")
            check_text(f"item {number}", item)
            checked.append(item)
        with self.transaction() as conn:
            # Not creating a lock row: on PostgreSQL that would leave a user without records counted
            # at 0. Two adds racing on one session then meet at the primary key, and one is refused.
            self._db.lock_user(conn, user, creating=False)
            last = conn.execute("SELECT coalesce(max(position), 0) FROM agent_items WHERE user_id = ?"
                                " AND session_id = ?", (user, session)).fetchone()[0]
            at = iso(self._clock())
            conn.executemany("INSERT INTO agent_items (user_id, session_id, position, item, at) VALUES (?, ?, ?, ?, ?)",
                             [(user, session, last + n, item, at) for n, item in enumerate(checked, 1)])
            trim_agent_items(conn, user, self.limits.max_agent_item_chars_per_user, keep=(session, int(last)))
            self._db.check_size(conn)
            return int(last) + len(checked)

    def agent_items(self, user: str, session: str, limit: int | None = None) -> list[str]:
        """The JSON texts of a session's items in the order added; with `limit`, the last `limit`."""
        self._check_session(user, session)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise ValidationError(f"limit is {limit!r}; give a number of items, 0 or more, or None for all")
        if limit is None:
            rows = self._db.fetch("SELECT item FROM agent_items WHERE user_id = ? AND session_id = ?"
                                  " ORDER BY position", (user, session))
            return [row[0] for row in rows]
        rows = self._db.fetch("SELECT item FROM agent_items WHERE user_id = ? AND session_id = ?"
                              " ORDER BY position DESC LIMIT ?", (user, session, limit))
        return [row[0] for row in reversed(rows)]

    def pop_agent_item(self, user: str, session: str) -> str | None:
        """Remove and return the JSON text of the session's last item (None if it has none)."""
        self._check_session(user, session)
        with self.transaction() as conn:
            self._db.lock_user(conn, user, creating=False)
            row = conn.execute("SELECT position, item FROM agent_items WHERE user_id = ? AND session_id = ?"
                               " ORDER BY position DESC LIMIT 1", (user, session)).fetchone()
            if row is None:
                return None
            conn.execute("DELETE FROM agent_items WHERE user_id = ? AND session_id = ? AND position = ?",
                         (user, session, row[0]))
            return str(row[1])

    def clear_agent_items(self, user: str, session: str) -> int:
        """Remove every item of the session; returns how many were removed."""
        self._check_session(user, session)
        with self.transaction() as conn:
            self._db.lock_user(conn, user, creating=False)
            return int(conn.execute("DELETE FROM agent_items WHERE user_id = ? AND session_id = ?",
                                    (user, session)).rowcount)

    def agent_sessions(self, user: str) -> list[dict[str, Any]]:
        """`user`'s openai-agents sessions: items, first and last item time; latest first."""
        self.limits.check_id("user", user)
        rows = self._db.fetch("SELECT session_id, count(*), min(at), max(at) FROM agent_items WHERE user_id = ?"
                              " GROUP BY session_id ORDER BY max(at) DESC, session_id", (user,))
        return [{"session": r[0], "items": int(r[1]), "first": r[2], "last": r[3]} for r in rows]

    def agent_item_rows(self, user: str, session: str) -> list[dict[str, Any]]:
        """A session's items with their numbers and times (`position`, `item` as JSON text, `at`), in order."""
        self._check_session(user, session)
        rows = self._db.fetch("SELECT position, item, at FROM agent_items WHERE user_id = ? AND session_id = ?"
                              " ORDER BY position", (user, session))
        return [{"position": int(r[0]), "item": r[1], "at": r[2]} for r in rows]

    def agent_item_users(self) -> list[str]:
        """Every user with openai-agents session items, by id."""
        return [str(row[0]) for row in self._db.fetch("SELECT DISTINCT user_id FROM agent_items ORDER BY user_id")]

    def _check_session(self, user: str, session: str) -> None:
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
