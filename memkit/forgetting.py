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

A window gone for good would block that forever, so a person may name it gone (`gone=`,
`memkit forget-user --window-gone PLACE`, or `drop_window`, `memkit windows --drop PLACE`); it is
dropped from the store's record, with a note in the result, only if nothing answers there: a Redis
server that refuses the connection (or whose host or socket file is unknown), a workspace window
whose folder is not there. Never by itself: a retired server cannot be told from one that is only
down, nor a removed workspace folder from one that was moved, renamed or is on a disk not mounted
(its append-only file would still hold the turns). A server that answers and refuses this shell (a
password, still loading, a timeout) is there, and blocks.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
from typing import Any
from collections.abc import Iterable, Iterator

from .errors import MemkitError, WindowError
from .store import Store
from .window import RedisWindow, ShortTermWindow, connect_redis
from .window.places import REDIS, WORKSPACE, describe, read_place, server_url
from .servers.redis_client import client_for, display_url, redis_module
from .servers.workspace import DEFAULT_WAIT_S, WorkspaceRedis

__all__ = ["ForgetIncomplete", "drop_window", "find_place", "forget_user", "window_status"]


class ForgetIncomplete(WindowError):
    """Some of the user's traces could not be reached, or were still there afterwards."""


class NoAnswer(WindowError):
    """Nothing answers at a window place: the connection was refused, the host is unknown, or the
    socket file is missing. Only this may let a person's "gone for good" through: a server that
    answers but refuses this shell (a password, still loading, a timeout) may hold turns."""


def forget_user(store: Store, user: str, *, windows: Iterable[ShortTermWindow] = (),
                places: Iterable[str] = (), gone: Iterable[str] = (), redis_url: str | None = None,
                wait: float = DEFAULT_WAIT_S) -> dict[str, Any]:
    """Remove `user` from every window of `store` and from the store; check that nothing is left.

    Args:
        store: the long-term store; its recorded window places (`Store.window_places`) are
            all visited.
        user: whose memory goes.
        windows: open windows to clear too (an in-process window, a window on a client of yours).
        places: more places to visit (`memkit.window.places`), e.g. a window opened before its
            store recorded places.
        gone: places a person says are gone for good (each named as `find_place` accepts; a Redis
            URL is probed with its password): each is skipped only if nothing answers there
            (`NoAnswer`: connection refused, unknown host, missing socket file, no folder), and
            dropped from the store's record with the rest; one that answers, or refuses this shell,
            blocks the forgetting like any window that cannot be cleared.
        redis_url: the `REDIS_URL` of this shell, used (with its password) for a recorded Redis
            place that names the same server; other Redis places are reached at their recorded
            URL. Default: the `REDIS_URL` environment variable.
        wait: seconds to wait for a workspace window's lock or stalled server.

    Returns:
        {"user", "removed": the store's counts plus (when a window was reached) `redis_keys` and
        `window_turns`, "left": all zero,
        "windows": [{"window": described place, "window_turns": n, "redis_keys": n}, ...],
        "dropped_windows": [{"window": described place, "why": ...}, ...]: the places gone for good,
        no longer recorded (in the same transaction as the store's part of the forgetting),
        "skipped_windows": the same for places named gone that the store had not recorded (given in
        `places`): skipped, nothing dropped}

    Raises:
        ForgetIncomplete: a recorded window could not be reached, a place named in `gone` included
            when something there refused this shell (then nothing was removed), a place
            judged gone was noted again by a window opened there meanwhile (the windows were cleared,
            the store was left as it was), or traces were left afterwards (the message names them).
        WindowError: a place named in `gone` is not recorded, or still answers (or is a workspace
            whose folder still exists); nothing was removed.
        ValidationError: a malformed user id.
    """
    store.limits.check_id("user", user)
    redis_url = redis_url if redis_url is not None else (os.environ.get("REDIS_URL") or None)
    # When each recorded place was last noted, read before any is judged: a place judged gone is
    # dropped only if no window noted it again meanwhile (a chat opening it anew).
    noted = store.window_places_noted()
    wanted = list(dict.fromkeys([*noted, *places]))
    # A place named by its URL is probed with that URL's password (it is not part of the place).
    named_gone: dict[str, str | None] = {}
    for name in gone:
        named_gone[find_place(store, name, wanted)] = name if "://" in name else None
    for place in named_gone:
        _refuse_existing_folder(place)
    with contextlib.ExitStack() as opened:
        reached: list[tuple[str, ShortTermWindow]] = []
        unreachable: list[str] = []
        dropped: dict[str, str] = {}
        for place in wanted:
            try:
                window = opened.enter_context(_open_place(store, place, redis_url, wait, named_gone.get(place)))
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
            reached.append((describe(place), window))
        reached += [(repr(window), window) for window in windows]
        if unreachable:
            raise ForgetIncomplete(
                f"user {user!r} was NOT forgotten: {len(unreachable)} of the store's windows could not be reached, "
                "and a window that still holds their turns would give them back. " + "; ".join(unreachable)
                + ". Nothing was removed anywhere. Make each reachable (start its server; set REDIS_URL with its "
                "password in this shell; put a moved workspace folder back) and run forget-user again; a window gone "
                "for good (a retired Redis server, a removed workspace folder): name it with --window-gone PLACE "
                "(`memkit windows` lists the places)")
        removed: dict[str, int] = {"redis_keys": 0, "window_turns": 0} if reached else {}
        report_windows = []
        for name, window in reached:
            cleared = window.clear_user(user)
            report_windows.append({"window": name, **cleared})
            for key, count in cleared.items():
                removed[key] = removed.get(key, 0) + count
        skipped = {place: why for place, why in dropped.items() if place not in noted}
        dropped = {place: why for place, why in dropped.items() if place in noted}
        with store.transaction():  # the store's part and the dropped places: both or neither
            removed = {**store.forget_user(user), **removed}
            for place in dropped:
                if not store.drop_window_place(place, noted_at=noted[place]):
                    raise ForgetIncomplete(
                        f"user {user!r} was NOT forgotten in the store: {describe(place)} was named gone for good, "
                        "but a window was opened there while forgetting ran (it was noted again), and it may hold "
                        "their turns. The store was left as it was; run forget-user again")
        left: dict[str, int] = dict(store.traces(user))
        if reached:
            left["window_turns"] = sum(window.user_turns(user) for _, window in reached)
    if any(left.values()):
        raise ForgetIncomplete(f"user {user!r} is not fully forgotten: {json.dumps(left)} remain")
    return {"user": user, "removed": removed, "left": left, "windows": report_windows,
            "dropped_windows": [{"window": describe(place), "why": why} for place, why in dropped.items()],
            "skipped_windows": [{"window": describe(place), "why": why} for place, why in skipped.items()]}


