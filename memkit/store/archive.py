"""The transcript archive: turns that left a session's short-term window, kept exactly once.

Keyed by (user, session, turn number), so archiving the same turn twice (a retry after a crash)
stores it once. A turn number already kept with other content is a conflict, refused with an
`ArchiveConflictError`, never skipped: two different turns under one number means a counter went
back (a Redis restored from an older state), and skipping would drop one of them silently. The
window archives into it through `Store.archive_turns` (sessions.py), which checks turns here.

Each user keeps at most `Limits.max_archived_turns_per_user` turns, over all their sessions: a
write past it removes the user's oldest (`trim_oldest`), so one conversation cannot fill the store.
The store's own window holds as many of a user's recent turns at most (`stale_windows`).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Iterable, Mapping

from ..errors import StoreError, ValidationError
from ..limits import check_text
from ..transcript import TURN_ROLES


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


def rows_to_insert(conn: Any, rows: list[tuple[Any, ...]], bound: int) -> tuple[list[tuple[Any, ...]],
                                                                                 set[tuple[str, int]], int]:
    """Read inside the write's transaction, before the insert: the `rows` (one session's, from
    `turn_rows`) worth inserting, the (session, turn) of those the archive does not hold yet, and
    how many turns the user's archive holds (`held_turns`; 0 when `rows` is empty: nothing is read).

    A user at `bound` keeps only turns newer than every turn removed (`trim_oldest`): a row older
    than the oldest kept was removed before (a retry) or would be at once, so it is left out.
    """
    if not rows:
        return rows, set(), 0
    user, session = rows[0][0], rows[0][1]
    count = held_turns(conn, user, bound - len(rows))
    if count >= bound:  # the user's oldest turn takes a sort of all their turns: read only at the bound
        oldest = tuple(conn.execute("SELECT at, session_id, turn FROM transcript WHERE user_id = ?"
                                    " ORDER BY at, session_id, turn LIMIT 1", (user,)).fetchone())
        rows = [row for row in rows if (row[5], row[1], row[2]) >= oldest]
    numbers = [row[2] for row in rows] or [0]
    held = {int(row[0]) for row in conn.execute(
        "SELECT turn FROM transcript WHERE user_id = ? AND session_id = ? AND turn >= ? AND turn <= ?",
        (user, session, min(numbers), max(numbers))).fetchall()}
    return rows, {(session, row[2]) for row in rows if row[2] not in held}, count


_CEILING = """
WITH RECURSIVE hop(session_id, n) AS (
    SELECT (SELECT min(session_id) FROM transcript WHERE user_id = ?), 1
    UNION ALL
    SELECT (SELECT min(session_id) FROM transcript WHERE user_id = ? AND session_id > hop.session_id), n + 1
    FROM hop WHERE hop.session_id IS NOT NULL AND n <= ?)
SELECT count(*), coalesce(sum((SELECT max(turn) FROM transcript WHERE user_id = ? AND session_id = hop.session_id)), 0)
FROM hop WHERE session_id IS NOT NULL"""  # plain ?, as PostgreSQL's adapter takes them: (user, user, hops, user)
_HOPS = 8
_COUNTED = 256  # up to this bound (the default is 64), counting every turn costs less than hopping


def held_turns(conn: Any, user: str, room: int) -> int:
    """How many turns `user`'s archive holds, or, when that proves it holds at most `room`, a number
    at least that (the caller then needs neither the oldest turn nor a trim).

    A session's turns are distinct numbers from 1, so its largest bounds its count: hopping along
    the key from session to session (a few index seeks for each of at most `_HOPS` sessions) bounds
    the user's count without reading their turns (10 µs for one session, against 50 µs to count
    1,000 turns). A user near the bound, with more sessions, or under a small bound is counted.
    """
    if room > _COUNTED:
        sessions, ceiling = conn.execute(_CEILING, (user, user, _HOPS, user)).fetchone()
        if sessions <= _HOPS and ceiling <= room:
            return int(ceiling)
    return int(conn.execute("SELECT count(*) FROM transcript WHERE user_id = ?", (user,)).fetchone()[0])


def trim_oldest(conn: Any, user: str, bound: int, inserted: set[tuple[str, int]], count: int) -> int:
    """Inside the write's transaction: remove `user`'s oldest archived turns past `bound`; return how
    many of `inserted` (this write's new turns, `rows_to_insert`) went again at once. `count`: the
    turns the user's archive holds now (`rows_to_insert`'s count plus the rows just inserted).

    Oldest by (time, session, turn), a total order that never changes: while a user is at the bound
    every turn removed is older than every turn kept, so a turn archived again (a window's retry after
    a crash) is always among the first removed, in the same call. It never comes back, nor counts as new.
    """
    if count <= bound:
        return 0
    doomed = [(str(row[0]), int(row[1])) for row in conn.execute(
        "SELECT session_id, turn FROM transcript WHERE user_id = ? ORDER BY at, session_id, turn LIMIT ?",
        (user, count - bound)).fetchall()]
    conn.executemany("DELETE FROM transcript WHERE user_id = ? AND session_id = ? AND turn = ?",
                     [(user, session, turn) for session, turn in doomed])
    return len(inserted.intersection(doomed))


def stale_windows(conn: Any, user: str, session: str, bound: int) -> list[str]:
    """The sessions of `user` (never `session`, being written) whose store windows (`window_turns`)
    retire into the archive now, least recently written first, so the user's windows hold at most
    `bound` turns again: one user opening session after session cannot fill the store either."""
    held = int(conn.execute("SELECT count(*) FROM window_turns WHERE user_id = ?", (user,)).fetchone()[0])
    stale: list[str] = []
    for other, turns in conn.execute(
            "SELECT session_id, count(*) FROM window_turns WHERE user_id = ? AND session_id <> ? GROUP BY session_id"
            " ORDER BY max(at), session_id", (user, session)).fetchall() if held > bound else []:
        if held <= bound:
            break
        stale.append(str(other))
        held -= int(turns)
    return stale
