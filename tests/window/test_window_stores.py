"""Two stores on one Redis never share a window (issue 21, class 2).

Two databases (two workspaces, two students on a class Redis) use one `REDIS_URL`. Each window's
keys carry its store's id, so B's chat never recalls A's turns, B's archiver never copies them, and
forgetting a user in B leaves A's window as it was. Real processes, one real redis-server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _cli_helpers import memkit

from memkit import MemoryStore, RedisWindow
from memkit.window import KeyLayout



def requests_of(dump: Path) -> list[dict]:
    return [json.loads(r["messages"][1]["content"]) for r in json.loads(dump.read_text(encoding="utf-8"))]


def test_two_databases_on_one_redis_url_never_recall_each_others_turns(own_server, tmp_path, monkeypatch):
    import os

    server = own_server()
    env = {**os.environ, "REDIS_URL": server.url}
    a, b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    told = memkit("chat", "--db", str(a), "--user", "alice", "--session", "s1",
                  "--message", "My ticket number is T-4471", env=env)
    assert told.returncode == 0, told.stderr
    dump = tmp_path / "b.json"
    asked = memkit("chat", "--db", str(b), "--user", "alice", "--session", "s1",
                   "--message", "What was my ticket number?", "--dump-requests", str(dump), env=env)
    assert asked.returncode == 0, asked.stderr
    assert "T-4471" not in json.dumps(requests_of(dump)), "B's request carried A's turn"
    assert "T-4471" not in json.loads(asked.stdout)["turns"][0]["reply"]
    # ... while A, on the same server, still recalls it.
    dump_a = tmp_path / "a.json"
    again = memkit("chat", "--db", str(a), "--user", "alice", "--session", "s1",
                   "--message", "What was my ticket number?", "--dump-requests", str(dump_a), env=env)
    assert again.returncode == 0, again.stderr
    assert "T-4471" in json.loads(again.stdout)["turns"][0]["reply"]


@pytest.fixture
def two_stores(tmp_path):
    with MemoryStore(tmp_path / "a.sqlite3") as a, MemoryStore(tmp_path / "b.sqlite3") as b:
        yield a, b


def test_each_store_has_its_own_id_and_its_keys_carry_it(two_stores, own_server):
    a, b = two_stores
    assert a.store_id != b.store_id
    client = own_server().client
    with RedisWindow(a, client, background=False) as window:
        window.append("alice", "s1", "user", "hello")
        keys = sorted(k.decode() for k in client.scan_iter(match="memkit:*") if b"_life" not in k)
    prefix = f"memkit:{a.store_id[:16]}:"
    assert keys and all(k.startswith(prefix) for k in keys), keys
    assert KeyLayout("ops", store_id=b.store_id).session("alice", "s1").turns == f"ops:{b.store_id[:16]}:alice:s1:turns"


def test_bs_archiver_never_copies_as_turns_and_bs_forget_never_touches_as_window(two_stores, own_server):
    a, b = two_stores
    client = own_server().client
    with RedisWindow(a, client, size=2, background=False) as window_a, \
            RedisWindow(b, client, size=2, background=False) as window_b:
        for n in range(6):  # four fall out of A's window into its pending turns
            window_a.append("alice", "s1", "user", f"A's secret {n}")
        assert len(window_a.pending("alice", "s1")) == 4
        window_b.flush()
        window_b.archiver.retire_all()
        assert b.archived_turns("alice", "s1") == []
        assert b.traces("alice")["transcript"] == 0
        forgotten = window_b.forget_user("alice")
        assert forgotten["window_turns"] == 0 and forgotten["redis_keys"] == 0
        assert [t["content"] for t in window_a.recent("alice", "s1")] == ["A's secret 4", "A's secret 5"]
        window_a.flush()
        # A's archive has no hole: every turn that left A's window reached A's archive, in order.
        assert [t["turn"] for t in a.archived_turns("alice", "s1")] == [1, 2, 3, 4]
