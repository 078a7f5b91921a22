"""The trigram index is kept only where a store's limits let a user reach the size at which search
asks it (`MemoryStore.fts_min_user_rows`), and search answers the same with it or without it.

Every test uses a real SQLite file under tmp_path.
"""

from __future__ import annotations

import sqlite3

import pytest

from _store_helpers import open_store
from memkit.errors import StoreError
from memkit.limits import Limits
from memkit.store import MIGRATIONS, SCHEMA_VERSION, MemoryStore, expected_objects
from memkit.store.schema import SEARCH_INDEX_LOOKUP_OBJECTS, SEARCH_INDEX_OBJECTS, has_search_index

WORDS = ["green tea", "black TEA", "coffee", "Straße", "strasse at noon", "茶 and cake", "teal boat"]
INDEXED = Limits().replace(max_records_per_user=MemoryStore.fts_min_user_rows)


def _objects(conn: sqlite3.Connection) -> set[tuple[str, str]]:
    return {(row[0], row[1]) for row in conn.execute("SELECT type, name FROM sqlite_master")
            if not row[1].startswith("sqlite_")}


def _fill(store: MemoryStore) -> None:
    for n, word in enumerate(WORDS):
        store.put("alice", "s1", "episode", f"k{n}", word)
        store.put("bob", "s1", "preference", f"k{n}", f"{word} of bob")


def _indexed_rows(conn: sqlite3.Connection, term: str) -> list[int]:
    found = conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rowid",
                         ('"' + term + '"',)).fetchall()
    return [row[0] for row in found]


def _matching_rows(conn: sqlite3.Connection, term: str) -> list[int]:
    found = conn.execute("SELECT id FROM memories WHERE instr(key_fold, ?1) > 0 OR instr(value_fold, ?1) > 0"
                         " ORDER BY id", (term,)).fetchall()
    return [row[0] for row in found]


def _answers(store: MemoryStore) -> dict[tuple[str, str, int], list[str]]:
    """What search returns through the index (threshold 0) and by a scan (threshold 10**9)."""
    out = {}
    for threshold in (0, 10**9):
        store.fts_min_user_rows = threshold
        for user in ("alice", "bob"):
            for query in ("tea", "TEA", "strasse", "茶 a", "bob", "zzz"):
                out[(user, query, threshold)] = [r["key"] for r in store.search(user, query, limit=50)]
    store.fts_min_user_rows = MemoryStore.fts_min_user_rows
    return out


def test_the_default_limits_keep_no_trigram_index(tmp_path):
    with open_store(tmp_path / "m.sqlite3") as store:
        _fill(store)
        conn = store.connection
        assert not has_search_index(conn)
        assert not _objects(conn) & SEARCH_INDEX_OBJECTS
        assert _objects(conn) == set(expected_objects(SCHEMA_VERSION))
        assert _indexed_rows(conn, "tea") == [] != _matching_rows(conn, "tea")  # the table is there, empty
        assert [r["key"] for r in store.search("alice", "TEA")] == ["k6", "k1", "k0"]


def test_a_quota_that_lets_a_user_reach_the_threshold_keeps_the_index_up_to_date(tmp_path):
    with open_store(tmp_path / "m.sqlite3", limits=INDEXED) as store:
        _fill(store)
        store.put("alice", "s2", "episode", "k2", "tea instead of coffee")
        store.delete("bob", "preference", "k0")
        conn = store.connection
        assert has_search_index(conn) and _objects(conn) >= SEARCH_INDEX_OBJECTS
        for term in ("tea", "coffee", "bob", "茶 a"):  # 3+ characters: a trigram index
            assert _indexed_rows(conn, term) == _matching_rows(conn, term), term


def test_reopening_with_other_limits_builds_or_drops_the_index_and_search_is_unchanged(tmp_path):
    path = tmp_path / "m.sqlite3"
    with open_store(path) as store:
        _fill(store)
        before = _answers(store)
    with open_store(path, limits=INDEXED) as store:
        conn = store.connection
        assert has_search_index(conn)
        for term in ("tea", "strasse", "bob"):  # built from every row already there
            assert _indexed_rows(conn, term) == _matching_rows(conn, term) != [], term
        assert _answers(store) == before
    with open_store(path) as store:
        assert not has_search_index(store.connection)
        assert _answers(store) == before
        assert store.health()["counters_consistent"]


class SmallThreshold(MemoryStore):
    fts_min_user_rows = 3


