"""Forget a user everywhere: every Redis window the store noted, then the store and its own window.

Recent turns may sit in a Redis window this process never opened (a `REDIS_URL` set in another
shell); the store records each Redis it was used with (`memkit.window.places`), so `forget_user`
reaches them all, or removes nothing. What is left afterwards is an error, never a success. Why the
order, and when a window may be named gone for good: docs/design/window.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from typing import Any
from collections.abc import Iterable, Iterator

from .errors import MemkitError, WindowError
from .store import Store
from .window import RedisWindow, ShortTermWindow, StoreWindow, connect_redis, display_url
from .window.places import REDIS, WORKSPACE, describe, read_place, server_url

__all__ = ["ForgetIncomplete", "drop_window", "find_place", "forget_user", "window_status"]


class ForgetIncomplete(WindowError):
    """Some of the user's traces could not be reached, or were still there afterwards."""


class NoAnswer(WindowError):
    """Nothing answers at a window place: the connection was refused, the host is unknown, or the
    socket file is missing. Only this may let a person's "gone for good" through: a server that
    answers but refuses this shell (a password, still loading, a timeout) may hold turns."""


def forget_user(store: Store, user: str, *, windows: Iterable[ShortTermWindow] = (),
                places: Iterable[str] = (), gone: Iterable[str] = (), redis_url: str | None = None) -> dict[str, Any]:
    """Remove `user` from every window of `store` (its own, and every place it recorded) and from the
    store; check that nothing is left.

    Args:
        windows: open windows to clear too (an in-process window, a window on a client of yours).
        places: more places to visit (`memkit.window.places`), e.g. this shell's `REDIS_URL`.
        gone: places a person says are gone for good (as `find_place` accepts; a Redis URL is
            probed with its password): each is skipped only if nothing answers there (`NoAnswer`),
            and dropped from the store's record in the same transaction as the store's part.
        redis_url: this shell's `REDIS_URL` (default: the environment's), used with its password
            for a recorded place on the same server; other places are reached at their recorded URL.

    Returns:
        {"user", "removed": the store's counts plus `window_turns` (and `redis_keys` when a Redis
        window was reached), "left": all zero, "windows": [{"window": described, "window_turns": n,
        ...}], "dropped_windows" and "skipped_windows": [{"window", "why"}] for places named gone
        (recorded ones no longer are; unrecorded ones were only skipped)}

    Raises:
        ForgetIncomplete: a recorded window could not be reached (then nothing was removed), a place
            judged gone was noted again meanwhile (the store was left as it was), or traces were left.
        WindowError: a place named in `gone` is not recorded, or still answers; nothing was removed.
        ValidationError: a malformed user id.
    """
    store.limits.check_id("user", user)
    redis_url = _shell_url(redis_url)
    # When each place was last noted, read before any is judged: a place judged gone is dropped only
    # if no window noted it again meanwhile (a chat opening it anew).
    noted = store.window_places_noted()
    wanted = list(dict.fromkeys([*noted, *places]))
    named_gone: dict[str, str | None] = {}  # a place named by its URL is probed with that URL's password
    for name in gone:
        named_gone[find_place(store, name, wanted)] = name if "://" in name else None
    own = StoreWindow(store) if store.path is not None else None
    with contextlib.ExitStack() as opened:
        reached: list[tuple[str, ShortTermWindow]] = []
        unreachable: list[str] = []
        dropped: dict[str, str] = {}
        for place in wanted:
            try:
                found = opened.enter_context(_open_place(store, place, redis_url, named_gone.get(place)))
            except NoAnswer as exc:
                if place in named_gone:
                    dropped[place] = _why_gone(place, exc)
                else:
                    unreachable.append(f"{describe(place)}: {exc}")
                continue
            except (MemkitError, OSError) as exc:
                unreachable.append(f"{describe(place)}: {exc}" + (REFUSES_NAMED if place in named_gone else ""))
                continue
            if place in named_gone:
                raise WindowError(f"{describe(place)} was named gone for good, but it answers: it may still hold "
                                  f"{user!r}'s turns. Nothing was removed anywhere. Forget without naming it")
            assert found is not None  # not a look: a window
            reached.append((describe(place), found))
        reached += [(repr(window), window) for window in windows]
        if unreachable:
            raise ForgetIncomplete(
                f"user {user!r} was NOT forgotten: {len(unreachable)} of the store's windows could not be reached, "
                "and a window that still holds their turns would give them back. " + "; ".join(unreachable)
                + ". Nothing was removed anywhere. Make each reachable (start its server; set REDIS_URL with its "
                "password in this shell) and run forget-user again; a window gone for good (a retired Redis "
                "server, a removed workspace folder): name it with --window-gone PLACE (`memkit windows` lists them)")
        removed: dict[str, int] = {"redis_keys": 0, "window_turns": 0} if reached else {"window_turns": 0}
        report_windows = []
        for name, window in reached:
            cleared = window.clear_user(user)
            report_windows.append({"window": name, **cleared})
            for key, count in cleared.items():
                removed[key] = removed.get(key, 0) + count
        skipped = {place: why for place, why in dropped.items() if place not in noted}
        dropped = {place: why for place, why in dropped.items() if place in noted}
        with store.transaction():  # the store, its own window and the dropped places: all or nothing
            if own is not None:
                cleared = own.clear_user(user)
                report_windows.append({"window": OWN_WINDOW, **cleared})
                removed["window_turns"] += cleared["window_turns"]
            removed = {**store.forget_user(user), **removed}
            for place in dropped:
                if not store.drop_window_place(place, noted_at=noted[place]):
                    raise ForgetIncomplete(
                        f"user {user!r} was NOT forgotten in the store: {describe(place)} was named gone for good, "
                        "but a window was opened there while forgetting ran (it was noted again), and it may hold "
                        "their turns. The store was left as it was; run forget-user again")
        left: dict[str, int] = dict(store.traces(user))
        left["window_turns"] = sum(window.user_turns(user) for _, window in reached)
        left["window_turns"] += own.user_turns(user) if own is not None else 0
    if any(left.values()):
        raise ForgetIncomplete(f"user {user!r} is not fully forgotten: {json.dumps(left)} remain")
    return {"user": user, "removed": removed, "left": left, "windows": report_windows,
            "dropped_windows": [{"window": describe(place), "why": why} for place, why in dropped.items()],
            "skipped_windows": [{"window": describe(place), "why": why} for place, why in skipped.items()]}


