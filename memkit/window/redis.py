"""The short-term window in Redis, shared by every agent instance that serves the user.

Each session keeps its last `size` turns in Redis with a sliding TTL (each read and write restarts
it). Turns that fall out of the window move atomically (one Lua script) into a `pending` set; the
archiver (`memkit.window.archiver`: a background thread, or `flush()`) copies pending turns into
SQLite and only then removes them from Redis.

Why no turn is lost or doubled:

* Each turn gets its number from one Redis counter (`INCR`) inside the same script that stores
  it, so numbers are unique and dense even with several instances writing.
* Archiving is copy, then trim, keyed by turn number; `load_session` counts a turn once by its
  number even in the moment it is in both places.
* Expiry: every touch records the session's expiry time in an index; the sweeper retires a
  session near expiry into `pending` before Redis can drop it.

TTLs run on the Redis server's clock, the only clock that can expire a key; turn timestamps come
from the window's replaceable `clock`. The keys are described in `memkit.window.keys`.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import TYPE_CHECKING, Any

from .. import codec
from ..clock import Clock, iso, utc_now
from ..errors import ValidationError, WindowError
from ..store import MemoryStore
from ..transcript import Turn, merge_turns
from .archiver import Archiver, OnArchived, decode
from .base import DEFAULT_MAX_CONTENT_CHARS, DEFAULT_SIZE, ShortTermWindow
from .keys import KeyLayout, SessionKeys, as_text
from .server import Persistence, RedisHandle, connect_redis, display_url, redis_errors

if TYPE_CHECKING:  # pragma: no cover
    import redis

log = logging.getLogger(__name__)

DEFAULT_TTL_SECONDS = 30 * 60.0


class RedisWindow(ShortTermWindow):
    """The short-term window in Redis, shared by every instance that uses the same server.

    Each session keeps its last `size` turns in Redis with a sliding TTL; what falls out is
    archived into `store` by a background thread (`background=True`) or by `flush()`; a session
    idle for nearly `ttl` is retired into the archive by the same worker, so expiry loses nothing.
    See the module docstring for the exactly-once argument and `memkit.window.keys` for the keys.

    Args:
        store: the SQLite store whose transcript table is the archive.
        client: a redis-py client to use (not closed by `close()`). If None, the window connects
            with `connect_redis(url, persistence=...)` and closes that connection on `close()`.
        url: the Redis URL when no client is given (default: `REDIS_URL`, else an embedded server).
        size: how many turns the window keeps (default 10).
        ttl: seconds of inactivity after which Redis would drop a session (default 1800).
        sweep_margin: retire a session this many seconds before its TTL runs out (default:
            a quarter of `ttl`, at most 60 s). The worker must run at least this often.
        interval: seconds between two passes of the background worker (default: a quarter of
            the margin, at most 0.5 s).
        background: run the archiver in a daemon thread; with False, call `flush()` yourself.
        max_backlog: when a session has more pending turns than this (the worker is behind or
            stopped), `append` archives them itself before returning: back-pressure, not growth.
        prefix: the first part of every key; separate deployments (or tests) on one server use
            different prefixes. Each prefix should belong to one SQLite store.
        on_archived: called as `on_archived(user, session, turns)` after turns are committed to
            SQLite and before they are removed from Redis (for logging, metrics, demonstrations).
        clock: where turn timestamps come from.

    Raises:
        WindowError: Redis is unavailable or refuses (at construction or in any method).

    Example:
        >>> with MemoryStore(tmp / "m.sqlite3") as store, RedisWindow(store, size=2) as window:  # doctest: +SKIP
        ...     for text in ["hi", "hello", "tea?"]:
        ...         _ = window.append("alice", "s1", "user", text)
        ...     [t["content"] for t in window.recent("alice", "s1")]
        ['hello', 'tea?']
    """

    APPEND = """
