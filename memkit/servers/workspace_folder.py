"""The workspace window folder (`memkit.servers.workspace`): kept private (`private_folder`), one
decision at a time (`locked`), and its `server.json` believed only for this workspace's own
server (`trusted_record`, `socket_folder_of`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import stat
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from ..errors import WindowError
from .redis_client import redis_module
from .watchdog import start_token

SOCKET_FOLDER_PREFIX = "memkit-ws-"
KEEPER_NAME = "memkit-keeper"
"""The client name of a keeper's connection (not counted as a user of the server)."""

MARKER = "memkit-window.json"
"""The file in a socket folder memkit made, naming the workspace window folder it serves."""


def private_folder(folder: Path) -> None:
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
def locked(folder: Path, timeout: float) -> Iterator[None]:
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


def read_record(folder: Path) -> dict[str, Any] | None:
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


def write_private(path: Path, text: str) -> None:
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


def remove_socket_folder(socket: str, folder: Path) -> None:
    """Remove the socket, the marker and their folder, only if memkit made that folder for `folder`."""
    if socket_folder_of(socket, folder) is None:
        return
    parent = Path(socket).parent
    for name in (Path(socket).name, MARKER):
        with contextlib.suppress(OSError):
            (parent / name).unlink()
    with contextlib.suppress(OSError):
        parent.rmdir()  # only if empty: anything else in it was not memkit's


def process_is(pid: int, started: str) -> bool:
    """True if `pid` runs as this Unix user and is the process that started at `started`."""
    if start_token(pid) != started:
        return False
    try:
        import psutil  # type: ignore[import-untyped]  # no type information of its own

        return bool(psutil.Process(pid).uids().real == os.getuid())
    except Exception:  # psutil.NoSuchProcess, AccessDenied: not one memkit may use
        return False


def trusted_record(folder: Path) -> dict[str, Any] | None:
    """The record if the server it names is this workspace's own and runs (not asked whether it answers)."""
    info = read_record(folder)
    if info is None or not process_is(info["pid"], info["started"]) or socket_folder_of(info["socket"], folder) is None:
        return None
    return info


def servers_on(folder: Path) -> list[int]:
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


@contextlib.contextmanager
def probe_client(info: dict[str, Any], timeout: float = 2.0) -> Iterator[Any]:
    """A short-lived client of the server `info` names (with its password), closed when the block ends."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # No retry: a server that is gone (or just shut down, which closes the connection) is an answer,
    # not something to wait out with redis-py's default backoff (seconds per SHUTDOWN).
    client = redis_module().Redis(unix_socket_path=info["socket"], password=info["token"],
                                   socket_connect_timeout=min(1.0, timeout), socket_timeout=timeout,
                                   retry=Retry(NoBackoff(), 0))
    try:
        yield client
    finally:
        client.close()


def answers(info: dict[str, Any], timeout: float = 2.0) -> bool:
    """True if the server `info` names answers a PING within `timeout` seconds."""
    with probe_client(info, timeout) as probe:
        try:
            return bool(probe.ping())
        except redis_module().RedisError:
            return False


def client_count(info: dict[str, Any]) -> int | None:
    """How many clients the server has, counting the connection that asks and not its keeper's;
    None if it does not answer."""
    with probe_client(info) as probe:
        try:
            return sum(1 for client in probe.client_list() if client.get("name") != KEEPER_NAME)
        except redis_module().RedisError:
            return None


def keeper_runs(info: dict[str, Any] | None) -> bool:
    """True if the server `info` names has a live keeper (started by this user at the recorded moment)."""
    return bool(info and info.get("keeper") and process_is(info["keeper"], info["keeper_started"]))
