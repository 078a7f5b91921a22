"""Short-term windows: the recent turns of a live session, and how they reach the archive.

A conversation has two tiers. The *window* holds the last `size` turns of a session, where the
agent reads them on every reply; the *archive* (the `transcript` table of the SQLite store) keeps
every turn that left the window. `load_session` joins the two back into the whole conversation.

    append ──► window (last N) ──► pending ──► archive (SQLite)
                 │  falls out       │  worker     ▲
                 └── idle near TTL ─┘  (or flush) │   load_session = archive + pending + window

Two implementations share one interface, `ShortTermWindow`:

* `InProcessWindow` (`base`): a bounded deque per session in this process. Fast, private to the
  process, gone when it exits; the default of the early notebooks.
* `RedisWindow` (`redis`): the window in Redis, shared by every agent instance that serves the
  user, with a sliding TTL, archived into SQLite exactly once by its `archiver`.

The modules, from the leaves up (each docstring says what it owns): `places`, `protocol` (the
Redis keys and every Lua script), `base`, `expiry`, `numbering`, `reads`, `archiver`, `redis`. The
servers themselves (the embedded redis-server or `REDIS_URL`, the workspace's redis-server and its
keeper) are `memkit.servers`.
"""

from __future__ import annotations

from ..servers.redis import Persistence, RedisHandle, connect_redis, start_embedded_redis
from ..servers.redis_client import DEFAULT_TIMEOUT_S, check_redis_url, display_url, note_server_life
from .archiver import Archiver
from .base import DEFAULT_MAX_CONTENT_CHARS, DEFAULT_SIZE, InProcessWindow, ShortTermWindow
from .protocol import KeyLayout, SessionKeys, session_keys
from .expiry import DEFAULT_TTL_SECONDS
from .redis import RedisWindow

__all__ = [
    "DEFAULT_MAX_CONTENT_CHARS",
    "DEFAULT_SIZE",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_TTL_SECONDS",
    "Archiver",
    "InProcessWindow",
    "KeyLayout",
    "Persistence",
    "RedisHandle",
    "RedisWindow",
    "SessionKeys",
    "ShortTermWindow",
    "check_redis_url",
    "connect_redis",
    "display_url",
    "note_server_life",
    "session_keys",
    "start_embedded_redis",
]