OWN_WINDOW = "the store's own window"

REFUSES_NAMED = (" (named gone for good, but it is there: something answered and refused this shell, so it may "
                 "still hold turns; give its password in the named URL or in REDIS_URL, or wait until it has "
                 "loaded, and run again)")

FOLDER_GONE = ("named gone for good by a person, and its folder no longer exists there, so neither does the "
               "append-only file that held its turns; no longer recorded")


def _why_gone(place: str, exc: Exception) -> str:
    if _kind(place) == WORKSPACE:
        return FOLDER_GONE
    return f"named gone for good by a person; it did not answer ({exc})"


def find_place(store: Store, name: str, extra: Iterable[str] = ()) -> str:
    """The recorded window place a person named: its JSON text, a Redis URL (any password is ignored),
    or an older memkit's workspace window folder.

    Raises:
        WindowError: `name` matches no recorded place, or several (the same server under several
            key prefixes: then give the place's JSON text, as `memkit windows` prints it).
    """
    known = list(dict.fromkeys([*store.window_places(), *extra]))
    if name in known:
        return name
    matches = [place for place in known if name and _names(place, name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise WindowError(f"{name!r} is not a window place this store recorded; `memkit windows` lists them "
                          "(name one by its Redis URL, its workspace folder, or its place text). Nothing was changed")
    raise WindowError(f"{name!r} names {len(matches)} recorded places ({', '.join(matches)}); give one of "
                      "these texts instead. Nothing was changed")


def _names(place: str, name: str) -> bool:
    """Whether `name` (a Redis URL or a folder) names `place`."""
    try:
        read = read_place(place)
    except WindowError:
        return False
    if read.kind == REDIS and "://" in name:
        try:
            return server_url(name) == read.url
        except WindowError:
            return False
    if read.kind == WORKSPACE and "://" not in name:
        path = os.path.expanduser(name)  # a name through a symlink matches, or the plain absolute path
        return read.folder in (os.path.abspath(path), os.path.realpath(path))
    return False


def window_status(store: Store, *, redis_url: str | None = None) -> list[dict[str, Any]]:
    """Every window place the store recorded, and whether each is there now; it only looks.

    Each entry: {"place": the JSON text (what `find_place` takes), "window": described, "kind",
    "state", and "error" unless it "answers"}. States: "answers" (a Redis server replied to a ping),
    "no answer" (nothing answers at a Redis place), "refuses" (it answers and refuses this shell),
    "gone or moved" (an older memkit's workspace folder that is not there), "folder present" (one
    that is: its append-only file may hold turns; this memkit no longer starts its server).
    """
    redis_url = _shell_url(redis_url)
    report = []
    for place in store.window_places():
        entry: dict[str, Any] = {"place": place, "window": describe(place), "kind": _kind(place)}
        try:
            with _open_place(store, place, redis_url, None, look=True):
                entry["state"] = "answers"
        except NoAnswer as exc:
            entry.update(state="gone or moved" if entry["kind"] == WORKSPACE else "no answer", error=str(exc))
        except (MemkitError, OSError) as exc:
            state = "folder present" if entry["kind"] == WORKSPACE else "refuses"
            entry.update(state=state, error=str(exc))
        report.append(entry)
    return report


def drop_window(store: Store, name: str, *, redis_url: str | None = None) -> dict[str, Any]:
    """Stop recording a window place gone for good, so forgetting a user no longer waits for it.

    Dropped only if nothing answers there (`NoAnswer`; a Redis URL in `name` is probed with its
    password); refused for a place that answers or refuses this shell (it may hold turns), for an
    older memkit's workspace window whose folder still exists, and for a place noted again meanwhile.

    Returns:
        {"dropped": described place, "place": its JSON text, "why": what showed it is gone}

    Raises:
        WindowError: the name matches no recorded place or several, or the place is not gone;
            nothing was changed.
    """
    redis_url = _shell_url(redis_url)
    noted = store.window_places_noted()  # before it is judged: see forget_user
    place = find_place(store, name)
    try:
        with _open_place(store, place, redis_url, name if "://" in name else None, look=True):
            pass
    except NoAnswer as exc:
        why = _why_gone(place, exc)
    except (MemkitError, OSError) as exc:
        raise WindowError(f"{describe(place)}: {exc}{REFUSES_NAMED if _kind(place) == REDIS else ''}. "
                          "Nothing was changed") from None
    else:
        raise WindowError(f"{describe(place)} answers, so it is not gone: it may hold turns that forgetting "
                          "must clear. Nothing was changed")
    if place not in noted or not store.drop_window_place(place, noted_at=noted[place]):
        raise WindowError(f"{describe(place)} was dropped meanwhile, or a window was opened there meanwhile (it was "
                          "noted again): nothing was changed. Run `memkit windows` to see it now")
    return {"dropped": describe(place), "place": place, "why": why}


def _shell_url(redis_url: str | None) -> str | None:
    return redis_url if redis_url is not None else (os.environ.get("REDIS_URL") or None)


def _kind(place: str) -> str:
    try:
        return read_place(place).kind
    except WindowError:
        return "unknown"


def _nothing_listens(exc: BaseException) -> bool:
    """Whether redis-py's error says nothing is there: refused, an unknown host, a missing socket file."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError | FileNotFoundError):
            return True
        if isinstance(seen, socket.gaierror) and seen.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", 0)):
            return True  # not EAI_AGAIN: a resolver that is down says nothing about the host
        seen = seen.__cause__ or seen.__context__
    return False


def _redis_url(recorded: str, redis_url: str | None, named: str | None) -> str:
    """The URL to reach a recorded Redis place (at the `recorded` URL) with: the one a person named
    (with its password), else this shell's REDIS_URL when it names the same server, else `recorded`."""
    for url in (named, redis_url):
        with contextlib.suppress(WindowError):
            if url and server_url(url) == recorded:
                return url
    return recorded


@contextlib.contextmanager
def _open_place(store: Store, place: str, redis_url: str | None, named: str | None = None, *,
                look: bool = False) -> Iterator[ShortTermWindow | None]:
    """A window of `store` at `place` for the block (None with `look`: only check that it answers).

    Raises:
        NoAnswer: nothing answers there (only this may let a person call it gone for good).
        WindowError: it could not be opened for another reason (it is not gone).
    """
    read = read_place(place)
    if read.kind == WORKSPACE:  # the redis-server an older memkit kept beside the store
        if _folder_gone(read.folder):
            raise NoAnswer(f"its folder {read.folder} is not there: removed for good, or moved (renamed, on a disk "
                           "not mounted), where its append-only file would still hold turns. If it moved, put it "
                           f"back; if it is gone for good, name it: --window-gone {read.folder}")
        raise WindowError(f"its folder still exists: {read.folder} is the window folder of an older memkit, whose "
                          "redis-server this memkit no longer starts, and its append-only file may hold turns. Remove "
                          f"the folder if it is meant to go, then name it with --window-gone {read.folder}")
    if read.kind != REDIS:
        raise WindowError("this memkit does not know that kind of window place")
    url = _redis_url(read.url, redis_url, named)
    try:
        handle = connect_redis(url)
    except WindowError as exc:
        if _nothing_listens(exc):
            raise NoAnswer(f"nothing answers at {display_url(url)} ({exc.__context__})") from None
        raise WindowError(f"Redis at {display_url(url)} answers but refuses this shell ({exc.__context__}); set "
                          "REDIS_URL with its password, or wait until it has loaded its data") from None
    try:
        if look:
            yield None
        else:
            with RedisWindow(store, handle.client, prefix=read.prefix, background=False,
                             accept_eviction=True) as window:
                yield window
    finally:
        handle.close()


def _folder_gone(folder: str) -> bool:
    """True only when nothing is at the folder's path (a symlink whose target is missing is there)."""
    try:
        os.lstat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return True
    return False
