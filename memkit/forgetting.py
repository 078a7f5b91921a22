"""Forget a user everywhere: every short-term window the store ever used, then the store itself.

The one place that answers "remove this user's memory", used by `memkit forget-user` (and open to
the inspector and the notebooks). A user's recent turns may sit in a window the current process
never opened: the workspace window of a chat run from another directory, a Redis server named by a
`REDIS_URL` set in another shell. The store records each window place (`memkit.window.places`), so
`forget_user` reaches them all, whatever this process's directory and environment.

Order: every window is cleared first, then the store (records, history, transcript), so no
archiver copies a window's turns back into a store that was just cleared; then everything is
counted again, and what is left is an error, never a report of success.

If a recorded window cannot be reached (its server is down, or needs a password this shell lacks),
nothing is forgotten anywhere: the error names each unreachable window and what to do, and running
it again once they are reachable finishes the job.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any
from collections.abc import Iterable, Iterator

from .errors import MemkitError, WindowError
from .store import MemoryStore
from .window import RedisWindow, ShortTermWindow, connect_redis
from .window.places import REDIS, WORKSPACE, describe, server_url
from .servers.workspace import DEFAULT_WAIT_S, WorkspaceRedis

__all__ = ["ForgetIncomplete", "forget_user"]


class ForgetIncomplete(WindowError):
    """Some of the user's traces could not be reached, or were still there afterwards."""


def forget_user(store: MemoryStore, user: str, *, windows: Iterable[ShortTermWindow] = (),
                places: Iterable[str] = (), redis_url: str | None = None,
                wait: float = DEFAULT_WAIT_S) -> dict[str, Any]:
    """Remove `user` from every window of `store` and from the store; check that nothing is left.

    Args:
        store: the long-term store; its recorded window places (`MemoryStore.window_places`) are
            all visited.
        user: whose memory goes.
        windows: open windows to clear too (an in-process window, a window on a client of yours).
        places: more places to visit (`memkit.window.places`), e.g. a window opened before its
            store recorded places.
        redis_url: the `REDIS_URL` of this shell, used (with its password) for a recorded Redis
            place that names the same server; other Redis places are reached at their recorded
            URL. Default: the `REDIS_URL` environment variable.
        wait: seconds to wait for a workspace window's lock or stalled server.

    Returns:
        {"user", "removed": the store's counts plus (when a window was reached) `redis_keys` and
        `window_turns`, "left": all zero,
        "windows": [{"window": described place, "window_turns": n, "redis_keys": n}, ...]}

    Raises:
        ForgetIncomplete: a recorded window could not be reached (then nothing was removed), or
            traces were left afterwards (the message names them).
        ValidationError: a malformed user id.
    """
    store.limits.check_id("user", user)
    redis_url = redis_url if redis_url is not None else (os.environ.get("REDIS_URL") or None)
    wanted = list(dict.fromkeys([*store.window_places(), *places]))
    with contextlib.ExitStack() as opened:
        reached: list[tuple[str, ShortTermWindow]] = []
        unreachable: list[str] = []
        for place in wanted:
            try:
                window = opened.enter_context(_open_place(store, place, redis_url, wait))
            except (MemkitError, OSError) as exc:
                unreachable.append(f"{describe(place)}: {exc}")
                continue
            if window is not None:
                reached.append((describe(place), window))
        reached += [(repr(window), window) for window in windows]
        if unreachable:
            raise ForgetIncomplete(
                f"user {user!r} was NOT forgotten: {len(unreachable)} of the store's windows could not be reached, "
                "and a window that still holds their turns would give them back. " + "; ".join(unreachable)
                + ". Nothing was removed anywhere. Make each reachable (start its server; set REDIS_URL with its "
                "password in this shell) and run forget-user again")
        removed: dict[str, int] = {"redis_keys": 0, "window_turns": 0} if reached else {}
        report_windows = []
        for name, window in reached:
            cleared = window.clear_user(user)
            report_windows.append({"window": name, **cleared})
            for key, count in cleared.items():
                removed[key] = removed.get(key, 0) + count
        removed = {**store.forget_user(user), **removed}
        left: dict[str, int] = dict(store.traces(user))
        if reached:
            left["window_turns"] = sum(window.user_turns(user) for _, window in reached)
    if any(left.values()):
        raise ForgetIncomplete(f"user {user!r} is not fully forgotten: {json.dumps(left)} remain")
    return {"user": user, "removed": removed, "left": left, "windows": report_windows}


@contextlib.contextmanager
def _open_place(store: MemoryStore, place: str, redis_url: str | None,
                wait: float) -> Iterator[ShortTermWindow | None]:
    """A window of `store` at `place` for the block (None: the place holds nothing any more)."""
    data = json.loads(place)
    prefix = str(data.get("prefix", "memkit"))
    handle: Any
    if data.get("kind") == WORKSPACE:
        folder = data["folder"]
        if not os.path.isdir(folder):  # the folder and its append-only file are gone: no turn is left there
            yield None
            return
        handle = WorkspaceRedis(folder, wait=wait)
    elif data.get("kind") == REDIS:
        url = redis_url if redis_url and server_url(redis_url) == data["url"] else data["url"]
        handle = connect_redis(url)
    else:
        raise WindowError("this memkit does not know that kind of window place")
    try:
        with RedisWindow(store, handle.client, prefix=prefix, background=False, accept_eviction=True) as window:
            yield window
    finally:
        handle.close()
