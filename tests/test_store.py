"""MemoryStore against a real SQLite file: records and history, quotas, search, export, opening, locks.

Every test uses a real file under tmp_path; crashes, restarts, locks and races use real processes
(the lab's workers, `memkit.lab`, started with `sys.executable`).
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import stat
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _store_helpers import folder_state, snapshot
from memkit import lab
from memkit.clock import FakeClock
from memkit.errors import QuotaError, StoreError, ValidationError
from memkit.limits import Limits
from memkit.migrations import SCHEMA_VERSION
from memkit.store import MemoryStore, seal_bundle


def open_store(path: Path, **options) -> MemoryStore:
    """A store whose clock moves one second per reading: distinct, ordered timestamps."""
    options.setdefault("clock", FakeClock(step_seconds=1))
    return MemoryStore(path, **options)


@pytest.fixture
def clocked(tmp_path):
    with open_store(tmp_path / "memory.sqlite3") as opened:
        yield opened


def worker(mode: str, path: Path, user: str, key: str, value: str | None = None) -> object:
    """One put or get of a preference in a fresh process (the lab's `put`/`get` workers)."""
    payload = {"path": str(path), "user": user, "key": key, **({"value": value} if value is not None else {})}
    return lab.run_worker(mode, payload)


# -- one row per key, revisions, history ---------------------------------------------------------


def test_revision_starts_at_one_rises_per_update_and_same_value_is_a_no_op(clocked):
    first = clocked.put("alice", "s1", "preference", "drink", "tea")
    assert (first["revision"], first["created_at"], first["updated_at"]) == (1, "2026-01-01T09:00:00.000000Z",
                                                                              "2026-01-01T09:00:00.000000Z")
    second = clocked.put("alice", "s2", "preference", "drink", "coffee", confirmation="cli#1")
    assert (second["revision"], second["source_session"]) == (2, "s2")
    assert second["created_at"] == first["created_at"] != second["updated_at"]
    before = snapshot(clocked)
    again = clocked.put("alice", "s3", "preference", "drink", "coffee", confirmation="cli#2")
    assert again == clocked.get("alice", "preference", "drink") == second  # still revision 2, from s2
    assert snapshot(clocked) == before  # no event, no new revision
    assert clocked.put("alice", "s3", "preference", "drink", "Coffee")["revision"] == 3  # case is a change


def test_one_row_per_user_kind_and_key(clocked):
    clocked.put("alice", "s1", "preference", "drink", "tea")
    clocked.put("alice", "s1", "preference", "drink", "coffee")
    clocked.put("alice", "s1", "episode", "drink", "drank tea at 9")
    clocked.put("bob", "s1", "preference", "drink", "water")
    rows = clocked.connection.execute(
        "SELECT user_id, kind, memory_key, value, revision FROM memories ORDER BY user_id, kind").fetchall()
    assert [tuple(row) for row in rows] == [
        ("alice", "episode", "drink", "drank tea at 9", 1),
        ("alice", "preference", "drink", "coffee", 2),
        ("bob", "preference", "drink", "water", 1),
    ]
    assert clocked.users() == {"alice": 2, "bob": 1}
    assert [r["key"] for r in clocked.records("alice", kind="episode")] == ["drink"]
    assert clocked.get("carol", "preference", "drink") is None


def test_history_is_append_only_with_session_time_values_and_confirmation(clocked):
    clocked.put("alice", "s1", "preference", "drink", "tea", confirmation="cli#1")
    clocked.put("alice", "s2", "preference", "drink", "coffee", confirmation="widget#7")
    clocked.put("alice", "s2", "preference", "drink", "coffee", confirmation="cli#9")  # no-op: no event
    assert clocked.delete("alice", "preference", "drink", session="s3", confirmation="cli#2") is True
    assert clocked.delete("alice", "preference", "drink", session="s3", confirmation="cli#3") is False
    assert clocked.get("alice", "preference", "drink") is None
    assert clocked.history("alice", "preference", "drink") == [
        {"action": "create", "revision": 1, "session": "s1", "old_value": None, "new_value": "tea",
         "confirmation": "cli#1", "at": "2026-01-01T09:00:00.000000Z"},
        {"action": "update", "revision": 2, "session": "s2", "old_value": "tea", "new_value": "coffee",
         "confirmation": "widget#7", "at": "2026-01-01T09:00:01.000000Z"},
        {"action": "delete", "revision": 2, "session": "s3", "old_value": "coffee", "new_value": None,
         "confirmation": "cli#2", "at": "2026-01-01T09:00:03.000000Z"},
    ]
    # Created again after a delete: the revision goes on from the history, never back to 1.
    assert clocked.put("alice", "s4", "preference", "drink", "water")["revision"] == 3
    assert [e["revision"] for e in clocked.history("alice", "preference", "drink")] == [1, 2, 2, 3]
    assert clocked.history("bob", "preference", "drink") == []


def test_puts_inside_one_transaction_commit_or_roll_back_together(clocked):
    with pytest.raises(RuntimeError):
        with clocked.transaction():
            clocked.put("alice", "s1", "preference", "drink", "tea")
            assert clocked.get("alice", "preference", "drink")["value"] == "tea"  # sees its own write
            clocked.put("alice", "s1", "preference", "food", "rice")
            raise RuntimeError("the caller changed its mind")
    assert clocked.records("alice") == [] and clocked.history("alice", "preference", "drink") == []
    with clocked.transaction():
        clocked.put("alice", "s1", "preference", "drink", "tea")
        clocked.put("alice", "s1", "preference", "food", "rice")
    assert [r["key"] for r in clocked.records("alice")] == ["drink", "food"]


def test_a_failed_put_inside_a_transaction_undoes_only_itself(tmp_path):
    with open_store(tmp_path / "m.sqlite3", limits=Limits().replace(max_records_per_user=1)) as store:
        with store.transaction():
            store.put("alice", "s1", "preference", "drink", "tea")
            with pytest.raises(QuotaError):
                store.put("alice", "s1", "preference", "food", "rice")
            store.put("alice", "s1", "preference", "drink", "coffee")
        assert [(r["key"], r["value"], r["revision"]) for r in store.records("alice")] == [("drink", "coffee", 2)]
        assert store.health()["counters_consistent"]


def test_closed_store_refuses_calls_and_closes_twice(tmp_path):
    store = MemoryStore(tmp_path / "m.sqlite3")
    with store:
        store.put("alice", "s1", "preference", "drink", "tea")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get("alice", "preference", "drink")


# -- quotas and the size cap ----------------------------------------------------------------------


def test_per_user_quota_refuses_a_new_key_but_allows_updates(tmp_path):
    with open_store(tmp_path / "m.sqlite3", limits=Limits().replace(max_records_per_user=3)) as store:
        for number in range(3):
            store.put("alice", "s1", "preference", f"k{number}", "v")
        before = snapshot(store)
        with pytest.raises(QuotaError, match="user 'alice' has 3 records; the per-user quota is 3"):
            store.put("alice", "s1", "episode", "k3", "v")
        assert snapshot(store) == before
        assert store.put("alice", "s1", "preference", "k0", "changed")["revision"] == 2  # at quota, still updatable
        store.put("bob", "s1", "preference", "k0", "v")  # another user has their own quota
        assert store.delete("alice", "preference", "k1")
        store.put("alice", "s1", "episode", "k3", "v")  # room again after a delete
        assert store.users() == {"alice": 3, "bob": 1}


def test_default_quotas_are_64_per_user_and_1024_in_all(tmp_path):
    with open_store(tmp_path / "m.sqlite3", synchronous="NORMAL") as store:
        for user in range(16):
            with store.transaction():  # one commit per user keeps this fast
                for number in range(64):
                    store.put(f"user{user}", "s1", "episode", f"e{number}", "v")
        with pytest.raises(QuotaError, match="per-user quota is 64"):
            store.put("user0", "s1", "episode", "e64", "v")
        before = snapshot(store)
        with pytest.raises(QuotaError, match="the store holds 1024 records; the global quota is 1024"):
            store.put("newcomer", "s1", "episode", "e0", "v")
        assert snapshot(store) == before
        store.put("user3", "s1", "episode", "e0", "updated at the global quota")
        health = store.health()
        assert (health["records_total"], health["max_records_total"], health["users"]) == (1024, 1024, 16)
        assert health["counters_consistent"]


def test_raised_quotas_hold_more(tmp_path):
    limits = Limits().replace(max_records_per_user=100, max_records_total=2000)
    with open_store(tmp_path / "m.sqlite3", limits=limits, synchronous="NORMAL") as store:
        with store.transaction():
            for number in range(100):
                store.put("alice", "s1", "episode", f"e{number}", "v")
        with pytest.raises(QuotaError, match="per-user quota is 100"):
            store.put("alice", "s1", "episode", "e100", "v")


def test_a_write_past_the_size_cap_rolls_back_whole(tmp_path):
    path = tmp_path / "m.sqlite3"
    with open_store(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        empty_size = store.health()["db_bytes"]
    # Reopen with a cap a few pages above the current size, then fill until it refuses.
    limits = Limits().replace(max_db_bytes=empty_size + 3 * 4096, max_records_per_user=1000, max_records_total=1000)
    with open_store(path, limits=limits) as store:
        refused = None
        for number in range(500):
            before = snapshot(store)
            try:
                store.put("alice", "s1", "episode", f"e{number}", f"{number} " + "x" * 500)
            except QuotaError as exc:
                refused = (number, exc)
                break
        assert refused is not None, "the size cap never applied"
        number, exc = refused
        assert f"the cap is {limits.max_db_bytes} bytes" in str(exc)
        assert snapshot(store) == before  # no row, no event, counters unchanged
        assert store.get("alice", "episode", f"e{number}") is None
        health = store.health()
        assert health["db_bytes"] <= limits.max_db_bytes and health["counters_consistent"]
        assert store.delete("alice", "episode", "e0")  # deleting is always allowed, to make room


def test_a_tiny_size_cap_refuses_every_write(tmp_path):
    path = tmp_path / "m.sqlite3"
    with open_store(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    with open_store(path, limits=Limits().replace(max_db_bytes=4096)) as store:
        before = snapshot(store)
        with pytest.raises(QuotaError, match="the cap is 4096 bytes"):
            store.put("alice", "s1", "preference", "drink", "coffee")
        with pytest.raises(QuotaError, match="the cap is 4096 bytes"):
            store.archive_turns("alice", "s1", [{"turn": 1, "role": "user", "content": "hi", "at": "t"}])
        with pytest.raises(QuotaError, match="the cap is 4096 bytes"):
            store.import_records(store.export_user("alice"), user="bob")
        assert snapshot(store) == before
        assert store.health()["max_db_bytes"] == 4096


def test_racing_processes_never_pass_the_quotas(tmp_path):
    path = tmp_path / "m.sqlite3"
    MemoryStore(path).close()
    per_user, total = 10, 25
    # alice has two racers over one per-user quota; the three users together exceed the global one.
    racers = [("alice", "a"), ("alice", "b"), ("bob", "a"), ("carol", "a")]
    plans = [[(user, "preference", f"{prefix}{n}", f"value {n}") for n in range(12)] for user, prefix in racers]
    # Every writer opens the store and says ready; then all are told to go at once.
    results = lab.run_racers(path, plans, limits={"max_records_per_user": per_user, "max_records_total": total,
                                                  "busy_timeout_ms": 30_000})
    outcomes = [[o["outcome"] for o in result] for result in results]
    assert all(set(result) <= {"ok", "quota"} for result in outcomes)
    with MemoryStore(path) as store:
        counts = dict(store.connection.execute("SELECT user_id, count(*) FROM memories GROUP BY user_id"))
        assert all(count <= per_user for count in counts.values())
        assert sum(counts.values()) == total  # 48 attempts for 25 places: exactly full, never over
        assert sum(result.count("ok") for result in outcomes) == total
        assert counts["alice"] == outcomes[0].count("ok") + outcomes[1].count("ok")
        assert store.health()["counters_consistent"] and store.users() == counts


# -- search ---------------------------------------------------------------------------------------

LITERALS = {
    "percent": "100% sure",
    "under": "snake_case please",
    "quote": "it's fine",
    "dquote": 'say "cheese"',
    "backslash": r"C:\Users\me",
    "fts-words": "tea OR coffee NEAR milk*",
    "plain": "abc",
}


@pytest.mark.parametrize("fts_min_user_rows", [0, 10**9], ids=["fts", "scan"])
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("%", {"percent"}),
        ("_", {"under"}),
        ("a_c", set()),  # '_' is not a wildcard: "abc" does not match
        ("0%", {"percent"}),
        ("'", {"quote"}),
        ("it's", {"quote"}),
        ('"', {"dquote"}),
        ('"cheese"', {"dquote"}),
        ("\\", {"backslash"}),
        ("\\users\\", {"backslash"}),
        ("or coffee", {"fts-words"}),
        ("milk*", {"fts-words"}),
        ("near", {"fts-words"}),
        ("*", {"fts-words"}),
        ("SNAKE", {"under"}),  # case-insensitive
        ("fts-w", {"fts-words"}),  # keys are searched too
        ("xyz", set()),
    ],
)
def test_search_is_a_literal_case_insensitive_substring(clocked, fts_min_user_rows, query, expected):
    for key, value in LITERALS.items():
        clocked.put("alice", "s1", "preference", key, value)
    clocked.put("bob", "s1", "preference", "percent", "50% of bob")  # never in alice's results
    clocked.fts_min_user_rows = fts_min_user_rows
    assert {r["key"] for r in clocked.search("alice", query, limit=50)} == expected


@pytest.mark.parametrize("fts_min_user_rows", [0, 10**9], ids=["fts", "scan"])
def test_search_matches_chinese_and_folded_case(clocked, fts_min_user_rows):
    clocked.put("alice", "s1", "preference", "drink", "我喜欢喝绿茶")
    clocked.put("alice", "s1", "preference", "city", "Straße in München")
    clocked.put("alice", "s1", "episode", "greek", "ΣΊΣΥΦΟΣ rolled a stone")
    clocked.fts_min_user_rows = fts_min_user_rows
    assert [r["key"] for r in clocked.search("alice", "茶")] == ["drink"]
    assert [r["key"] for r in clocked.search("alice", "绿茶")] == ["drink"]
    assert [r["key"] for r in clocked.search("alice", "喝绿茶")] == ["drink"]
    assert clocked.search("alice", "红茶") == []
    assert [r["key"] for r in clocked.search("alice", "STRASSE")] == ["city"]
    assert [r["key"] for r in clocked.search("alice", "münchen")] == ["city"]
    assert [r["key"] for r in clocked.search("alice", "σίσυφος")] == ["greek"]
    assert [r["key"] for r in clocked.search("alice", "stone", kind="episode")] == ["greek"]
    assert clocked.search("alice", "stone", kind="preference") == []


def test_empty_query_returns_the_most_recent_first_within_the_limit(clocked):
    for key in ("a", "b", "c", "d"):
        clocked.put("alice", "s1", "preference", key, f"value {key}")
    clocked.put("alice", "s1", "preference", "a", "updated last")
    assert [r["key"] for r in clocked.search("alice")] == ["a", "d", "c", "b"]
    assert [r["key"] for r in clocked.search("alice", "", limit=2)] == ["a", "d"]
    assert [r["key"] for r in clocked.search("alice", "value")] == ["d", "c", "b"]
    assert clocked.search("nobody") == []


def test_large_users_are_searched_through_the_trigram_index(clocked):
    statements: list[str] = []
    clocked.connection.set_trace_callback(statements.append)
    clocked.put("alice", "s1", "preference", "drink", "green tea")
    clocked.fts_min_user_rows = 1
    assert [r["key"] for r in clocked.search("alice", "TEA")] == ["drink"]
    assert any("memories_fts MATCH" in sql for sql in statements)
    statements.clear()
    assert [r["key"] for r in clocked.search("alice", "te")] == ["drink"]  # two characters: the scan
    assert not any("memories_fts MATCH" in sql for sql in statements)
    clocked.connection.set_trace_callback(None)


# Characters chosen to stress the rule: case folding that changes length (ß, ﬁ, İ), final sigma,
# CJK, FTS5 syntax characters, LIKE wildcards, quotes, backslashes, spaces.
ALPHABET = st.sampled_from(list('aAbBkK ßSsİiıﬁΣσςÅå茶绿喝"\'%_*\\-:.^()\t'))
VALUES = st.text(ALPHABET, min_size=1, max_size=12).filter(lambda v: v.strip())


USER_NUMBERS = itertools.count()


@pytest.fixture(scope="module")
def search_store(tmp_path_factory):
    limits = Limits().replace(max_records_total=1_000_000)
    with open_store(tmp_path_factory.mktemp("search") / "m.sqlite3", limits=limits, synchronous="NORMAL") as store:
        yield store


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(VALUES, min_size=1, max_size=12),
    queries=st.lists(st.text(ALPHABET, min_size=0, max_size=5), min_size=1, max_size=6),
    picks=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11), st.integers(0, 5)), max_size=4),
    limit=st.integers(1, 50),
)
def test_trigram_index_and_scan_both_match_the_reference_rule(search_store, values, queries, picks, limit):
    store = search_store
    # A new pair of users per example: one store for all examples keeps the property test fast.
    alice, bob = f"alice{next(USER_NUMBERS)}", f"bob{next(USER_NUMBERS)}"
    records = {}
    for number, value in enumerate(values):
        key = f"k{number % 7}"  # some keys are updated: updated_at, not id, orders them
        store.put(alice, "s1", "episode", key, value)
        if records.get(key, (None,))[0] != value:  # the same value again is no update
            records[key] = (value, number)
    store.put(bob, "s1", "episode", "k0", values[0])  # another user's copy must never appear
    # Also query real substrings of the values, so matches are common, not only misses.
    queries = queries + [values[i % len(values)][j:j + 1 + k] for i, j, k in picks]
    for query in queries:
        newest_first = sorted(records.items(), key=lambda item: -item[1][1])
        expected = [key for key, (value, _) in newest_first
                    if query.casefold() in key.casefold() or query.casefold() in value.casefold()][:limit]
        store.fts_min_user_rows = 0
        through_index = [r["key"] for r in store.search(alice, query, limit=limit)]
        store.fts_min_user_rows = 10**9
        through_scan = [r["key"] for r in store.search(alice, query, limit=limit)]
        assert through_index == through_scan == expected, query


