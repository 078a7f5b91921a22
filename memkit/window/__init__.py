"""Short-term windows: the recent turns of a live session, and how they reach the archive.

The *window* holds the last `size` turns of a session, which the agent reads on every reply; the
*archive* (the store's `transcript` table) keeps every turn that left it. One interface,
`ShortTermWindow` (`base`), three places: this process (`InProcessWindow`), the store's own file
(`StoreWindow`, what `memkit chat` uses), Redis (`RedisWindow`, shared by every instance). Why they
are built as they are: docs/design/window.md.
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
