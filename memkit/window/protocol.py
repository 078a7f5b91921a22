"""The window's Redis protocol: its keys, and every Lua script that touches them.

Every key starts with `{prefix}:{store}` (the operator's prefix, then the store's id), so two stores
on one Redis server never see each other's windows; ids are text (`Limits.check_id`) and enter keys
encoded (`key_part`), so no id can name another user's keys or an index key. The scripts, each with
its KEYS/ARGV header: APPEND, READ and RECENT (`RedisWindow`), RETIRE, TRIM and RENUMBER
(`memkit.window.archiver`). The whole layout and why: docs/design/window.md.
"""

from __future__ import annotations

import logging
import re
import urllib.parse
from typing import TYPE_CHECKING, Any, NamedTuple
from collections.abc import Iterable, Iterator

from .. import codec
from ..errors import ValidationError
from ..jsonutil import canonical_json
from ..limits import DEFAULT_LIMITS, Limits
from ..servers.redis_client import LIFE_KEY as LIFE_KEY  # the server's key, read by APPEND
from ..servers.redis_client import as_text
from ..transcript import Turn

if TYPE_CHECKING:  # pragma: no cover
    import redis

log = logging.getLogger(__name__)

_PREFIX_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_STORE_ID_RE = re.compile(r"[0-9a-f]{16,}")

STORE_ID_CHARS = 16
"""How much of the store's id the keys carry (64 random bits: two stores never meet by chance)."""


class SessionKeys(NamedTuple):
    """The Redis keys of one session of one user."""

    turns: str
    pending: str
    seq: str


def key_part(an_id: str) -> str:
    """A user or session id as it appears in a key or an index member: percent-encoded UTF-8.

    Letters, digits, '_', '.', '-' (and '~') stay as they are, so the keys of plain ids such as
    `alice` are what older memkits made; everything else is `%XX`, and so is a leading '_' (index
    keys start `_`). An encoded id holds no ':', '/', '{', '}' or glob character: `a:b` and `a` +
    `b:...` never meet, a SCAN pattern matches one user, and no id forms a Cluster hash tag.
    """
    encoded = urllib.parse.quote(an_id, safe="")
    return "%5F" + encoded[1:] if encoded.startswith("_") else encoded


def session_keys(prefix: str, user: str, session: str, limits: Limits = DEFAULT_LIMITS) -> SessionKeys:
    """The keys `{prefix}:{user}:{session}:turns|pending|seq`, `prefix` being a layout's `base`.

    Both ids are checked first, and enter the keys encoded (`key_part`).
    """
    limits.check_id("user", user)
    limits.check_id("session", session)
    base = f"{prefix}:{key_part(user)}:{key_part(session)}"
    return SessionKeys(f"{base}:turns", f"{base}:pending", f"{base}:seq")


class KeyLayout:
    """Every key of one store under one prefix: the two index keys, and `session(user, session)` for the rest.

    `prefix` is the operator's part (letters, digits, '_', '.', '-'), followed by the first 16 hex
    digits of `store_id` (`Store.store_id`); anything else is a ValidationError.
    """

    def __init__(self, prefix: str, limits: Limits = DEFAULT_LIMITS, *, store_id: str) -> None:
        if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
            raise ValidationError(f"key prefix {prefix!r} is not allowed; use letters, digits, '_', '.', '-'")
        if not isinstance(store_id, str) or not _STORE_ID_RE.fullmatch(store_id):
            raise ValidationError(f"store id {store_id!r} is not a store's id (at least 16 lower-case hex digits)")
        self.prefix = prefix
        self.store_id = store_id[:STORE_ID_CHARS]
        self.base = f"{prefix}:{self.store_id}"
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
        """A SCAN pattern that matches this user's keys only (an encoded id holds no ':' or glob character)."""
        self.limits.check_id("user", user)
        return f"{self.base}:{key_part(user)}:*"

    def ref(self, user: str, session: str) -> str:
        """The member naming one session in the index and the queue: "user/session", both encoded."""
        self.limits.check_id("user", user)
        self.limits.check_id("session", session)
        return f"{key_part(user)}/{key_part(session)}"

    def is_users(self, member: bytes | str, user: str) -> bool:
        """Whether an index or queue member names a session of `user`."""
        return as_text(member).partition("/")[0] == key_part(user)

    def refs(self, members: Iterable[bytes | str]) -> Iterator[tuple[str, str]]:
        """(user, session) of each "user/session" member of an index, sorted; malformed ones skipped."""
        for member in sorted(as_text(m) for m in members):
            parts = member.partition("/")[::2]
            try:
                user, session = (urllib.parse.unquote(part, errors="strict") for part in parts)
                self.limits.check_id("user", user)
                self.limits.check_id("session", session)
                canonical = (key_part(user), key_part(session)) == parts
            except (ValidationError, UnicodeDecodeError):
                canonical = False
            if not canonical:
                log.warning("skipping malformed session reference %r under prefix %r", member, self.prefix)
                continue
            yield user, session


def encode(at: str, role: str, text: str) -> str:
    """A turn as APPEND takes it: canonical JSON without its number, `{"at":...,"content":...,"role":...}`.

    APPEND and RENUMBER splice the number in front (`{"turn":n,` + the rest), so a member always
    starts with its number. The content is text (`codec.dumps` made a tool result so): no tag here.
    """
    return canonical_json({"at": at, "content": text, "role": role})


def decode(members: Any) -> list[Turn]:
    """Turns stored in Redis (the members of a turns or pending set, bytes or str), as dicts."""
    return codec.loads_many(members)  # type: ignore[no-any-return]


