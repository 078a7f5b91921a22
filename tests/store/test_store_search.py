"""MemoryStore's search against a real SQLite file: the literal case-folded rule, by scan and by the
trigram index, and search_many.

Every test uses a real file under tmp_path.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _store_helpers import open_store
from memkit.limits import Limits
from memkit.store import MemoryStore


pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend


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


@pytest.mark.sqlite_only  # FTS5 trace (tests/postgres/test_postgres.py: the pg_trgm plan)
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
ALPHABET = st.sampled_from(list('aAbBkK ßSsİiıﬁΣσςÅå茶绿喝"\'%_*\\-:.^()\t'))  # noqa: RUF001 -- dotless i, sigma: case folding on purpose
VALUES = st.text(ALPHABET, min_size=1, max_size=12).filter(lambda v: v.strip())


USER_NUMBERS = itertools.count()


@pytest.fixture(scope="module")
def search_store(tmp_path_factory, backend):
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


WORDS = st.sampled_from(["tea", "green tea", "TEA time", "coffee", "Straße", "strasse", "茶", "a\"b", "x\\y", "zz"])


@pytest.fixture(scope="module")
def many_store(tmp_path_factory, backend):
    limits = Limits().replace(max_records_per_user=10_000, max_records_total=1_000_000)
    with backend.open(tmp_path_factory.mktemp("many") / "m.sqlite3", limits=limits, synchronous="NORMAL") as store:
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
