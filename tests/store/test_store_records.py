"""MemoryStore's records against a real SQLite file: one row per key, revisions, history,
transactions, quotas, the size cap, racing writers.

Every test uses a real file under tmp_path; crashes, restarts, locks and races use real processes
(the lab's workers, `classroom.lab`, started with `sys.executable`).
"""

from __future__ import annotations

import sqlite3
import threading

import pytest

from _store_helpers import open_store, snapshot
import lab
from memkit.clock import FakeClock
from memkit.errors import QuotaError, StoreError
from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.store.schema import MIGRATIONS, SCHEMA_VERSION


pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend


# -- a delete retires the user's recent history ---------------------------------------------------


def test_a_delete_records_when_it_retired_the_users_history_and_forget_removes_it(clocked):
    assert clocked.retired_before("alice") is None
    clocked.put("alice", "s1", "preference", "drink", "tea")
    clocked.put("bob", "s1", "preference", "drink", "tea")
    assert not clocked.delete("alice", "preference", "food")  # nothing deleted, nothing retired
    assert clocked.retired_before("alice") is None
    assert clocked.delete("alice", "preference", "drink")
    retired = clocked.retired_before("alice")
    assert retired == clocked.history("alice", "preference", "drink")[-1]["at"]
    assert clocked.retired_before("bob") is None  # another user's history is theirs
    clocked.forget_user("alice")
    assert clocked.retired_before("alice") is None


def test_a_users_history_keeps_its_newest_events_and_every_held_keys_newest(tmp_path):
    limits = Limits(max_events_per_user=5)
    with open_store(tmp_path / "memory.sqlite3", limits=limits) as store:
        store.put("alice", "s1", "preference", "food", "rice")
        store.put("alice", "s1", "preference", "gone", "x")
        store.delete("alice", "preference", "gone")
        for n in range(1, 9):
            store.put("alice", "s1", "preference", "drink", f"tea {n}")
        store.put("bob", "s1", "preference", "drink", "tea")
        drink = store.history("alice", "preference", "drink")
        food = store.history("alice", "preference", "food")
        assert [e["revision"] for e in drink] == [5, 6, 7, 8] and drink[-1]["new_value"] == "tea 8"
        assert [e["new_value"] for e in food] == ["rice"]  # the held key's newest event stays
        assert store.history("alice", "preference", "gone") == []  # a deleted key's events go first
        assert len(store.history("bob", "preference", "drink")) == 1  # counted per user
        assert store.traces("alice")["events"] == 5


def _kept_by_the_rule(events: list[tuple[str, str]], held: set[str], bound: int) -> list[tuple[str, str]]:
    """The history bound's rule in plain Python: past `bound` events, the oldest go first, never the
    newest event of a key the user holds."""
    newest = {key: n for n, (key, _) in enumerate(events)}
    prunable = [n for n, (key, _) in enumerate(events) if key not in held or newest[key] != n]
    gone = set(prunable[:max(0, len(events) - bound)])
    return [event for n, event in enumerate(events) if n not in gone]


def test_the_history_bound_keeps_exactly_what_its_rule_says_over_random_writes(tmp_path):
    """Creates, updates and deletes in a seeded random order, on a user who also holds records an import
    brought without events (one of them never written, so its key has no newest event to keep all
    along): after every write the store's events are the ones the rule keeps."""
    import random

    from memkit.store import EXPORT_FORMAT, EXPORT_FORMAT_VERSION, SCHEMA_VERSION, seal_bundle

    bound, rng = 6, random.Random(26)
    at = "2026-01-01T00:00:00.000000Z"
    imported = [{"type": "record", "kind": "preference", "key": f"old{n}", "value": "v", "source_session": "s0",
                 "revision": 1, "created_at": at, "updated_at": at} for n in range(3)]
    bundle = seal_bundle([{"format": EXPORT_FORMAT, "format_version": EXPORT_FORMAT_VERSION,
                           "schema_version": SCHEMA_VERSION, "user": "alice", "records": 3, "events": 0}, *imported])
    with open_store(tmp_path / "memory.sqlite3", limits=Limits(max_events_per_user=bound)) as store:
        store.import_records(bundle)
        held, events = {"old0", "old1", "old2"}, []
        for n in range(120):
            key = rng.choice(["a", "b", "c", "d", "old0", "old1"])  # old2 keeps no event throughout
            if key in held and rng.random() < 0.3:
                store.delete("alice", "preference", key)
                held.discard(key)
                events.append((key, "delete"))
            else:
                events.append((key, "update" if key in held else "create"))
                store.put("alice", "s1", "preference", key, f"value {n}")
                held.add(key)
            events = _kept_by_the_rule(events, held, bound)
            found = [(row[0], row[1]) for row in store.connection.execute(
                "SELECT memory_key, action FROM memory_events WHERE user_id = 'alice' ORDER BY id").fetchall()]
            assert found == events, n


