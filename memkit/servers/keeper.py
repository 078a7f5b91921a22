"""The keeper of a warm workspace redis-server: it stops the server once nobody has used it for a while.

`memkit chat` keeps the workspace's redis-server running between messages (starting one costs
more than the whole rest of a message), so something must stop it when the conversation is over.
Each server memkit starts gets a keeper, a small process of its own (`python -P keeper.py`, which
imports nothing of memkit, only redis-py and psutil) that reads the server's record on standard
input and then, every `poll` seconds:

* ends when the server has ended (it was stopped, or killed);
* stops the server when the workspace's window folder is gone (the workspace was removed);
* stops the server when no client but the keeper has been connected for `idle` seconds.

Stopping takes the workspace's `lock` first (without waiting: a process that holds it is about to
use the server) and checks again that no client has connected; then SHUTDOWN (which fsyncs the
append-only file), and it removes the record and the socket folder memkit made, as a closing
memkit process would. A server that does not answer (stopped with SIGSTOP, overloaded) counts as
busy. A keeper that is killed leaves its server running; the next memkit process that adopts the
server starts a new keeper (`memkit.servers.workspace`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from typing import Any


def _start_token(pid: int) -> str | None:
    import psutil  # type: ignore[import-untyped]  # no type information of its own

    try:
        process = psutil.Process(pid)
        return None if process.status() == psutil.STATUS_ZOMBIE else repr(process.create_time())
    except psutil.Error:
        return None


def _clients(client: Any) -> int | None:
    """Clients connected besides the keeper, or None when the server does not answer."""
    try:
        return max(0, len(client.client_list()) - 1)
    except Exception:  # redis-py's errors: a stalled or stopping server is not idle
        return None


def _stop(client: Any, record: dict[str, Any]) -> None:
    """SHUTDOWN the server, wait for it, remove its record and the socket folder memkit made."""
    with contextlib.suppress(Exception):
        client.shutdown(nosave=True)
    deadline = time.monotonic() + 10.0
    while _start_token(record["pid"]) == record["started"] and time.monotonic() < deadline:
        time.sleep(0.02)
    folder = record["folder"]
    try:
        with open(os.path.join(folder, "server.json"), encoding="utf-8") as file:
            named = json.load(file).get("pid")
    except (OSError, ValueError, AttributeError):
        named = None
    if named == record["pid"]:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, "server.json"))
    socket_dir = os.path.dirname(record["socket"])
    for name in (os.path.basename(record["socket"]), record["marker"]):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(socket_dir, name))
    with contextlib.suppress(OSError):
        os.rmdir(socket_dir)  # only if empty


def _keep(record: dict[str, Any]) -> int:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    idle, poll = float(record["idle"]), float(record["poll"])
    client = redis.Redis(unix_socket_path=record["socket"], password=record["token"], socket_connect_timeout=1.0,
                         socket_timeout=max(1.0, poll), retry=Retry(NoBackoff(), 0), client_name=record["name"])
    last_used = time.monotonic()
    while True:
        time.sleep(poll)
        if _start_token(record["pid"]) != record["started"]:
            return 0  # the server ended: someone stopped it
        if not os.path.isdir(record["folder"]):
            _stop(client, record)  # the workspace is gone
            return 0
        count = _clients(client)
        if count != 0:
            last_used = time.monotonic()
            continue
        if time.monotonic() - last_used < idle:
            continue
        try:
            lock = os.open(os.path.join(record["folder"], "lock"), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a memkit process is starting, adopting or stopping it: not idle
            if _clients(client) == 0:
                _stop(client, record)
                return 0
        finally:
            os.close(lock)  # (closing releases the flock)


if __name__ == "__main__":
    sys.exit(_keep(json.loads(sys.stdin.readline())))
