"""Opening store files: refusing what is not a sound memkit database (leaving it unchanged), locks,
processes, crashes, migrations.

Every test uses a real file under tmp_path; crashes, restarts, locks and races use real processes
(the lab's workers, `classroom.lab`, started with `sys.executable`).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path

import pytest

from _store_helpers import folder_state, memkit_file, snapshot, worker
import lab
from memkit.errors import LockedError, QuotaError, StoreError
from memkit.limits import Limits
from memkit.store import SCHEMA_VERSION, MemoryStore, is_busy

pytestmark = pytest.mark.sqlite_only  # the SQLite file itself: refusals, WAL, locks, byte-identical files


# -- opening: refuse what is not ours, and leave it exactly as it was ----------------------------


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
    with pytest.raises(StoreError, match=r"symbolic link.*real\.sqlite3"):
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
    hanging = lab.start_worker("put", {"path": str(path), "user": "alice", "key": "drink", "value": "tea",
                                       "hang": True})
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


def _file_at_version(path: Path, version: int) -> Path:
    from memkit.store import MIGRATIONS

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


def _v11_file_with_records(path: Path, users: dict[str, int]) -> Path:
    """A file made by the steps up to 11 (the store-wide count in `total_count`), holding `users`'
    records (and a create event each), written with plain SQL as memkit 11 wrote them."""
    _file_at_version(path, 11)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    for user, count in users.items():
        for n in range(count):
            seq = conn.execute("UPDATE store_meta SET sequence = sequence + 1 RETURNING sequence").fetchone()[0]
            conn.execute("INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision,"
                         " created_at, updated_at, key_fold, value_fold, seq)"
                         " VALUES (?, 'preference', ?, 'v', 's1', 1, '2026-01-01T00:00:00.000000Z',"
                         " '2026-01-01T00:00:00.000000Z', ?, 'v', ?)", (user, f"k{n}", f"k{n}", seq))
            conn.execute("INSERT INTO memory_events (user_id, kind, memory_key, action, revision, new_value, at)"
                         " VALUES (?, 'preference', ?, 'create', 1, 'v', '2026-01-01T00:00:00.000000Z')",
                         (user, f"k{n}"))
    conn.execute("COMMIT")
    conn.close()
    return path


def test_a_version_11_file_with_records_keeps_its_exact_count_when_migrated(tmp_path):
    """Step 12 moves the store-wide count into store_meta: the count, the sequence and the database
    id all survive, and the quota and the counter check read the moved count from then on."""
    from memkit.store import inspect_file

    path = _v11_file_with_records(tmp_path / "v11.sqlite3", {"alice": 3, "bob": 2})
    before = sqlite3.connect(path)
    sequence, database_id = before.execute("SELECT sequence, database_id FROM store_meta").fetchone()
    assert before.execute("SELECT records FROM total_count").fetchone()[0] == 5
    before.close()
    # Read before any store opens (and migrates) it: the count is found where version 11 keeps it.
    assert inspect_file(path) == {"integrity": "ok", "records": 5, "counted": 5, "counters_consistent": True}
    with MemoryStore(path, limits=Limits().replace(max_records_total=6)) as store:
        conn = store.connection
        assert store.health()["schema_version"] == SCHEMA_VERSION >= 12  # migrated to the newest, past step 12
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'total_count'").fetchone() is None
        opened = conn.execute("SELECT sequence, database_id, records FROM store_meta").fetchone()
        # The sequence only grows (recording the limits at this first open took a number).
        assert opened[0] >= sequence and tuple(opened)[1:] == (database_id, 5)
        health = store.health()
        assert (health["records_total"], health["counters_consistent"]) == (5, True)
        # The global quota reads the moved count inside the write transaction: exactly one more fits.
        store.put("carol", "s1", "preference", "drink", "tea")
        with pytest.raises(QuotaError, match="the store holds 6 records; the global quota is 6"):
            store.put("carol", "s1", "preference", "food", "rice")
        assert store.delete("alice", "preference", "k0")
        store.put("carol", "s1", "preference", "food", "rice")  # the delete gave its place back
        assert conn.execute("SELECT records FROM store_meta").fetchone()[0] == 6
        assert store.health()["counters_consistent"] is True
        assert conn.execute("SELECT sequence FROM store_meta").fetchone()[0] == opened[0] + 3
    assert inspect_file(path)["counted"] == 6


def test_the_moved_count_drifting_is_noticed(tmp_path):
    path = _v11_file_with_records(tmp_path / "v11.sqlite3", {"alice": 2})
    MemoryStore(path).close()
    raw_edit(path, "UPDATE store_meta SET records = records - 1")
    assert inspect_file_result(path) == (2, 1, False)


def inspect_file_result(path: Path) -> tuple[int, int, bool]:
    from memkit.store import inspect_file

    found = inspect_file(path)
    return found["records"], found["counted"], found["counters_consistent"]


def test_an_older_version_file_missing_what_its_steps_made_is_refused(tmp_path):
    path = _file_at_version(tmp_path / "old.sqlite3", 1)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE transcript")
    conn.close()
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match="says schema version 1 but lacks table 'transcript'"):
        MemoryStore(path)
    assert folder_state(tmp_path) == before


def test_expected_columns_are_what_the_steps_make_at_every_version(tmp_path):
    """Derived from the steps' text, checked against a database the steps built (FTS5's own tables aside)."""
    from memkit.store import MIGRATIONS, expected_columns

    for version in range(1, SCHEMA_VERSION + 1):
        conn = sqlite3.connect(_file_at_version(tmp_path / f"v{version}.sqlite3", version))
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                                                 " AND name NOT LIKE 'sqlite%' AND name NOT LIKE 'memories_fts%'")}
        made = {table: {row[1] for row in conn.execute(f"PRAGMA table_info({table})")} for table in tables}
        conn.close()
        assert made == expected_columns(version), version
    assert len(MIGRATIONS) == SCHEMA_VERSION


def test_a_file_whose_later_table_lacks_a_column_is_refused(tmp_path):
    path = _file_at_version(tmp_path / "new.sqlite3", SCHEMA_VERSION)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("ALTER TABLE window_places DROP COLUMN noted_at")  # the table of the last step
    conn.close()
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match=f"says schema version {SCHEMA_VERSION} but table 'window_places' lacks"
                                         " noted_at; it is malformed"):
        MemoryStore(path)
    assert folder_state(tmp_path) == before


def test_locked_is_decided_by_sqlite_error_code_not_by_the_message(tmp_path):
    path = tmp_path / "memory.sqlite3"
    MemoryStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with (MemoryStore(path, limits=Limits().replace(busy_timeout_ms=50)) as store,
              pytest.raises(LockedError, match="locked by another writer")):
            store.put("alice", "s1", "preference", "drink", "tea")
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError) as busy:
            other.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError, match="locked") as named:
            other.execute("SELECT * FROM locked")  # "no such table: locked": not a lock at all
        other.close()
    finally:
        holder.close()
    assert is_busy(busy.value) and not is_busy(named.value)


def test_a_version_2_file_is_numbered_in_its_old_order_and_given_its_own_id(tmp_path):
    ids = []
    for name in ("a.sqlite3", "b.sqlite3"):
        path = raw_edit(_file_at_version(tmp_path / name, 2), *[
            "INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision, created_at,"
            f" updated_at, key_fold, value_fold) VALUES ('alice', 'preference', '{key}', 'tea', 's1', 1, '{at}',"
            f" '{at}', '{key}', 'tea')"
            for key, at in (("late", "2026-01-03"), ("early", "2026-01-01"), ("middle", "2026-01-02"))
        ])
        with MemoryStore(path) as store:
            assert store.health()["schema_version"] == SCHEMA_VERSION
            assert [r["key"] for r in store.search("alice", "tea")] == ["late", "middle", "early"]
            store.put("alice", "s2", "preference", "early", "green tea")
            assert [r["key"] for r in store.search("alice", "tea")] == ["early", "late", "middle"]
            ids.append(store.connection.execute("SELECT database_id FROM store_meta").fetchone()[0])
    assert len(set(ids)) == 2 and all(len(i) == 32 for i in ids)