# -- one row per key, revisions, history ---------------------------------------------------------


def test_revision_starts_at_one_rises_per_update_and_same_value_is_a_no_op(clocked):
    first = clocked.put("alice", "s1", "preference", "drink", "tea")
    assert (first["revision"], first["created_at"], first["updated_at"]) == (1, "2026-01-01T09:00:00.000000Z",
                                                                              "2026-01-01T09:00:00.000000Z")
    second = clocked.put("alice", "s2", "preference", "drink", "coffee", confirmation="cli#1")
    assert (second["revision"], second["source_session"]) == (2, "s2")
    assert second["created_at"] == first["created_at"] != second["updated_at"]
    before = snapshot(clocked)
    again = clocked.put("alice", "s3", "preference", "drink", "coffee", confirmation="cli#2")
    assert again == clocked.get("alice", "preference", "drink") == second  # still revision 2, from s2
    assert snapshot(clocked) == before  # no event, no new revision
    assert clocked.put("alice", "s3", "preference", "drink", "Coffee")["revision"] == 3  # case is a change


def test_one_row_per_user_kind_and_key(clocked):
    clocked.put("alice", "s1", "preference", "drink", "tea")
    clocked.put("alice", "s1", "preference", "drink", "coffee")
    clocked.put("alice", "s1", "episode", "drink", "drank tea at 9")
    clocked.put("bob", "s1", "preference", "drink", "water")
    rows = clocked.connection.execute(
        "SELECT user_id, kind, memory_key, value, revision FROM memories ORDER BY user_id, kind").fetchall()
    assert [tuple(row) for row in rows] == [
        ("alice", "episode", "drink", "drank tea at 9", 1),
        ("alice", "preference", "drink", "coffee", 2),
        ("bob", "preference", "drink", "water", 1),
    ]
    assert clocked.users() == {"alice": 2, "bob": 1}
    assert [r["key"] for r in clocked.records("alice", kind="episode")] == ["drink"]
    assert clocked.get("carol", "preference", "drink") is None


def test_history_is_append_only_with_session_time_values_and_confirmation(clocked):
    clocked.put("alice", "s1", "preference", "drink", "tea", confirmation="cli#1")
    clocked.put("alice", "s2", "preference", "drink", "coffee", confirmation="widget#7")
    clocked.put("alice", "s2", "preference", "drink", "coffee", confirmation="cli#9")  # no-op: no event
    assert clocked.delete("alice", "preference", "drink", session="s3", confirmation="cli#2") is True
    assert clocked.delete("alice", "preference", "drink", session="s3", confirmation="cli#3") is False
    assert clocked.get("alice", "preference", "drink") is None
    assert clocked.history("alice", "preference", "drink") == [
        {"action": "create", "revision": 1, "session": "s1", "old_value": None, "new_value": "tea",
         "confirmation": "cli#1", "at": "2026-01-01T09:00:00.000000Z"},
        {"action": "update", "revision": 2, "session": "s2", "old_value": "tea", "new_value": "coffee",
         "confirmation": "widget#7", "at": "2026-01-01T09:00:01.000000Z"},
        {"action": "delete", "revision": 2, "session": "s3", "old_value": "coffee", "new_value": None,
         "confirmation": "cli#2", "at": "2026-01-01T09:00:03.000000Z"},
    ]
    # Created again after a delete: the revision goes on from the history, never back to 1.
    assert clocked.put("alice", "s4", "preference", "drink", "water")["revision"] == 3
    assert [e["revision"] for e in clocked.history("alice", "preference", "drink")] == [1, 2, 2, 3]
    assert clocked.history("bob", "preference", "drink") == []


