"""Consolidation on every backend: the same archived turns give the same proposals, nothing applied.

The conformance suite runs each test on SQLite and on PostgreSQL (with and without pg_trgm), so
`memkit consolidate --db postgresql://...` proposes as it does on a file.
"""

from __future__ import annotations

import pytest

from _store_helpers import open_store
from memkit.consolidation import consolidate
from memkit.errors import ValidationError

pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend

SAID = ["I live in Lisbon", "answer in French this time", "I'm vegetarian", "I moved to Porto"]


def archived(store, user: str = "sam", session: str = "s1") -> None:
    turns = []
    for n, text in enumerate(SAID):
        turns += [{"turn": 2 * n + 1, "role": "user", "content": text, "at": f"2026-01-01T09:00:0{n}.000000Z"},
                  {"turn": 2 * n + 2, "role": "assistant", "content": "ok", "at": f"2026-01-01T09:00:0{n}.500000Z"}]
    store.archive_turns(user, session, turns)


def test_a_finished_session_becomes_proposals_and_no_memory(tmp_path):
    with open_store(tmp_path / "memory.sqlite3") as store:
        archived(store)
        done = consolidate(store, "sam", "s1")
        assert [(p["key"], p["value"]) for p in done.proposed][:2] == [("diet", "vegetarian"), ("city", "Porto")]
        assert done.proposed[2]["key"] == "session.s1"
        assert done.proposed[2]["value"] == ("Session s1 on 2026-01-01, 4 messages from the person. Told: city Porto "
                                             "(changed from Lisbon), diet vegetarian. 1 instruction for that time "
                                             "only, not kept. Ended with: 'ok'")
        assert store.records("sam") == [] and len(store.proposals("sam")) == 3
        assert consolidate(store, "sam", "s1").proposed == []  # run again: the same three still wait


def test_another_users_session_is_not_read(tmp_path):
    with open_store(tmp_path / "memory.sqlite3") as store:
        archived(store)
        with pytest.raises(ValidationError, match="Nothing was proposed"):
            consolidate(store, "bob", "s1")
        assert store.proposals("bob") == [] and len(store.proposals("sam")) == 0