-- Append one turn to a session's window, move what falls out into pending, slide the TTL.
-- KEYS[1] turns   (zset: turn number -> turn JSON; sliding TTL)
-- KEYS[2] pending (zset of turns that left the window, waiting for the archiver; no TTL)
-- KEYS[3] seq     (the session's turn counter; sliding TTL)
-- KEYS[4] the sessions index (zset: "user/session" -> expiry time in ms, Redis clock)
-- KEYS[5] the archive queue  (set of "user/session" that have pending turns)
-- ARGV[1] "user/session"  ARGV[2] window size  ARGV[3] TTL in ms
-- ARGV[4] the turn as JSON without its number: {"at":...,"content":...,"role":...}
-- ARGV[5] the highest archived turn number, or "" if the caller has not looked it up
-- Returns {turn number, pending count}; or {-1} when the counter is gone and Redis holds no
-- turn of the session: the caller looks up the archive and calls again with ARGV[5].
if redis.call('EXISTS', KEYS[3]) == 0 then
  local floor = -1
  if ARGV[5] ~= '' then floor = tonumber(ARGV[5]) end
  for i = 1, 2 do
    local top = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
    if top[2] then floor = math.max(floor, tonumber(top[2])) end
  end
  if floor < 0 then return {-1} end
  redis.call('SET', KEYS[3], floor)
end
local n = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[1], n, '{"turn":' .. n .. ',' .. string.sub(ARGV[4], 2))
local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
if extra > 0 then
  local old = redis.call('ZRANGE', KEYS[1], 0, extra - 1, 'WITHSCORES')
  for i = 1, #old, 2 do redis.call('ZADD', KEYS[2], old[i + 1], old[i]) end
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, extra - 1)
  redis.call('SADD', KEYS[5], ARGV[1])
