"""The limits on what a memory may be: each bad input is refused by name, and nothing is written."""

from __future__ import annotations

import pytest

from _store_helpers import snapshot
from memkit.errors import ValidationError
from memkit.limits import DEFAULT_LIMITS, KINDS, Limits
from memkit.store import MemoryStore

GOOD = {"user": "alice", "session": "s1", "kind": "preference", "key": "drink", "value": "tea"}

# (argument, bad value, words the message must contain). Each row breaks exactly one rule.
BAD_PUTS = [
    # value: 1-512 code points, not blank, no NUL, no lone surrogate, a str.
    ("value", "x" * 513, "513 characters"),
    ("value", "茶" * 513, "513 characters"),
    ("value", "", "blank"),
    ("value", " \t\n\u3000", "blank"),
    ("value", "te\x00a", "NUL"),
    ("value", "tea \ud800", "surrogate"),
    ("value", b"tea", "must be a string, not bytes"),
    ("value", None, "must be a string, not NoneType"),
    ("value", 42, "must be a string, not int"),
    # key: 1-64 of [a-z][a-z0-9_.:-].
    ("key", "", "key is empty"),
    ("key", "k" * 65, "65 characters"),
    ("key", "Drink", "not allowed"),
    ("key", "1drink", "not allowed"),
    ("key", "_drink", "not allowed"),
    ("key", "drink\n", "not allowed"),
    ("key", "drink tea", "not allowed"),
    ("key", "drink/tea", "not allowed"),
    ("key", "café", "not allowed"),
    ("key", "drink%", "not allowed"),
    ("key", ["drink"], "must be a string, not list"),
    ("key", None, "must be a string, not NoneType"),
    # user and session: 1-256 characters of visible text (no control, invisible or line-break
    # character, no surrounding spaces); data, never a path or a key part as given.
    ("user", "", "user is empty"),
    ("user", "   ", "user is blank"),
    ("user", "a" * 257, "257 characters"),
    ("user", "alice\n", "not allowed (control character U+000A)"),
    ("user", "al\x00ice", "not allowed (control character U+0000)"),
    ("user", "ali\u200bce", "not allowed (invisible character U+200B)"),
    ("user", "al\u2028ice", "not allowed (line-break character U+2028)"),
    ("user", "alice\ud800", "not allowed (surrogate character U+D800)"),
    ("user", " alice", "not allowed (spaces around it)"),
    ("user", "alice ", "not allowed (spaces around it)"),
    ("user", 7, "must be a string, not int"),
    ("user", None, "must be a string, not NoneType"),
    ("session", "", "session is empty"),
    ("session", "s" * 257, "257 characters"),
    ("session", "s1\n", "not allowed"),
    ("session", "s\t1", "not allowed"),
    ("session", b"s1", "must be a string, not bytes"),
    # kind: preference or episode.
    ("kind", "fact", "unknown"),
    ("kind", "Preference", "unknown"),
    ("kind", None, "unknown"),
    # confirmation: None, or text of at most 512 code points.
    ("confirmation", 123, "must be a string or None, not int"),
    ("confirmation", "ok\x00", "NUL"),
    ("confirmation", "   ", "blank"),
    ("confirmation", "c" * 513, "513 characters"),
]


@pytest.mark.parametrize(("field", "bad", "words"), BAD_PUTS, ids=lambda v: repr(v)[:24])
def test_put_refuses_bad_input_by_name_and_writes_nothing(store, field, bad, words):
    store.put("alice", "s0", "preference", "drink", "coffee")
    store.put("bob", "s0", "episode", "trip", "went to Oslo")
    before = snapshot(store)
    arguments = {**GOOD, field: bad}
    confirmation = arguments.pop("confirmation", None)
    with pytest.raises(ValidationError) as refused:
        store.put(arguments["user"], arguments["session"], arguments["kind"], arguments["key"],
                  arguments["value"], confirmation=confirmation)
    assert words in str(refused.value)
    assert snapshot(store) == before


@pytest.mark.parametrize(("field", "bad", "words"),
                         [row for row in BAD_PUTS if row[0] in ("user", "kind", "key", "session", "confirmation")],
                         ids=lambda v: repr(v)[:24])