# -- forgetting, export and import ----------------------------------------------------------------


def fill(store: MemoryStore, user: str) -> None:
    store.put(user, "s1", "preference", "drink", "tea", confirmation="cli#1")
    store.put(user, "s2", "preference", "drink", "green tea\u2028with\x85milk", confirmation="cli#2")
    store.put(user, "s2", "episode", "trip", "went to 北京 \"quoted\" \\ back")
    store.put(user, "s2", "episode", "gone", "soon deleted")
    store.delete(user, "episode", "gone", session="s3", confirmation="cli#3")
    store.archive_turns(user, "s1", [{"turn": 1, "role": "user", "content": "hello", "at": "t1"},
                                     {"turn": 2, "role": "assistant", "content": "hi", "at": "t2"}])


def test_forget_user_removes_records_events_and_transcript(clocked):
    fill(clocked, "alice")
    fill(clocked, "bob")
    bob_before = clocked.export_user("bob")
    assert clocked.forget_user("alice") == {"records": 2, "events": 5, "transcript": 2}
    conn = clocked.connection
    for table in ("memories", "memory_events", "user_counts", "transcript"):
        assert conn.execute(f"SELECT count(*) FROM {table} WHERE user_id = 'alice'").fetchone()[0] == 0, table
    # The search index forgets too: bob's copy of "tea" is the only one left in it.
    hits = conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH '\"tea\"'").fetchall()
    assert [row[0] for row in hits] == [r[0] for r in conn.execute("SELECT id FROM memories WHERE user_id = 'bob'"
                                                                   " AND value_fold LIKE '%tea%'")]
    assert clocked.search("alice", "") == [] and clocked.archived_turns("alice", "s1") == []
    assert clocked.export_user("bob") == bob_before
    assert clocked.users() == {"bob": 2} and clocked.health()["counters_consistent"]
    assert clocked.forget_user("alice") == {"records": 0, "events": 0, "transcript": 0}


