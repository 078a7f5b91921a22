"""The per-user bound on openai-agents session items (`Limits.max_agent_item_chars_per_user`), on every backend.

Unbounded, one user's `add_items` filled a 1 MiB store and then another user's first memory was
refused. A write past the bound removes that user's oldest items (every session, by their time)
inside its own transaction, never an item of the write itself; a write whose own items are past the
bound is refused whole, naming the limit.
"""

from __future__ import annotations

import json

import pytest

from _store_helpers import open_store, snapshot
from memkit.errors import QuotaError
from memkit.limits import Limits

pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend


def item(text: str) -> str:
    """An item's JSON text, as `MemkitSession` stores it."""
    return json.dumps({"role": "user", "content": text})


def test_one_users_session_items_never_refuse_another_users_first_memory(tmp_path):
    # Items of 2,000 characters under a 1 MiB cap, a quarter of it for each user's items.
    limits = Limits(max_db_bytes=1 << 20, max_agent_item_chars_per_user=256_000)
    refused_hog = 0
    with open_store(tmp_path / "memory.sqlite3", limits=limits) as store:
        for n in range(1, 601):  # 1.2 million characters: past the cap when nothing bounds them
            try:
                store.add_agent_items("hog", f"s{n // 50}", [item(f"{n} " + "x" * 2000)])
            except QuotaError:
                refused_hog += 1
        refused_others = 0
        for other in range(10):
            try:
                store.put(f"user{other}", "s1", "episode", "trip", "a long story " + "y" * 490)
            except QuotaError:
                refused_others += 1
        kept = [json.loads(text)["content"].split()[0] for s in range(13) for text in store.agent_items("hog", f"s{s}")]
        held = sum(len(text) for s in range(13) for text in store.agent_items("hog", f"s{s}"))
    assert refused_others == refused_hog == 0
    assert held <= limits.max_agent_item_chars_per_user
    assert [int(n) for n in kept] == list(range(601 - len(kept), 601))  # the newest, in order, each once


def test_the_oldest_items_go_first_across_sessions_and_never_another_users(tmp_path):
    size = len(item("a1"))
    with open_store(tmp_path / "memory.sqlite3", limits=Limits(max_agent_item_chars_per_user=5 * size)) as store:
        store.add_agent_items("bob", "s1", [item("b1"), item("b2"), item("b3")])
        store.add_agent_items("alice", "old", [item("o1"), item("o2"), item("o3")])
        store.add_agent_items("alice", "new", [item("n1"), item("n2")])  # at the bound
        assert store.add_agent_items("alice", "new", [item("n3"), item("n4")]) == 4
        assert store.agent_items("alice", "old") == [item("o3")]
        assert store.agent_items("alice", "new") == [item(f"n{n}") for n in (1, 2, 3, 4)]
        assert store.agent_items("bob", "s1") == [item(f"b{n}") for n in (1, 2, 3)]
        # A session trimmed to nothing starts again at 1; the others keep their numbers.
        store.add_agent_items("alice", "new", [item("n5"), item("n6"), item("n7")])
        assert store.agent_items("alice", "old") == [] and store.add_agent_items("alice", "old", [item("o4")]) == 1


def test_a_write_whose_own_items_are_past_the_bound_is_refused_whole(tmp_path):
    size = len(item("a1"))
    with open_store(tmp_path / "memory.sqlite3", limits=Limits(max_agent_item_chars_per_user=3 * size)) as store:
        store.add_agent_items("alice", "s1", [item("a1")])
        before = snapshot(store)
        with pytest.raises(QuotaError, match=r"max_agent_item_chars_per_user .*nothing of this call was stored"):
            store.add_agent_items("alice", "s1", [item(f"a{n}") for n in range(2, 6)])
        assert snapshot(store) == before and store.agent_items("alice", "s1") == [item("a1")]


def test_an_imported_bundle_arrives_with_its_newest_items_within_the_bound(tmp_path):
    size = len(item("a1"))
    with open_store(tmp_path / "big.sqlite3") as big:
        big.add_agent_items("alice", "s1", [item(f"a{n}") for n in range(1, 7)])
        bundle = big.export_user("alice")
    with open_store(tmp_path / "small.sqlite3", limits=Limits(max_agent_item_chars_per_user=4 * size)) as small:
        assert small.import_records(bundle)["items"] == 6
        assert small.agent_items("alice", "s1") == [item(f"a{n}") for n in range(3, 7)]


def test_a_session_cut_by_the_bound_never_starts_with_a_tool_output_whose_call_went(tmp_path):
    call = json.dumps({"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"})
    output = json.dumps({"type": "function_call_output", "call_id": "c1", "output": "x" * 40})
    answer = item("the file says x")
    bound = len(output) + 2 * len(answer) + len(item("next"))
    with open_store(tmp_path / "memory.sqlite3", limits=Limits(max_agent_item_chars_per_user=bound)) as store:
        store.add_agent_items("alice", "s1", [call, output, answer])
        store.add_agent_items("alice", "s1", [item("next")])  # past the bound by the call alone
        assert store.agent_items("alice", "s1") == [answer, item("next")]  # its output went with it
