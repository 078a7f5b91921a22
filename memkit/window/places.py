"""Where a session's turns are right now: in the Redis window, waiting in pending, or archived.

Read without touching the TTL (asking is not activity), for teaching, tests and operators. Mixed
into `RedisWindow`, whose client, store and key layout it reads through.
"""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING, Any

from ..store import MemoryStore
from ..transcript import Turn
from .archiver import decode
from .keys import KeyLayout
from .server import redis_errors

if TYPE_CHECKING:  # pragma: no cover
    import redis


class SessionPlaces:
    """The reads of `RedisWindow` that show where turns are, without sliding the TTL."""

    client: "redis.Redis"
    store: MemoryStore
    layout: KeyLayout
    _where: str

    def pending(self, user: str, session: str) -> list[Turn]:
        """Turns that left the window and wait for the archiver (without touching the TTL)."""
        keys = self.layout.session(user, session)
        with redis_errors(self._where, f"reading the pending turns of {user}/{session}"):
            return decode(self.client.zrange(keys.pending, 0, -1))

    def ttl_left(self, user: str, session: str) -> float | None:
        """Seconds until Redis would drop the session's window, or None if it has none.

        Asking does not count as activity: it does not restart the TTL.
        """
        keys = self.layout.session(user, session)
        with redis_errors(self._where, f"reading the TTL of {user}/{session}"):
            ms = self.client.pttl(keys.turns)
        return ms / 1000 if ms >= 0 else None

    def snapshot(self, user: str, session: str) -> list[dict[str, Any]]:
        """Every turn of the session with where it is now: "window", "pending", "archive", or two
        of them joined by '+' (the moment between an archive commit and the Redis trim).

        For teaching and tests; it does not touch the TTL.
        """
        keys = self.layout.session(user, session)
        with redis_errors(self._where, f"reading {user}/{session}"):
            pipe = self.client.pipeline(transaction=True)
            pipe.zrange(keys.turns, 0, -1)
            pipe.zrange(keys.pending, 0, -1)
            window, pending = pipe.execute()
        places: dict[int, list[str]] = collections.defaultdict(list)
        turns: dict[int, Turn] = {}
        for place, members in (("window", decode(window)), ("pending", decode(pending)),
                               ("archive", self.store.archived_turns(user, session))):
            for turn in members:
                places[turn["turn"]].append(place)
                turns.setdefault(turn["turn"], turn)  # type: ignore[arg-type]
        return [{"turn": n, "role": turns[n]["role"], "content": turns[n]["content"], "place": "+".join(places[n])}
                for n in sorted(turns)]

    def place_counts(self, user: str, session: str) -> dict[str, int]:
        """How many turns of the session are in each place: {"window": n, "pending": n, "archive": n}.

        A turn caught between an archive commit and the Redis trim counts in both of its places.
        Built on `snapshot`, so it does not touch the TTL either.
        """
        counts = {"window": 0, "pending": 0, "archive": 0}
        for row in self.snapshot(user, session):
            for place in row["place"].split("+"):
                counts[place] += 1
        return counts

    def wait_until_archived(self, user: str, session: str, *, timeout: float = 5.0) -> bool:
        """Wait until the session has no key left in Redis: the sweeper retired its window and the
        archiver moved every turn into SQLite (a background worker must be running, or `flush()`
        called meanwhile).

        Returns:
            True if that happened within `timeout` seconds, False otherwise.
        """
        keys = self.layout.session(user, session)
        deadline = time.monotonic() + timeout
        while True:
            with redis_errors(self._where, f"checking the keys of {user}/{session}"):
                left = self.client.exists(keys.turns, keys.pending, keys.seq)
            if not left:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
