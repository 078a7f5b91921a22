"""How a Redis window's keys leave Redis: by their sliding TTL only, never evicted.

A session's window expires after `ttl` seconds of inactivity (the archiver retires it into the
archive just before; `memkit.window.archiver`): `check_ttl` keeps a ttl finite and within what Redis
accepts. A key Redis evicts to free memory would take turns with it before they are archived, so a
server whose `maxmemory-policy` may evict keys is refused (`refuse_eviction`) unless the caller
accepts the risk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ValidationError, WindowError
from ..servers.redis_client import redis_errors

if TYPE_CHECKING:  # pragma: no cover
    import redis

DEFAULT_TTL_SECONDS = 30 * 60.0

MAX_TTL_SECONDS = 10 * 365 * 24 * 3600.0
"""The longest ttl a window takes (ten years): finite, and far inside what Redis accepts for an
expiry in milliseconds (a larger one would fail inside Redis at the next append)."""


def check_ttl(seconds: object) -> float:
    """`seconds` as a window's ttl, or ValidationError naming the value and the range."""
    if (isinstance(seconds, bool) or not isinstance(seconds, int | float)
            or not 0.01 < seconds <= MAX_TTL_SECONDS):  # NaN and infinity fail here too
        raise ValidationError(f"ttl is {seconds!r} seconds; it must be a number more than 0.01 and at most "
                              f"{MAX_TTL_SECONDS:g} (ten years)")
    return float(seconds)


SAFE_EVICTION_POLICY = "noeviction"
"""The only `maxmemory-policy` under which Redis never drops a key by itself (the volatile-* policies
evict keys with a TTL, which is every window)."""


def refuse_eviction(client: redis.Redis, where: str) -> None:
    """Refuse a server that may evict keys: raise a `WindowError` naming the setting the window needs.

    Raises:
        WindowError: its `maxmemory-policy` is not `noeviction`, or it cannot be read.
    """
    with redis_errors(where, "reading its maxmemory-policy"):
        policy = str(client.info("memory").get("maxmemory_policy", SAFE_EVICTION_POLICY))
    if policy != SAFE_EVICTION_POLICY:
        raise WindowError(
            f"Redis at {where} runs with maxmemory-policy {policy}: when it fills up it evicts keys, and an "
            "evicted window loses turns before they are archived. Set maxmemory-policy noeviction on the server "
            "(CONFIG SET maxmemory-policy noeviction, or in redis.conf; a full server then refuses writes with an "
            "error instead), or pass accept_eviction=True to accept the risk"
        )
