"""What every short-term window promises, and the simplest window that keeps the promise.

The last `size` turns of each session, numbered from 1 without a gap; a turn that falls out is
archived in the store's transcript exactly once, so `load_session` gives back the whole conversation.
"""

from __future__ import annotations

import abc
import collections
import threading
from typing import Any, cast

from .. import codec
from ..clock import Clock, iso, utc_now
from ..errors import ValidationError
from ..limits import DEFAULT_LIMITS, Limits, check_text
from ..store import Store
from ..transcript import TURN_ROLES, Turn, merge_turns

DEFAULT_SIZE = 10
DEFAULT_MAX_CONTENT_CHARS = 20_000


class ShortTermWindow(abc.ABC):
    """The last `size` turns of each session, with every older turn in the store's archive.

    Every window checks the ids and the turn before it writes anything, numbers turns past every
    number the session already used, and archives what falls out before it leaves. The subclasses
    differ only in where the window lives: this process (`InProcessWindow`), the store's own file
    (`StoreWindow`), or Redis, shared by every instance (`RedisWindow`).
    """

    def __init__(self, size: int, store: Store | None, clock: Clock, limits: Limits,
                 max_content_chars: int) -> None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValidationError(f"window size is {size!r}; it must be a positive integer")
        self.size = size
        self.store = store
        self.limits = store.limits if store is not None else limits
        self._clock = clock
        self.max_content_chars = max_content_chars

    @abc.abstractmethod
    def append(self, user: str, session: str, role: str, content: Any) -> Turn:
        """Add a turn to the session's window and return it with its number.

        `role` is "user", "assistant" or "tool"; content that is not text (a tool result) is stored
        as its `codec.dumps` JSON. A bad id, role or content raises ValidationError and writes
        nothing; a window whose backend is unavailable raises WindowError.
        """

    @abc.abstractmethod
    def recent(self, user: str, session: str) -> list[Turn]:
        """The session's window: its last `size` turns, oldest first."""

    @abc.abstractmethod
    def load_session(self, user: str, session: str) -> list[Turn]:
        """The whole conversation, archive and window together, each turn once, in turn order."""

    def append_exchange(self, user: str, session: str, question: str, answer: str) -> list[Turn]:
        """Store the user's turn and the assistant's together: both or neither."""
        self._checked_text("user", question)
        self._checked_text("assistant", answer)  # both checked before either is stored
        return [self.append(user, session, "user", question), self.append(user, session, "assistant", answer)]

    @abc.abstractmethod
    def retire_user(self, user: str) -> int:
        """Archive (or, without a store, drop) every window turn of `user`; returns the sessions retired."""

    @abc.abstractmethod
    def clear_user(self, user: str) -> dict[str, int]:
        """Remove `user`'s turns from this window only, leaving the store alone; returns `window_turns`."""

    @abc.abstractmethod
    def forget_user(self, user: str) -> dict[str, int]:
        """Remove `user`'s turns from the window, then everything of theirs in the store; returns the counts."""

    @abc.abstractmethod
    def user_turns(self, user: str) -> int:
        """How many turns of `user` the window holds, all sessions (0 once forgotten)."""

    def flush(self) -> dict[str, int]:
        """Archive now what waits to be archived; returns {"closed": sessions, "archived": turns}."""
        return {"closed": 0, "archived": 0}

    def close(self) -> None:  # noqa: B027 - nothing to release by default; not abstract
        """Release what the window holds. Safe to call twice."""

    def __enter__(self) -> ShortTermWindow:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_ids(self, user: str, session: str) -> None:
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)

    def _checked_text(self, role: object, content: Any) -> str:
        if role not in TURN_ROLES:
            raise ValidationError(f"turn role {role!r} is unknown; use one of {', '.join(TURN_ROLES)}")
        text = content if isinstance(content, str) else codec.dumps(content)
        check_text("turn content", text)
        if len(text) > self.max_content_chars:
            raise ValidationError(
                f"turn content is {len(text)} characters; a turn holds at most {self.max_content_chars}")
        return text


class InProcessWindow(ShortTermWindow):
    """A bounded deque per session in this process's memory; nothing survives the process.

    With a `store`, a turn that falls out is archived before it leaves; without one it is simply
    forgotten. One lock guards every session, so the window is thread-safe.

    Example:
        >>> window = InProcessWindow(size=2)
        >>> for text in ["hi", "hello", "tea?"]:
        ...     _ = window.append("alice", "s1", "user", text)
        >>> [t["content"] for t in window.recent("alice", "s1")]
        ['hello', 'tea?']
    """

    def __init__(self, size: int = DEFAULT_SIZE, *, store: Store | None = None, clock: Clock = utc_now,
                 limits: Limits = DEFAULT_LIMITS, max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS) -> None:
        super().__init__(size, store, clock, limits, max_content_chars)
        self._turns: dict[tuple[str, str], collections.deque[Turn]] = {}
        self._last_number: dict[tuple[str, str], int] = {}
        self._lock = threading.RLock()  # re-entrant: append_exchange holds it across two appends

    def append(self, user: str, session: str, role: str, content: Any) -> Turn:
        self._check_ids(user, session)
        text = self._checked_text(role, content)
        key = (user, session)
        with self._lock:
            if key not in self._last_number:  # a session seen before this process: continue its numbers
                self._last_number[key] = self.store.last_archived_turn(user, session) if self.store is not None else 0
            turns = self._turns.setdefault(key, collections.deque(maxlen=self.size))  # drops the oldest
            number = self._last_number[key] + 1
            turn: Turn = {"turn": number, "role": role, "content": text, "at": iso(self._clock())}
            if len(turns) == self.size and self.store is not None:  # the oldest is archived before it falls out
                self.store.archive_turns(user, session, [cast(dict[str, Any], turns[0])])
            self._last_number[key] = number
            turns.append(turn)
        return dict(turn)  # type: ignore[return-value]

    def append_exchange(self, user: str, session: str, question: str, answer: str) -> list[Turn]:
        with self._lock:  # no other writer lands between the two turns
            return super().append_exchange(user, session, question, answer)

    def recent(self, user: str, session: str) -> list[Turn]:
        self._check_ids(user, session)
        with self._lock:
            return [dict(t) for t in self._turns.get((user, session), ())]  # type: ignore[misc]

    def load_session(self, user: str, session: str) -> list[Turn]:
        window = self.recent(user, session)  # first: a turn archived meanwhile is then read twice, never missed
        return merge_turns(window, self.store.archived_turns(user, session) if self.store else [])  # type: ignore[arg-type]

    def retire_user(self, user: str) -> int:
        self.limits.check_id("user", user)
        with self._lock:
            sessions = [key for key, turns in self._turns.items() if key[0] == user and turns]
            for key in sessions:
                if self.store is not None:
                    self.store.archive_turns(*key, cast(list[dict[str, Any]], list(self._turns[key])))
                self._turns[key].clear()
            return len(sessions)

    def clear_user(self, user: str) -> dict[str, int]:
        self.limits.check_id("user", user)
        with self._lock:
            doomed = [key for key in self._turns if key[0] == user]
            for key in doomed:
                self._last_number.pop(key, None)
            return {"window_turns": sum(len(self._turns.pop(key)) for key in doomed)}

    def forget_user(self, user: str) -> dict[str, int]:
        with self._lock:
            cleared = self.clear_user(user)
            return {**(self.store.forget_user(user) if self.store is not None else {}), **cleared}

    def user_turns(self, user: str) -> int:
        with self._lock:
            return sum(len(turns) for (owner, _), turns in self._turns.items() if owner == user)
