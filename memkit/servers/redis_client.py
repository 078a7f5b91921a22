"""Talking to a Redis server: the URL check, the kit's client (with its life hook), its errors.

Every message shows a URL through `display_url`, never with its password; `redis_errors` turns
redis-py's errors into the one `WindowError` the kit documents.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
import urllib.parse
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterator

from ..errors import ValidationError, WindowError, install_hint

if TYPE_CHECKING:  # pragma: no cover
    import redis

DEFAULT_TIMEOUT_S = 2.0
"""Seconds to connect, and to wait for any one reply, before Redis counts as unavailable."""

_SCHEMES = ("redis", "rediss", "unix")

LIFE_KEY = "memkit:_life"
"""The server's run_id as the last kit client to connect found it (no prefix: it is the server's)."""


def as_text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def redis_module() -> Any:
    """redis-py, imported when first needed (an ImportError names the extra to install)."""
    try:
        import redis
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError(f"the Redis window needs redis-py: {install_hint('redis')}") from None
    return redis


def display_url(url: str) -> str:
    """`url` with any password replaced by `***`; it does not parse, so a malformed URL is hidden too."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    netloc, tail = rest[:cut], rest[cut:]
    if "@" not in netloc:
        return url
    userinfo, host = netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0] + (":***" if ":" in userinfo else "")
    return f"{scheme}{sep}{user}@{host}{tail}"


SOCKET_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
"""The longest unix socket path the kernel takes (`sun_path` is 108 bytes on Linux, 104 on macOS,
the last a NUL): a longer one makes the server fail or listen somewhere nobody connects to."""


def socket_folder(prefix: str, name: str, *, make: Callable[[str], str] | None = None) -> tuple[str, str]:
    """A new private (0700) temporary folder for a server's unix socket, and the socket's path in it
    (`make(prefix)` makes the folder, a watchdog's `make_folder` say; default `tempfile.mkdtemp`).

    Raises:
        WindowError: the path would be longer than a unix socket allows (a long TMPDIR), said before
            anything is made or started, with the remedy.
    """
    base = tempfile.gettempdir()
    longest = len(os.fsencode(os.path.join(base, prefix + "x" * 8, name)))  # mkdtemp adds 8 characters
    if longest > SOCKET_PATH_MAX:
        raise WindowError(f"a Redis socket in the temporary folder {base} would have a {longest}-byte path, over "
                          f"the {SOCKET_PATH_MAX} bytes a unix socket path may have; set TMPDIR to a shorter "
                          "folder (for example /tmp) and try again")
    folder = make(prefix) if make is not None else tempfile.mkdtemp(prefix=prefix)
    return folder, os.path.join(folder, name)


def check_redis_url(url: str) -> str:
    """`url` if it is a Redis URL redis-py can connect with; else a `WindowError` naming its problem.

    Accepted: `redis://[user:password@]host[:port][/db]`, `rediss://...` (TLS) and
    `unix://[user:password@]/path/to/socket[?db=N]`; each refusal names its problem and the remedy.
    """
    shown = display_url(url) if isinstance(url, str) else repr(url)
    if not isinstance(url, str):
        raise WindowError(f"the Redis URL must be text, not {type(url).__name__}")
    where = f"the Redis URL {shown!r}"
    if url != url.strip() or re.search(r"[\s\x00-\x1f\x7f]", url):
        raise WindowError(f"{where} contains whitespace or a control character (a stray space or newline?); "
                          "remove it")
    scheme, sep, _ = url.partition("://")
    if not sep:
        raise WindowError(f"{where} has no scheme; write it as redis://HOST:PORT/DB (for example "
                          "redis://localhost:6379/0), rediss://... for TLS, or unix:///path/to/redis.sock")
    if scheme.lower() not in _SCHEMES:
        raise WindowError(f"{where} has the scheme {scheme.lower()!r}, which is not Redis's; use redis://, "
                          "rediss:// or unix://")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raw = url.partition("://")[2].split("/", 1)[0].rsplit("@", 1)[-1]
        if "[" in raw and "]" not in raw:
            raise WindowError(f"{where} opens an IPv6 address with '[' and never closes it; "
                              "write it as redis://[::1]:6379/0") from None
        raise WindowError(f"{where} has the port {raw.rpartition(':')[2]!r}, which is not a number "
                          f"from 1 to 65535 ({exc})") from None
    if parts.scheme.lower() == "unix":
        if not parts.path:
            raise WindowError(f"{where} names no socket path; write it as unix:///path/to/redis.sock")
    else:
        if not parts.hostname:
            raise WindowError(f"{where} names no host; write it as redis://HOST:PORT/DB")
        if port == 0:
            raise WindowError(f"{where} has the port '0', which is not a number from 1 to 65535")
        database = parts.path.lstrip("/")
        if database and not database.isdigit():
            raise WindowError(f"{where} names the database {database!r}; a Redis database is a number "
                              "(redis://HOST:PORT/0)")
    return url


