"""Agent instances as real processes sharing one Redis session, and killed between the SQLite commit
and the Redis trim: every promised turn is still kept, exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

from memkit.errors import ValidationError
from memkit.store import MemoryStore
from memkit.transcript import TURN_ROLES, Turn
from memkit.window import DEFAULT_SIZE, DEFAULT_TTL_SECONDS, RedisWindow
from .workers import start_worker, worker


def spawn_instance(url: str, db: str | os.PathLike[str], user: str, session: str, *, name: str,
                   turns: int, role: str = "user", size: int = DEFAULT_SIZE, ttl: float = DEFAULT_TTL_SECONDS,
                   prefix: str = "memkit", alternate: bool = False, first: bool = False,
                   inline_archive: bool = False, pause_after_archive: float = 0.0,
                   pause_from_turn: int = 1) -> subprocess.Popen[str]:
    """Start another agent instance as a real process sharing the Redis at `url` and the store `db`.

    The instance appends `turns` turns (content "<name> #<i>") to one session and prints
    `turn <number> <name> <i>` once each append has returned (a promise: that turn must never be
    lost). With `alternate`, it waits until the newest turn in the shared window is someone
    else's before each append (two instances then take turns; `first` starts). With
    `inline_archive`, it flushes after every append; `pause_after_archive` makes it sleep between
    the SQLite commit and the Redis trim (printing `archived <highest turn>` first) once it has
    appended `pause_from_turn` turns, so a demonstration can kill it exactly there.

    Returns:
        The running process (stdout is a text pipe).
    """
    if role not in TURN_ROLES:
        raise ValidationError(f"turn role {role!r} is unknown; use one of {', '.join(TURN_ROLES)}")
    return start_worker("instance", {
        "url": url, "db": os.fspath(db), "user": user, "session": session, "name": name, "turns": turns,
        "role": role, "size": size, "ttl": ttl, "prefix": prefix, "alternate": alternate, "first": first,
        "inline_archive": inline_archive, "pause_after_archive": pause_after_archive,
        "pause_from_turn": pause_from_turn,
    }, capture_stderr=False)


@worker("instance")
def _instance_worker(opts: dict[str, Any]) -> None:
    """The instance process started by `spawn_instance` (its options are `spawn_instance`'s arguments)."""
    user, session, name = opts["user"], opts["session"], opts["name"]
    pause, pause_from = opts["pause_after_archive"], opts["pause_from_turn"]
    appended = 0

    def archived(_user: str, _session: str, turns: list[Turn]) -> None:
        if pause and appended >= pause_from:
            print(f"archived {turns[-1]['turn']}", flush=True)
            time.sleep(pause)

    with MemoryStore(opts["db"]) as store, RedisWindow(
        store, url=opts["url"], size=opts["size"], ttl=opts["ttl"], prefix=opts["prefix"],
        background=not opts["inline_archive"], on_archived=archived,
    ) as window:
        mine = name + " #"
        for i in range(1, opts["turns"] + 1):
            if opts["alternate"]:
                deadline = time.monotonic() + 20
                while True:
                    last = window.recent(user, session)
                    if (not last and opts["first"]) or (last and not last[-1]["content"].startswith(mine)):
                        break
                    if time.monotonic() > deadline:
                        print("gave up waiting for the other instance", file=sys.stderr)
                        raise SystemExit(3)
                    time.sleep(0.002)
            turn = window.append(user, session, opts["role"], f"{name} #{i}")
            appended = i
            print(f"turn {turn['turn']} {name} {i}", flush=True)
            if opts["inline_archive"]:
                window.flush()