def test_puts_inside_one_transaction_commit_or_roll_back_together(clocked):
    with pytest.raises(RuntimeError), clocked.transaction():
        clocked.put("alice", "s1", "preference", "drink", "tea")
        assert clocked.get("alice", "preference", "drink")["value"] == "tea"  # sees its own write
        clocked.put("alice", "s1", "preference", "food", "rice")
        raise RuntimeError("the caller changed its mind")
    assert clocked.records("alice") == [] and clocked.history("alice", "preference", "drink") == []
    with clocked.transaction():
        clocked.put("alice", "s1", "preference", "drink", "tea")
        clocked.put("alice", "s1", "preference", "food", "rice")
    assert [r["key"] for r in clocked.records("alice")] == ["drink", "food"]


def test_a_failed_put_inside_a_transaction_undoes_only_itself(tmp_path):
    with open_store(tmp_path / "m.sqlite3", limits=Limits().replace(max_records_per_user=1)) as store:
        with store.transaction():
            store.put("alice", "s1", "preference", "drink", "tea")
            with pytest.raises(QuotaError):
                store.put("alice", "s1", "preference", "food", "rice")
            store.put("alice", "s1", "preference", "drink", "coffee")
        assert [(r["key"], r["value"], r["revision"]) for r in store.records("alice")] == [("drink", "coffee", 2)]
        assert store.health()["counters_consistent"]


@pytest.mark.sqlite_only  # opens a MemoryStore (tests/postgres/test_postgres.py: PostgresStore)
def test_closed_store_refuses_calls_and_closes_twice(tmp_path):
    store = MemoryStore(tmp_path / "m.sqlite3")
    with store:
        store.put("alice", "s1", "preference", "drink", "tea")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get("alice", "preference", "drink")


# -- quotas and the size cap ----------------------------------------------------------------------


def test_per_user_quota_refuses_a_new_key_but_allows_updates(tmp_path):
    with open_store(tmp_path / "m.sqlite3", limits=Limits().replace(max_records_per_user=3)) as store:
        for number in range(3):
            store.put("alice", "s1", "preference", f"k{number}", "v")
        before = snapshot(store)
        with pytest.raises(QuotaError, match="user 'alice' has 3 records; the per-user quota is 3"):
            store.put("alice", "s1", "episode", "k3", "v")
        assert snapshot(store) == before
        assert store.put("alice", "s1", "preference", "k0", "changed")["revision"] == 2  # at quota, still updatable
        store.put("bob", "s1", "preference", "k0", "v")  # another user has their own quota
        assert store.delete("alice", "preference", "k1")
        store.put("alice", "s1", "episode", "k3", "v")  # room again after a delete
        assert store.users() == {"alice": 3, "bob": 1}


def test_default_quotas_are_64_per_user_and_1024_in_all(tmp_path):
    with open_store(tmp_path / "m.sqlite3", synchronous="NORMAL") as store:
        for user in range(16):
            with store.transaction():  # one commit per user keeps this fast
                for number in range(64):
                    store.put(f"user{user}", "s1", "episode", f"e{number}", "v")
        with pytest.raises(QuotaError, match="per-user quota is 64"):
            store.put("user0", "s1", "episode", "e64", "v")
        before = snapshot(store)
        with pytest.raises(QuotaError, match="the store holds 1024 records; the global quota is 1024"):
            store.put("newcomer", "s1", "episode", "e0", "v")
        assert snapshot(store) == before
        store.put("user3", "s1", "episode", "e0", "updated at the global quota")
        health = store.health()
        assert (health["records_total"], health["max_records_total"], health["users"]) == (1024, 1024, 16)
        assert health["counters_consistent"]


