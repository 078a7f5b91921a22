"""The Redis keys of the short-term window: one layout per key prefix and store, one set of keys per session.

Every key starts with `{prefix}:{store}`: the operator's prefix (default `memkit`; separate
deployments on one server may choose their own) and the store's id (`MemoryStore.store_id`, its
first 16 hex digits). Two databases that share one Redis server (two workspaces, two students on a
class Redis) therefore never see each other's windows: one store's chat cannot recall the other's
turns, its archiver cannot copy them, its forget cannot remove them. User and session ids are
checked by `Limits.check_id`, so they contain no ':' or glob character and never start with '_':
no id can name another user's keys or one of the two index keys.

* `{prefix}:{store}:{user}:{session}:turns`   sorted set, score = turn number, member = the turn's
                                              JSON (sliding TTL)
* `{prefix}:{store}:{user}:{session}:pending` sorted set of turns that left the window, not yet
                                              archived (no TTL)
* `{prefix}:{store}:{user}:{session}:seq`     the turn counter (sliding TTL)
* `{prefix}:{store}:_sessions`   sorted set: "user/session" -> expiry time in ms (Redis clock) as of
                                 the last write (a read slides only the session keys' TTL, which the
                                 sweeper checks before it retires a session)
* `{prefix}:{store}:_archive`    set of "user/session" that have pending turns
* `memkit:_life`                 the server's run_id, one key per server whatever the prefix: set by
                                 `memkit.window.life.note_server_life` when a kit client connects,
                                 read by the append script (see `memkit.window.redis`)

All keys of one session plus the two index keys are touched by one script, so on Redis Cluster
they would need one hash slot; this kit targets one server.
"""

from __future__ import annotations

import logging
import re
from typing import NamedTuple
from collections.abc import Iterable, Iterator

from ..errors import ValidationError
from ..limits import DEFAULT_LIMITS, Limits

log = logging.getLogger(__name__)

_PREFIX_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_STORE_ID_RE = re.compile(r"[0-9a-f]{16,}")

STORE_ID_CHARS = 16
"""How much of the store's id the keys carry (64 random bits: two stores never meet by chance)."""


LIFE_KEY = "memkit:_life"
"""The server's run_id as the last kit client to connect found it (no prefix: it is the server's)."""


class SessionKeys(NamedTuple):
    """The Redis keys of one session of one user."""

    turns: str
    pending: str
    seq: str


def session_keys(prefix: str, user: str, session: str, limits: Limits = DEFAULT_LIMITS) -> SessionKeys:
    """The Redis keys of one session of one user: `{prefix}:{user}:{session}:turns|pending|seq`.

    `prefix` is a layout's `base` (`{prefix}:{store}`, see `KeyLayout`).

    Both ids are checked first (`Limits.check_id`): they cannot contain ':' or glob characters,
    nor start with '_', so no id can name another user's keys or the `_sessions`/`_archive` index.
    """
    limits.check_id("user", user)
    limits.check_id("session", session)
    base = f"{prefix}:{user}:{session}"
    return SessionKeys(f"{base}:turns", f"{base}:pending", f"{base}:seq")


def as_text(value: bytes | str) -> str:
    """A Redis reply (bytes) as text."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


class KeyLayout:
    """Every key of one store under one prefix: the two index keys, and `session(user, session)` for the rest.

    Args:
        prefix: the operator's part (letters, digits, '_', '.', '-').
        store_id: the store's id (`MemoryStore.store_id`); its first 16 hex digits follow the prefix.
            None only for code that predates store ids (keys `{prefix}:{user}:...`, shared by every
            store on the server); every `RedisWindow` passes it.

    Raises:
        ValidationError: the prefix has characters other than letters, digits, '_', '.', '-', or
            the store id is not hexadecimal.
    """

    def __init__(self, prefix: str, limits: Limits = DEFAULT_LIMITS, store_id: str | None = None) -> None:
        if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
            raise ValidationError(f"key prefix {prefix!r} is not allowed; use letters, digits, '_', '.', '-'")
        if store_id is not None and (not isinstance(store_id, str) or not _STORE_ID_RE.fullmatch(store_id)):
            raise ValidationError(f"store id {store_id!r} is not a store's id (at least 16 lower-case hex digits)")
        self.prefix = prefix
        self.store_id = store_id[:STORE_ID_CHARS] if store_id is not None else None
        self.base = prefix if self.store_id is None else f"{prefix}:{self.store_id}"
        """What every key of this layout starts with: `{prefix}:{store}`."""
        self.limits = limits
        self.index = f"{self.base}:_sessions"
        """Sorted set: "user/session" -> the session's expiry time in ms (Redis clock)."""
        self.queue = f"{self.base}:_archive"
        """Set of "user/session" that have pending turns."""

    def session(self, user: str, session: str) -> SessionKeys:
        """The keys of one session (both ids checked)."""
        return session_keys(self.base, user, session, self.limits)

    def user_pattern(self, user: str) -> str:
        """A SCAN pattern that matches this user's keys only (ids hold no ':' or glob character)."""
        self.limits.check_id("user", user)
        return f"{self.base}:{user}:*"

    def refs(self, members: Iterable[bytes | str]) -> Iterator[tuple[str, str]]:
        """(user, session) of each "user/session" member of an index, sorted; malformed ones skipped."""
        for member in sorted(as_text(m) for m in members):
            user, _, session = member.partition("/")
            try:
                self.limits.check_id("user", user)
                self.limits.check_id("session", session)
            except ValidationError:
                log.warning("skipping malformed session reference %r under prefix %r", member, self.prefix)
                continue
            yield user, session
