"""What the inspector reads, as plain functions of a store: a user's records in the order asked,
deleted keys, sessions, and what was said in one session (archive and live window together)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..store import Record, Store
from ._support import pandas as _pandas

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed

    from ..window import ShortTermWindow

SORTS = ("kind, key", "newest", "key")
"""How the records table can be ordered: by kind then key (the store's order), newest first, by key."""


def records(store: Store, user: str, kind: str | None, query: str, sort: str) -> list[Record]:
    """`user`'s records of `kind` (None: any) matching `query` (empty: all), in `sort` order.

    With a query these are the store's own search results (`Store.search`: a literal,
    case-insensitive substring of key or value), at most `Limits.max_search_limit`, the newest.
    """
    if not query:
        found = store.records(user, kind)
    else:
        found = store.search(user, query, limit=store.limits.max_search_limit, kind=kind)
    if sort == "newest":
        return sorted(found, key=lambda r: (r["updated_at"], r["kind"], r["key"]), reverse=True)
    if sort == "key":
        return sorted(found, key=lambda r: (r["key"], r["kind"]))
    return sorted(found, key=lambda r: (r["kind"], r["key"]))


def deleted(store: Store, user: str | None) -> pandas.DataFrame:
    """`user`'s deleted keys (their history ends in a delete), newest first."""
    rows = store.deleted_keys(user) if user is not None else []
    return _pandas().DataFrame(rows, columns=["kind", "key", "value", "revision", "deleted_at", "events"])


def sessions(store: Store, user: str | None, window: ShortTermWindow | None) -> pandas.DataFrame:
    """`user`'s sessions: archived turns (and live ones, when a window is given)."""
    rows = store.sessions(user) if user is not None else []
    if window is not None and user is not None:
        for row in rows:
            row["live turns"] = len(window.recent(user, row["session"]))
    columns = ["session", "turns", "first", "last"] + (["live turns"] if window is not None else [])
    return _pandas().DataFrame(rows, columns=columns)


def turns(store: Store, user: str | None, session: str, window: ShortTermWindow | None) -> pandas.DataFrame:
    """What was said in one session of `user`: archived turns, then the live window's turns not
    archived yet (when a window is given), in turn order."""
    rows: list[dict[str, Any]] = []
    if user is not None:
        archived = store.archived_turns(user, session)
        rows = [{**t, "where": "archive"} for t in archived]
        if window is not None:
            last = max((t["turn"] for t in archived), default=0)
            rows += [{**t, "where": "window"} for t in window.recent(user, session) if t["turn"] > last]
    return _pandas().DataFrame(rows, columns=["turn", "role", "content", "at", "where"])
