"""Short-term windows: the recent turns of a live session, and how they reach the archive.

A conversation has two tiers. The *window* holds the last `size` turns of a session, where the
agent reads them on every reply; the *archive* (the store's `transcript` table) keeps every turn
that left the window. `load_session` joins the two back into the whole conversation. Three windows
share one interface, `ShortTermWindow` (`base`):

* `InProcessWindow` (`base`): a bounded deque per session in this process, gone when it exits.
* `StoreWindow` (`store_window`): in the store's own SQLite file, one transaction per turn; what
  `memkit chat` uses, and what survives a killed process with nothing else running.
* `RedisWindow` (`redis`): in Redis, shared by every agent instance that serves the user, with a
  sliding TTL, archived into the store exactly once by its `archiver`.

The Redis key layout and the scripts' contracts: docs/design/window.md.
"""

from __future__ import annotations

from ..servers.redis import Persistence, RedisHandle, connect_redis, start_embedded_redis
from ..servers.redis_client import DEFAULT_TIMEOUT_S, check_redis_url, display_url, note_server_life
from .archiver import Archiver
from .base import DEFAULT_MAX_CONTENT_CHARS, DEFAULT_SIZE, InProcessWindow, ShortTermWindow
from .expiry import DEFAULT_TTL_SECONDS
from .protocol import KeyLayout, SessionKeys, session_keys
from .redis import RedisWindow
from .store_window import StoreWindow

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
    "StoreWindow",
    "check_redis_url",
    "connect_redis",
    "display_url",
    "note_server_life",
    "session_keys",
    "start_embedded_redis",
]
