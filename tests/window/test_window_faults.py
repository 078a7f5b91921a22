"""The Redis window when things go wrong around it: a Redis that comes back older than the archive,
an archive that refuses while a turn is appended, a program that ends without close(), a server
that evicts keys, exit hooks, and REDIS_URL values that are not Redis URLs.

Real parts throughout: embedded redis-servers of each test's own (stopped, killed and restarted
for real), real SQLite files, real processes that exit without closing anything.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import signal
import weakref

import pytest

from _window_helpers import wait_for
import lab
from lab import redis_faults
from memkit.errors import LockedError, WindowError
from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.window import RedisWindow, connect_redis, start_embedded_redis
from memkit.servers.redis import _is_alive
from memkit.servers.redis_client import DEFAULT_TIMEOUT_S


def _contents(turns):
    return [t["content"] for t in turns]


# -- a Redis that comes back older than the archive -------------------------------------------------


def test_a_redis_restarted_from_an_older_snapshot_never_reuses_an_archived_turn_number(own_server, store, tmp_path):
    folder = tmp_path / "redis"
    folder.mkdir()
    first = own_server(persistence="aof", directory=folder)
    window = RedisWindow(store, first.client, size=3, background=False)
    for i in range(1, 6):
        window.append("alice", "s1", "user", f"before {i}")
    window.flush()
    first.client.save()  # the snapshot a stock server would restart from
    snapshot = (folder / "redis.db").read_bytes()
    for i in range(6, 11):
        window.append("alice", "s1", "user", f"before {i}")
    window.flush()
    assert [t["turn"] for t in store.archived_turns("alice", "s1")] == [1, 2, 3, 4, 5, 6, 7]
    os.kill(first.pid, signal.SIGKILL)  # Redis dies; it comes back from the older snapshot
    assert wait_for(lambda: not _is_alive(first.pid))
    shutil.rmtree(folder)
    folder.mkdir()
    (folder / "redis.db").write_bytes(snapshot)
    second = own_server(persistence="none", directory=folder)
    assert second.client.get(window.keys("alice", "s1").seq) == b"5"  # the counter went back
    again = RedisWindow(store, second.client, size=3, background=False)
    numbers = [again.append("alice", "s1", "user", f"after {i}")["turn"] for i in range(1, 5)]
    again.archiver.retire_all()

    assert min(numbers) > 7 and numbers == sorted(set(numbers))  # past the archive, each once
    whole = again.load_session("alice", "s1")
    assert _contents(whole)[-4:] == [f"after {i}" for i in range(1, 5)]  # every acknowledged turn kept
    assert [t["content"] for t in whole if t["turn"] <= 7] == [f"before {i}" for i in range(1, 8)]


def test_a_kit_client_notes_the_server_life_on_every_connect_and_a_plain_client_does_not(own_server):
    import redis

    from memkit.window import note_server_life
    from memkit.window.protocol import LIFE_KEY
    from memkit.servers.redis_client import notes_server_life

    handle = own_server()
    client = handle.client
    run_id = client.info("server")["run_id"]
    assert client.get(LIFE_KEY) == run_id.encode()  # set when the handle's first connection opened
    client.set(LIFE_KEY, "an-older-life")  # what a server restored from an older state brings back
    client.connection_pool.disconnect()  # as a restart does to every connection
    assert client.get(LIFE_KEY) == run_id.encode()  # the new connection put it right first
    plain = redis.Redis(unix_socket_path=handle.url.removeprefix("unix://"))
    hooked = redis.Redis(unix_socket_path=handle.url.removeprefix("unix://"), redis_connect_func=note_server_life)
    try:
        assert notes_server_life(client) and notes_server_life(hooked) and not notes_server_life(plain)
        client.set(LIFE_KEY, "an-older-life")
        plain.ping()
        assert client.get(LIFE_KEY) == b"an-older-life"  # a plain client's connect changes nothing
        hooked.ping()
        assert client.get(LIFE_KEY) == run_id.encode()
    finally:
        plain.close()
        hooked.close()


def test_a_turn_whose_number_the_archive_holds_with_other_content_is_kept_and_reported(own_server, store, caplog):
    handle = own_server()
    window = RedisWindow(store, handle.client, size=1, background=False)
    store.archive_turns("alice", "s1", [{"turn": 1, "role": "user", "content": "archived first", "at": "t1"}])
    # Another writer's turn 1 reaches Redis's pending set (a counter that went back, a race at a restart).
    keys = window.keys("alice", "s1")
    handle.client.zadd(keys.pending, {'{"turn":1,"at":"t2","content":"written later","role":"user"}': 1})
    handle.client.sadd(window.layout.queue, "alice/s1")

    with caplog.at_level(logging.ERROR, logger="memkit.window.archiver"):
        window.flush()

    whole = window.load_session("alice", "s1")
    assert _contents(whole) == ["archived first", "written later"]  # neither copy dropped
    assert [t["turn"] for t in whole] == [1, 2]
    assert window.archiver.renumbered == [{"user": "alice", "session": "s1", "was": 1, "now": 2}]
    assert "turn 1 of alice/s1" in caplog.text and "different content" in caplog.text
    assert window.append("alice", "s1", "user", "next")["turn"] == 3


# -- append: stored and returns, or not stored and raises ---------------------------------------------


def test_an_append_the_archive_refuses_is_not_stored_and_a_retry_stores_it_once(own_server, tmp_path):
    handle = own_server()
    with MemoryStore(tmp_path / "m.sqlite3", limits=Limits().replace(busy_timeout_ms=100)) as store:
        window = RedisWindow(store, handle.client, size=1, max_backlog=1, background=False)
        window.append("alice", "s1", "user", "a")
        window.append("alice", "s1", "user", "b")  # "a" waits in pending: the backlog is full
        with lab.holding_write_lock(store.path):
            with pytest.raises(LockedError):
                window.append("alice", "s1", "user", "c")  # it would pass the backlog: archive first
            assert _contents(window.load_session("alice", "s1")) == ["a", "b"]  # "c" was not stored
        assert window.append("alice", "s1", "user", "c")["turn"] == 3  # the retry
        assert _contents(window.load_session("alice", "s1")) == ["a", "b", "c"]


def test_append_documents_every_error_it_raises():
    doc = RedisWindow.append.__doc__
    for name in ("ValidationError", "QuotaError", "StoreError", "LockedError", "WindowError"):
        assert name in doc, name


# -- a program that ends without close() ---------------------------------------------------------------


@pytest.mark.parametrize("server", ["the window's own", "a handle the program started"])
def test_a_program_that_ends_without_close_archives_its_window_first(tmp_path, monkeypatch, server):
    monkeypatch.delenv("REDIS_URL", raising=False)
    db = tmp_path / "m.sqlite3"
    result = lab.run_worker("abandon", {"db": str(db), "turns": 10, "size": 3, "background": True,
                                        "own_server": server == "the window's own"})
    assert result["appended"] == list(range(1, 11))
    with MemoryStore(db) as store:
        assert [t["turn"] for t in store.archived_turns("alice", "s1")] == list(range(1, 11))
    assert not _is_alive(result["redis_pid"])


def test_a_window_closed_before_the_embedded_server_it_was_given_leaves_every_turn_archived(own_server, store):
    handle = own_server()  # keeps no data: stopping it drops whatever it holds
    window = RedisWindow(store, handle.client, size=3, background=False)
    for i in range(5):
        window.append("alice", "s1", "user", f"turn {i}")
    window.close()
    handle.close()
    assert [t["turn"] for t in store.archived_turns("alice", "s1")] == [1, 2, 3, 4, 5]


def test_closing_never_raises_for_what_it_could_not_archive(own_server, tmp_path, caplog):
    handle = own_server()
    with MemoryStore(tmp_path / "m.sqlite3", limits=Limits().replace(busy_timeout_ms=100)) as store:
        window = RedisWindow(store, handle.client, size=1, background=False)
        window.append("alice", "s1", "user", "a")
        window.append("alice", "s1", "user", "b")
        with lab.holding_write_lock(store.path), caplog.at_level(logging.WARNING):
            window.close()
        assert "could not archive before closing" in caplog.text and "locked" in caplog.text
        assert _contents(window.pending("alice", "s1")) == ["a"]  # it waits in Redis for the next pass


# -- exit hooks -------------------------------------------------------------------------------------------


def test_open_and_close_cycles_leave_no_exit_hook_behind(store, monkeypatch):
    """An exit hook holds what it would close; once closed, nothing may hold the handle or its server."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    held = []
    for _ in range(3):
        window = RedisWindow(store, background=True)
        held += [weakref.ref(window.handle), weakref.ref(window.handle._server)]
        window.close()
        with start_embedded_redis(persistence="none") as handle:
            held += [weakref.ref(handle), weakref.ref(handle._server)]
            RedisWindow(store, handle.client, background=False).close()
    del window, handle
    gc.collect()
    assert [ref() for ref in held] == [None] * len(held)


