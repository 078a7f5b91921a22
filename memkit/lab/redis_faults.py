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
import tempfile
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