def test_export_forget_import_export_is_identical(clocked, tmp_path):
    fill(clocked, "alice")
    fill(clocked, "bob")
    bundle = clocked.export_user("alice")
    lines = _lines(bundle)
    assert json.loads(lines[0])["format"] == "memkit-export" and len(lines) == 1 + 2 + 5 + 1
    clocked.forget_user("alice")
    assert clocked.import_records(bundle) == {"records": 2, "events": 5}
    assert clocked.export_user("alice") == bundle
    assert clocked.history("alice", "preference", "drink")[1]["confirmation"] == "cli#2"
    # Through a file, into a new store, under another user id.
    clocked.export_user("alice", tmp_path / "alice.jsonl")
    assert not (tmp_path / "alice.jsonl.partial").exists()
    with open_store(tmp_path / "other.sqlite3") as other:
        assert other.import_records(tmp_path / "alice.jsonl") == {"records": 2, "events": 5}
        assert other.export_user("alice") == bundle
        other.import_records(bundle, user="alice2")
        assert other.records("alice2") == other.records("alice")
        assert other.health()["counters_consistent"]


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.text(min_size=1, max_size=40).filter(
    lambda v: v.strip() and "\x00" not in v and not any(0xD800 <= ord(c) <= 0xDFFF for c in v)), min_size=1, max_size=5))
