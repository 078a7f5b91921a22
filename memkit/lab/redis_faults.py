"""The Redis window when Redis misbehaves: it comes back older than the archive, it evicts keys, the
program using it ends without closing, REDIS_URL is not a Redis URL.

Each experiment runs a real embedded redis-server (killed and restarted for real where it says so)
over a real SQLite archive, and counts turns: acknowledged (append returned a number), kept (in
`load_session` with the content that was appended), dropped, doubled.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import WindowError
from ..store import MemoryStore
from ..transcript import Turn
from ..window import RedisWindow, connect_redis, start_embedded_redis
from ..window.server import _is_alive
from .workers import PathLike, run_worker, worker


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def count_kept(whole: list[Turn], acknowledged: dict[int, str]) -> dict[str, int]:
    """How many acknowledged turns (number -> content) a loaded session holds with their content.

    Returns:
        `acknowledged`, `kept` (a turn with that content is there, under any number), `dropped`
        (no turn has that content), `doubled` (a content is there more than once).
    """
    contents = [t["content"] for t in whole]
    kept = sum(1 for content in acknowledged.values() if content in contents)
    return {"acknowledged": len(acknowledged), "kept": kept, "dropped": len(acknowledged) - kept,
            "doubled": sum(1 for content in acknowledged.values() if contents.count(content) > 1)}


# -- a program that ends without close() ------------------------------------------------------------------


def exit_without_close(db: PathLike, *, turns: int = 10, size: int = 3, own_server: bool = True) -> dict[str, Any]:
    """A fresh process appends `turns` turns to alice/s1 and ends normally without closing anything.

    With `own_server`, the window starts its own embedded server (`RedisWindow(store)`); otherwise
    the program starts one (`start_embedded_redis()`) and gives the window its client. Either way
    the server's data lives in a temporary folder and is gone when the process ends.

    Returns:
        `appended` (the numbers append returned), `archived` (the numbers the archive holds after the
        process ended), `lost` (appended but not archived) and `redis_pid`.
    """
    result = run_worker("abandon", {"db": os.fspath(db), "turns": turns, "size": size, "own_server": own_server})
    with MemoryStore(db) as store:
        archived = [t["turn"] for t in store.archived_turns("alice", "s1")]
    result.update(archived=archived, lost=len(set(result["appended"]) - set(archived)))
    return result  # type: ignore[no-any-return]


@worker("abandon")
def _abandon_worker(payload: dict[str, Any]) -> dict[str, Any]:
    store = MemoryStore(payload["db"])
    if payload["own_server"]:
        window = RedisWindow(store, size=payload["size"], background=False, persistence="none")
        handle = window.handle
    else:
        handle = start_embedded_redis(persistence="none")
        window = RedisWindow(store, handle.client, size=payload["size"], background=False)
    assert handle is not None
    appended = [window.append("alice", "s1", "user", f"turn {i}")["turn"] for i in range(1, payload["turns"] + 1)]
    return {"appended": appended, "redis_pid": handle.pid}  # and end without close()


# -- Redis comes back older than the archive ------------------------------------------------------------


def older_state_restart(folder: PathLike, *, before: int = 10, after: int = 4, size: int = 3,
                        snapshot_at: int = 5) -> dict[str, Any]:
    """Run a session, restart its Redis from a snapshot older than the archive, and go on.

    A real embedded server (AOF in `folder`, reached at a TCP address that survives the restart)
    takes `before` turns of alice/s1 from two instances: the "early" one writes the first two and
    then stays idle; the other the rest, saving a snapshot (`SAVE`, the RDB a stock server restarts
    from) after turn `snapshot_at`. An archiver pass copies what left the window into SQLite. Then
    redis-server is killed and started again from the snapshot alone, at the same address: its
    counter is back at `snapshot_at` while the archive holds more. The early instance appends
    `after` turns (it remembers only the first two), then a new instance appends `after` more.

    Returns:
        `archived before the restart` (highest number), `counter after the restart`, `acknowledged
        after the restart`, `kept`, `dropped`, `doubled`, `numbers reused` (new turns numbered at or
        below the archive's highest when they were appended), `renumbered` (turns the archive refused,
        kept under a new number and reported), and `lost with the older state` (acknowledged before
        the restart and never archived: what a Redis restored from an older state cannot give back).
    """
    folder = Path(folder)
    data = folder / "redis"
    data.mkdir(parents=True)
    with MemoryStore(folder / "memory.sqlite3") as store:
        first = start_embedded_redis(persistence="aof", directory=data)
        url = _listen_on_tcp(first)
        options: dict[str, Any] = {"url": url, "size": size, "background": False, "prefix": "restart"}
        early, writer = RedisWindow(store, **options), RedisWindow(store, **options)
        acknowledged_before: dict[int, str] = {}
        for i in range(1, before + 1):
            turn = (early if i <= 2 else writer).append("alice", "s1", "user", f"before the restart {i}")
            acknowledged_before[turn["turn"]] = turn["content"]
            if i == snapshot_at:
                writer.flush()
                first.client.save()
                snapshot = (data / "redis.db").read_bytes()
        writer.flush()
        archived_max = store.last_archived_turn("alice", "s1")
        writer.close()
        _kill(first)
        shutil.rmtree(data)
        data.mkdir()
        (data / "redis.db").write_bytes(snapshot)
        second = start_embedded_redis(persistence="none", directory=data)
        try:
            _listen_on_tcp(second, url)
            counter = int(second.client.get(early.keys("alice", "s1").seq) or 0)
            acknowledged_after: dict[int, str] = {}
            reused = 0
            late = None
            for name, make in (("early", lambda: early), ("new", lambda: RedisWindow(store, **options))):
                window = late = make()
                for i in range(1, after + 1):
                    taken = store.last_archived_turn("alice", "s1")
                    turn = window.append("alice", "s1", "user", f"after the restart, {name} instance {i}")
                    acknowledged_after[turn["turn"]] = turn["content"]
                    reused += turn["turn"] <= taken
            assert late is not None
            late.retire_all()
            whole = late.load_session("alice", "s1")
            renumbered = len(early.renumbered) + len(late.renumbered)
            early.close()
            late.close()
        finally:
            second.close()
    counts = count_kept(whole, acknowledged_after)
    return {"archived before the restart": archived_max, "counter after the restart": counter,
            "acknowledged after the restart": counts["acknowledged"], "kept": counts["kept"],
            "dropped": counts["dropped"], "doubled": counts["doubled"], "numbers reused": reused,
            "renumbered": renumbered, "lost with the older state": count_kept(whole, acknowledged_before)["dropped"]}


def _listen_on_tcp(handle: Any, url: str | None = None) -> str:
    """Make an embedded server listen on 127.0.0.1 too (at `url`'s port, or a free one): a server at a
    TCP address comes back at the same address after a restart, as a stock server does."""
    if url is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            url = f"redis://127.0.0.1:{probe.getsockname()[1]}/0"
    handle.client.config_set("bind", "127.0.0.1")
    handle.client.config_set("port", url.rsplit(":", 1)[1].split("/")[0])
    return url


def _kill(handle: Any) -> None:
    """SIGKILL an embedded redis-server (a crash: no SHUTDOWN, no fsync) and wait until it is gone."""
    pid = handle.pid
    os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: not _is_alive(pid))
    handle.close()
