"""The bound on a user's openai-agents session items (table `agent_items`): `Limits.max_agent_item_chars_per_user`.

Items are a conversation log the framework reads back, each up to a million characters, so a count
would bound nothing: the bound is on the characters of their JSON texts, per user over all their
sessions. A write past it removes the user's oldest items, as the archive removes its oldest turns
(archive.py), so one user's conversation cannot fill the store and refuse another user's first memory.
A session cut there never starts with a tool's output whose call went (the model's API refuses
one): such items go with their call.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import QuotaError


def trim_agent_items(conn: Any, user: str, bound: int, keep: tuple[str, int] | None = None) -> int:
    """Inside the write's transaction: remove `user`'s oldest session items until their JSON texts
    hold at most `bound` characters together; return how many went.

    Oldest by (time, session, number), over all the user's sessions, as the archive trims its turns.
    `keep`: the write's own items (its session, and the number its first item follows), never removed.

    Raises:
        QuotaError: the kept items alone are past `bound` (the transaction then rolls back).
    """
    total = int(conn.execute("SELECT coalesce(sum(length(item)), 0) FROM agent_items WHERE user_id = ?",
                             (user,)).fetchone()[0])
    if total <= bound:
        return 0
    session, after = keep if keep is not None else ("", 0)
    older = conn.execute("SELECT session_id, position, length(item) FROM agent_items WHERE user_id = ? AND NOT"
                         " (session_id = ? AND position > ?) ORDER BY at, session_id, position",
                         (user, session, after)).fetchall()
    doomed = []
    for row in older:
        if total <= bound:
            break
        doomed.append((user, str(row[0]), int(row[1])))
        total -= int(row[2])
    if total > bound:
        raise QuotaError(f"these items are {total:,} characters of JSON; Limits.max_agent_item_chars_per_user is "
                         f"{bound:,}; nothing of this call was stored. Add fewer or smaller items, or raise it with "
                         "`memkit limits --set max_agent_item_chars_per_user=N --confirm`")
    for cut in {row[1]: row for row in doomed}.values():  # each session's last removed item
        doomed += _orphaned_outputs(conn, user, cut[1], cut[2], keep=after if cut[1] == session else None)
    conn.executemany("DELETE FROM agent_items WHERE user_id = ? AND session_id = ? AND position = ?", doomed)
    return len(doomed)


def _orphaned_outputs(conn: Any, user: str, session: str, cut: int, keep: int | None) -> list[tuple[str, str, int]]:
    """The items of `session` right after position `cut` that are tool outputs (their call went with
    the trimmed items), up to the first that is not; never past `keep` (the write's own items)."""
    gone = []
    for position, text in conn.execute("SELECT position, item FROM agent_items WHERE user_id = ? AND session_id = ?"
                                       " AND position > ? AND position <= ? ORDER BY position",
                                       (user, session, cut, keep if keep is not None else 2**62)):
        try:
            kind = json.loads(text).get("type", "")
        except (ValueError, AttributeError):
            break
        if not (isinstance(kind, str) and kind.endswith("_output")):
            break
        gone.append((user, session, int(position)))
    return gone
