"""How the inspector opens a database and what it reads from it, as plain functions of a store.

Opening must not change a database: a path or URL is opened read-only unless editing is asked for,
and never created (`open_store(..., read_only=True)`; see `memkit.store`).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..limits import shorten
from ..store import Record, Store, open_store
from ..store.targets import postgres_conninfo
from ..validators import import_jsonschema
from ._support import pandas as _pandas

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed

    from ..window import ShortTermWindow

SORTS = ("kind, key", "newest", "key")
"""How the records table can be ordered: by kind then key (the store's order), newest first, by key."""


def open_target(target: str | os.PathLike[str], edit: bool) -> Store:
    """Open an existing database file or a PostgreSQL URL, for writing only when `edit`, with the
    limits the store recorded.

    Raises:
        StoreError: there is no file at the path, or the store cannot be opened.
    """
    conninfo = postgres_conninfo(target) if isinstance(target, str) else None
    if conninfo is None:
        path = Path(target)
        if not path.exists():
            raise StoreError(f"there is no database at {path}; the inspector opens existing files only")
        return open_store(path, read_only=not edit)
    return open_store(conninfo, read_only=not edit, create=False)


def warm_up() -> threading.Thread:
    """Start importing jsonschema in the background, the way the tools import it.

    The first Confirm needs jsonschema, whose import takes seconds with jupyter's format checkers
    installed: started when editing begins, it runs while the person is still choosing what to change.
    """
    thread = threading.Thread(target=import_jsonschema, name="memkit-inspector-warm", daemon=True)
    thread.start()
    return thread


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


ITEM_SHOWN_CHARS = 2000
"""How much of an openai-agents session item's JSON text a table cell shows (an item may be a whole
web page a tool read); the rest is named by the shortening marker, and an export carries it whole."""


def agent_sessions(store: Store, user: str | None) -> pandas.DataFrame:
    """`user`'s openai-agents sessions (`MemkitSession`): items, first and last item time; latest first."""
    rows = store.agent_sessions(user) if user is not None else []
    return _pandas().DataFrame(rows, columns=["session", "items", "first", "last"])


def items(store: Store, user: str | None, session: str) -> pandas.DataFrame:
    """The items of one openai-agents session of `user`, in order: number, type (a message's role, or
    the item's `type`), the item's JSON text (long ones shortened, saying so) and when it was added."""
    rows = []
    for row in store.agent_item_rows(user, session) if user is not None else []:
        try:
            item = json.loads(row["item"])
        except ValueError:  # stored by hand, not by MemkitSession: shown as it is
            item = None
        kind = (item.get("role") or item.get("type")) if isinstance(item, dict) else None
        rows.append({"item": row["position"], "type": str(kind or type(item).__name__),
                     "json": shorten(row["item"], ITEM_SHOWN_CHARS), "at": row["at"]})
    return _pandas().DataFrame(rows, columns=["item", "type", "json", "at"])


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