APPEND = """
-- Append one turn to a session's window, move what falls out into pending, slide the TTL.
-- KEYS[1..5] are the keys of one store (`{prefix}:{store}:...`), KEYS[6] the server's.
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
-- KEYS[6] the server's life key (LIFE_KEY)
-- ARGV[8] the run_id of the server the caller's remembered floors belong to
-- ARGV[9] "1" if every connection of the caller's client set KEYS[6] to the server's run_id when
--         it connected (note_server_life): read it there; "0": ask INFO
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

READ = """
-- Read a session's window and its pending turns in one step and slide the TTL (load_session;
-- `recent` reads the window alone with the RECENT script, see `RedisWindow.recent`).
-- KEYS[1] turns  KEYS[2] pending  KEYS[3] seq  KEYS[4] the sessions index
-- ARGV[1] "user/session"  ARGV[2] TTL in ms
-- Returns {window members oldest first, pending members oldest first}.
local window = redis.call('ZRANGE', KEYS[1], 0, -1)
if #window > 0 then
  local ttl = tonumber(ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
  local now = redis.call('TIME')
  redis.call('ZADD', KEYS[4], now[1] * 1000 + math.floor(now[2] / 1000) + ttl, ARGV[1])
end
return {window, redis.call('ZRANGE', KEYS[2], 0, -1)}
"""

RECENT = """
-- Read a session's window and slide its TTL (`recent`, on every reply).
-- KEYS[1] turns  KEYS[2] seq  ARGV[1] TTL in ms
-- Returns the window's members, oldest first.
local window = redis.call('ZRANGE', KEYS[1], 0, -1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return window
"""

RETIRE = """
-- Retire an idle session: move its whole window into pending before the TTL can drop it.
-- KEYS[1] turns  KEYS[2] pending  KEYS[3] seq  KEYS[4] the sessions index  KEYS[5] the archive queue
-- ARGV[1] "user/session"  ARGV[2] margin in ms: retire only if the session expires within it
--   ("inf" retires it whatever its expiry, e.g. before stopping the server)
-- Returns the number of turns moved, or -1 if the session was touched meanwhile (still live).
local expiry = redis.call('ZSCORE', KEYS[4], ARGV[1])
if not expiry then return -1 end
if ARGV[2] ~= 'inf' then
  local now = redis.call('TIME')
  local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
  -- A read slides the keys' TTL but not the index, so the index may say earlier than the keys, never
  -- later: the window's own TTL decides, and the index catches up (PTTL is -2 for a gone key).
  local left = redis.call('PTTL', KEYS[1])
  if left > tonumber(ARGV[2]) then
    redis.call('ZADD', KEYS[4], now_ms + left, ARGV[1])
    return -1
  end
  if tonumber(expiry) > now_ms + tonumber(ARGV[2]) then return -1 end
end
local old = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #old, 2 do redis.call('ZADD', KEYS[2], old[i + 1], old[i]) end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
if #old > 0 then redis.call('SADD', KEYS[5], ARGV[1]) end
return #old / 2
"""

TRIM = """
-- After the archive committed turns up to ARGV[2], remove them from pending, and move a counter
-- that went back (Redis restored from an older state) past them, keeping its TTL.
-- KEYS[1] pending  KEYS[2] the archive queue  KEYS[3] seq
-- ARGV[1] "user/session"  ARGV[2] the highest turn number now safe in SQLite
-- Returns how many pending turns are left (the queue entry goes when none are).
local seq = redis.call('GET', KEYS[3])
if seq and tonumber(seq) < tonumber(ARGV[2]) then redis.call('INCRBY', KEYS[3], tonumber(ARGV[2]) - tonumber(seq)) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local left = redis.call('ZCARD', KEYS[1])
if left == 0 then redis.call('SREM', KEYS[2], ARGV[1]) end
return left
"""

RENUMBER = """
-- Give pending turns whose numbers the archive holds with other content the next free numbers.
-- KEYS[1] pending  KEYS[2] seq  KEYS[3] turns
-- ARGV[1] the highest turn number archived  ARGV[2..] the conflicting turn numbers
-- Returns {old, new, old, new, ...}, one pair per turn moved. The counter (if the session has one)
-- moves past the new numbers, keeping its TTL; without one, the next append starts past them.
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
local free = math.max(tonumber(ARGV[1]), seq)
for _, key in ipairs({KEYS[1], KEYS[3]}) do
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top[2] then free = math.max(free, tonumber(top[2])) end
end
local moved = {}
for i = 2, #ARGV do
  local n = ARGV[i]
  local head = '{"turn":' .. n .. ','
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], n, n)) do
    if string.sub(member, 1, #head) == head then
      free = free + 1
      redis.call('ZREM', KEYS[1], member)
      redis.call('ZADD', KEYS[1], free, '{"turn":' .. free .. ',' .. string.sub(member, #head + 1))
      table.insert(moved, tonumber(n))
      table.insert(moved, free)
    end
  end
end
if seq > 0 and free > seq then redis.call('INCRBY', KEYS[2], free - seq) end
return moved
"""


class Scripts:
    """Every script of the protocol, registered on one client (callable as redis-py's `Script`s)."""

    def __init__(self, client: redis.Redis) -> None:
        self.append = client.register_script(APPEND)
        self.read = client.register_script(READ)
        self.recent = client.register_script(RECENT)
        self.retire = client.register_script(RETIRE)
        self.trim = client.register_script(TRIM)
        self.renumber = client.register_script(RENUMBER)