end
local ttl = tonumber(ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
local now = redis.call('TIME')
redis.call('ZADD', KEYS[4], now[1] * 1000 + math.floor(now[2] / 1000) + ttl, ARGV[1])
return {n, redis.call('ZCARD', KEYS[2])}
"""

    READ = """
-- Read a session's window and its pending turns in one step and slide the TTL (load_session;
-- `recent` reads the window alone with a plain pipeline, see RedisWindow._read).
-- KEYS[1] turns  KEYS[2] pending  KEYS[3] seq  KEYS[4] the sessions index
-- ARGV[1] "user/session"  ARGV[2] TTL in ms  ARGV[3] "1" to return pending turns as well
-- Returns {window members oldest first, pending members oldest first (or empty)}.
local window = redis.call('ZRANGE', KEYS[1], 0, -1)
if #window > 0 then
  local ttl = tonumber(ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
  local now = redis.call('TIME')
  redis.call('ZADD', KEYS[4], now[1] * 1000 + math.floor(now[2] / 1000) + ttl, ARGV[1])
end
local pending = {}
if ARGV[3] == '1' then pending = redis.call('ZRANGE', KEYS[2], 0, -1) end
return {window, pending}
"""

    def __init__(
        self,
        store: MemoryStore,
        client: "redis.Redis | None" = None,
        *,
        url: str | None = None,
        size: int = DEFAULT_SIZE,
        ttl: float = DEFAULT_TTL_SECONDS,
        sweep_margin: float | None = None,
        interval: float | None = None,
        background: bool = True,
        max_backlog: int = 1000,
        prefix: str = "memkit",
        persistence: Persistence = "aof",
        on_archived: OnArchived | None = None,
        clock: Clock = utc_now,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
    ) -> None:
        super().__init__(size, store, clock, store.limits, max_content_chars)
        self.layout = KeyLayout(prefix, store.limits)
        if not ttl > 0.01:
            raise ValidationError(f"ttl is {ttl!r} seconds; it must be more than 0.01")
        self.store: MemoryStore = store
        self.ttl = float(ttl)
        sweep_margin = float(sweep_margin if sweep_margin is not None else min(60.0, ttl / 4))
        if not 0 < sweep_margin < self.ttl:
            raise ValidationError(f"sweep_margin is {sweep_margin} s; it must be between 0 and ttl ({ttl} s)")
        self.max_backlog = max_backlog
        self.prefix = prefix
        self._handle: RedisHandle | None = None
        if client is None:
            self._handle = connect_redis(url, persistence=persistence)
            client = self._handle.client
        self.client = client
        self.url = self._handle.url if self._handle is not None else None
        self._where = display_url(self.url) if self.url else "the given client"
        self._append_script = client.register_script(self.APPEND)
        self._read_script = client.register_script(self.READ)
        self.archiver = Archiver(
            client, store, self.layout, where=self._where, sweep_margin=sweep_margin,
            interval=float(interval if interval is not None else min(0.5, sweep_margin / 4)),
            on_archived=on_archived,
        )
        with redis_errors(self._where, "connecting"):
            client.ping()
        if background:
            self.archiver.start()

    # -- plumbing ---------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"RedisWindow({self._where!r}, size={self.size}, ttl={self.ttl:g}s, prefix={self.prefix!r})"

    @property
    def handle(self) -> RedisHandle | None:
        """The connection the window opened itself (None when it was given a client, or is closed)."""
        return self._handle

    @property
    def sweep_margin(self) -> float:
        """Seconds before its TTL runs out at which a session is retired into the archive."""
        return self.archiver.sweep_margin

    @property
    def interval(self) -> float:
        """Seconds between two passes of the background worker."""
        return self.archiver.interval

    @property
    def last_error(self) -> BaseException | None:
        """The last error the background worker met (it logs it and tries again next pass)."""
        return self.archiver.last_error

    def keys(self, user: str, session: str) -> SessionKeys:
        """The Redis keys of one session of one user (see `memkit.window.keys.session_keys`)."""
        return self.layout.session(user, session)

    @property
    def _ttl_ms(self) -> int:
        return max(1, round(self.ttl * 1000))

    # -- the window -------------------------------------------------------------------------------

    def append(self, user: str, session: str, role: str, content: Any) -> Turn:
        keys = self.keys(user, session)
        text = self._content(role, content)
        at = iso(self._clock())
        body = codec.dumps({"at": at, "content": text, "role": role})
        ref = f"{user}/{session}"
        script_keys = [keys.turns, keys.pending, keys.seq, self.layout.index, self.layout.queue]
        with redis_errors(self._where, f"appending a turn of {ref}"):
            result = self._append_script(keys=script_keys, args=[ref, self.size, self._ttl_ms, body, ""])
            if int(result[0]) < 0:  # a new or retired session: continue after what is archived
                floor = self._archived_max(user, session)
                result = self._append_script(keys=script_keys, args=[ref, self.size, self._ttl_ms, body, floor])
        number, pending = int(result[0]), int(result[1])
        if pending > self.max_backlog:
            self.archiver.archive_session(user, session)  # the worker is behind: push back on the writer
        elif pending >= self.size:
            # A window's worth is waiting: archive it now. Fewer wait for the worker's next pass
            # (every `interval`): one SQLite commit per turn cost more than the append itself.
            self.archiver.wake()
        return {"turn": number, "role": role, "content": text, "at": at}

    def append_exchange(self, user: str, session: str, question: str, answer: str) -> list[Turn]:
        """Store the user's turn and the assistant's in one Redis transaction (MULTI/EXEC): both or neither.

        Two instances answering in the same session cannot interleave their turns, and a process
        killed while storing an exchange leaves none of it.
        """
        keys = self.keys(user, session)
        turns = [("user", self._content("user", question)), ("assistant", self._content("assistant", answer))]
        at = iso(self._clock())
        bodies = [codec.dumps({"at": at, "content": text, "role": role}) for role, text in turns]
        ref = f"{user}/{session}"
        script_keys = [keys.turns, keys.pending, keys.seq, self.layout.index, self.layout.queue]
        floor: int | str = ""
        with redis_errors(self._where, f"appending an exchange of {ref}"):
            for _ in range(2):
                pipe = self.client.pipeline(transaction=True)
                for body in bodies:
                    self._append_script(keys=script_keys, args=[ref, self.size, self._ttl_ms, body, floor], client=pipe)
                results = pipe.execute()
                if int(results[0][0]) >= 0:
                    break
                # A new or retired session: the scripts wrote nothing; continue after what is archived.
                floor = self._archived_max(user, session)
        pending = int(results[-1][1])
        if pending:
            if pending > self.max_backlog:
                self.archiver.archive_session(user, session)  # the worker is behind: push back on the writer
            else:
                self.archiver.wake()
        return [{"turn": int(result[0]), "role": role, "content": text, "at": at}
                for result, (role, text) in zip(results, turns)]

    def retire_user(self, user: str) -> int:
        """Retire every session of `user` into the archive now (all turns, whatever their TTL)."""
        self.limits.check_id("user", user)
        with self.archiver.lock:
            with redis_errors(self._where, f"listing the sessions of {user}"):
                members: Any = self.client.zrange(self.layout.index, 0, -1)
            refs = [ref for ref in self.layout.refs(members) if ref[0] == user]
            retired = self.archiver.retire(refs)
            for ref in refs:
                self.archiver.archive_session(*ref)
        return retired

    def user_turns(self, user: str) -> int:
        """How many turns of `user` Redis holds, windows and pending, all sessions."""
        self.limits.check_id("user", user)
        with redis_errors(self._where, f"counting the turns of {user}"):
            sorted_sets = [k for k in self.client.scan_iter(match=self.layout.user_pattern(user), count=500)
                           if as_text(k).endswith((":turns", ":pending"))]
            return sum(int(self.client.zcard(k)) for k in sorted_sets)

    def _read(self, user: str, session: str, with_pending: bool) -> tuple[list[Turn], list[Turn]]:
        """The window (and the pending turns), decoded, with the TTL slid: one round trip.

        The window alone (`recent`, read on every reply) is a plain pipeline: ZRANGE, then PEXPIRE
        of the turns and the counter. A Lua script costs the server several times that (measured
        in bench/RESULTS.md), and nothing here needs one: a turn that moves or a retire that runs
        between the commands changes nothing the read returns, and PEXPIRE of a key that has gone
        does nothing. The sessions index is left as the last append set it, so it may say a read
        session expires earlier than it does, never later; the sweeper asks the key's own TTL
        before it retires a session (`Archiver.RETIRE`). Window and pending together
        (`load_session`) must be one snapshot, so a turn moving between them is seen once: the
        READ script.
        """
        keys = self.keys(user, session)
        ttl = self._ttl_ms
        with redis_errors(self._where, f"reading the window of {user}/{session}"):
            if with_pending:
                window, pending = self._read_script(
                    keys=[keys.turns, keys.pending, keys.seq, self.layout.index],
                    args=[f"{user}/{session}", ttl, "1"],
                )
                return decode(window), decode(pending)
            pipe = self.client.pipeline(transaction=False)
            pipe.zrange(keys.turns, 0, -1)
            pipe.pexpire(keys.turns, ttl)
            pipe.pexpire(keys.seq, ttl)
            window = pipe.execute()[0]
        return decode(window), []

    def recent(self, user: str, session: str) -> list[Turn]:
        """The session's window, oldest first; reading it restarts the TTL."""
        return self._read(user, session, False)[0]

    def pending(self, user: str, session: str) -> list[Turn]:
        """Turns that left the window and wait for the archiver (without touching the TTL)."""
        keys = self.keys(user, session)
        with redis_errors(self._where, f"reading the pending turns of {user}/{session}"):
            return decode(self.client.zrange(keys.pending, 0, -1))

    def load_session(self, user: str, session: str) -> list[Turn]:
        """The whole conversation: archive + pending + window, each turn once, in turn order.

        Redis is read first (window and pending in one script, so a turn moving between them is
        seen once), then SQLite: a turn archived in between is then in both reads and counted once.
        Reading the other way round could miss a turn that moved in between.
        """
        window, pending = self._read(user, session, True)
        return merge_turns(window, pending, self.store.archived_turns(user, session))  # type: ignore[arg-type]

    def ttl_left(self, user: str, session: str) -> float | None:
        """Seconds until Redis would drop the session's window, or None if it has none.

        Asking does not count as activity: it does not restart the TTL.
        """
        keys = self.keys(user, session)
        with redis_errors(self._where, f"reading the TTL of {user}/{session}"):
            ms = self.client.pttl(keys.turns)
        return ms / 1000 if ms >= 0 else None

    def snapshot(self, user: str, session: str) -> list[dict[str, Any]]:
        """Every turn of the session with where it is now: "window", "pending", "archive", or two
        of them joined by '+' (the moment between an archive commit and the Redis trim).

        For teaching and tests; it does not touch the TTL.
        """
        keys = self.keys(user, session)
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
        keys = self.keys(user, session)
        deadline = time.monotonic() + timeout
        while True:
            with redis_errors(self._where, f"checking the keys of {user}/{session}"):
                left = self.client.exists(keys.turns, keys.pending, keys.seq)
            if not left:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    # -- archiving (see memkit.window.archiver) ----------------------------------------------------

    def sweep(self, *, margin: float | None = None) -> int:
        """Retire every session that expires within `margin` seconds (default `sweep_margin`):
        move its window into pending, so the archiver keeps it before Redis drops it.

        Returns:
            How many sessions were retired.
        """
        return self.archiver.sweep(margin=margin)

    def archive_pending(self) -> int:
        """Archive the pending turns of every session of this prefix. Returns how many were new."""
        return self.archiver.archive_pending()

    def flush(self) -> dict[str, int]:
        """One archiver pass now, in the caller's thread: retire sessions near expiry, then archive
        all pending turns.

        Returns:
            {"closed": sessions retired, "archived": turns newly written to SQLite}
        """
        return self.archiver.flush()

    def retire_all(self) -> dict[str, int]:
        """Move every session's window into the archive now (e.g. before the server stops)."""
        return self.archiver.flush(margin=float("inf"))

    def forget_user(self, user: str) -> dict[str, int]:
        """Remove every trace of `user`: the Redis windows and pending turns of all their sessions,
        then (`MemoryStore.forget_user`) their records, history and archived transcript.

        Redis goes first: `store.forget_user` alone leaves pending turns that the archiver would copy
        back into the transcript. Holding the archiver's lock keeps this instance's worker out; archivers
        of other instances on the same prefix should be stopped meanwhile (or this called again).

        Returns:
            The store's counts plus `redis_keys` (Redis keys removed) and `window_turns` (turns
            they held, windows and pending).
        """
        pattern = self.layout.user_pattern(user)
        index, queue = self.layout.index, self.layout.queue
        with self.archiver.lock:
            turns = self.user_turns(user)
            with redis_errors(self._where, f"forgetting {user}"):
                doomed = list(self.client.scan_iter(match=pattern, count=500))
                members: list[Any] = [*self.client.zrange(index, 0, -1), *self.client.smembers(queue)]
                refs = [m for m in map(as_text, members) if m.partition("/")[0] == user]
                pipe = self.client.pipeline(transaction=True)
                if doomed:
                    pipe.delete(*doomed)
                if refs:
                    pipe.zrem(index, *refs)
                    pipe.srem(queue, *refs)
                pipe.execute()
            return {**self.store.forget_user(user), "redis_keys": len(doomed), "window_turns": turns}

    def close(self) -> None:
        """Stop the worker, archive what is pending, and close what the window opened.

        If the window started its own embedded server, every session is retired into the archive
        first, because stopping that server drops whatever it holds. A window on a shared server
        leaves live sessions in Redis for the other instances (their workers retire them).
        """
        self.archiver.stop()
        handle, self._handle = self._handle, None
        try:
            if handle is not None and handle.embedded:
                self.retire_all()
            else:
                with self.archiver.lock:
                    self.archiver.archive_pending()
        except WindowError as exc:
            log.warning("could not archive before closing (the turns wait in Redis): %s", exc)
        finally:
            if handle is not None:
                handle.close()