def test_any_valid_value_survives_export_and_import(tmp_path_factory, values):
    folder = tmp_path_factory.mktemp("bundle")
    with open_store(folder / "a.sqlite3", synchronous="NORMAL") as source, \
            open_store(folder / "b.sqlite3", synchronous="NORMAL") as target:
        for number, value in enumerate(values):
            source.put("alice", "s1", "episode", f"k{number % 3}", value)
        bundle = source.export_user("alice")
        target.import_records(bundle)
        assert target.export_user("alice") == bundle
        assert target.records("alice") == source.records("alice")


def _resigned(bundle: str, change) -> str:
    """Apply `change` to the parsed lines and write a valid checksum again: only the content is wrong."""
    lines = [json.loads(line) for line in bundle.split("\n")[:-2]]
    change(lines)
    return seal_bundle(lines)


def _lines(bundle: str) -> list[str]:
    # Not str.splitlines(): it also breaks at U+2028 and U+0085, which the values in `fill` hold.
    return [line + "\n" for line in bundle.split("\n")[:-1]]


BAD_BUNDLES = {
    "tampered value": (lambda b: b.replace('"tea"', '"TEA"'), ValidationError, "checksum does not match"),
    "tampered checksum": (lambda b: b[:-4] + "00\"}\n", ValidationError, "checksum does not match"),
    "truncated at a line": (lambda b: "".join(_lines(b)[:3]), ValidationError, "checksum line"),
    "truncated mid-line": (lambda b: b[: len(b) // 2], ValidationError, "truncated"),
    "last byte cut": (lambda b: b[:-1], ValidationError, "truncated"),
    "checksum cut": (lambda b: b[:-20], ValidationError, "truncated"),
    "empty": (lambda b: "", ValidationError, "truncated"),
    "a line dropped": (lambda b: "".join(l for i, l in enumerate(_lines(b)) if i != 2),
                       ValidationError, "checksum does not match"),
    "wrong format": (lambda b: _resigned(b, lambda ls: ls[0].update(format="other-export")), ValidationError,
                     "memkit export header"),
    "wrong format version": (lambda b: _resigned(b, lambda ls: ls[0].update(format_version=2)), ValidationError,
                             "format version 2"),
    "wrong schema version": (lambda b: _resigned(b, lambda ls: ls[0].update(schema_version=SCHEMA_VERSION + 1)),
                             ValidationError, "schema version"),
    "count mismatch": (lambda b: _resigned(b, lambda ls: ls[0].update(records=9)), ValidationError, "line counts"),
    "value over the limit": (lambda b: _resigned(b, lambda ls: ls[1].update(value="x" * 513)), ValidationError,
                             "513 characters"),
    "bad event kind": (lambda b: _resigned(b, lambda ls: ls[-1].update(kind="fact")), ValidationError, "kind"),
    "event time missing": (lambda b: _resigned(b, lambda ls: ls[-1].update(at=None)), ValidationError, "'at'"),
    "boolean revision": (lambda b: _resigned(b, lambda ls: ls[1].update(revision=True)), ValidationError,
                         "revision"),
    "duplicate record": (lambda b: _resigned(b, lambda ls: (ls.insert(2, dict(ls[1])), ls[0].update(records=3))),
                         ValidationError, "twice"),
}


@pytest.mark.parametrize("case", BAD_BUNDLES, ids=str)
def test_import_refuses_a_bad_bundle_and_changes_nothing(clocked, case):
    damage, error, words = BAD_BUNDLES[case]
    fill(clocked, "alice")
    bundle = clocked.export_user("alice")
    clocked.forget_user("alice")
    fill(clocked, "bob")
    before = snapshot(clocked)
    with pytest.raises(error, match=words):
        clocked.import_records(damage(bundle))
    assert snapshot(clocked) == before
    clocked.import_records(bundle)  # the undamaged bundle still imports


def test_import_refuses_a_user_who_has_data_or_would_break_a_quota(clocked, tmp_path):
    fill(clocked, "alice")
    bundle = clocked.export_user("alice")
    clocked.put("bob", "s1", "preference", "drink", "water")
    before = snapshot(clocked)
    with pytest.raises(StoreError, match="'alice' already has memory"):
        clocked.import_records(bundle)
    with pytest.raises(StoreError, match="'bob' already has memory"):
        clocked.import_records(bundle, user="bob")
    with pytest.raises(ValidationError, match="cannot read the bundle file"):
        clocked.import_records(tmp_path / "missing.jsonl")
    assert snapshot(clocked) == before
    with open_store(tmp_path / "small.sqlite3", limits=Limits().replace(max_records_per_user=1)) as small:
        with pytest.raises(QuotaError, match="per-user quota is 1"):
            small.import_records(bundle)
        assert all(rows in ([], [(1, 0)]) for rows in snapshot(small).values())


# -- archive of turns -----------------------------------------------------------------------------


def test_archive_is_idempotent_by_user_session_and_turn(clocked):
    turns = [{"turn": n, "role": role, "content": f"turn {n}", "at": f"t{n}"}
             for n, role in ((1, "user"), (2, "assistant"), (3, "tool"))]
    assert clocked.archive_turns("alice", "s1", turns[:2]) == 2
    assert clocked.archive_turns("alice", "s1", turns) == 1  # a retry after a crash: only turn 3 is new
    assert clocked.archive_turns("alice", "s1", turns) == 0
    assert clocked.archive_turns("alice", "s1", [{**turns[0], "content": "rewritten"}]) == 0  # first one kept
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


# -- health ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_health_reports_the_settings_and_the_quotas(tmp_path, synchronous):
    limits = Limits().replace(busy_timeout_ms=1234, max_records_per_user=5)
    with open_store(tmp_path / "m.sqlite3", limits=limits, synchronous=synchronous) as store:
        store.put("alice", "s1", "preference", "a", "v")
        store.put("alice", "s1", "preference", "b", "v")
        store.put("bob", "s1", "preference", "a", "v")
        health = store.health()
    assert health["schema_version"] == SCHEMA_VERSION
    assert health["journal_mode"] == "wal"
    assert health["synchronous"] == synchronous
    assert health["busy_timeout_ms"] == 1234
    assert 0 < health["db_bytes"] < health["max_db_bytes"]
    assert health["max_db_bytes"] == 16 * 1024 * 1024
    assert (health["records_total"], health["max_records_total"], health["users"]) == (3, 1024, 2)
    assert health["records_per_user"] == {"alice": 2, "bob": 1}
    assert health["max_records_per_user"] == 5
    assert health["counters_consistent"] is True


@pytest.mark.parametrize(
    "drift",
    [
        "UPDATE total_count SET records = records + 1",
        "UPDATE user_counts SET records = 1 WHERE user_id = 'alice'",  # total still right
        "DELETE FROM user_counts WHERE user_id = 'bob'",
        "INSERT INTO user_counts VALUES ('ghost', 0)",
    ],
)
def test_health_notices_counters_that_disagree_with_the_rows(tmp_path, drift):
    path = tmp_path / "m.sqlite3"
    with open_store(path) as store:
        store.put("alice", "s1", "preference", "a", "v")
        store.put("alice", "s1", "preference", "b", "v")
        store.put("bob", "s1", "preference", "a", "v")
        assert store.health()["counters_consistent"] is True
        with sqlite3.connect(path) as raw:
            raw.execute(drift)
        raw.close()
        assert store.health()["counters_consistent"] is False


# -- opening: refuse what is not ours, and leave it exactly as it was ----------------------------


def memkit_file(path: Path) -> Path:
    with MemoryStore(path) as store:
        fill(store, "alice")
    return path


def raw_edit(path: Path, *statements: str) -> Path:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in statements:
        conn.execute(statement)
    conn.close()
    return path


def truncated(offset: int | None):
    def make(path: Path) -> Path:
        data = memkit_file(path).read_bytes()
        path.write_bytes(data[: offset if offset is not None else len(data) // 2])
        return path
    return make


BAD_FILES = {
    "zero-length": (lambda p: (p.write_bytes(b""), p)[1], "empty"),
    "text": (lambda p: (p.write_text("my notes\nnot a database\n"), p)[1], "not a SQLite database"),
    "random bytes": (lambda p: (p.write_bytes(bytes(range(7, 256)) * 40), p)[1], "not a SQLite database"),
    "short header": (lambda p: (p.write_bytes(b"SQLite format 3\x00" + b"\x10\x00"), p)[1], "truncated"),
    "header then garbage": (lambda p: (p.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 64), p)[1],
                            "damaged|corrupt"),
    "truncated at 100": (truncated(100), "damaged|corrupt"),
    "truncated at 1000": (truncated(1000), "damaged|corrupt"),
    "truncated at 4096": (truncated(4096), "damaged|corrupt"),
    "truncated at 12288": (truncated(12288), "damaged|corrupt"),
    "truncated in half": (truncated(None), "damaged|corrupt"),
    "truncated by a page": (truncated(-4096), "damaged|corrupt"),
    "truncated by a byte": (truncated(-1), "damaged|corrupt"),
    "foreign schema": (lambda p: raw_edit(p, "CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)",
                                          "INSERT INTO orders VALUES (1, 9.5)"), "another program"),
    "foreign view only": (lambda p: raw_edit(p, "CREATE VIEW answers AS SELECT 42 AS answer"), "another program"),
    "foreign schema claiming version 1": (
        lambda p: raw_edit(p, "CREATE TABLE memories (id INTEGER PRIMARY KEY)", "PRAGMA user_version = 1"),
        "malformed"),
    "newer version": (lambda p: raw_edit(memkit_file(p), f"PRAGMA user_version = {SCHEMA_VERSION + 1}"), "newer"),
    "negative version": (lambda p: raw_edit(memkit_file(p), "PRAGMA user_version = -3"), "malformed"),
    "missing table": (lambda p: raw_edit(memkit_file(p), "DROP TABLE transcript"), "transcript"),
    "missing search index": (lambda p: raw_edit(memkit_file(p), "DROP TABLE memories_fts"), "memories_fts"),
    "missing counting trigger": (lambda p: raw_edit(memkit_file(p), "DROP TRIGGER memories_count_insert"),
                                 "memories_count_insert"),
    "missing column": (lambda p: raw_edit(memkit_file(p), "ALTER TABLE memory_events DROP COLUMN confirmation"),
                       "lacks confirmation"),
}


@pytest.mark.parametrize("case", BAD_FILES, ids=str)
def test_opening_refuses_a_file_that_is_not_a_sound_memkit_database(tmp_path, case):
    make, words = BAD_FILES[case]
    path = make(tmp_path / "memory.sqlite3")
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match=words) as refused:
        MemoryStore(path)
    assert str(path) in str(refused.value)
    assert folder_state(tmp_path) == before  # byte for byte, and no -wal, -shm or new file left


def test_opening_refuses_a_read_only_file(tmp_path):
    path = memkit_file(tmp_path / "memory.sqlite3")
    path.chmod(0o444)
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match="read-only"):
        MemoryStore(path)
    assert folder_state(tmp_path) == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o444


@pytest.mark.parametrize("with_file", [True, False], ids=["existing file", "new file"])
def test_opening_refuses_a_read_only_folder(tmp_path, with_file):
    folder = tmp_path / "ro"
    folder.mkdir()
    if with_file:
        memkit_file(folder / "memory.sqlite3")
    before = folder_state(folder)
    folder.chmod(0o555)
    try:
        with pytest.raises(StoreError, match="read-only"):
            MemoryStore(folder / "memory.sqlite3")
        assert folder_state(folder) == before
    finally:
        folder.chmod(0o755)


def test_opening_refuses_a_directory_a_symlink_and_a_missing_folder(tmp_path):
    (tmp_path / "dir.sqlite3").mkdir()
    target = memkit_file(tmp_path / "real.sqlite3")
    (tmp_path / "link.sqlite3").symlink_to(target)
    (tmp_path / "dangling.sqlite3").symlink_to(tmp_path / "nowhere.sqlite3")
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match="is a directory"):
        MemoryStore(tmp_path / "dir.sqlite3")
    with pytest.raises(StoreError, match="symbolic link.*real.sqlite3"):
        MemoryStore(tmp_path / "link.sqlite3")
    with pytest.raises(StoreError, match="symbolic link"):
        MemoryStore(tmp_path / "dangling.sqlite3")
    with pytest.raises(StoreError, match="does not exist; create it first"):
        MemoryStore(tmp_path / "missing" / "memory.sqlite3")
    assert folder_state(tmp_path) == before
    assert not (tmp_path / "missing").exists() and not (tmp_path / "nowhere.sqlite3").exists()


