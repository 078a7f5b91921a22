"""The reliability lab: the ids applications use never let one (user, session) meet another.

Ids are any visible text (`Limits.check_id`): e-mail addresses, `auth0|123`, `thread/42`, and the
hostile strings of `_reliability.NASTY` (Redis separators, globs, SQL and LIKE metacharacters, RTL
marks, emoji). Generated pairs each write a Redis window turn, openai-agents session items and a
record; then no Redis key, index member or row is shared, every pair reads back only its own, and
an export bundle moves each user to another store byte for byte. Ids that are not visible text are
refused and change nothing. See `tests/_reliability.py` for the sizes and conftest.py for `figures`.
"""

from __future__ import annotations

import json
import random
import uuid

import pytest

from _reliability import NASTY, scale
from memkit.errors import ValidationError
from memkit.limits import DEFAULT_LIMITS
from memkit.store import MemoryStore

APPLICATION_IDS = ["alice@example.com", "auth0|123", "google-oauth2|1093", "thread/42", "org:acme/user:7",
                   "a:b", "a", "b:s", "{tag}", "_sessions", "user 42", "ålice", "😀", "a%3Ab"]


def _valid(text: str) -> bool:
    try:
        DEFAULT_LIMITS.check_id("id", text)
    except ValidationError:
        return False
    return True


def _pairs(count: int) -> list[tuple[str, str]]:
    """`count` distinct (user, session) pairs built from application ids and hostile text, seeded."""
    rng = random.Random(34)
    pieces = [text for text in APPLICATION_IDS + NASTY if _valid(text)]
    pairs: set[tuple[str, str]] = {("a:b", "s"), ("a", "b:s"), ("a", "b/s"), ("a/b", "s")}
    while len(pairs) < count:
        user = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))[:DEFAULT_LIMITS.max_id_chars]
        session = rng.choice([*pieces, "s1", "thread/42"])
        if _valid(user) and _valid(session):
            pairs.add((user, session))
    return sorted(pairs)


@pytest.fixture(scope="module")
def redis_client():
    from memkit.window import connect_redis

    with connect_redis(persistence="none") as handle:
        yield handle.client


def test_generated_ids_never_share_a_key_a_row_or_a_bundle(tmp_path, figures, redis_client):
    from memkit.window import RedisWindow

    pairs = _pairs(scale(40, 400))
    prefix = f"ids-{uuid.uuid4().hex[:8]}"
    token = {pair: uuid.uuid4().hex for pair in pairs}
    with MemoryStore(tmp_path / "memory.sqlite3", synchronous="NORMAL",
                     limits=DEFAULT_LIMITS.replace(max_records_total=1 << 20, max_db_bytes=1 << 30)) as store, \
            RedisWindow(store, redis_client, prefix=prefix, size=4, background=False) as window:
        for pair in pairs:
            window.append(*pair, "user", f"turn {token[pair]}")
            store.add_agent_items(*pair, [json.dumps({"role": "user", "content": token[pair]})])
            store.put(pair[0], pair[1], "episode", f"e{token[pair][:8]}", f"memory {token[pair]}")
        # Keys: every key is one pair's (or an index key); the index reads back to exactly the pairs.
        owner: dict[str, tuple[str, str]] = {}
        shared = sum(owner.setdefault(key, pair) != pair for pair in pairs for key in window.keys(*pair))
        found = {k.decode() for k in redis_client.scan_iter(match=f"{prefix}:*")}
        assert found - set(owner) == {window.layout.index}
        members = redis_client.zrange(window.layout.index, 0, -1)
        assert sorted(window.layout.refs(members)) == pairs
        # Reads: each pair sees its own turn and item, and no other pair's token.
        leaks = 0
        for pair in pairs:
            seen = json.dumps([window.recent(*pair), store.agent_items(*pair)])
            assert seen.count(token[pair]) == 2
            leaks += sum(token[other] in seen for other in pairs if other != pair)
        # Bundles: each user moves to another store exactly (records, history, session items).
        users = sorted({user for user, _ in pairs})
        moved = 0
        with MemoryStore(tmp_path / "other.sqlite3", synchronous="NORMAL",
                         limits=store.limits) as other:
            for user in users:
                bundle = store.export_user(user)
                other.import_records(bundle)
                assert other.export_user(user) == bundle
                moved += 1
        # Not visible text: refused, nothing written anywhere.
        before = (len(list(redis_client.scan_iter(match=f"{prefix}:*"))), store.health()["rows"])
        refused = 0
        for bad in [*(text for text in NASTY if not _valid(text)), "x" * 257, " alice", "ali\u200bce"]:
            for call, args in ((window.append, (bad, "s1", "user", "x")), (store.add_agent_items, (bad, "s1", ["1"])),
                               (store.put, (bad, "s1", "episode", "k", "v"))):
                with pytest.raises(ValidationError):
                    call(*args)
                refused += 1
        assert (len(list(redis_client.scan_iter(match=f"{prefix}:*"))), store.health()["rows"]) == before
        window.forget_user(pairs[0][0])
        assert token[pairs[-1]] in json.dumps(window.recent(*pairs[-1]))
    assert (shared, leaks) == (0, 0)
    figures("Ids applications use", pairs=len(pairs), users=len(users), redis_keys=len(owner),
            keys_shared=shared, leaks=leaks, bundles_moved_exactly=moved, refusals=refused)