def test_delete_refuses_bad_input_and_deletes_nothing(store, field, bad, words):
    store.put("alice", "s0", "preference", "drink", "coffee")
    before = snapshot(store)
    arguments = {**GOOD, field: bad}
    with pytest.raises(ValidationError) as refused:
        store.delete(arguments["user"], arguments["kind"], arguments["key"], session=arguments["session"],
                     confirmation=arguments.get("confirmation"))
    assert words in str(refused.value)
    assert snapshot(store) == before


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("value", "x" * 512),
        ("value", "茶" * 512),
        ("value", "\U0001f375" * 512),  # 512 code points, 2048 UTF-8 bytes: the rule counts code points
        ("value", "  tea  \n"),
        ("key", "k" * 64),
        ("key", "a0_.:-z"),
        ("user", "A" * 256),
        ("user", "0a_.-Z"),
        ("user", "alice@example.com"),
        ("user", "auth0|123"),
        ("user", "ålice smith"),
        ("user", "../alice"),
        ("user", "alice' OR '1'='1"),
        ("session", "s" * 256),
        ("session", "thread/42"),
        ("session", "s:1*{x}"),
        ("confirmation", "c" * 512),
    ],
    ids=lambda v: repr(v)[:24],
)
def test_values_at_the_limit_are_stored_whole(store, field, value):
    arguments = {**GOOD, field: value}
    confirmation = arguments.pop("confirmation", None)
    store.put(arguments["user"], arguments["session"], arguments["kind"], arguments["key"], arguments["value"],
              confirmation=confirmation)
    stored = store.get(arguments["user"], arguments["kind"], arguments["key"])
    assert stored["value"] == arguments["value"]  # exactly, not truncated or stripped
    assert stored["source_session"] == arguments["session"]
    assert store.history(arguments["user"], arguments["kind"], arguments["key"])[0]["confirmation"] == confirmation


@pytest.mark.parametrize(
    ("query", "limit", "words"),
    [
        ("x" * 257, 5, "257 characters"),
        ("te\x00a", 5, "NUL"),
        ("\udfff", 5, "surrogate"),
        (b"tea", 5, "must be a string, not bytes"),
        (None, 5, "must be a string, not NoneType"),
        ("tea", 0, "from 1 to 50"),
        ("tea", -1, "from 1 to 50"),
        ("tea", 51, "from 1 to 50"),
        ("tea", 10**9, "from 1 to 50"),
        ("tea", True, "must be an integer, not bool"),
        ("tea", 5.0, "must be an integer, not float"),
        ("tea", "5", "must be an integer, not str"),
    ],
    ids=lambda v: repr(v)[:24],
)
def test_search_refuses_bad_query_or_limit_instead_of_clamping(store, query, limit, words):
    store.put("alice", "s1", "preference", "drink", "tea")
    with pytest.raises(ValidationError) as refused:
        store.search("alice", query, limit=limit)
    assert words in str(refused.value)


def test_search_accepts_the_bounds_exactly(store):
    for number in range(60):
        store.put("alice", "s1", "episode", f"e{number}", f"tea number {number}")
    assert len(store.search("alice", "x" * 256, limit=50)) == 0
    assert len(store.search("alice", "tea", limit=50)) == 50
    assert len(store.search("alice", "tea", limit=1)) == 1


def test_default_limits_are_the_teaching_values():
    assert (DEFAULT_LIMITS.max_value_chars, DEFAULT_LIMITS.max_key_chars, DEFAULT_LIMITS.max_id_chars) == (512, 64, 256)
    assert (DEFAULT_LIMITS.max_records_per_user, DEFAULT_LIMITS.max_records_total) == (64, 1024)
    assert DEFAULT_LIMITS.max_db_bytes == 16 * 1024 * 1024
    assert KINDS == ("preference", "episode")


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10", None])
def test_limits_refuse_values_that_are_not_positive_integers(bad):
    with pytest.raises(ValidationError, match="max_records_per_user"):
        Limits().replace(max_records_per_user=bad)


def test_limits_replace_changes_only_what_is_named():
    raised = Limits().replace(max_records_total=200_000)
    assert raised.max_records_total == 200_000
    assert raised.max_records_per_user == Limits().max_records_per_user
    assert Limits().max_records_total == 1024  # the original is frozen, not changed


def test_store_refuses_an_unknown_synchronous_mode(tmp_path):
    with pytest.raises(ValidationError, match="OFF"):
        MemoryStore(tmp_path / "memory.sqlite3", synchronous="OFF")
    assert not (tmp_path / "memory.sqlite3").exists()
