"""MemoryStore's transcript archive against a real SQLite file: idempotent by (user, session, turn),
bad turns refused.

Every test uses a real file under tmp_path.
"""

from __future__ import annotations


import pytest

from _store_helpers import snapshot
from memkit.errors import ValidationError
from memkit.store.archive import ArchiveConflictError


pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend


# -- archive of turns -----------------------------------------------------------------------------


def test_a_batch_with_a_conflicting_turn_archives_nothing(clocked):
    first = {"turn": 1, "role": "user", "content": "hello", "at": "t1"}
    clocked.archive_turns("alice", "s1", [first])
    new = {"turn": 2, "role": "assistant", "content": "hi", "at": "t2"}
    before = snapshot(clocked)
    with pytest.raises(ArchiveConflictError) as caught:
        clocked.archive_turns("alice", "s1", [new, {**first, "at": "t9"}, {**new, "turn": 3}])
    assert caught.value.turns == [1] and snapshot(clocked) == before
    with pytest.raises(ArchiveConflictError, match="turn 4 of alice/s1"):  # one number twice in one call
        clocked.archive_turns("alice", "s1", [{**new, "turn": 4}, {**new, "turn": 4, "content": "other"}])
    assert snapshot(clocked) == before


def test_archive_is_idempotent_by_user_session_and_turn(clocked):
    turns = [{"turn": n, "role": role, "content": f"turn {n}", "at": f"t{n}"}
             for n, role in ((1, "user"), (2, "assistant"), (3, "tool"))]
    assert clocked.archive_turns("alice", "s1", turns[:2]) == 2
    assert clocked.archive_turns("alice", "s1", turns) == 1  # a retry after a crash: only turn 3 is new
    assert clocked.archive_turns("alice", "s1", turns) == 0
    with pytest.raises(ArchiveConflictError, match="turn 1 of alice/s1 is already archived with different content"):
        clocked.archive_turns("alice", "s1", [turns[2], {**turns[0], "content": "rewritten"}])  # never skipped
    assert clocked.archived_turns("alice", "s1") == turns
    assert clocked.archived_turns("alice", "s2") == []
    assert clocked.archived_turns("bob", "s1") == []  # same session id, another user: nothing
    assert clocked.archive_turns("bob", "s1", turns[:1]) == 1
    assert clocked.archived_turns("bob", "s1") == turns[:1]
    assert clocked.archived_turns("alice", "s1") == turns


@pytest.mark.parametrize(
    ("turn", "words"),
    [
        ({"turn": 0, "role": "user", "content": "c", "at": "t"}, "positive integer"),
        ({"turn": True, "role": "user", "content": "c", "at": "t"}, "positive integer"),
        ({"turn": 2, "role": "system", "content": "c", "at": "t"}, "role 'system'"),
        ({"turn": 2, "role": "user", "content": None, "at": "t"}, "must be strings"),
        ({"turn": 2, "role": "user", "content": "a\x00", "at": "t"}, "NUL"),
        ("not a dict", "must be a dict"),
        (None, "must be a dict"),
    ],
)
def test_archive_refuses_a_bad_turn_and_keeps_none_of_the_call(clocked, turn, words):
    good = {"turn": 1, "role": "user", "content": "hello", "at": "t"}
    before = snapshot(clocked)
    with pytest.raises(ValidationError, match=words):
        clocked.archive_turns("alice", "s1", [good, turn])
    assert snapshot(clocked) == before


def test_last_archived_turn_is_the_highest_turn_of_that_session_only(store):
    assert store.last_archived_turn("alice", "s1") == 0
    store.archive_turns("alice", "s1", [{"turn": n, "role": "user", "content": "x", "at": "t"} for n in (1, 2, 7)])
    store.archive_turns("alice", "s2", [{"turn": 9, "role": "user", "content": "x", "at": "t"}])
    store.archive_turns("bob", "s1", [{"turn": 12, "role": "user", "content": "x", "at": "t"}])
    assert store.last_archived_turn("alice", "s1") == 7
