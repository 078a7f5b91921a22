"""A conversation's turns: what a turn is, its roles, and how turn lists from several places are joined.

A turn lives in the short-term window while it is recent and in the store's transcript archive
once it has left the window; both hand it out in this shape, and `merge_turns` joins them.
"""

from __future__ import annotations

from typing import TypedDict

TURN_ROLES = ("user", "assistant", "tool")
"""The roles a turn may have."""


class Turn(TypedDict):
    """One turn of a conversation, as the window, the archive and `load_session` hand it out."""

    turn: int
    role: str
    content: str
    at: str


def merge_turns(*sources: list[Turn]) -> list[Turn]:
    """Join turn lists, keeping the first copy of each turn number, in turn order."""
    seen: dict[int, Turn] = {}
    for source in sources:
        for turn in source:
            seen.setdefault(turn["turn"], turn)
    return [seen[number] for number in sorted(seen)]
