"""Agent instances as real processes sharing one Redis session, and killed between the SQLite commit
and the Redis trim: every promised turn is still kept, exactly once.

An instance (`spawn_instance`) does not run an agent: it appends turns to one session of a
`RedisWindow` and prints `turn <number> <name> <i>` once each append has returned (a promise:
that turn must never be lost), and `archived <highest turn>` when it pauses between an archive
commit and the trim.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from typing import Any

from ..errors import ValidationError
from ..store import MemoryStore
from ..transcript import TURN_ROLES, Turn
from ..window import DEFAULT_SIZE, DEFAULT_TTL_SECONDS, RedisWindow
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


def kill_experiment(window: RedisWindow, user: str, session: str, *, kills: int = 5, seed: int = 1,
                    url: str | None = None) -> list[dict[str, Any]]:
    """Kill instances with SIGKILL between the SQLite commit and the Redis trim, and count turns.

    Each round starts an instance (`spawn_instance`, archiving after every append and pausing
    after each commit), lets it append a few turns (a random number from `seed`), kills it while
    it pauses, and inspects the session through `window`: before an archiver pass (some turns are
    then in both places, which `load_session` counts once) and after one pass of `window.flush()`.
    The next round's instance continues the same session.

    Returns:
        One row per kill: turns promised so far (printed by instances after `append` returned),
        turns stored, turns in two places before the pass, whether `load_session` had each turn
        once, and whether after the pass every turn was in exactly one place with none missing.
    """
    url = url or window.url
    if url is None:
        raise ValidationError("the window was given a client; pass the server's url for the instances")
    rng = random.Random(seed)
    promised: set[int] = set()
    rows = []
    for kill in range(1, kills + 1):
        proc = spawn_instance(url, window.store.location, user, session, name=f"i{kill}", turns=1_000_000,
                              size=window.size, prefix=window.prefix, inline_archive=True,
                              pause_after_archive=30.0, pause_from_turn=rng.randint(1, 4))
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("turn "):
                promised.add(int(line.split()[1]))
            elif line.startswith("archived"):
                break
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.communicate()[0]
        promised.update(int(line.split()[1]) for line in rest.splitlines() if line.startswith("turn "))
        before = window.snapshot(user, session)
        numbers = [row["turn"] for row in before]
        loaded = [t["turn"] for t in window.load_session(user, session)]
        window.flush()
        after = window.snapshot(user, session)
        rows.append({
            "kill": kill,
            "turns promised": len(promised),
            "turns stored": len(numbers),
            "in two places before the pass": sum("+" in row["place"] for row in before),
            "load_session has each once": loaded == numbers,
            "exactly once after the pass": [row["turn"] for row in after] == list(range(1, len(numbers) + 1))
            and promised <= set(numbers) and all("+" not in row["place"] for row in after),
        })
    return rows


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