def test_paths_with_uri_characters_and_unicode_open(tmp_path):
    folder = tmp_path / "odd ?#%20 ☕ file:x"
    folder.mkdir()
    path = folder / "m?x#y%25.sqlite3"
    with MemoryStore(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    with MemoryStore(path) as store:
        assert store.get("alice", "preference", "drink")["value"] == "tea"
    assert os.listdir(folder) == [path.name]  # no stray file under a mis-parsed name


def test_a_sound_file_opens_again_unchanged_in_content(tmp_path):
    path = memkit_file(tmp_path / "memory.sqlite3")
    with MemoryStore(path) as store:
        exported = store.export_user("alice")
        assert store.health()["schema_version"] == SCHEMA_VERSION
    with MemoryStore(path, check_integrity=False) as store:
        assert store.export_user("alice") == exported
    assert sorted(os.listdir(tmp_path)) == ["memory.sqlite3"]  # no -wal, -shm or creation leftovers


def test_processes_creating_the_same_new_store_at_once_all_succeed(tmp_path):
    path = tmp_path / "new.sqlite3"
    # The writers open (and so create) the store first, then wait: their first opens race each other.
    results = lab.run_racers(path, [[(f"user{n}", "preference", f"k{i}", f"value {i}") for i in range(3)]
                                    for n in range(4)],
                             limits={"max_records_per_user": 64, "max_records_total": 1024, "busy_timeout_ms": 30_000})
    for result in results:
        assert [o["outcome"] for o in result] == ["ok"] * 3
    with MemoryStore(path) as store:
        assert store.users() == {f"user{n}": 3 for n in range(4)}
    assert sorted(os.listdir(tmp_path)) == ["new.sqlite3"]


# -- locks, restarts, threads ----------------------------------------------------------------------


def test_a_held_write_lock_makes_put_fail_after_the_busy_timeout_while_reads_go_on(tmp_path):
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path, limits=Limits().replace(busy_timeout_ms=200)) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        # Another process holds BEGIN IMMEDIATE with a row it never commits; leaving the block
        # kills it with SIGKILL.
        with lab.holding_write_lock(path, seconds=30):
            before = snapshot(store)
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"locked by another writer.*\(200 ms\); nothing was written"):
                store.put("alice", "s1", "preference", "drink", "coffee")
            waited = time.monotonic() - started
            assert 0.15 <= waited < 5, waited
            with pytest.raises(StoreError, match="locked"):
                store.forget_user("alice")
            # WAL: readers neither wait nor see the holder's uncommitted row.
            assert store.get("alice", "preference", "drink")["value"] == "tea"
            assert [r["key"] for r in store.search("alice", "tea")] == ["drink"]
            assert store.records("holder") == []
            assert snapshot(store) == before
            with MemoryStore(path, limits=Limits().replace(busy_timeout_ms=200)) as second:
                assert second.get("alice", "preference", "drink")["value"] == "tea"  # opening works too
        # The holder died without committing: its row never appears, and writing works again.
        assert store.put("alice", "s1", "preference", "drink", "coffee")["revision"] == 2
        assert store.records("holder") == []
        assert store.health()["counters_consistent"]