def check_timeout(timeout: object) -> float:
    """`timeout` as seconds if it is a positive finite number; else a `ValidationError` naming it."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise ValidationError(f"timeout is {timeout!r}; give the seconds to wait for Redis as a positive number")
    return float(timeout)


def client_for(url: str, timeout: float = DEFAULT_TIMEOUT_S, password: str | None = None) -> redis.Redis:
    """The kit's client for `url`: a short retry, `timeout` for the connect and every reply, the life hook."""
    redis = redis_module()
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    # A short retry: a dropped connection is retried twice within ~50 ms, and a server that is
    # down is reported in milliseconds instead of after redis-py's default multi-second backoff.
    # A timeout is not retried: a server that accepts and never answers costs one `timeout`.
    try:
        return redis.Redis.from_url(
            url, retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), 2, supported_errors=(redis.ConnectionError,)),
            socket_connect_timeout=timeout, socket_timeout=timeout, redis_connect_func=note_server_life,
            **({"password": password} if password is not None else {}),
        )
    except (ValueError, TypeError) as exc:
        raise WindowError(f"the Redis URL {display_url(url)!r} is not one redis-py accepts: {exc}") from None


@contextlib.contextmanager
def redis_errors(where: str, doing: str) -> Iterator[None]:
    """Turn redis-py's errors inside the block into a `WindowError` that says what was being done.

    Args:
        where: the server, for the message (a URL through `display_url`, never with its password).
        doing: what the block does ("appending a turn of alice/s1").
    """
    redis = redis_module()
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise WindowError(
            f"Redis at {where} is unavailable while {doing} ({exc}); the short-term window cannot be "
            "used until it is back. The long-term store does not need Redis and keeps working"
        ) from None
    except redis.RedisError as exc:
        raise WindowError(f"Redis at {where} refused {doing}: {exc}") from None


def note_server_life(connection: Any) -> None:
    """redis-py's connect hook on every client the kit makes: note the server's life in `LIFE_KEY`.

    A Redis restarted from an older state hands out turn numbers the archive holds unless the window
    notices (`memkit.window.redis.TakenNumbers`). Every restart breaks every connection, and a
    connection's first command waits for this hook, so `LIFE_KEY` holds the life's run_id before any
    command of a kit client runs, and APPEND reads it (one GET) instead of `INFO server` (7-21 µs of
    server time per append here). Give a client of your own `redis_connect_func=note_server_life`.
    """
    import redis  # only a client of redis-py calls this

    connection.on_connect()  # what redis-py does when no hook is given: HELLO, AUTH, SELECT
    connection.send_command("INFO", "server")
    match = re.search(r"^run_id:(\w+)", as_text(connection.read_response()), re.MULTILINE)
    if match is None:
        raise redis.ConnectionError("the server's INFO names no run_id; it is not a Redis the kit can use")
    connection.send_command("GET", LIFE_KEY)
    known = connection.read_response()
    if known is None or as_text(known) != match.group(1):
        connection.send_command("SET", LIFE_KEY, match.group(1))
        connection.read_response()


def notes_server_life(client: object) -> bool:
    """True if every connection of `client` runs `note_server_life` when it connects."""
    pool = getattr(client, "connection_pool", None)
    return getattr(pool, "connection_kwargs", {}).get("redis_connect_func") is note_server_life