def test_a_user_already_past_the_threshold_keeps_the_index_under_a_lower_quota(tmp_path):
    path = tmp_path / "m.sqlite3"
    with SmallThreshold(path, limits=Limits().replace(max_records_per_user=10)) as store:
        for n in range(5):
            store.put("alice", "s1", "episode", f"k{n}", f"tea number {n}")
        assert has_search_index(store.connection)
    # A quota of 2 is below the threshold, but alice already holds 5 records: search asks the index for her.
    with SmallThreshold(path, limits=Limits().replace(max_records_per_user=2)) as store:
        assert has_search_index(store.connection)
        assert [r["key"] for r in store.search("alice", "tea", limit=3)] == ["k4", "k3", "k2"]
        store.forget_user("alice")
    with SmallThreshold(path, limits=Limits().replace(max_records_per_user=2)) as store:
        assert not has_search_index(store.connection)


def test_lowering_the_threshold_after_open_builds_the_index_when_search_first_needs_it(tmp_path):
    with open_store(tmp_path / "m.sqlite3") as store:
        _fill(store)
        assert not has_search_index(store.connection)
        statements: list[str] = []
        store.connection.set_trace_callback(statements.append)
        store.fts_min_user_rows = 1
        assert [r["key"] for r in store.search("alice", "tea")] == ["k6", "k1", "k0"]
        store.connection.set_trace_callback(None)
        assert any("memories_fts MATCH" in sql for sql in statements)
        assert has_search_index(store.connection)
        store.put("alice", "s1", "episode", "k9", "more tea")  # kept from now on
        assert _indexed_rows(store.connection, "tea") == _matching_rows(store.connection, "tea")


def _file_at_version(path, version: int):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for steps in MIGRATIONS[:version]:
        for statement in steps:
            conn.execute(statement)
    conn.execute("INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision, created_at,"
                 " updated_at, key_fold, value_fold) VALUES ('alice', 'episode', 'k', 'Green Tea', 's', 1,"
                 " 't1', 't1', 'k', 'green tea')")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    return path


@pytest.mark.parametrize("version", [2, 4], ids=["version 2", "version 4 (before step 5)"])
@pytest.mark.parametrize("limits", [Limits(), INDEXED], ids=["default limits", "indexed limits"])
def test_an_older_file_is_migrated_and_its_index_fitted_to_the_limits(tmp_path, limits, version):
    path = _file_at_version(tmp_path / "old.sqlite3", version)
    with open_store(path, limits=limits) as store:
        conn = store.connection
        assert store.health()["schema_version"] == SCHEMA_VERSION
        wanted = limits.max_records_per_user >= MemoryStore.fts_min_user_rows
        assert has_search_index(conn) == wanted
        assert _objects(conn) == set(expected_objects()) | (set(SEARCH_INDEX_LOOKUP_OBJECTS) if wanted else set())
        assert _indexed_rows(conn, "tea") == ([1] if wanted else [])
        assert _matching_rows(conn, "tea") == [1]
        assert [r["key"] for r in store.search("alice", "TEA")] == ["k"]


def test_a_file_holding_part_of_the_index_is_refused(tmp_path):
    path = tmp_path / "m.sqlite3"
    with open_store(path, limits=INDEXED) as store:
        _fill(store)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER memories_fts_update")  # updates would leave the index stale
    conn.close()
    with pytest.raises(StoreError, match="lacks trigger 'memories_fts_update'"):
        MemoryStore(path, limits=INDEXED)


def test_opening_and_searching_while_another_process_holds_the_write_lock_never_wait_for_the_index(tmp_path):
    import lab

    path = tmp_path / "m.sqlite3"
    with open_store(path, limits=INDEXED) as store:
        _fill(store)
        before = _answers(store)
    # Default limits would stop keeping the index, but that needs the write lock: the open
    # neither waits nor fails, and leaves the index as it is.
    with (lab.holding_write_lock(path, seconds=30),
          open_store(path, limits=Limits().replace(busy_timeout_ms=5000)) as store):
        assert has_search_index(store.connection)
        assert _answers(store) == before
    with open_store(path, limits=Limits()) as store:  # the lock is free again: now the index goes
        assert not has_search_index(store.connection)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            # Asked for the index path, search cannot build the index under another's lock: it
            # answers by the scan, without waiting, and the same as before.
            assert _answers(store) == before
            assert not has_search_index(store.connection)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
