"""The short-term window in Redis, shared by every agent instance that serves the user.

Each session keeps its last `size` turns in Redis with a sliding TTL (each read and write restarts
it). Turns that fall out of the window move atomically (one Lua script) into a `pending` set; the
archiver (`memkit.window.archiver`: a background thread, or `flush()`) copies pending turns into
SQLite and only then removes them from Redis.

Why no turn is lost or doubled:

* Each turn gets its number from one Redis counter (`INCR`) inside the same script that stores
  it, so numbers are unique and dense even with several instances writing.
* A counter that went back (Redis restored from an older snapshot, or an AOF's lost last second)
  is moved past the archive: each append passes the highest number the instance knows is taken on
  this server (the archive's highest, read on its first touch of the session, and the numbers it
  handed out since); the script refuses knowledge from an earlier life of the server (its run_id
  changed: read from the life key that a kit client's connect hook keeps, else from INFO), and the
  caller reads the archive again. (Reading it on every append would cost more
  than the append: the archiver's commits hold the store's lock.) A turn that still lands on an
  archived number is kept under a new one by the archiver, and reported (`memkit.window.archiver`).
* Archiving is copy, then trim, keyed by turn number; `load_session` counts a turn once by its
  number even in the moment it is in both places. Expiry: the sweeper retires a session near its
  TTL into `pending` before Redis can drop it. Eviction: a server that may evict keys is refused
  unless the caller accepts the risk. Exit: see `RedisHandle.on_discard`.

TTLs run on the Redis server's clock, the only clock that can expire a key; turn timestamps come
from the window's replaceable `clock`. The keys are described in `memkit.window.keys`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .. import codec
from ..clock import Clock, iso, utc_now
from ..errors import ValidationError, WindowError
from ..store import MemoryStore
from ..transcript import Turn
from .archiver import Archiver, OnArchived
from .base import DEFAULT_MAX_CONTENT_CHARS, DEFAULT_SIZE, ShortTermWindow
from .keys import LIFE_KEY, KeyLayout, as_text
from .life import notes_server_life
from .numbering import TakenNumbers
from .places import client_place
from .reads import SessionReads
from .server import (
    DEFAULT_TIMEOUT_S,
    Persistence,
    RedisHandle,
    connect_redis,
    display_url,
    embedded_handle,
    redis_errors,
    refuse_eviction,
)

if TYPE_CHECKING:  # pragma: no cover
    import redis

log = logging.getLogger(__name__)

DEFAULT_TTL_SECONDS = 30 * 60.0

_APPEND_ATTEMPTS = 5



class RedisWindow(SessionReads, ShortTermWindow):
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
        max_backlog: when an append would leave a session more pending turns than this (the
            worker is behind or stopped), `append` archives them itself first: back-pressure,
            not growth.
        prefix: the first part of every key, before the store's id (`memkit.window.keys`): two
            stores never share keys whatever their prefix; separate deployments on one server may
            choose their own prefix too.
        on_archived: called as `on_archived(user, session, turns)` after turns are committed to
            SQLite and before they are removed from Redis (for logging, metrics, demonstrations).
        clock: where turn timestamps come from.
        timeout: seconds to connect and to wait for any one reply, when the window connects itself.
        accept_eviction: use a server whose `maxmemory-policy` evicts keys anyway; without it such
            a server is refused, because an evicted key loses turns.

    Raises:
        WindowError: Redis is unavailable or refuses (at construction or in any method); at
            construction also a malformed URL, or a server whose `maxmemory-policy` is not
            `noeviction` (unless `accept_eviction`).
        ValidationError: a bad setting (size, ttl, sweep_margin, prefix, persistence, timeout).

    Example:
        >>> with MemoryStore(tmp / "m.sqlite3") as store, RedisWindow(store, size=2) as window:  # doctest: +SKIP
        ...     for text in ["hi", "hello", "tea?"]:
        ...         _ = window.append("alice", "s1", "user", text)
        ...     [t["content"] for t in window.recent("alice", "s1")]
        ['hello', 'tea?']
    """

    APPEND = """
-- Append one turn to a session's window, move what falls out into pending, slide the TTL.
-- KEYS[1..5] are the keys of one store (`{prefix}:{store}:...`, memkit.window.keys), KEYS[6] the server's.
-- KEYS[1] turns   (zset: turn number -> turn JSON; sliding TTL)
-- KEYS[2] pending (zset of turns that left the window, waiting for the archiver; no TTL)
-- KEYS[3] seq     (the session's turn counter; sliding TTL)
-- KEYS[4] the sessions index (zset: "user/session" -> expiry time in ms, Redis clock)
-- KEYS[5] the archive queue  (set of "user/session" that have pending turns)
-- ARGV[1] "user/session"  ARGV[2] window size  ARGV[3] TTL in ms
-- ARGV[4] the turn as JSON without its number: {"at":...,"content":...,"role":...}
-- ARGV[5] the floor: the highest turn number the caller knows is taken (the archive's highest,
--         and the highest this instance handed out); the counter moves past it if it is behind
-- ARGV[6] the backlog limit: refuse when this append would leave more pending turns than that
-- ARGV[7] "1" if the floor was read from the archive just now, "0" if the caller remembered it
-- KEYS[6] the server's life key (memkit.window.keys.LIFE_KEY)
-- ARGV[8] the run_id of the server the caller's remembered floors belong to
-- ARGV[9] "1" if every connection of the caller's client set KEYS[6] to the server's run_id when
--         it connected (memkit.window.life.note_server_life): read it there; "0": ask INFO
-- Returns {turn number, pending count}. Nothing is written when it returns {-1} (the counter is
-- gone: a new or retired session; the caller reads the archive and calls again with ARGV[7] "1"),
-- {-2, pending count} (the backlog is full: the caller archives the session and calls again), or
-- {-3, 0, run_id} (the server restarted since: it may have come back older; the caller forgets
-- its floors, reads the archive and calls again with this run_id).
local run = false
if ARGV[9] == '1' then run = redis.call('GET', KEYS[6]) end
if not run then  -- no hook, or the key was removed (FLUSHALL): ask the server itself
  run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
  if ARGV[9] == '1' then redis.call('SET', KEYS[6], run) end
end
if run ~= ARGV[8] then return {-3, 0, run} end
local size = tonumber(ARGV[2])
local overflow = redis.call('ZCARD', KEYS[1]) + 1 - size
local waiting = redis.call('ZCARD', KEYS[2])
if overflow > 0 and waiting + overflow > tonumber(ARGV[6]) then return {-2, waiting} end
local floor = tonumber(ARGV[5])
local seq = redis.call('GET', KEYS[3])
if not seq then
  if ARGV[7] ~= '1' then return {-1, waiting} end
  for i = 1, 2 do
    local top = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
    if top[2] then floor = math.max(floor, tonumber(top[2])) end
  end
  redis.call('SET', KEYS[3], floor)
elseif tonumber(seq) < floor then
  redis.call('SET', KEYS[3], floor)
end
local n = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[1], n, '{"turn":' .. n .. ',' .. string.sub(ARGV[4], 2))
if overflow > 0 then
  local old = redis.call('ZRANGE', KEYS[1], 0, overflow - 1, 'WITHSCORES')
  for i = 1, #old, 2 do redis.call('ZADD', KEYS[2], old[i + 1], old[i]) end
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, overflow - 1)
  redis.call('SADD', KEYS[5], ARGV[1])
end
local ttl = tonumber(ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
local now = redis.call('TIME')
redis.call('ZADD', KEYS[4], now[1] * 1000 + math.floor(now[2] / 1000) + ttl, ARGV[1])
return {n, redis.call('ZCARD', KEYS[2])}
"""

    def __init__(
        self,
        store: MemoryStore,
        client: redis.Redis | None = None,
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
        timeout: float = DEFAULT_TIMEOUT_S,
        accept_eviction: bool = False,
    ) -> None:
        super().__init__(size, store, clock, store.limits, max_content_chars)
        self.layout = KeyLayout(prefix, store.limits, store.store_id)
        if not ttl > 0.01:
            raise ValidationError(f"ttl is {ttl!r} seconds; it must be more than 0.01")
        self.store: MemoryStore = store
        self.ttl = float(ttl)
        sweep_margin = float(sweep_margin if sweep_margin is not None else min(60.0, ttl / 4))
        if not 0 < sweep_margin < self.ttl:
            raise ValidationError(f"sweep_margin is {sweep_margin} s; it must be between 0 and ttl ({ttl} s)")
        if isinstance(max_backlog, bool) or not isinstance(max_backlog, int) or max_backlog < 1:
            raise ValidationError(f"max_backlog is {max_backlog!r}; it must be a positive integer")
        self.max_backlog = max_backlog
        self.prefix = prefix
        self._numbers = TakenNumbers(self._archived_max)
        self._handle: RedisHandle | None = None
        if client is None:
            self._handle = connect_redis(url, persistence=persistence, timeout=timeout)
            client = self._handle.client
        self.client = client
        self.url = self._handle.url if self._handle is not None else None
        self._where = display_url(self.url) if self.url else "the given client"
        # A kit client notes the server's life on connect, so an append reads it from a key instead
        # of asking INFO (see `note_server_life`); any other client keeps asking INFO.
        self._life_from_key = int(notes_server_life(client))
        self._append_script = client.register_script(self.APPEND)
        self._read_script = client.register_script(self.READ)
        self._recent_script = client.register_script(self.RECENT)
        self.archiver = Archiver(
            client, store, self.layout, where=self._where, sweep_margin=sweep_margin,
            interval=float(interval if interval is not None else min(0.5, sweep_margin / 4)),
            on_archived=on_archived,
        )
        try:
            with redis_errors(self._where, "connecting"):
                client.ping()
            if not accept_eviction:
                refuse_eviction(client, self._where)
            with redis_errors(self._where, "reading its run_id"):
                self._numbers.run_id = str(client.info("server")["run_id"])
            # The store writes down where its windows are, so forgetting a user reaches this one
            # later from any directory or shell (memkit.window.places).
            # (Not a temporary embedded server of this process: it archives all it holds before it stops.)
            own = self._handle if self._handle is not None and self._handle.embedded else embedded_handle(client)
            place = client_place(client, prefix) if own is None or own.keeps_data else None
            if place is not None:
                store.note_window(place)
        except BaseException:
            if self._handle is not None:  # nothing may outlive a window that did not start
                self._handle.close()
            raise
        # On an embedded server that keeps no data, archive before it stops (also at exit).
        self._server = self._handle if self._handle is not None and self._handle.embedded else embedded_handle(client)
        if self._server is not None:
            self._server.on_discard(self._archive_before_discard)
        if background:
            self.archiver.start()

    # -- plumbing ---------------------------------------------------------------------------------

    def _archive_before_discard(self) -> None:
        """The embedded server is about to stop and drop what it holds: archive every session first."""
        self.archiver.stop()
        self.retire_all()

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
    def renumbered(self) -> list[dict[str, Any]]:
        """Turns the archiver moved to a new number because the archive held theirs with other
        content (also logged as errors): {"user", "session", "was", "now"} each."""
        return self.archiver.renumbered

    @property
    def last_error(self) -> BaseException | None:
        """The last error the background worker met (it logs it and tries again next pass)."""
        return self.archiver.last_error

    # -- the window -------------------------------------------------------------------------------

    def append(self, user: str, session: str, role: str, content: Any) -> Turn:
        """Add a turn to the session's window and return it with its number.

        Either the turn is stored and `append` returns, or it is not stored and `append` raises:
        a caller may retry after any of the errors below without storing the turn twice (the one
        exception is a WindowError from a connection that broke while the script ran: then Redis
        may have stored it; the turn's number is then not known, and `recent` shows whether it is
        there).

        The number is past every number the archive holds, even after Redis came back from an
        older state; when the session's backlog of pending turns is full (`max_backlog`), they are
        archived first, in this call.

        Args:
            role: "user", "assistant" or "tool".
            content: the text; any other value (a tool result) is stored as its `codec.dumps` JSON.

        Raises:
            ValidationError: a bad id, role or content.
            QuotaError: the backlog had to be archived and the archive is at its size cap.
            StoreError: the archive could not be read or written (`LockedError`: it stayed locked
                past its busy timeout).
            WindowError: Redis is unavailable or refused, or the backlog stays full (other writers
                fill it as fast as it is archived).
        """
        self.keys(user, session)  # the ids, checked before anything else
        return self._store_turns(user, session, [(role, self._content(role, content))])[0]

    def append_exchange(self, user: str, session: str, question: str, answer: str) -> list[Turn]:
        """Store the user's turn and the assistant's in one Redis transaction (MULTI/EXEC): both or neither.

        Two instances answering in the same session cannot interleave their turns, and a process
        killed while storing an exchange leaves none of it. Numbered, refused and archived first
        exactly as `append` does, and raises what `append` raises, with nothing stored.
        """
        self.keys(user, session)
        return self._store_turns(user, session, [("user", self._content("user", question)),
                                                 ("assistant", self._content("assistant", answer))])

    def _store_turns(self, user: str, session: str, turns: list[tuple[str, str]]) -> list[Turn]:
        """Store checked (role, text) turns in one transaction of APPEND calls, all or none, and return them.

        The calls share one floor and one answer: each script refuses (writing nothing) for the same
        reasons, so a refusal of the first means none was stored. The first turns leave backlog room
        for the later ones (an exchange may bring a backlog of 1 to 2).
        """
        keys = self.keys(user, session)
        at = iso(self._clock())
        bodies = [codec.dumps({"at": at, "content": text, "role": role}) for role, text in turns]
        ref = f"{user}/{session}"
        script_keys = [keys.turns, keys.pending, keys.seq, self.layout.index, self.layout.queue, LIFE_KEY]
        backlog = max(self.max_backlog, len(bodies))
        read_archive = False
        for _ in range(_APPEND_ATTEMPTS):
            floor, fresh = self._numbers.floor(user, session, read_archive=read_archive)
            calls: list[list[Any]] = [[ref, self.size, self._ttl_ms, body, floor, backlog - (len(bodies) - 1 - number), int(fresh),
                      self._numbers.run_id, self._life_from_key] for number, body in enumerate(bodies)]
            with redis_errors(self._where, f"appending to {ref}"):
                if len(calls) == 1:  # one script call is atomic by itself
                    results = [self._append_script(keys=script_keys, args=calls[0])]
                else:
                    pipe = self.client.pipeline(transaction=True)
                    for args in calls:
                        self._append_script(keys=script_keys, args=args, client=pipe)
                    results = pipe.execute()
            first = int(results[0][0])
            if first > 0:
                break
            if first == -1:  # a new or retired session: continue after what is archived now
                read_archive = True
            elif first == -3:  # the server restarted, maybe from an older state: read the archive again
                self._numbers.restarted(as_text(results[0][2]))
                read_archive = True
            else:  # the backlog is full: push back on the writer, before anything is stored
                self.archiver.archive_session(user, session)
        else:
            raise WindowError(
                f"the pending turns of {ref} stay above max_backlog ({self.max_backlog}) although this append "
                "archived them: other writers fill the backlog as fast; nothing was stored, try again"
            )
        numbers = [int(result[0]) for result in results]
        if min(numbers) <= 0:  # pragma: no cover - the first turns left room for the later ones
            raise WindowError(f"the turns {numbers} of {ref} were stored in part; this is a bug, please report it")
        self._numbers.handed_out(user, session, numbers[-1])
        if int(results[-1][1]) >= self.size:
            # A window's worth is waiting: archive it now. Fewer wait for the worker's next pass
            # (every `interval`): one SQLite commit per turn cost more than the append itself.
            self.archiver.wake()
        return [{"turn": number, "role": role, "content": text, "at": at}
                for number, (role, text) in zip(numbers, turns)]

    def retire_user(self, user: str) -> int:
        """Retire every session of `user` into the archive now (all turns, whatever their TTL)."""
        return self.archiver.retire_user(user)

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
        return self.archiver.retire_all()

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
        with self.archiver.lock:
            cleared = self._clear_user(user)
            return {**self.store.forget_user(user), **cleared}

    def clear_user(self, user: str) -> dict[str, int]:
        """Remove `user`'s keys from this window only (all sessions, windows and pending turns),
        leaving the store alone. Returns `redis_keys` (keys removed) and `window_turns` (turns they held)."""
        with self.archiver.lock:
            return self._clear_user(user)

    def _clear_user(self, user: str) -> dict[str, int]:  # the caller holds the archiver's lock
        turns = self.user_turns(user)
        removed = self.archiver.forget(user)
        self._numbers.forget_user(user)
        return {"redis_keys": removed, "window_turns": turns}

    def close(self) -> None:
        """Stop the worker, archive what is pending, and close what the window opened.

        If the window started its own embedded server, every session is retired into the archive
        first, because stopping that server drops whatever it holds. A window on a shared server
        leaves live sessions in Redis for the other instances (their workers retire them); on an
        embedded server it was given that keeps no data, the server retires this prefix's sessions
        into this store when it stops (once per prefix and store, however many windows closed).
        Closing never raises for what it could not archive (the archive is full or locked, Redis is
        gone, an `on_archived` callback failed): it logs a warning; the turns wait in Redis, unless
        the server stops now. Safe to call twice.
        """
        server, self._server = self._server, None
        if server is not None:
            server.remove_on_discard(self._archive_before_discard)
            if self._handle is None and not server.keeps_data:  # the closed window's archiver, not the window
                server.on_discard(self.archiver.retire_all, key=("retire", self.prefix, id(self.store)))
        self.archiver.stop()
        handle, self._handle = self._handle, None
        try:
            if handle is not None and handle.embedded:
                self.retire_all()
            else:
                with self.archiver.lock:
                    self.archiver.archive_pending()
        except Exception as exc:  # closing goes on (the worker is stopped, the handle closed); say what was not done
            log.warning("could not archive before closing (%s): %s",
                        "those turns are lost with the server" if handle is not None else "the turns wait in Redis", exc)
        finally:
            if handle is not None:
                handle.close()
