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

The modules, from the leaves up: `server` (the embedded redis-server or `REDIS_URL`), `workspace`
(the redis-server a workspace keeps beside its SQLite file; `keeper`, the process that stops it once
idle), `places` (where a store's windows are, recorded in the store so that forgetting reaches
them), `keys` (the Redis key layout, one per prefix and store),
`life` (the connect hook by which an append notices a restarted server), `base`, `numbering` (the turn numbers an instance knows are taken), `reads` (the read path, and
where a session's turns are), `archiver` (window to SQLite, exactly once), `redis`.
"""

from __future__ import annotations

from .archiver import Archiver
from .base import DEFAULT_MAX_CONTENT_CHARS, DEFAULT_SIZE, InProcessWindow, ShortTermWindow
from .keys import KeyLayout, SessionKeys, session_keys
from .life import note_server_life
from .redis import DEFAULT_TTL_SECONDS, RedisWindow
from .server import (
    DEFAULT_TIMEOUT_S,
    Persistence,
    RedisHandle,
    check_redis_url,
    connect_redis,
    display_url,
    start_embedded_redis,
)

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
