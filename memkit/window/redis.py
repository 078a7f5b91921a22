"""The short-term window in Redis, shared by every agent instance that serves the user.

Each session keeps its last `size` turns in Redis with a sliding TTL (each read and write restarts
it). What falls out moves atomically (one Lua script, `memkit.window.protocol`) into a `pending`
set; the archiver (`memkit.window.archiver`) copies pending turns into the store, and only then
removes them from Redis. Why no turn is lost or doubled (restarts, expiry, eviction, exit) and the
keys: docs/design/window.md.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from ..clock import Clock, iso, utc_now
from ..errors import ValidationError, WindowError
from ..servers.redis import Persistence, RedisHandle, connect_redis, embedded_handle
from ..servers.redis_client import DEFAULT_TIMEOUT_S, as_text, display_url, notes_server_life, redis_errors
from ..store import Store
from ..transcript import Turn, merge_turns
from .archiver import Archiver, OnArchived
from .base import DEFAULT_MAX_CONTENT_CHARS, DEFAULT_SIZE, ShortTermWindow
from .expiry import DEFAULT_TTL_SECONDS, check_ttl
from .places import client_place
from .protocol import LIFE_KEY, KeyLayout, Scripts, SessionKeys, decode, encode

if TYPE_CHECKING:  # pragma: no cover
    import redis

log = logging.getLogger(__name__)

_APPEND_ATTEMPTS = 5
REMEMBERED_SESSIONS = 10_000  # per instance; one forgotten reads the archive again at its next append


class TakenNumbers:
    """The highest turn number taken in each session, as far as this instance knows, on one server life.

    Redis can come back older than the archive (an RDB snapshot, an AOF's lost last second), its
    counter pointing at numbers the archive holds. So an instance reads the archive's highest number
    the first time it numbers a session, remembers the numbers it hands out since, and passes that
    floor with each append: the APPEND script moves a counter that is behind it. The knowledge
    belongs to one life of the server: the script refuses it when the server's run_id is not
    `run_id`, and `restarted` forgets it all.
    """

    def __init__(self, archived_max: Callable[[str, str], int]) -> None:
        self._archived_max = archived_max
        self._taken: collections.OrderedDict[tuple[str, str], int] = collections.OrderedDict()
        self.run_id = ""

    def floor(self, user: str, session: str, *, read_archive: bool = False) -> tuple[int, bool]:
        """The highest number known taken in the session, and whether the archive was read for it now
        (when asked, and the first time this instance numbers the session on this server)."""
        key = (user, session)
        fresh = read_archive or key not in self._taken
        if fresh:
            self._taken[key] = max(self._taken.get(key, 0), self._archived_max(user, session))
        self._taken.move_to_end(key)
        if len(self._taken) > REMEMBERED_SESSIONS:
            self._taken.popitem(last=False)
        return self._taken[key], fresh

    def handed_out(self, user: str, session: str, number: int) -> None:
        self._taken[(user, session)] = max(number, self._taken.get((user, session), 0))

    def restarted(self, run_id: str) -> None:
        self.run_id = run_id
        self._taken.clear()

    def forget_user(self, user: str) -> None:
        for key in [key for key in self._taken if key[0] == user]:
            del self._taken[key]


class RedisWindow(ShortTermWindow):
    """The short-term window in Redis, shared by every instance that uses the same server.

    Each session keeps its last `size` turns in Redis with a sliding TTL; what falls out is
    archived into `store` by a background thread (`background=True`) or by `flush()`; a session
    idle for nearly `ttl` is retired into the archive by the same worker, so expiry loses nothing.
    Its `archiver` runs the sweeps and archive passes (and keeps `renumbered`, `last_error`).

    Args:
        store: the store whose transcript table is the archive.
        client: a redis-py client to use (not closed by `close()`); None: the window connects with
            `connect_redis(url, persistence=..., timeout=...)` and closes that connection itself.
        ttl: seconds of inactivity after which Redis would drop a session (default 1800).
        sweep_margin: retire a session this many seconds before its TTL runs out (default: a
            quarter of `ttl`, at most 60 s); `interval`, the worker's seconds between passes, is
            shorter (default: a quarter of the margin, at most 0.5 s).
        background: run the archiver in a daemon thread; with False, call `flush()` yourself.
        max_backlog: an append that would leave a session more pending turns than this archives
            them itself first: back-pressure, not growth.
        prefix: the first part of every key, before the store's id (`memkit.window.protocol`).
        on_archived: called as `on_archived(user, session, turns)` after turns are committed to
            SQLite and before they are removed from Redis.
        accept_eviction: use a server whose `maxmemory-policy` may evict keys (and lose turns).

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

    def __init__(
        self,
        store: Store,
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
        self.layout = KeyLayout(prefix, store.limits, store_id=store.store_id)
        self.store: Store = store
        self._ttl = check_ttl(ttl)
        sweep_margin = float(sweep_margin if sweep_margin is not None else min(60.0, ttl / 4))
        if not 0 < sweep_margin < self._ttl:
            raise ValidationError(f"sweep_margin is {sweep_margin} s; it must be between 0 and ttl ({ttl} s)")
        if isinstance(max_backlog, bool) or not isinstance(max_backlog, int) or max_backlog < 1:
            raise ValidationError(f"max_backlog is {max_backlog!r}; it must be a positive integer")
        self.max_backlog = max_backlog
        self.prefix = prefix
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
        self._scripts = Scripts(client)
        self.archiver = Archiver(
            client, store, self.layout, self._scripts, where=self._where, sweep_margin=sweep_margin,
            interval=float(interval if interval is not None else min(0.5, sweep_margin / 4)),
            on_archived=on_archived,
        )
        """Moves what left the window into the store, exactly once (`memkit.window.archiver`)."""
        self._numbers = TakenNumbers(store.last_archived_turn)  # numbering starts past the archive
        server = self._handle if self._handle is not None and self._handle.embedded else embedded_handle(client)
        try:
            with redis_errors(self._where, "connecting"):
                client.ping()
            if not accept_eviction:
                _refuse_eviction(client, self._where)
            with redis_errors(self._where, "reading its run_id"):
                self._numbers.run_id = str(client.info("server")["run_id"])
            # The store notes where its windows are, so forgetting a user reaches this one later from
            # any shell; not a temporary embedded server of this process: it archives all before it stops.
            place = client_place(client, prefix) if server is None or server.keeps_data else None
            if place is not None:
                store.note_window(place)
        except BaseException:
            if self._handle is not None:  # nothing may outlive a window that did not start
                self._handle.close()
            raise
        # On an embedded server that keeps no data, archive before it stops (also at exit).
        self._server = server
        if self._server is not None:
            self._server.on_discard(self._archive_before_discard)
        if background:
            self.archiver.start()

    # -- plumbing ---------------------------------------------------------------------------------

    def _archive_before_discard(self) -> None:
        """The embedded server is about to stop and drop what it holds: archive every session first."""
        self.archiver.stop()
        self.archiver.retire_all()

    def __repr__(self) -> str:
        return f"RedisWindow({self._where!r}, size={self.size}, ttl={self.ttl:g}s, prefix={self.prefix!r})"

    @property
    def ttl(self) -> float:
        """Seconds of inactivity after which Redis drops a session's window (archived `sweep_margin`
        seconds before). Settable: each session's next append or read takes the new value (one nobody
        touches keeps its expiry); a value `check_ttl` refuses, or not above `sweep_margin`, is a
        ValidationError and changes nothing.
        """
        return self._ttl

    @ttl.setter
    def ttl(self, seconds: float) -> None:
        seconds = check_ttl(seconds)  # before anything is set: a refused value changes nothing
        if not seconds > self.archiver.sweep_margin:
            raise ValidationError(
                f"ttl is {seconds!r} seconds, not above this window's sweep_margin ({self.archiver.sweep_margin:g} s):"
                " a session would be retired as soon as it was touched. Open a new window with a smaller sweep_margin")
        self._ttl = float(seconds)

    @property
    def _ttl_ms(self) -> int:  # as the scripts take it
        return max(1, round(self._ttl * 1000))

    @property
    def handle(self) -> RedisHandle | None:
        """The connection the window opened itself (None when it was given a client, or is closed)."""
        return self._handle

    def keys(self, user: str, session: str) -> SessionKeys:
        """The Redis keys of one session of one user (both ids checked; see `memkit.window.protocol`)."""
        return self.layout.session(user, session)

    # -- writing ----------------------------------------------------------------------------------

    def append(self, user: str, session: str, role: str, content: Any) -> Turn:
        """Add a turn to the session's window and return it with its number.

        Either the turn is stored and `append` returns, or it is not stored and `append` raises, so
        a caller may retry without storing it twice; the one exception is a WindowError from a
        connection that broke while the script ran (Redis may have stored it: `recent` shows it).
        The number is past every number the archive holds, even after Redis came back from an
        older state; a full backlog of pending turns (`max_backlog`) is archived first, in this call.

        Raises:
            ValidationError: a bad id, role or content.
            QuotaError: the backlog had to be archived and the archive is at its size cap.
            StoreError: the archive could not be read or written (`LockedError`: it stayed locked
                past its busy timeout).
            WindowError: Redis is unavailable or refused, or the backlog stays full (other writers
                fill it as fast as it is archived).
        """
        self.keys(user, session)  # the ids, checked before anything else
        return self._store_turns(user, session, [(role, self._checked_text(role, content))])[0]

    def append_exchange(self, user: str, session: str, question: str, answer: str) -> list[Turn]:
        """Store the user's turn and the assistant's in one Redis transaction (MULTI/EXEC): both or neither.

        Two instances answering in the same session cannot interleave their turns, and a process
        killed while storing an exchange leaves none of it. Raises what `append` raises, with
        nothing stored.
        """
        self.keys(user, session)
        return self._store_turns(user, session, [("user", self._checked_text("user", question)),
                                                 ("assistant", self._checked_text("assistant", answer))])

    def _store_turns(self, user: str, session: str, turns: list[tuple[str, str]]) -> list[Turn]:
        """Store checked (role, text) turns in one transaction of APPEND calls, all or none, and return them.

        The calls share one floor and one answer: each script refuses (writing nothing) for the same
        reasons, so a refusal of the first means none was stored. The first turns leave backlog room
        for the later ones (an exchange may bring a backlog of 1 to 2).
        """
        keys = self.keys(user, session)
        at = iso(self._clock())
        bodies = [encode(at, role, text) for role, text in turns]
        ref = self.layout.ref(user, session)
        script_keys = [keys.turns, keys.pending, keys.seq, self.layout.index, self.layout.queue, LIFE_KEY]
        backlog = max(self.max_backlog, len(bodies))
        read_archive = False
        for _ in range(_APPEND_ATTEMPTS):
            floor, fresh = self._numbers.floor(user, session, read_archive=read_archive)
            calls: list[list[Any]] = [
                [ref, self.size, self._ttl_ms, body, floor, backlog - (len(bodies) - 1 - number), int(fresh),
                 self._numbers.run_id, self._life_from_key] for number, body in enumerate(bodies)]
            with redis_errors(self._where, f"appending to {ref}"):
                if len(calls) == 1:  # one script call is atomic by itself
                    results = [self._scripts.append(keys=script_keys, args=calls[0])]
                else:
                    pipe = self.client.pipeline(transaction=True)
                    for args in calls:
                        self._scripts.append(keys=script_keys, args=args, client=pipe)
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
                for number, (role, text) in zip(numbers, turns, strict=True)]

    def retire_user(self, user: str) -> int:
        return self.archiver.retire_user(user)

    def flush(self) -> dict[str, int]:
        """One archiver pass now, in the caller's thread: retire sessions near expiry, then archive
        all pending turns. Returns {"closed": sessions retired, "archived": turns newly archived}."""
        return self.archiver.flush()

    # -- reading: `recent` and `load_session` slide the TTL (a read is activity); the others do not --

    def recent(self, user: str, session: str) -> list[Turn]:
        """The session's window, oldest first; reading it restarts the TTL (the RECENT script).

        RECENT is ZRANGE, then PEXPIRE of the turns and the counter. The same three commands as a
        pipeline cost the server about 10 µs less (1.6 against 11 µs a read, measured alternately),
        but the client about 25 µs more (it packs and parses three commands instead of one), and a
        read is mostly client. The sessions index keeps the expiry the last append gave it (earlier
        than the truth, never later): the sweeper asks the key's own TTL before it retires a session.
        """
        keys = self.keys(user, session)
        with redis_errors(self._where, f"reading the window of {user}/{session}"):
            return decode(self._scripts.recent(keys=[keys.turns, keys.seq], args=[self._ttl_ms]))

    def load_session(self, user: str, session: str) -> list[Turn]:
        """The whole conversation: archive + pending + window, each turn once, in turn order.

        Redis is read first (window and pending in one READ script, one snapshot, so a turn moving
        between them is seen once), then SQLite: a turn archived in between is then in both reads
        and counted once. Reading the other way round could miss a turn that moved in between.
        """
        keys = self.keys(user, session)
        with redis_errors(self._where, f"reading the window of {user}/{session}"):
            window, pending = self._scripts.read(keys=[keys.turns, keys.pending, keys.seq, self.layout.index],
                                                 args=[self.layout.ref(user, session), self._ttl_ms])
        return merge_turns(decode(window), decode(pending), self.store.archived_turns(user, session))  # type: ignore[arg-type]

    def pending(self, user: str, session: str) -> list[Turn]:
        """Turns that left the window and wait for the archiver."""
        keys = self.keys(user, session)
        with redis_errors(self._where, f"reading the pending turns of {user}/{session}"):
            return decode(self.client.zrange(keys.pending, 0, -1))

    def ttl_left(self, user: str, session: str) -> float | None:
        """Seconds until Redis would drop the session's window, or None if it has none."""
        keys = self.keys(user, session)
        with redis_errors(self._where, f"reading the TTL of {user}/{session}"):
            ms = self.client.pttl(keys.turns)
        return ms / 1000 if ms >= 0 else None

    def snapshot(self, user: str, session: str) -> list[dict[str, Any]]:
        """Every turn of the session with where it is now: "window", "pending", "archive", or two
        of them joined by '+' (the moment between an archive commit and the Redis trim)."""
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
        """How many turns of the session are in each place: {"window": n, "pending": n, "archive": n}
        (a turn caught between an archive commit and the Redis trim counts in both)."""
        counts = {"window": 0, "pending": 0, "archive": 0}
        for row in self.snapshot(user, session):
            for place in row["place"].split("+"):
                counts[place] += 1
        return counts

    def wait_until_archived(self, user: str, session: str, *, timeout: float = 5.0) -> bool:
        """True once the session has no key left in Redis (retired and archived by a running worker,
        or `flush()` called meanwhile), False if `timeout` seconds pass first."""
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

    def user_turns(self, user: str) -> int:
        """How many turns of `user` Redis holds, windows and pending, all sessions."""
        with redis_errors(self._where, f"counting the turns of {user}"):
            sorted_sets = [k for k in self.client.scan_iter(match=self.layout.user_pattern(user), count=500)
                           if as_text(k).endswith((":turns", ":pending"))]
            return sum(int(self.client.zcard(k)) for k in sorted_sets)

    # -- forgetting and closing -------------------------------------------------------------------

    def forget_user(self, user: str) -> dict[str, int]:
        """Remove `user`'s Redis keys (windows and pending turns), then everything of theirs in the store.

        Redis goes first: `store.forget_user` alone leaves pending turns that the archiver would copy
        back into the transcript. Holding the archiver's lock keeps this instance's worker out; archivers
        of other instances on the same prefix should be stopped meanwhile (or this called again).
        Returns the store's counts plus `redis_keys` and `window_turns`.
        """
        with self.archiver.lock:
            cleared = self._clear_user(user)
            return {**self.store.forget_user(user), **cleared}

    def clear_user(self, user: str) -> dict[str, int]:
        """Remove `user`'s keys from this window only; returns `redis_keys` and `window_turns`."""
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
                self.archiver.retire_all()
            else:
                with self.archiver.lock:
                    self.archiver.archive_pending()
        except Exception as exc:  # closing goes on (the worker is stopped, the handle closed); say what was not done
            lost = "those turns are lost with the server" if handle is not None else "the turns wait in Redis"
            log.warning("could not archive before closing (%s): %s", lost, exc)
        finally:
            if handle is not None:
                handle.close()


def _refuse_eviction(client: redis.Redis, where: str) -> None:
    """Refuse a server whose `maxmemory-policy` may evict keys: an evicted window loses turns before
    they are archived (the volatile-* policies evict keys with a TTL, which is every window)."""
    with redis_errors(where, "reading its maxmemory-policy"):
        policy = str(client.info("memory").get("maxmemory_policy", "noeviction"))
    if policy != "noeviction":
        raise WindowError(
            f"Redis at {where} runs with maxmemory-policy {policy}: when it fills up it evicts keys, and an "
            "evicted window loses turns before they are archived. Set maxmemory-policy noeviction on the server "
            "(CONFIG SET maxmemory-policy noeviction, or in redis.conf; a full server then refuses writes with an "
            "error instead), or pass accept_eviction=True to accept the risk"
        )
