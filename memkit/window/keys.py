"""The Redis keys of the short-term window: one layout per key prefix, one set of keys per session.

The prefix defaults to `memkit`; user and session ids are checked by `Limits.check_id`, so they
contain no ':' or glob character and never start with '_': no id can name another user's keys or
one of the two index keys.

* `memkit:{user}:{session}:turns`   sorted set, score = turn number, member = the turn's JSON (sliding TTL)
* `memkit:{user}:{session}:pending` sorted set of turns that left the window, not yet archived (no TTL)
* `memkit:{user}:{session}:seq`     the turn counter (sliding TTL)
* `memkit:_sessions`                sorted set: "user/session" -> expiry time in ms (Redis clock) as of
                                    the last write (a read slides only the session keys' TTL, which
                                    the sweeper checks before it retires a session)
* `memkit:_archive`                 set of "user/session" that have pending turns
* `memkit:_life`                    the server's run_id, one key per server whatever the prefix: set by
                                    `memkit.window.life.note_server_life` when a kit client connects,
                                    read by the append script (see `memkit.window.redis`)

All keys of one session plus the two index keys are touched by one script, so on Redis Cluster
they would need one hash slot; this kit targets one server.
"""

from __future__ import annotations

import logging
import re
from typing import Iterable, Iterator, NamedTuple

from ..errors import ValidationError
from ..limits import DEFAULT_LIMITS, Limits

log = logging.getLogger(__name__)

_PREFIX_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


LIFE_KEY = "memkit:_life"
"""The server's run_id as the last kit client to connect found it (no prefix: it is the server's)."""


class SessionKeys(NamedTuple):
    """The Redis keys of one session of one user."""

    turns: str
    pending: str
    seq: str


def session_keys(prefix: str, user: str, session: str, limits: Limits = DEFAULT_LIMITS) -> SessionKeys:
    """The Redis keys of one session of one user: `{prefix}:{user}:{session}:turns|pending|seq`.

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
    """Every key under one prefix: the two index keys, and `session(user, session)` for the rest.

    Raises:
        ValidationError: the prefix has characters other than letters, digits, '_', '.', '-'.
    """

    def __init__(self, prefix: str, limits: Limits = DEFAULT_LIMITS) -> None:
        if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
            raise ValidationError(f"key prefix {prefix!r} is not allowed; use letters, digits, '_', '.', '-'")
        self.prefix = prefix
        self.limits = limits
        self.index = f"{prefix}:_sessions"
        """Sorted set: "user/session" -> the session's expiry time in ms (Redis clock)."""
        self.queue = f"{prefix}:_archive"
        """Set of "user/session" that have pending turns."""

    def session(self, user: str, session: str) -> SessionKeys:
        """The keys of one session (both ids checked)."""
        return session_keys(self.prefix, user, session, self.limits)

    def user_pattern(self, user: str) -> str:
        """A SCAN pattern that matches this user's keys only (ids hold no ':' or glob character)."""
        self.limits.check_id("user", user)
        return f"{self.prefix}:{user}:*"

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
