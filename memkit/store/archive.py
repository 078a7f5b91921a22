"""The transcript archive: turns that left a session's short-term window, kept exactly once.

Keyed by (user, session, turn number), so archiving the same turn twice (a retry after a crash)
stores it once. A turn number already kept with other content is a conflict, refused with an
`ArchiveConflictError`, never skipped: two different turns under one number means a counter went
back (a Redis restored from an older state), and skipping would drop one of them silently. The
window archives into it; `load_session` reads it back (see `memkit.transcript`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from collections.abc import Iterable, Mapping

from ..errors import StoreError, ValidationError
from ..limits import check_text
from ..transcript import TURN_ROLES, Turn

if TYPE_CHECKING:
    from .backend import Backend


def turn_rows(user: str, session: str, turns: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """The archive rows of `turns`, each checked; ValidationError (naming the turn's problem) if one is malformed."""
    try:
        turns = list(turns)
    except TypeError:
        raise ValidationError(f"turns must be a list of turn dicts, not {type(turns).__name__}") from None
    rows = []
    for t in turns:
        if not isinstance(t, dict):
            raise ValidationError(f"a turn must be a dict with turn, role, content, at; got {type(t).__name__}")
        number, role, content, at = t.get("turn"), t.get("role"), t.get("content"), t.get("at")
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise ValidationError(f"turn number {number!r} is not a positive integer")
        if role not in TURN_ROLES:
            raise ValidationError(f"turn role {role!r} is unknown; use one of {', '.join(TURN_ROLES)}")
        if not isinstance(content, str) or not isinstance(at, str):
            raise ValidationError("turn content and at must be strings")
        check_text("turn content", content)
        rows.append((user, session, number, role, content, at))
    return rows


class ArchiveConflictError(StoreError):
    """Turn numbers of a session are already archived with other content; nothing was archived.

    Attributes:
        user, session: the session.
        turns: the conflicting turn numbers, ascending.
    """

    def __init__(self, user: str, session: str, turns: list[int]) -> None:
        self.user, self.session, self.turns = user, session, turns
        shown = ", ".join(map(str, turns[:10])) + (", ..." if len(turns) > 10 else "")
        super().__init__(
            f"turn {shown} of {user}/{session} is already archived with different content; nothing of "
            "this call was archived. Give the new turn a number the session has not used"
        )


def archive_rows(db: Backend, rows: list[tuple[Any, ...]]) -> int:
    """Insert checked rows in one transaction, skipping turns already kept with the same role,
    content and time; return how many were new.

    Raises:
        ArchiveConflictError: a turn number is kept with other content (or given twice with
            different content); the transaction is rolled back, nothing is archived.
    """
    with db.transaction() as conn:
        added = db.changed(conn, "INSERT INTO transcript (user_id, session_id, turn, role, content, at)"
                                 " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", rows)
        if added != len(rows):  # a turn was skipped: it was kept before, perhaps with other content
            conflicts = sorted({row[2] for row in rows if tuple(conn.execute(
                "SELECT role, content, at FROM transcript WHERE user_id = ? AND session_id = ? AND turn = ?",
                row[:3]).fetchone()) != tuple(row[3:])})
            if conflicts:
                raise ArchiveConflictError(rows[0][0], rows[0][1], conflicts)
        db.check_size(conn)
    return added


def archived_turns(db: Backend, user: str, session: str) -> list[Turn]:
    """The archived turns of one session, in turn order."""
    rows = db.fetch(
        "SELECT turn, role, content, at FROM transcript WHERE user_id = ? AND session_id = ? ORDER BY turn",
        (user, session),
    )
    return [Turn(turn=row["turn"], role=row["role"], content=row["content"], at=row["at"]) for row in rows]


def last_archived_turn(db: Backend, user: str, session: str) -> int:
    """The highest archived turn number of one session (0 if none), read from the key alone."""
    rows = db.fetch("SELECT max(turn) FROM transcript WHERE user_id = ? AND session_id = ?", (user, session))
    return int(rows[0][0] or 0)
