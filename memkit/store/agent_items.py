"""Items of openai-agents sessions, kept whole in the store (`memkit.integrations.openai_agents`).

One row per item, its JSON text as given, numbered per (user, session) in the order added. Unlike the
transcript archive, a framework's session removes items (`pop_item`, `clear_session`), so a number can
be used again after its item was removed; the archive never changes a kept turn. Every statement names
the user. The SQL uses `?` placeholders and runs on both backends (PostgreSQL through `PgConnection`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from collections.abc import Sequence

from ..errors import ValidationError
from ..limits import check_text

if TYPE_CHECKING:
    from .backend import Backend


def check_items(items: Sequence[str]) -> list[str]:
    """The items as a list, each checked to be text SQLite and JSON can carry; ValidationError otherwise."""
    checked = []
    for number, item in enumerate(items, 1):
        if not isinstance(item, str):
            raise ValidationError(f"item {number} must be JSON text, not {type(item).__name__}")
        check_text(f"item {number}", item)
        checked.append(item)
    return checked


def append(db: Backend, conn: Any, user: str, session: str, items: list[str], at: str) -> int:
    """Inside the caller's transaction: add `items` after the session's last one; returns the last number."""
    last = conn.execute("SELECT coalesce(max(position), 0) FROM agent_items WHERE user_id = ? AND session_id = ?",
                        (user, session)).fetchone()[0]
    conn.executemany("INSERT INTO agent_items (user_id, session_id, position, item, at) VALUES (?, ?, ?, ?, ?)",
                     [(user, session, last + n, item, at) for n, item in enumerate(items, 1)])
    db.check_size(conn)
    return int(last) + len(items)


def read(db: Backend, user: str, session: str, limit: int | None) -> list[str]:
    """The session's items in the order added; with `limit`, only the last `limit` of them."""
    if limit is None:
        rows = db.fetch("SELECT item FROM agent_items WHERE user_id = ? AND session_id = ? ORDER BY position",
                        (user, session))
        return [row[0] for row in rows]
    rows = db.fetch("SELECT item FROM agent_items WHERE user_id = ? AND session_id = ?"
                    " ORDER BY position DESC LIMIT ?", (user, session, limit))
    return [row[0] for row in reversed(rows)]


def pop(conn: Any, user: str, session: str) -> str | None:
    """Inside the caller's transaction: remove and return the session's last item (None if it has none)."""
    row = conn.execute("SELECT position, item FROM agent_items WHERE user_id = ? AND session_id = ?"
                       " ORDER BY position DESC LIMIT 1", (user, session)).fetchone()
    if row is None:
        return None
    conn.execute("DELETE FROM agent_items WHERE user_id = ? AND session_id = ? AND position = ?",
                 (user, session, row[0]))
    return str(row[1])


def clear(conn: Any, user: str, session: str) -> int:
    """Inside the caller's transaction: remove every item of the session; returns how many."""
    return int(conn.execute("DELETE FROM agent_items WHERE user_id = ? AND session_id = ?",
                            (user, session)).rowcount)
