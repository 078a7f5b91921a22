"""What one window instance knows about the turn numbers already taken, per session.

Redis hands out turn numbers (one counter per session), but Redis can come back older than the
archive (an RDB snapshot, the last second of an AOF lost): its counter then points at numbers the
archive already holds. The archive is the durable record, so an instance reads the archive's
highest number the first time it numbers a session on a server, remembers every number it hands
out since, and passes that floor with each append; the append script moves a counter that is
behind it. The knowledge belongs to one life of the server: the script compares the server's
run_id with `run_id` and refuses knowledge from an earlier life, and `restarted` forgets it all.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

REMEMBERED_SESSIONS = 10_000
"""Sessions one instance remembers (least recently used are forgotten: their next append reads the
archive again)."""


class TakenNumbers:
    """The highest turn number taken in each session, as far as this instance knows, on one server life.

    Args:
        archived_max: reads the archive's highest turn number of (user, session).
    """

    def __init__(self, archived_max: Callable[[str, str], int]) -> None:
        self._archived_max = archived_max
        self._taken: collections.OrderedDict[tuple[str, str], int] = collections.OrderedDict()
        self.run_id = ""
        """The server life (Redis `run_id`) the remembered numbers belong to."""

    def floor(self, user: str, session: str, *, read_archive: bool = False) -> tuple[int, bool]:
        """The highest number known taken in the session, and whether the archive was read for it
        just now (when asked, and the first time this instance numbers the session on this server)."""
        key = (user, session)
        fresh = read_archive or key not in self._taken
        if fresh:
            self._taken[key] = max(self._taken.get(key, 0), self._archived_max(user, session))
        self._taken.move_to_end(key)
        if len(self._taken) > REMEMBERED_SESSIONS:
            self._taken.popitem(last=False)
        return self._taken[key], fresh

    def handed_out(self, user: str, session: str, number: int) -> None:
        """Remember a number the append script gave (it is past the floor it was given)."""
        self._taken[(user, session)] = max(number, self._taken.get((user, session), 0))

    def restarted(self, run_id: str) -> None:
        """The server restarted (maybe from an older state): forget every number known on the old one."""
        self.run_id = run_id
        self._taken.clear()

    def forget_user(self, user: str) -> None:
        """Forget what is known about `user`'s sessions (they were removed)."""
        for key in [key for key in self._taken if key[0] == user]:
            del self._taken[key]