def test_a_value_written_in_one_process_is_read_by_a_fresh_one(tmp_path):
    path = tmp_path / "memory.sqlite3"
    written = worker("put", path, "alice", "drink", "green tea 绿茶")
    assert written["revision"] == 1 and written["source_session"] == "first-process"
    assert worker("get", path, "alice", "drink") == written
    assert worker("get", path, "bob", "drink") is None
    with MemoryStore(path) as store:
        assert store.get("alice", "preference", "drink") == written


def test_a_committed_value_survives_the_writer_being_killed(tmp_path):
    path = tmp_path / "memory.sqlite3"
    hanging = lab.start_worker("put", {"path": str(path), "user": "alice", "key": "drink", "value": "tea", "hang": True})
    try:
        written = lab.read_answer(hanging)
        assert written is not None
    finally:
        hanging.kill()  # SIGKILL: no close, no checkpoint
        hanging.communicate()
    assert Path(f"{path}-wal").stat().st_size > 0  # the value lives only in the write-ahead log
    assert worker("get", path, "alice", "drink") == written
    with MemoryStore(path) as store:
        assert store.put("alice", "s2", "preference", "drink", "coffee")["revision"] == 2


def test_threads_sharing_one_store_all_succeed_with_consecutive_revisions(clocked):
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer(number: int) -> None:
        try:
            start.wait()
            for step in range(10):
                clocked.put("alice", f"t{number}", "preference", "shared", f"thread {number} step {step}")
                clocked.put("alice", f"t{number}", "episode", f"own{number}", f"step {step}")
                clocked.search("alice", "step")
        except BaseException as exc:  # collected: an exception in a thread would otherwise vanish
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    history = clocked.history("alice", "preference", "shared")
    assert [e["revision"] for e in history] == list(range(1, 81))
    assert [e["at"] for e in history] == sorted(e["at"] for e in history)  # time follows commit order
    assert clocked.get("alice", "preference", "shared")["revision"] == 80
    assert all(clocked.get("alice", "episode", f"own{n}")["revision"] == 10 for n in range(8))
    assert clocked.health()["counters_consistent"]