def test_raised_quotas_hold_more(tmp_path):
    limits = Limits().replace(max_records_per_user=100, max_records_total=2000)
    with open_store(tmp_path / "m.sqlite3", limits=limits, synchronous="NORMAL") as store:
        with store.transaction():
            for number in range(100):
                store.put("alice", "s1", "episode", f"e{number}", "v")
        with pytest.raises(QuotaError, match="per-user quota is 100"):
            store.put("alice", "s1", "episode", "e100", "v")


def test_a_write_past_the_size_cap_rolls_back_whole(tmp_path):
    path = tmp_path / "m.sqlite3"
    with open_store(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        empty_size = store.health()["db_bytes"]
    # Reopen with a cap a few pages above the current size, then fill until it refuses.
    limits = Limits().replace(max_db_bytes=empty_size + 3 * 4096, max_records_per_user=1000, max_records_total=1000)
    with open_store(path, limits=limits) as store:
        refused = None
        for number in range(500):
            before = snapshot(store)
            try:
                store.put("alice", "s1", "episode", f"e{number}", f"{number} " + "x" * 500)
            except QuotaError as exc:
                refused = (number, exc)
                break
        assert refused is not None, "the size cap never applied"
        number, exc = refused
        assert f"the cap is {limits.max_db_bytes} bytes" in str(exc)
        assert snapshot(store) == before  # no row, no event, counters unchanged
        assert store.get("alice", "episode", f"e{number}") is None
        health = store.health()
        assert health["db_bytes"] <= limits.max_db_bytes and health["counters_consistent"]
        assert store.delete("alice", "episode", "e0")  # deleting is always allowed, to make room


def test_a_tiny_size_cap_refuses_every_write(tmp_path):
    path = tmp_path / "m.sqlite3"
    with open_store(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    with open_store(path, limits=Limits().replace(max_db_bytes=4096)) as store:
        before = snapshot(store)
        with pytest.raises(QuotaError, match="the cap is 4096 bytes"):
            store.put("alice", "s1", "preference", "drink", "coffee")
        with pytest.raises(QuotaError, match="the cap is 4096 bytes"):
            store.archive_turns("alice", "s1", [{"turn": 1, "role": "user", "content": "hi", "at": "t"}])
        with pytest.raises(QuotaError, match="the cap is 4096 bytes"):
            store.import_records(store.export_user("alice"), user="bob")
        assert snapshot(store) == before
        assert store.health()["max_db_bytes"] == 4096


@pytest.mark.sqlite_only  # workers on a file (tests/postgres/test_postgres_processes.py: on PostgreSQL)
def test_racing_processes_never_pass_the_quotas(tmp_path):
    path = tmp_path / "m.sqlite3"
    MemoryStore(path).close()
    per_user, total = 10, 25
    # alice has two racers over one per-user quota; the three users together exceed the global one.
    racers = [("alice", "a"), ("alice", "b"), ("bob", "a"), ("carol", "a")]
    plans = [[(user, "preference", f"{prefix}{n}", f"value {n}") for n in range(12)] for user, prefix in racers]
    # Every writer opens the store and says ready; then all are told to go at once.
    results = lab.run_racers(path, plans, limits={"max_records_per_user": per_user, "max_records_total": total,
                                                  "busy_timeout_ms": 30_000})
    outcomes = [[o["outcome"] for o in result] for result in results]
    assert all(set(result) <= {"ok", "quota"} for result in outcomes)
    with MemoryStore(path) as store:
        counts = dict(store.connection.execute("SELECT user_id, count(*) FROM memories GROUP BY user_id"))
        assert all(count <= per_user for count in counts.values())
        assert sum(counts.values()) == total  # 48 attempts for 25 places: exactly full, never over
        assert sum(result.count("ok") for result in outcomes) == total
        assert counts["alice"] == outcomes[0].count("ok") + outcomes[1].count("ok")
        assert store.health()["counters_consistent"] and store.users() == counts


def test_threads_sharing_one_store_all_succeed_with_consecutive_revisions(clocked):
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer(number: int) -> None:
        try:
            start.wait()
            for step in range(10):
                clocked.put("alice", f"t{number}", "preference", "shared", f"thread {number} step {step}")
                clocked.put("alice", f"t{number}", "episode", f"own{number}", f"step {step}")
                clocked.search("alice", "step")
        except BaseException as exc:  # collected: an exception in a thread would otherwise vanish
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    history = clocked.history("alice", "preference", "shared")
    assert [e["revision"] for e in history] == list(range(1, 81))
    assert [e["at"] for e in history] == sorted(e["at"] for e in history)  # time follows commit order
    assert clocked.get("alice", "preference", "shared")["revision"] == 80
    assert all(clocked.get("alice", "episode", f"own{n}")["revision"] == 10 for n in range(8))
    assert clocked.health()["counters_consistent"]


@pytest.mark.sqlite_only  # sqlite3's error (tests/postgres/test_postgres.py: the PostgreSQL trigger)
def test_the_event_history_is_append_only_in_the_database_itself(store):
    store.put("alice", "s1", "preference", "drink", "tea")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        store.connection.execute("UPDATE memory_events SET new_value = 'gin'")
    assert store.history("alice", "preference", "drink")[0]["new_value"] == "tea"
    assert store.forget_user("alice")["events"] == 1  # deleting a user's history stays possible


def test_the_published_statements_write_what_the_store_reads(clocked):
    sql = type(clocked).statements()  # each backend publishes the SQL it runs
    with clocked.transaction() as conn:
        seq = conn.execute(sql.take_sequence, (1,)).fetchone()[0]
        conn.execute(sql.insert_memory,
                     ("alice", "preference", "drink", "Tea", "s1", 1, "t1", "t1", "drink", "tea", seq))
        conn.execute(sql.insert_event, ("alice", "preference", "drink", "create", 1, "s1", None, "Tea", None, "t1"))
        row = conn.execute(sql.select_current, ("alice", "preference", "drink")).fetchone()
        assert (row["value"], row["revision"]) == ("Tea", 1)
        seq = conn.execute(sql.take_sequence, (1,)).fetchone()[0]
        conn.execute(sql.update_memory, ("Green tea", "green tea", "s2", 2, "t2", seq, "alice", "preference", "drink"))
    assert clocked.get("alice", "preference", "drink") == {
        "kind": "preference", "key": "drink", "value": "Green tea", "source_session": "s2", "revision": 2,
        "created_at": "t1", "updated_at": "t2"}
    assert [r["key"] for r in clocked.search("alice", "GREEN")] == ["drink"]
    assert clocked.users() == {"alice": 1} and clocked.health()["counters_consistent"]
    with clocked.transaction() as conn:
        conn.execute(sql.delete_memory, ("alice", "preference", "drink"))
    assert clocked.get("alice", "preference", "drink") is None and clocked.users() == {}


def test_a_clock_that_steps_back_changes_neither_newest_first_nor_created_before_updated(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path / "m.sqlite3", clock=clock) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        clock.advance(seconds=-3600)  # NTP steps the clock back an hour
        store.put("alice", "s1", "preference", "food", "rice")
        clock.advance(seconds=-3600)
        updated = store.put("alice", "s1", "preference", "drink", "green tea")
        clock.advance(seconds=-3600)
        store.put("alice", "s1", "episode", "trip", "Kyoto in May, tea ceremony")
        assert [r["key"] for r in store.search("alice", "")] == ["trip", "drink", "food"]  # commit order
        assert [r["key"] for r in store.search("alice", "tea")] == ["trip", "drink"]
        assert [r["key"] for r in store.search_many("alice", ["", "tea"])[("", "preference")]] == ["drink", "food"]
        for record in [updated, *store.records("alice")]:
            assert record["created_at"] <= record["updated_at"], record
        store.fts_min_user_rows = 0  # the trigram index path orders the same way
        assert [r["key"] for r in store.search("alice", "tea")] == ["trip", "drink"]


@pytest.mark.sqlite_only  # SQLite's step 15 (PostgreSQL's is empty)
def test_a_store_of_version_14_keeps_its_records_history_and_order_clustered_by_key(tmp_path):
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    for steps in MIGRATIONS[:14]:
        for statement in steps:
            conn.execute(statement)
    # rowids past the sequence (a store made before step 3 numbered none of its writes)
    conn.execute("INSERT INTO memories (id, user_id, kind, memory_key, value, source_session, revision, created_at,"
                 " updated_at, key_fold, value_fold, seq) VALUES (40, 'alice', 'preference', 'drink', 'Tea', 's', 2,"
                 " 't1', 't2', 'drink', 'tea', 1), (41, 'alice', 'preference', 'food', 'rice', 's', 1, 't3', 't3',"
                 " 'food', 'rice', 2)")
    conn.execute("INSERT INTO memory_events (id, user_id, kind, memory_key, action, revision, session_id, old_value,"
                 " new_value, confirmation, at) VALUES (50, 'alice', 'preference', 'drink', 'create', 1, 's', NULL,"
                 " 'Coffee', 'c1', 't1'), (52, 'alice', 'preference', 'drink', 'update', 2, 's', 'Coffee', 'Tea',"
                 " 'c2', 't2'), (51, 'alice', 'preference', 'food', 'create', 1, 's', NULL, 'rice', NULL, 't3')")
    conn.execute("INSERT INTO history_retired VALUES ('alice', '2000-01-01T00:00:00.000000Z'), ('bob', 't9')")
    conn.execute("PRAGMA user_version = 14")
    conn.close()
    with open_store(path) as store:
        conn = store.connection
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert [r["key"] for r in store.search("alice", "")] == ["food", "drink"]  # newest first, as before
        history = store.history("alice", "preference", "drink")
        assert [(e["action"], e["new_value"], e["confirmation"]) for e in history] == [
            ("create", "Coffee", "c1"), ("update", "Tea", "c2")]
        store.put("alice", "s2", "preference", "drink", "Green tea", confirmation="c3")
        store.delete("alice", "preference", "food", confirmation="c4")
        ids = dict(conn.execute("SELECT memory_key, id FROM memories").fetchall())
        events = conn.execute("SELECT id, memory_key, action FROM memory_events ORDER BY id").fetchall()
        # the new numbers come after every rowid the file had given, in commit order
        assert ids == {"drink": 40} and events[-2]["id"] > 52 and events[-1]["id"] > events[-2]["id"]
        assert [(e[1], e[2]) for e in events] == [("drink", "create"), ("food", "create"), ("drink", "update"),
                                                 ("drink", "update"), ("food", "delete")]
        assert store.history("alice", "preference", "drink")[-1]["confirmation"] == "c3"
        assert store.users() == {"alice": 1} and store.health()["counters_consistent"]
        # bob holds no records and keeps his mark; alice's delete moved hers on
        assert store.retired_before("bob") == "t9" and store.retired_before("alice") > "2000-01-01T00:00:00.000000Z"


@pytest.mark.sqlite_only  # SQLite keeps the retire mark beside the count from step 15
def test_a_delete_of_a_users_last_record_keeps_the_retire_mark_and_forget_removes_it(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path / "m.sqlite3", clock=clock) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        clock.advance(seconds=60)
        store.delete("alice", "preference", "drink")
        at = store.retired_before("alice")
        assert at is not None and store.users() == {} and store.health()["users"] == 0
        assert store.health()["counters_consistent"]
        clock.advance(seconds=-3600)  # a clock that steps back does not move the mark back
        store.put("alice", "s1", "preference", "drink", "tea")
        store.delete("alice", "preference", "drink")
        assert store.retired_before("alice") == at
        store.put("alice", "s1", "preference", "food", "rice")
        assert store.users() == {"alice": 1} and store.health()["counters_consistent"]
        store.forget_user("alice")
        assert store.retired_before("alice") is None
        assert store.connection.execute("SELECT count(*) FROM user_counts").fetchone()[0] == 0
