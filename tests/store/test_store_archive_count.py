"""The archive's per-user bound under a large bound, on every backend: a user's count of archived
turns may be bounded from their sessions' highest turn numbers (`archive.held_turns`) instead of
counted turn by turn, and the bound holds exactly either way: every turn kept below it, the oldest
removed past it, a retried turn never counted twice.
"""

from __future__ import annotations

import pytest

from _store_helpers import ACTIVE
from memkit.limits import Limits
from memkit.store.archive import _HOPS, held_turns

pytestmark = pytest.mark.usefixtures("backend")


def _turns(first, last, text="t"):
    return [{"turn": n, "role": "user", "content": f"{text} {n}", "at": f"2026-01-01T00:{n // 60 % 60:02d}:"
             f"{n % 60:02d}.{n:06d}Z"} for n in range(first, last + 1)]


@pytest.mark.parametrize("sessions", [1, _HOPS + 2], ids=["one-session", "more-sessions-than-hops"])
def test_a_large_bound_keeps_every_turn_below_it_and_trims_exactly_past_it(tmp_path, sessions):
    bound = 400
    with ACTIVE[-1].open(tmp_path / "m.sqlite3", limits=Limits(max_archived_turns_per_user=bound,
                                                               max_db_bytes=1 << 28)) as store:
        per = 390 // sessions
        for s in range(sessions):
            assert store.archive_turns("alice", f"s{s}", _turns(1, per)) == per
        held = per * sessions
        assert store.traces("alice")["transcript"] == held
        assert store.archive_turns("alice", "s0", _turns(per - 4, per)) == 0  # a retry: nothing new
        assert store.traces("alice")["transcript"] == held
        added = store.archive_turns("alice", "s0", _turns(per + 1, per + 30))  # past the bound by held + 30 - 400
        assert store.traces("alice")["transcript"] == min(bound, held + 30)
        assert added == 30
        assert [t["turn"] for t in store.archived_turns("alice", "s0")][-1] == per + 30


def test_held_turns_is_the_count_or_a_ceiling_that_proves_room(tmp_path):
    with ACTIVE[-1].open(tmp_path / "m.sqlite3", limits=Limits(max_archived_turns_per_user=10_000,
                                                               max_db_bytes=1 << 28)) as store:
        store.archive_turns("alice", "a", _turns(5, 300))  # 296 turns numbered 5..300: ceiling 300
        store.archive_turns("alice", "b", _turns(1, 20))
        with store.transaction() as conn:
            assert held_turns(conn, "alice", 5_000) == 320  # the ceiling: 300 + 20 >= 316 held
            assert held_turns(conn, "alice", 319) == 316  # no room under the ceiling: counted
            assert held_turns(conn, "alice", 100) == 316  # a small room: counted
            assert held_turns(conn, "nobody", 5_000) == 0