def _with_wal_beside(path: Path, *statements: str) -> Path:
    """A WAL-mode database whose last writes are still in a `-wal` file beside it (as after a crash)."""
    import shutil

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    for statement in statements:
        conn.execute(statement)
    copy = path.with_name("copy-" + path.name)
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            shutil.copy(f"{path}{suffix}", f"{copy}{suffix}")
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return copy


@pytest.mark.parametrize(
    ("statements", "words"),
    [
        (("CREATE TABLE notes (body TEXT)", "INSERT INTO notes VALUES ('x')"), "another program"),
        (("CREATE TABLE t (a)", f"PRAGMA user_version = {SCHEMA_VERSION + 1}"), "newer"),
    ],
)
def test_a_refused_file_with_a_wal_beside_it_is_not_checkpointed(tmp_path, statements, words):
    path = _with_wal_beside(tmp_path / "foreign.sqlite3", *statements)
    assert Path(f"{path}-wal").stat().st_size > 0

    def state() -> dict[str, str]:
        # The -shm file is SQLite's shared-memory index of the WAL, rebuilt by any reader: its
        # presence is compared, its bytes are not. The database and its WAL must not change.
        return {name: ("<shm>" if name.endswith("-shm") else digest) for name, digest in folder_state(tmp_path).items()}

    before = state()
    with pytest.raises(StoreError, match=words):
        MemoryStore(path)
    assert state() == before