# -- a server that evicts keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-lru", "allkeys-random", "volatile-ttl"])
def test_a_server_that_evicts_keys_is_refused_unless_the_risk_is_accepted(own_server, store, policy):
    handle = own_server()
    handle.client.config_set("maxmemory-policy", policy)
    with pytest.raises(WindowError, match=rf"maxmemory-policy {policy}.*noeviction.*accept_eviction=True"):
        RedisWindow(store, handle.client, background=False)
    accepted = RedisWindow(store, handle.client, background=False, accept_eviction=True)
    assert accepted.append("alice", "s1", "user", "at my own risk")["turn"] == 1
    accepted.close()


# -- REDIS_URL ------------------------------------------------------------------------------------------


BAD_URLS = [
    ("localhost:6379", "has no scheme"),
    ("http://localhost:6379/0", "scheme 'http'"),
    ("redis://h:notaport/0", "port 'notaport'"),
    ("redis://localhost:99999/0", "port '99999'"),
    (" redis://localhost:6379/0", "whitespace"),
    ("redis://localhost:6379/0\n", "whitespace"),
    ("redis://[::1", "IPv6"),
    ("redis://localhost:6379/zero", "database 'zero'"),
    ("redis:///0", "no host"),
    ("unix://", "no socket path"),
    ("redis://memkit:hunter2@h:notaport/0", "port 'notaport'"),
    ("http://memkit:hunter2@localhost/", "scheme 'http'"),
    ("redis://memkit:hunter2@[::1", "IPv6"),
    (" redis://memkit:hunter2@localhost:6379/0", "whitespace"),
]


@pytest.mark.parametrize("url, words", BAD_URLS)
def test_a_redis_url_that_is_not_one_is_a_window_error_naming_the_problem(url, words, monkeypatch, store):
    monkeypatch.setenv("REDIS_URL", url)
    for attempt in (lambda: connect_redis(url), connect_redis, lambda: RedisWindow(store, background=False)):
        with pytest.raises(WindowError, match=words) as caught:
            attempt()
        assert "hunter2" not in str(caught.value)


def test_a_server_that_accepts_and_never_answers_is_unavailable_after_one_timeout():
    for timeout in (0.2, DEFAULT_TIMEOUT_S):
        seconds, error = redis_faults.silent_server_seconds(timeout)
        assert isinstance(error, WindowError) and "unavailable" in str(error)
        assert seconds < 2 * timeout + 0.5  # one wait, not one per retry


def test_the_timeout_is_checked():
    for bad in (0, -1, float("nan"), "2"):
        with pytest.raises(ValueError, match="timeout"):
            connect_redis("redis://127.0.0.1:1/0", timeout=bad)
