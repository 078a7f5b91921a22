"""The reliability lab: no read, search, retrieval, history, export, window or request holds another
user's value.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _reliability import examples, ids, keys
from lab import read_answer, start_worker
from memkit.agent import MemoryAgent
from memkit.errors import ValidationError
from memkit.limits import KINDS
from memkit.models import FixtureModel
from memkit.retrieval import retrieve
from memkit.store import MemoryStore


PROBE_PAIRS = [
    ("acme", "acme-corp"),          # one id a prefix of the other
    ("Alice", "alice"),             # case variants
    ("a_c", "abc"),                 # '_' is LIKE's any-character
    ("a.b", "a"),                   # ':'/'.'-joined Redis keys: a.b:s vs a:b.s must not meet
    ("user1", "user10"),
    ("bob", "bob."),
    ("a:b", "a"),                   # ids any text (Limits.check_id): encoded in keys, a:b:s1 vs a:b%3As1
    ("alice/s1", "alice"),          # '/' joins index members
    ("acme:*", "acme"),             # a SCAN glob in an id matches nothing but itself
]
id_pairs = st.one_of(
    st.sampled_from(PROBE_PAIRS),
    st.tuples(ids, ids),
    ids.flatmap(lambda a: st.sampled_from([(a, a.swapcase()), (a, a + "-corp"), (a, a + "_"), (a, a + ".x")])),
).filter(lambda pair: pair[0] != pair[1] and all(len(u) <= 64 for u in pair))


def leaks(other_tokens: set[str], *outputs: Any) -> list[str]:
    text = json.dumps(outputs, ensure_ascii=False, default=str)
    return sorted(token for token in other_tokens if token in text)


@pytest.fixture(scope="module")
def redis_client():
    from memkit.window import connect_redis

    with connect_redis(persistence="none") as handle:
        yield handle.client


def test_isolation_no_read_search_retrieval_history_export_window_or_request_holds_another_users_value(
        tmp_path, figures, redis_client):
    from memkit.window import RedisWindow

    store = MemoryStore(tmp_path / "isolation.sqlite3")
    window = RedisWindow(store, redis_client, prefix=f"iso-{uuid.uuid4().hex[:8]}", size=2, background=False)
    tally = {"user pairs": 0, "reads and requests scanned": 0, "leaks": 0}

    @examples(25, 250)
    @given(pair=id_pairs, shared_keys=st.lists(keys, min_size=1, max_size=3, unique=True),
           words=st.text(max_size=30).filter(lambda t: "\x00" not in t))
    def one_pair(pair, shared_keys, words):
        for user in pair:  # a clean start, even after a failed example
            store.forget_user(user)
        tokens = {user: {f"tok{uuid.uuid4().hex[:10]}"} for user in pair}
        for user in pair:
            token = next(iter(tokens[user]))
            for key in shared_keys:
                for kind in KINDS:  # the same key under both kinds, for both users
                    store.put(user, "s1", kind, key, f"{kind} {key} of {user}: {token}")
            for n in range(3):  # more turns than the window holds: some go to the archive
                window.append(user, "s1", "user", f"turn {n} of {user}: {token}")
            window.flush()
        for user, other in (pair, pair[::-1]):
            mine, theirs = next(iter(tokens[user])), tokens[other]
            model = FixtureModel()
            agent = MemoryAgent(store, user, "s2", model)
            # The tasks name the other user and the shared keys (never the other's values: a task is
            # sent to the model as it is, so a value typed into it would be found for the wrong reason).
            for task in [f"What is my {shared_keys[0]}?", f"Tell me about {other} and their {shared_keys[-1]}",
                         f"{words} {' '.join(shared_keys)}".strip() or "hello"]:
                asyncio.run(agent.ask(task))
            outputs = [
                [store.get(user, kind, key) for kind in KINDS for key in shared_keys],
                [store.search(user, q, limit=50)
                 for q in ["", *shared_keys, next(iter(theirs)), other, "of", "%", "_"]],
                store.records(user), [store.history(user, kind, key) for kind in KINDS for key in shared_keys],
                store.export_user(user), retrieve(store, user, f"{' '.join(shared_keys)} {other}").memory,
                window.recent(user, "s1"), window.load_session(user, "s1"), store.archived_turns(user, "s1"),
                window.snapshot(user, "s1"), model.requests,
            ]
            assert mine in json.dumps(outputs[0], ensure_ascii=False)  # the user does see their own
            tally["reads and requests scanned"] += len(outputs) - 1 + len(model.requests)
            found = leaks(theirs, outputs)
            tally["leaks"] += len(found)
            assert found == [], (user, other)
        # Forgetting one leaves the other whole.
        store.forget_user(pair[0])
        assert store.records(pair[0]) == [] and len(store.records(pair[1])) == 2 * len(shared_keys)
        assert leaks(tokens[pair[0]], store.export_user(pair[1]), store.search(pair[1], "tok", limit=50)) == []
        store.forget_user(pair[1])
        tally["user pairs"] += 1

    try:
        one_pair()
    finally:
        window.close()
        store.close()
    figures("Isolation: generated user pairs", **tally)
    assert tally["leaks"] == 0


def test_isolation_probes_hold_after_a_restart_and_after_forget_user(tmp_path, figures, redis_client):
    """The ids that broke other memory systems, checked again from fresh processes."""
    from memkit.window import RedisWindow, session_keys

    path = tmp_path / "probes.sqlite3"
    prefix = f"probe-{uuid.uuid4().hex[:8]}"
    users = sorted({user for pair in PROBE_PAIRS for user in pair})
    token = {user: f"tok{uuid.uuid4().hex[:10]}" for user in users}
    with MemoryStore(path) as store, RedisWindow(store, redis_client, prefix=prefix, size=1,
                                                 background=False) as window:
        for user in users:
            for kind in KINDS:
                store.put(user, "s1", kind, "drink", f"{kind} of {user}: {token[user]}")
            window.append(user, "s1", "user", f"first turn of {user}: {token[user]}")
            window.append(user, "s1", "user", f"second turn of {user}: {token[user]}")
        window.flush()
        # Ids that are not visible text (controls, invisible characters, spaces around) are refused, and
        # make no keys; separators, globs and LIKE characters are text, encoded in keys (PROBE_PAIRS).
        refused = 0
        for bad in ["", " ", "a\n", "a\x00", "ali\u200bce", " a", "a\u2028b", "x" * 257]:
            with pytest.raises(ValidationError):
                window.append(bad, "s1", "user", "x")
            with pytest.raises(ValidationError):
                store.put(bad, "s1", "preference", "drink", "x")
            refused += 1
        # Every Redis key belongs to exactly one (user, session): no key is shared or ambiguous.
        owners: dict[str, str] = {}
        for user in users:
            for key in session_keys(window.layout.base, user, "s1"):  # {prefix}:{store}
                assert key not in owners, (key, owners.get(key), user)
                owners[key] = user
        stray = [k.decode() for k in redis_client.scan_iter(f"{prefix}:*")
                 if k.decode() not in owners and not k.decode().startswith(f"{window.layout.base}:_")]
        assert stray == []

    def dump_all(subset: list[str]) -> dict[str, Any]:
        answers = {}
        for user in subset:  # a fresh process per user: a restarted session
            process = start_worker("dump", {"path": str(path), "user": user, "queries": ["", "drink", "tok", "of"],
                                            "keys": [[k, "drink"] for k in KINDS],
                                            "tasks": ["What is my drink?", "What happened about drink?"]})
            answers[user] = read_answer(process)
            process.communicate(timeout=60)
        return answers

    scanned, leaked = 0, 0
    for user, answer in dump_all(users).items():
        others = {token[u] for u in users if u != user}
        assert token[user] in json.dumps(answer["records"])
        found = leaks(others, answer)
        scanned += 1 + len(answer["requests"])
        leaked += len(found)
        assert found == [], (user, found)
    forgotten = [pair[0] for pair in PROBE_PAIRS]
    with MemoryStore(path) as store, RedisWindow(store, redis_client, prefix=prefix, size=1,
                                                 background=False) as window:
        for user in forgotten:
            # A turn pushes an older one into pending: store.forget_user alone would let the archiver
            # copy it back into the transcript. window.forget_user clears Redis first (a regression).
            window.append(user, "s1", "user", f"third turn of {user}: {token[user]}")
            assert window.forget_user(user)["redis_keys"] >= 2
        window.flush()
        for user in users:
            recent = window.recent(user, "s1")
            assert ((recent == []) == (user in forgotten)
                    and (store.archived_turns(user, "s1") == []) == (user in forgotten))
    for user, answer in dump_all(users).items():
        others = {token[u] for u in users if u != user}
        if user in forgotten:
            assert answer["records"] == [] and token[user] not in json.dumps(answer)
        else:
            assert len(answer["records"]) == 2
        found = leaks(others | ({token[user]} if user in forgotten else set()), answer)
        scanned += 1 + len(answer["requests"])
        leaked += len(found)
        assert found == [], (user, found)
    figures("Isolation: probe ids after restart and forget_user", **{
        "probe users": len(users), "bad ids refused": refused, "restarted reads and requests scanned": scanned,
        "leaks": leaked})
    assert leaked == 0