def test_an_empty_file_marked_by_another_program_is_refused(tmp_path):
    path = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.commit()
    conn.close()
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match="application_id 1234"):
        MemoryStore(path)
    assert folder_state(tmp_path) == before


def test_a_memkit_file_left_with_its_wal_after_a_crash_opens_with_every_write(tmp_path):
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    conn = sqlite3.connect(tmp_path / "m.sqlite3", isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.close()
    path = _with_wal_beside(tmp_path / "m.sqlite3")  # no extra statements: copy what is there
    with MemoryStore(path) as store:
        assert store.get("alice", "preference", "drink")["value"] == "tea"


WORDS = st.sampled_from(["tea", "green tea", "TEA time", "coffee", "Straße", "strasse", "茶", "a\"b", "x\\y", "zz"])


@pytest.fixture(scope="module")
def many_store(tmp_path_factory):
    limits = Limits().replace(max_records_per_user=10_000, max_records_total=1_000_000)
    with MemoryStore(tmp_path_factory.mktemp("many") / "m.sqlite3", limits=limits, synchronous="NORMAL") as store:
        yield store


USERS = iter(range(10**9))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.tuples(st.sampled_from(["preference", "episode"]), st.integers(0, 9), WORDS),
                       min_size=1, max_size=25),
       queries=st.lists(st.sampled_from(["", "tea", "TEA", "te", "coffee", "STRASSE", "茶", '"', "\\", "nothing"]),
                        min_size=1, max_size=5),
       limit=st.integers(1, 6), threshold=st.sampled_from([0, 1, 3, 8, 10**9]))
def test_search_and_search_many_agree_with_the_rule_on_every_path(many_store, values, queries, limit, threshold):
    """Scan, newest-rows-first then index, and index alone: one rule; search_many = search per pair."""
    store, user, other = many_store, f"u{next(USERS)}", f"u{next(USERS)}"
    for n, (kind, key, word) in enumerate(values):
        store.put(user, "s", kind, f"k{key}", f"{word} {n}")
        store.put(other, "s", kind, f"k{key}", f"{word} of the other")
    store.fts_min_user_rows = 10**9
    reference = {(q, k): store.search(user, q, limit, k) for q in queries for k in ("preference", "episode")}
    store.fts_min_user_rows = threshold
    try:
        for (q, k), expected in reference.items():
            assert store.search(user, q, limit, k) == expected, (q, k)
        assert store.search_many(user, queries, limit) == reference
    finally:
        store.fts_min_user_rows = MemoryStore.fts_min_user_rows
    assert all("other" not in r["value"] for found in reference.values() for r in found)


def test_the_event_history_is_append_only_in_the_database_itself(store):
    store.put("alice", "s1", "preference", "drink", "tea")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        store.connection.execute("UPDATE memory_events SET new_value = 'gin'")
    assert store.history("alice", "preference", "drink")[0]["new_value"] == "tea"
    assert store.forget_user("alice")["events"] == 1  # deleting a user's history stays possible


def _file_at_version(path: Path, version: int) -> Path:
    from memkit.migrations import MIGRATIONS

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for steps in MIGRATIONS[:version]:
        for statement in steps:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    return path


def test_a_file_at_an_older_version_is_migrated_forward_on_open(tmp_path):
    path = _file_at_version(tmp_path / "old.sqlite3", 1)
    with MemoryStore(path) as store:
        assert store.health()["schema_version"] == SCHEMA_VERSION
        names = {row[0] for row in store.connection.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert "memory_events_append_only" in names


def test_an_older_version_file_missing_what_its_steps_made_is_refused(tmp_path):
    path = _file_at_version(tmp_path / "old.sqlite3", 1)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE transcript")
    conn.close()
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match="says schema version 1 but lacks table 'transcript'"):
        MemoryStore(path)
    assert folder_state(tmp_path) == before


def test_last_archived_turn_is_the_highest_turn_of_that_session_only(store):
    assert store.last_archived_turn("alice", "s1") == 0
    store.archive_turns("alice", "s1", [{"turn": n, "role": "user", "content": "x", "at": "t"} for n in (1, 2, 7)])
    store.archive_turns("alice", "s2", [{"turn": 9, "role": "user", "content": "x", "at": "t"}])
    store.archive_turns("bob", "s1", [{"turn": 12, "role": "user", "content": "x", "at": "t"}])
    assert store.last_archived_turn("alice", "s1") == 7