REFUSES_NAMED = (" (named gone for good, but it is there: something answered and refused this shell, so it may "
                 "still hold turns; give its password in the named URL or in REDIS_URL, or wait until it has "
                 "loaded, and run again)")
"""Why a place a person named gone was not dropped: only a place where nothing answers may be."""

FOLDER_GONE = ("named gone for good by a person, and its folder no longer exists there, so neither does the "
               "append-only file that held its turns; no longer recorded")
"""Why a workspace window's place was dropped: a person said so, and its folder is not there."""


def _why_gone(place: str, exc: Exception) -> str:
    """What showed a place a person named gone for good to be gone."""
    if _kind(place) == WORKSPACE:
        return FOLDER_GONE
    return f"named gone for good by a person; it did not answer ({exc})"


def find_place(store: Store, name: str, extra: Iterable[str] = ()) -> str:
    """The recorded window place a person named: its JSON text, a Redis URL (any password is ignored),
    or a workspace window's folder.

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
        # Recorded folders are resolved (`workspace_place`), so a name through a symlink matches;
        # the plain absolute path too, for a folder whose symlink is gone.
        path = os.path.expanduser(name)
        return read.folder in (os.path.abspath(path), os.path.realpath(path))
    return False


def window_status(store: Store, *, redis_url: str | None = None) -> list[dict[str, Any]]:
    """Every window place the store recorded, and whether each is there now; it only looks.

    Each entry: {"place": the JSON text (what `find_place` takes), "window": described, "kind",
    "state", and "error" for all but the first two states}. States: "answers" (a Redis server that
    replied to a ping), "folder present" (a workspace window's folder: forgetting starts its server
    to clear it), "gone or moved" (a workspace folder that is not there: removed, or moved; dropped
    only when a person names it), "no answer" (nothing answers at a Redis place), "refuses" (a Redis
    server that answers and refuses this shell, or a folder that cannot be looked at).

    Nothing is started, archived or written: a Redis place gets a ping, a workspace a look at its
    folder.
    """
    redis_url = redis_url if redis_url is not None else (os.environ.get("REDIS_URL") or None)
    report = []
    for place in store.window_places():
        entry: dict[str, Any] = {"place": place, "window": describe(place), "kind": _kind(place)}
        try:
            read = read_place(place)
            if read.kind == WORKSPACE:
                _check_folder(read.folder)
                entry["state"] = "folder present"
            elif read.kind == REDIS:
                _probe_redis(_redis_url(read.url, redis_url, None))
                entry["state"] = "answers"
            else:
                raise WindowError("this memkit does not know that kind of window place")
        except NoAnswer as exc:
            entry.update(state="gone or moved" if entry["kind"] == WORKSPACE else "no answer", error=str(exc))
        except (MemkitError, OSError) as exc:
            entry.update(state="refuses", error=str(exc))
        report.append(entry)
    return report


def drop_window(store: Store, name: str, *, redis_url: str | None = None,
                wait: float = DEFAULT_WAIT_S) -> dict[str, Any]:
    """Stop recording a window place gone for good, so forgetting a user no longer waits for it.

    Dropped only if nothing answers there (`NoAnswer`; a Redis URL in `name` is probed with its
    password). Refused for a place that still answers or refuses this shell (it may hold turns),
    for a workspace window whose folder still exists (its append-only file may hold turns even with
    no server running: remove the folder, or make it answer and forget through it), and for a place
    a window noted again while it was being judged.

    Returns:
        {"dropped": described place, "place": its JSON text, "why": what showed it is gone}

    Raises:
        WindowError: the name matches no recorded place or several, or the place is not gone;
            nothing was changed.
    """
    redis_url = redis_url if redis_url is not None else (os.environ.get("REDIS_URL") or None)
    noted = store.window_places_noted()  # before it is judged: see forget_user
    place = find_place(store, name)
    _refuse_existing_folder(place)
    try:
        with _open_place(store, place, redis_url, wait, name if "://" in name else None):
            pass
    except NoAnswer as exc:
        why = _why_gone(place, exc)
    except (MemkitError, OSError) as exc:
        raise WindowError(f"{describe(place)}: {exc}{REFUSES_NAMED}. Nothing was changed") from None
    else:
        raise WindowError(f"{describe(place)} answers, so it is not gone: it may hold turns that forgetting "
                          "must clear. Nothing was changed")
    if place not in noted or not store.drop_window_place(place, noted_at=noted[place]):
        raise WindowError(f"{describe(place)} was dropped meanwhile, or a window was opened there meanwhile (it was "
                          "noted again): nothing was changed. Run `memkit windows` to see it now")
    return {"dropped": describe(place), "place": place, "why": why}


def _refuse_existing_folder(place: str) -> None:
    """Refuse to call a workspace window gone while its folder (and so perhaps its turns) exists."""
    try:
        read = read_place(place)
    except WindowError as exc:
        raise WindowError(f"{exc}. Nothing was changed") from None
    if read.kind == WORKSPACE and not _folder_gone(read.folder):
        raise WindowError(f"{describe(place)} is not gone: its folder still exists, and its append-only file may "
                          "hold turns even with no server running. Remove the folder if it is meant to go, or let "
                          "forgetting clear it. Nothing was changed")


def _folder_gone(folder: str) -> bool:
    """True only when nothing is at the folder's path (a folder that cannot be looked at is not gone,
    nor a symlink whose target is missing: lstat, not stat)."""
    try:
        os.lstat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return True
    return False


def _check_folder(folder: str) -> None:
    """Raise unless `folder` is a folder this shell can open a workspace window in.

    Raises:
        NoAnswer: nothing is at its path (removed, or moved: not proof of either).
        WindowError: something is there that is not a usable folder (a broken symlink, one that
            cannot be read): not gone.
    """
    if _folder_gone(folder):
        raise NoAnswer(f"its folder {folder} is not there: removed for good, or moved (renamed, on a disk not "
                       "mounted), where its append-only file would still hold turns. If it moved, put it back; "
                       f"if it is gone for good, name it: --window-gone {folder}")
    try:
        info = os.stat(folder)
    except OSError as exc:
        raise WindowError(f"{folder} cannot be looked at ({exc.strerror}): a symlink whose target is missing, or "
                          "a folder this shell may not read; make it reachable") from None
    if not stat.S_ISDIR(info.st_mode):
        raise WindowError(f"{folder} is not a folder (a workspace window's folder was recorded there)")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise WindowError(f"{folder} cannot be read by this shell (permission denied); run as its owner")


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


def _probe_redis(url: str) -> None:
    """Ping the server at `url` with its credentials.

    Raises:
        NoAnswer: nothing is there (refused, unknown host, missing socket file).
        WindowError: something is there and refused (a password, LOADING, a timeout): not gone.
    """
    redis = redis_module()
    client = client_for(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        if _nothing_listens(exc):
            raise NoAnswer(f"nothing answers at {display_url(url)} ({exc})") from None
        raise WindowError(f"Redis at {display_url(url)} answers but refuses this shell ({exc}); set REDIS_URL "
                          "with its password, or wait until it has loaded its data") from None
    finally:
        client.close()


def _redis_url(recorded: str, redis_url: str | None, named: str | None) -> str:
    """The URL to reach a recorded Redis place (at the `recorded` URL) with: the one a person named
    (with its password), else this shell's REDIS_URL when it names the same server, else `recorded`."""
    for url in (named, redis_url):
        with contextlib.suppress(WindowError):
            if url and server_url(url) == recorded:
                return url
    return recorded


@contextlib.contextmanager
def _open_place(store: Store, place: str, redis_url: str | None, wait: float,
                named: str | None = None) -> Iterator[ShortTermWindow]:
    """A window of `store` at `place` for the block.

    Raises:
        NoAnswer: nothing answers there (only this may let a person call it gone for good).
        WindowError, OSError: it could not be opened for another reason (it is not gone).
    """
    read = read_place(place)
    handle: Any
    if read.kind == WORKSPACE:
        _check_folder(read.folder)
        handle = WorkspaceRedis(read.folder, wait=wait)
    elif read.kind == REDIS:
        url = _redis_url(read.url, redis_url, named)
        _probe_redis(url)
        handle = connect_redis(url)
    else:
        raise WindowError("this memkit does not know that kind of window place")
    try:
        with RedisWindow(store, handle.client, prefix=read.prefix, background=False, accept_eviction=True) as window:
            yield window
    finally:
        handle.close()
