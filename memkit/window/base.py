"""The short-term window's interface, and the window that lives in this process.

`ShortTermWindow` is what every window promises: the last `size` turns of a session, numbered
from 1 without a gap, with what falls out kept in an archive (the store's transcript) so that
`load_session` returns the whole conversation. `InProcessWindow` keeps it in this process;
`memkit.window.redis.RedisWindow` keeps it in Redis, shared by every instance.
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
    """The recent turns of each session, bounded to `size`, with the rest in an archive.

    Subclasses: `InProcessWindow` (this process only) and `RedisWindow` (shared through Redis).
    """

    size: int
    store: Store | None

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

        Args:
            role: "user", "assistant" or "tool".
            content: the text; any other value (a tool result) is stored as its `codec.dumps` JSON.

        Raises:
            ValidationError: a bad id, role or content; nothing was written.
            WindowError: the window's backend is unavailable.
        """

    @abc.abstractmethod
    def recent(self, user: str, session: str) -> list[Turn]:
        """The session's window: its last `size` turns, oldest first."""

    @abc.abstractmethod
    def load_session(self, user: str, session: str) -> list[Turn]:
        """The whole conversation, archive and window together, each turn once, in turn order."""

    def append_exchange(self, user: str, session: str, question: str, answer: str) -> list[Turn]:
        """Store one answered exchange, the user's turn and the assistant's, together: both or neither.

        Raises:
            ValidationError: a bad id or content; nothing was written.
            WindowError: the window's backend is unavailable; nothing was written.
        """
        self._content("user", question)
        self._content("assistant", answer)  # both checked before either is stored
        return [self.append(user, session, "user", question), self.append(user, session, "assistant", answer)]

    @abc.abstractmethod
    def retire_user(self, user: str) -> int:
        """Move every recent turn of `user` (all sessions) out of the window, into the archive.

        After a confirmed delete, so the old value is no longer in any recent history. With no
        archive the turns are dropped. Returns how many sessions were retired.
        """

    @abc.abstractmethod
    def forget_user(self, user: str) -> dict[str, int]:
        """Remove every trace of `user`: the window's turns (and what waits to be archived), then,
        with a store, the store's records, history and transcript. Returns how many of each went
        (`window_turns`, and the store's counts)."""

    @abc.abstractmethod
    def clear_user(self, user: str) -> dict[str, int]:
        """Remove `user`'s turns from this window only (recent and waiting to be archived), leaving
        the store alone: `memkit.forgetting.forget_user` clears every window first, then the store.
        Returns `window_turns` (how many went) and, for Redis, `redis_keys`."""

    @abc.abstractmethod
    def user_turns(self, user: str) -> int:
        """How many turns of `user` the window holds, all sessions (0 once forgotten)."""

    def flush(self) -> dict[str, int]:
        """Archive what is waiting to be archived now. Returns counts of what was done."""
        return {"closed": 0, "archived": 0}

    def close(self) -> None:  # noqa: B027 - nothing to release by default; not abstract
        """Release what the window holds. Safe to call twice."""

    def __enter__(self) -> ShortTermWindow:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check(self, user: str, session: str) -> None:
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)

    def _content(self, role: object, content: Any) -> str:
        if role not in TURN_ROLES:
            raise ValidationError(f"turn role {role!r} is unknown; use one of {', '.join(TURN_ROLES)}")
        text = content if isinstance(content, str) else codec.dumps(content)
        check_text("turn content", text)
        if len(text) > self.max_content_chars:
            raise ValidationError(
                f"turn content is {len(text)} characters; a turn holds at most {self.max_content_chars}"
            )
        return text


class InProcessWindow(ShortTermWindow):
    """A bounded window per session in this process's memory.

    With a `store`, a turn that falls out of the window is archived before it leaves (in the
    caller's thread, under the window's lock), so `load_session` has everything; without one the
    window simply forgets what falls out. Nothing survives the process. Thread-safe.

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
        self._seq: dict[tuple[str, str], int] = {}
        self._lock = threading.RLock()

    def append(self, user: str, session: str, role: str, content: Any) -> Turn:
        self._check(user, session)
        text = self._content(role, content)
        key = (user, session)
        with self._lock:
            if key not in self._seq:
                self._seq[key] = self.store.last_archived_turn(user, session) if self.store is not None else 0
            turns = self._turns.setdefault(key, collections.deque())
            number = self._seq[key] + 1
            turn: Turn = {"turn": number, "role": role, "content": text, "at": iso(self._clock())}
            overflow = list(turns)[: max(0, len(turns) + 1 - self.size)]
            if overflow and self.store is not None:
                # before they leave the window
                self.store.archive_turns(user, session, cast(list[dict[str, Any]], overflow))
            self._seq[key] = number
            for _ in overflow:
                turns.popleft()
            turns.append(turn)
        return dict(turn)  # type: ignore[return-value]

    def append_exchange(self, user: str, session: str, question: str, answer: str) -> list[Turn]:
        with self._lock:  # held across both appends (an RLock): no other writer lands in between
            return super().append_exchange(user, session, question, answer)

    def recent(self, user: str, session: str) -> list[Turn]:
        self._check(user, session)
        with self._lock:
            return [dict(t) for t in self._turns.get((user, session), ())]  # type: ignore[misc]

    def retire_user(self, user: str) -> int:
        self.limits.check_id("user", user)
        with self._lock:
            sessions = [key for key in self._turns if key[0] == user and self._turns[key]]
            for key in sessions:
                if self.store is not None:
                    self.store.archive_turns(*key, cast(list[dict[str, Any]], list(self._turns[key])))
                self._turns[key].clear()
            return len(sessions)

    def forget_user(self, user: str) -> dict[str, int]:
        with self._lock:
            cleared = self.clear_user(user)
            counts = self.store.forget_user(user) if self.store is not None else {}
        return {**counts, **cleared}

    def clear_user(self, user: str) -> dict[str, int]:
        self.limits.check_id("user", user)
        with self._lock:
            doomed = [key for key in self._turns if key[0] == user]
            turns = sum(len(self._turns.pop(key)) for key in doomed)
            for key in doomed:
                self._seq.pop(key, None)
        return {"window_turns": turns}

    def user_turns(self, user: str) -> int:
        with self._lock:
            return sum(len(turns) for (owner, _), turns in self._turns.items() if owner == user)

    def load_session(self, user: str, session: str) -> list[Turn]:
        window = self.recent(user, session)
        archived = self.store.archived_turns(user, session) if self.store is not None else []
        return merge_turns(window, archived)  # type: ignore[arg-type]
