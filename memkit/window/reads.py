"""Reading the Redis window: its read paths (the RECENT and READ scripts of `memkit.window.protocol`), and
where a session's turns are right now (in the window, waiting in pending, or archived).

`recent` (the RECENT script) and `load_session` (the READ script) slide the TTL (a read is activity
too); the others read without touching it, for teaching, tests and operators. A `RedisWindow` holds
one `WindowReads` and answers its reads through it.
"""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING, Any

from ..store import Store
from ..transcript import Turn, merge_turns
from ..servers.redis_client import as_text, redis_errors
from .protocol import KeyLayout, Scripts, decode

if TYPE_CHECKING:  # pragma: no cover
    import redis


class WindowReads:
    """The reads of one `RedisWindow`: its client, store and key layout, and the TTL a read slides.

    Args:
        client: the redis-py client. store: the archive. layout: the store's keys.
        scripts: the protocol's scripts on `client`. where: the server, for error messages.
        ttl: seconds of inactivity after which Redis drops a session (a read restarts it).
    """

    def __init__(self, client: redis.Redis, store: Store, layout: KeyLayout, scripts: Scripts, *,
                 where: str, ttl: float) -> None:
        self.client = client
        self.store = store
        self.layout = layout
        self.scripts = scripts
        self.where = where
        self.ttl_ms = max(1, round(ttl * 1000))
        """The sliding TTL in milliseconds, as the scripts take it."""

    def recent(self, user: str, session: str) -> list[Turn]:
        """The session's window, oldest first; reading it restarts the TTL (the RECENT script).

        RECENT is ZRANGE, then PEXPIRE of the turns and the counter. The same three commands as a
        pipeline cost the server about 10 µs less (1.6 against 11 µs a read, measured alternately),
        but the client about 25 µs more (it packs and parses three commands instead of one), and a
        read is mostly client: even a server shared by a thousand live conversations reads a window
        per reply, a few thousand times a second at most. The sessions index is left as the last
        append set it, so it may say a read session expires earlier than it does, never later; the
        sweeper asks the key's own TTL before it retires a session (the RETIRE script).
        """
        keys = self.layout.session(user, session)
        with redis_errors(self.where, f"reading the window of {user}/{session}"):
            return decode(self.scripts.recent(keys=[keys.turns, keys.seq], args=[self.ttl_ms]))

    def load_session(self, user: str, session: str) -> list[Turn]:
        """The whole conversation: archive + pending + window, each turn once, in turn order.

        Redis is read first (window and pending in one READ script, one snapshot, so a turn moving
        between them is seen once; it slides the TTL), then SQLite: a turn archived in between is
        then in both reads and counted once. Reading the other way round could miss a turn that
        moved in between.
        """
        keys = self.layout.session(user, session)
        with redis_errors(self.where, f"reading the window of {user}/{session}"):
            window, pending = self.scripts.read(keys=[keys.turns, keys.pending, keys.seq, self.layout.index],
                                                args=[f"{user}/{session}", self.ttl_ms])
        return merge_turns(decode(window), decode(pending), self.store.archived_turns(user, session))  # type: ignore[arg-type]

    def pending(self, user: str, session: str) -> list[Turn]:
        """Turns that left the window and wait for the archiver (without touching the TTL)."""
        keys = self.layout.session(user, session)
        with redis_errors(self.where, f"reading the pending turns of {user}/{session}"):
            return decode(self.client.zrange(keys.pending, 0, -1))

    def ttl_left(self, user: str, session: str) -> float | None:
        """Seconds until Redis would drop the session's window, or None if it has none.

        Asking does not count as activity: it does not restart the TTL.
        """
        keys = self.layout.session(user, session)
        with redis_errors(self.where, f"reading the TTL of {user}/{session}"):
            ms = self.client.pttl(keys.turns)
        return ms / 1000 if ms >= 0 else None

    def snapshot(self, user: str, session: str) -> list[dict[str, Any]]:
        """Every turn of the session with where it is now: "window", "pending", "archive", or two
        of them joined by '+' (the moment between an archive commit and the Redis trim).

        For teaching and tests; it does not touch the TTL.
        """
        keys = self.layout.session(user, session)
        with redis_errors(self.where, f"reading {user}/{session}"):
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
            with redis_errors(self.where, f"checking the keys of {user}/{session}"):
                left = self.client.exists(keys.turns, keys.pending, keys.seq)
            if not left:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def user_turns(self, user: str) -> int:
        """How many turns of `user` Redis holds, windows and pending, all sessions."""
        with redis_errors(self.where, f"counting the turns of {user}"):
            sorted_sets = [k for k in self.client.scan_iter(match=self.layout.user_pattern(user), count=500)
                           if as_text(k).endswith((":turns", ":pending"))]
            return sum(int(self.client.zcard(k)) for k in sorted_sets)
