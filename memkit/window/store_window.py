"""The short-term window in the store's own SQLite file: `memkit chat`'s window by default.

Each session keeps its last `size` turns in the table `window_turns`, beside the transcript archive
in the same file, so one transaction can move a turn from one to the other: every turn is in exactly
one of the two, and a process killed at any moment leaves a whole append or none of it. With several
machines, or many writers, keep the window in Redis instead (`RedisWindow`).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ..clock import Clock, iso, utc_now
from ..errors import ValidationError
from ..store import Store
from ..store.archive import stale_windows
from ..transcript import Turn, merge_turns
from .base import DEFAULT_MAX_CONTENT_CHARS, DEFAULT_SIZE, ShortTermWindow
from .expiry import DEFAULT_TTL_SECONDS, check_ttl, expiry_at

EVERY_TURN = 2**62
"""Larger than any turn number: `up_to` for the whole session."""

class StoreWindow(ShortTermWindow):
    """The last `size` turns of each session in a SQLite store's file, with a sliding expiry.

    A session nobody reads or writes for `ttl` seconds (each use restarts the clock) is moved whole
    into the archive at its next use, or at `flush()`: not lost, only no longer recent.

    Raises:
        ValidationError: a bad size or ttl, or a store that is not a SQLite file.

    Example:
        >>> with MemoryStore(tmp / "m.sqlite3") as store:  # doctest: +SKIP
        ...     window = StoreWindow(store, size=2)
        ...     for text in ["hi", "hello", "tea?"]:
        ...         _ = window.append("alice", "s1", "user", text)
        ...     [t["content"] for t in window.recent("alice", "s1")], len(window.load_session("alice", "s1"))
        (['hello', 'tea?'], 3)
    """

    def __init__(self, store: Store, size: int = DEFAULT_SIZE, *, ttl: float = DEFAULT_TTL_SECONDS,
                 clock: Clock = utc_now, max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS) -> None:
        if getattr(store, "path", None) is None:
            raise ValidationError("StoreWindow keeps its turns in a SQLite store's file, and this store is not one; "
                                  "for a PostgreSQL store use RedisWindow (REDIS_URL, or memkit chat --redis-url)")
        super().__init__(size, store, clock, store.limits, max_content_chars)
        self.store: Store = store
        self.ttl = check_ttl(ttl)

    def append(self, user: str, session: str, role: str, content: Any) -> Turn:
        """Add a turn and return it with its number, in one transaction.

        The turn goes in and a turn that falls out moves into the archive, under the store's write
        lock, so no other process takes the same number. A bad id, role or content: ValidationError,
        and nothing was written.
        """
        self._check_ids(user, session)
        text = self._checked_text(role, content)
        with self.store.transaction() as conn:
            now = self._clock()
            expires = expiry_at(now, self.ttl)
            self._archive_if_expired(conn, user, session, now)
            number = 1 + conn.execute(  # past every turn of the session, in the window or archived
                "SELECT max(coalesce((SELECT max(turn) FROM window_turns WHERE user_id = ? AND session_id = ?), 0),"
                " coalesce((SELECT max(turn) FROM transcript WHERE user_id = ? AND session_id = ?), 0))",
                (user, session, user, session)).fetchone()[0]
            turn: Turn = {"turn": number, "role": role, "content": text, "at": iso(now)}
            conn.execute("INSERT INTO window_turns (user_id, session_id, turn, role, content, at, expires_at)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?)", (user, session, number, role, text, turn["at"], expires))
            self._restart_expiry(conn, user, session, expires)
            for stale in stale_windows(conn, user, session, self.limits.max_archived_turns_per_user):
                self._archive(conn, user, stale)  # past the user's bound: their least recent windows retire
            self._archive(conn, user, session, up_to=number - self.size)  # what fell out of the window
        return turn

    def append_exchange(self, user: str, session: str, question: str, answer: str) -> list[Turn]:
        """Store the user's turn and the assistant's in one transaction: both or neither."""
        with self.store.transaction():  # each append's transaction nests inside this one
            return super().append_exchange(user, session, question, answer)

    def recent(self, user: str, session: str) -> list[Turn]:
        """The session's window, oldest first; reading it restarts its expiry. Kept to the second
        (`expiry_at`), the expiry is most often stored already: such a read writes nothing, lock-free."""
        self._check_ids(user, session)
        now = self._clock()
        expires = expiry_at(now, self.ttl)
        rows = self.store.window_rows(user, session)  # one statement: one snapshot
        if all(row[4] == expires for row in rows):
            return [Turn(turn=row[0], role=row[1], content=row[2], at=row[3]) for row in rows]
        with self.store.transaction() as conn:  # expired, or the expiry moves to another second
            self._archive_if_expired(conn, user, session, now)
            self._restart_expiry(conn, user, session, expires)
            return self._window_turns(conn, user, session)

    def load_session(self, user: str, session: str) -> list[Turn]:
        """The whole conversation, archive and window together, each turn once, in turn order."""
        self._check_ids(user, session)
        with self.store.transaction() as conn:  # one snapshot of both tables
            self._archive_if_expired(conn, user, session, self._clock())
            return merge_turns(self.store.archived_turns(user, session), self._window_turns(conn, user, session))

    def retire_user(self, user: str) -> int:
        self.limits.check_id("user", user)
        with self.store.transaction() as conn:
            sessions = [row[0] for row in conn.execute(
                "SELECT DISTINCT session_id FROM window_turns WHERE user_id = ?", (user,)).fetchall()]
            for session in sessions:
                self._archive(conn, user, session)
        return len(sessions)

    def clear_user(self, user: str) -> dict[str, int]:
        self.limits.check_id("user", user)
        with self.store.transaction() as conn:
            return {"window_turns": conn.execute("DELETE FROM window_turns WHERE user_id = ?", (user,)).rowcount}

    def forget_user(self, user: str) -> dict[str, int]:
        with self.store.transaction():  # the window and the store: both or neither
            cleared = self.clear_user(user)
            return {**self.store.forget_user(user), **cleared}

    def user_turns(self, user: str) -> int:
        self.limits.check_id("user", user)
        with self.store.transaction() as conn:
            return int(conn.execute("SELECT count(*) FROM window_turns WHERE user_id = ?", (user,)).fetchone()[0])

    def flush(self) -> dict[str, int]:
        """Archive every expired session, of every user: the operator's sweep, not a user's read."""
        with self.store.transaction() as conn:
            expired = conn.execute("SELECT user_id, session_id, count(*) FROM window_turns WHERE expires_at <= ?"
                                   " GROUP BY user_id, session_id", (iso(self._clock()),)).fetchall()
            for user, session, _ in expired:
                self._archive(conn, user, session)
        return {"closed": len(expired), "archived": sum(row[2] for row in expired)}

    # -- the steps, each inside the caller's transaction ---------------------------------------------

    def _window_turns(self, conn: Any, user: str, session: str, up_to: int = EVERY_TURN) -> list[Turn]:
        rows = conn.execute("SELECT turn, role, content, at FROM window_turns WHERE user_id = ? AND session_id = ?"
                            " AND turn <= ? ORDER BY turn", (user, session, up_to)).fetchall()
        return [Turn(turn=row[0], role=row[1], content=row[2], at=row[3]) for row in rows]

    def _restart_expiry(self, conn: Any, user: str, session: str, expires: str) -> None:
        conn.execute("UPDATE window_turns SET expires_at = ? WHERE user_id = ? AND session_id = ?"
                     " AND expires_at <> ?", (expires, user, session, expires))  # rows already right stay unwritten

    def _archive_if_expired(self, conn: Any, user: str, session: str, now: _dt.datetime) -> None:
        if conn.execute("SELECT 1 FROM window_turns WHERE user_id = ? AND session_id = ? AND expires_at <= ?"
                        " LIMIT 1", (user, session, iso(now))).fetchone():
            self._archive(conn, user, session)

    def _archive(self, conn: Any, user: str, session: str, up_to: int = EVERY_TURN) -> None:
        """Move the session's window turns numbered `up_to` or less (default: all) into the archive.
        Copy and delete share the caller's transaction: a turn is archived exactly once."""
        turns = self._window_turns(conn, user, session, up_to)  # none while the window fills
        self.store.archive_turns(user, session, turns)  # even none: the write checks the size cap
        if turns:
            conn.execute("DELETE FROM window_turns WHERE user_id = ? AND session_id = ? AND turn <= ?",
                         (user, session, turns[-1]["turn"]))
