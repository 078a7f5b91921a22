"""PostgresStore where PostgreSQL differs from SQLite: opening (refusals left unchanged, migrations,
clear errors without the password), the database's own rules (append-only history, counters, the
trigram index), and the same answers as SQLite for the same data (search, export bundles).

The behaviour both backends share is the conformance suite (tests/store/test_store_*.py, run on every
backend through the `backend` fixture). Everything here runs on a real PostgreSQL: the embedded one
(pgserver, PostgreSQL 16, no pg_trgm) and Debian's PostgreSQL 15 with pg_trgm (conftest.py).
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import threading
import uuid

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _store_helpers import fill
from memkit.clock import FakeClock
from memkit.errors import LockedError, StoreError, ValidationError
from memkit.limits import Limits
from memkit.store import MemoryStore, PostgresStore, open_store
from memkit.store import SCHEMA_VERSION
from memkit.store.schema import expected_columns
from memkit.store.postgres.schema import PG_SCHEMA_VERSION, expected_objects
from memkit.store.postgres.steps import PG_MIGRATIONS

pytestmark = pytest.mark.postgres

SECRET = "hunter2-Pw"
"""A password in the URLs below: trust authentication ignores it, and no message may show it."""


@pytest.fixture(scope="module", params=["pg", "pg-trgm"])
def server(request):
    """A PostgreSQL server's URL: the embedded one (no pg_trgm) and Debian's (with pg_trgm)."""
    return request.getfixturevalue("pg_url" if request.param == "pg" else "pg_trgm_url")


def fresh() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def with_password(url: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@", 1)


def catalog(url: str, schema: str) -> dict[str, list[tuple]]:
    """Every object of a schema and every row of its tables: equal catalogs, an untouched schema."""
    with psycopg.connect(url, autocommit=True) as conn:
        objects = conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s UNION ALL SELECT p.proname, 'f' FROM pg_proc p JOIN pg_namespace n"
            " ON n.oid = p.pronamespace WHERE n.nspname = %s UNION ALL SELECT t.tgname, 't' FROM pg_trigger t"
            " JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND NOT t.tgisinternal ORDER BY 1, 2", (schema, schema, schema)).fetchall()
        state = {"objects": objects}
        for name, kind in objects:
            if kind == "r":
                state[name] = sorted(conn.execute(f'SELECT * FROM "{schema}"."{name}"').fetchall(), key=repr)
        return state


def run(url: str, schema: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}") as conn:
        for statement in statements:
            conn.execute(statement)


# -- opening: refusals leave the database as it was ------------------------------------------------


def _foreign_tables(url: str, schema: str) -> None:
    run(url, schema, f"CREATE SCHEMA {schema}", "CREATE TABLE orders (id int PRIMARY KEY, total numeric)",
        "INSERT INTO orders VALUES (1, 9.5)")


def _foreign_view(url: str, schema: str) -> None:
    run(url, schema, f"CREATE SCHEMA {schema}", "CREATE VIEW answer AS SELECT 42 AS x")


def _newer(url: str, schema: str) -> None:
    PostgresStore(url, schema=schema).close()
    run(url, schema, f"UPDATE memkit_meta SET schema_version = {PG_SCHEMA_VERSION + 1}")


def _lacks_trigger(url: str, schema: str) -> None:
    PostgresStore(url, schema=schema).close()
    run(url, schema, "DROP TRIGGER memories_count_insert ON memories")


def _lacks_column(url: str, schema: str) -> None:
    PostgresStore(url, schema=schema).close()
    run(url, schema, "ALTER TABLE transcript DROP COLUMN at")


REFUSALS = {
    "another program's tables": (_foreign_tables, "holds objects of another program (table 'orders'"),
    "another program's view": (_foreign_view, "view 'answer'"),
    "a newer memkit schema": (_newer, f"version {PG_SCHEMA_VERSION + 1}, newer than this memkit knows"),
    "a missing counting trigger": (_lacks_trigger, "lacks trigger 'memories_count_insert'"),
    "a missing column": (_lacks_column, "table 'transcript' lacks at"),
}


@pytest.mark.parametrize("case", REFUSALS, ids=str)
def test_opening_refuses_a_schema_that_is_not_a_sound_memkit_one_and_changes_nothing(pg_url, case):
    make, words = REFUSALS[case]
    schema = fresh()
    make(pg_url, schema)
    before = catalog(pg_url, schema)
    with pytest.raises(StoreError, match=re.escape(words)) as refused:
        PostgresStore(with_password(pg_url), schema=schema)
    assert "memkit left it as it was" in str(refused.value) or "Nothing was changed" in str(refused.value)
    assert SECRET not in str(refused.value)
    assert catalog(pg_url, schema) == before


def test_a_database_with_another_programs_tables_in_public_is_refused_unless_given_a_schema(pg_url):
    database = f"d_{uuid.uuid4().hex[:12]}"
    run(pg_url, "public", f"CREATE DATABASE {database}")
    url = pg_url.replace("/postgres?", f"/{database}?")
    run(url, "public", "CREATE TABLE invoices (id int)")
    before = catalog(url, "public")
    with pytest.raises(StoreError, match=r"schema 'public' .* holds objects of another program .*invoices"):
        open_store(url)
    assert catalog(url, "public") == before
    with open_store(url, schema="memkit") as store:  # a schema of its own sits beside their tables
        store.put("alice", "s1", "preference", "drink", "tea")
    assert catalog(url, "public") == before


def test_expected_objects_and_columns_are_what_the_migrations_make(pg_url):
    schema = fresh()
    PostgresStore(pg_url, schema=schema).close()
    kinds = {"r": "table", "i": "index", "f": "function", "t": "trigger", "S": "sequence"}
    made = {(kinds[kind], name) for name, kind in catalog(pg_url, schema)["objects"] if kind in kinds}
    assert expected_objects() <= made
    with psycopg.connect(pg_url, autocommit=True) as conn:
        columns: dict[str, set[str]] = {}
        for table, column in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s", (schema,)):
            columns.setdefault(table, set()).add(column)
    assert columns == expected_columns(PG_SCHEMA_VERSION, PG_MIGRATIONS)
    assert PG_SCHEMA_VERSION == SCHEMA_VERSION  # version N names the same schema on both backends
    assert {name for kind, name in expected_objects() if kind == "trigger"} == {
        "memories_count_insert", "memories_count_delete", "memory_events_append_only",
        *(f"{table}_size_{event}"
          for table in ("memories", "memory_events", "transcript", "proposals", "memory_embeddings",
                        "agent_items")
          for event in ("insert", "update", "delete")),
        "memory_embeddings_stale", "memory_embeddings_gone"}


def test_a_schema_at_version_one_is_migrated_forward_with_its_data(pg_url):
    schema = fresh()
    run(pg_url, schema, f"CREATE SCHEMA {schema}", *PG_MIGRATIONS[0], "INSERT INTO memkit_meta VALUES (1, 1)")
    with psycopg.connect(pg_url, autocommit=True, options=f"-c search_path={schema}") as conn:
        for key, at in (("late", "2026-01-03"), ("early", "2026-01-01"), ("middle", "2026-01-02")):
            conn.execute("INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision, created_at,"
                         " updated_at, key_fold, value_fold) VALUES ('alice', 'preference', %s, 'tea', 's1', 1, %s, %s,"
                         " %s, 'tea')", (key, at, at, key))
            conn.execute("INSERT INTO memory_events (user_id, kind, memory_key, action, revision, new_value, at)"
                         " VALUES ('alice', 'preference', %s, 'create', 1, 'tea', %s)", (key, at))
        conn.execute("UPDATE memory_events SET confirmation = 'edited'")  # still allowed at version 1
    with PostgresStore(pg_url, schema=schema) as store:
        assert store.health()["schema_version"] == PG_SCHEMA_VERSION
        assert [r["key"] for r in store.search("alice", "tea")] == ["late", "middle", "early"]  # numbered in order
        store.put("alice", "s2", "preference", "early", "green tea")
        assert [r["key"] for r in store.search("alice", "tea")] == ["early", "late", "middle"]
        assert store.history("alice", "preference", "late")[0]["confirmation"] == "edited"
        with pytest.raises(psycopg.Error, match="append-only"):
            store.connection.execute("UPDATE memory_events SET confirmation = 'again'")
        assert store.health()["counters_consistent"]


def test_concurrent_openers_of_a_new_schema_all_succeed(pg_url):
    import threading

    schema, errors = fresh(), []

    def opener() -> None:
        try:
            PostgresStore(pg_url, schema=schema).close()
        except BaseException as exc:  # collected: an exception in a thread would otherwise vanish
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with PostgresStore(pg_url, schema=schema) as store:
        assert store.health()["schema_version"] == PG_SCHEMA_VERSION


# -- clear errors, and never the password ----------------------------------------------------------


def test_a_wrong_url_or_a_stopped_server_is_a_clear_error_without_the_password(pg_url, caplog):
    caplog.set_level(logging.DEBUG)
    socket_url = with_password(pg_url)
    cases = {
        "no such database": (socket_url.replace("/postgres?", "/nowhere?"), 'database "nowhere" does not exist'),
        "no such role": (socket_url.replace("postgres:", "mallory:", 1), 'role "mallory" does not exist'),
        "no server at that socket": (socket_url.split("?host=")[0] + "?host=/nonexistent-dir", "No such file"),
        "nothing listens on the port": (f"postgresql://ann:{SECRET}@127.0.0.1:9/db?connect_timeout=2", "refused"),
        "a malformed URL": (f"postgresql://ann:{SECRET}@[::1/db", "not a valid PostgreSQL URL"),
    }
    for case, (url, words) in cases.items():
        with pytest.raises(StoreError, match=words) as refused:
            PostgresStore(url, schema=fresh())
        assert SECRET not in str(refused.value) and "***" in str(refused.value), case
    with pytest.raises(ValidationError, match="schema 'Bad-Name' is not allowed"):
        PostgresStore(pg_url, schema="Bad-Name")
    assert SECRET not in caplog.text


def test_repr_and_health_mask_the_password(pg_url):
    with PostgresStore(with_password(pg_url), schema=fresh()) as store:
        shown = [repr(store), store.url, str(store.health())]
    assert all(SECRET not in text and ":***@" in text for text in shown)


def test_a_closed_store_refuses_calls_and_closes_twice(pg_url):
    store = PostgresStore(pg_url, schema=fresh())
    with store:
        store.put("alice", "s1", "preference", "drink", "tea")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get("alice", "preference", "drink")
    with pytest.raises(StoreError, match="closed"):
        store.connection.execute("SELECT 1")


# -- the database's own rules ----------------------------------------------------------------------


def test_the_event_history_is_append_only_in_the_database_itself(server):
    with PostgresStore(server, schema=fresh()) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        with pytest.raises(psycopg.Error, match="append-only"):
            store.connection.execute("UPDATE memory_events SET new_value = 'gin'")
        assert store.history("alice", "preference", "drink")[0]["new_value"] == "tea"
        assert store.forget_user("alice")["events"] == 1  # deleting a user's history stays possible


def test_forget_user_leaves_no_row_of_that_user(server):
    with PostgresStore(server, schema=fresh(), clock=FakeClock(step_seconds=1)) as store:
        fill(store, "alice")
        fill(store, "bob")
        bob_before = store.export_user("bob")
        assert store.forget_user("alice") == {"records": 2, "events": 5, "transcript": 2, "proposals": 0}
        for table in ("memories", "memory_events", "user_counts", "transcript"):
            assert store.connection.execute(f"SELECT count(*) FROM {table} WHERE user_id = 'alice'").fetchone()[0] == 0
        store.fts_min_user_rows = 0  # through the trigram index, where the server has one
        assert [r["value"] for r in store.search("bob", "tea", limit=50)] == ["green tea\u2028with\x85milk"]
        assert store.search("alice", "tea") == [] and store.export_user("bob") == bob_before
        assert store.users() == {"bob": 2} and store.health()["counters_consistent"]


def test_a_deadlock_names_itself_rolls_the_victim_back_whole_and_lets_the_other_commit(server):
    """Two blocks of writes lock two users in opposite orders: PostgreSQL stops one (the victim). Its
    error says it was a deadlock, not a lock that outlasted the busy timeout (far longer here)."""
    limits = Limits().replace(busy_timeout_ms=30_000)  # PostgreSQL finds the cycle after 1 s
    with PostgresStore(server, schema=fresh(), limits=limits) as store:
        for user in ("alice", "bob"):  # both counter rows exist: each first put locks one at once
            store.put(user, "s0", "preference", "seed", "x")
        both_hold_one = threading.Barrier(2, timeout=20)
        outcome: dict[str, BaseException | None] = {}

        def writer(first: str, second: str) -> None:
            try:
                with store.transaction():
                    store.put(first, "s1", "preference", f"by_{first}", "1")  # locks `first`'s row
                    both_hold_one.wait()
                    store.put(second, "s1", "preference", f"by_{first}", "2")  # waits for the other
                outcome[first] = None
            except BaseException as exc:
                outcome[first] = exc

        threads = [threading.Thread(target=writer, args=pair) for pair in (("alice", "bob"), ("bob", "alice"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(outcome) == ["alice", "bob"]
        errors = {first: exc for first, exc in outcome.items() if exc is not None}
        assert len(errors) == 1, outcome  # one victim; the other committed
        ((victim, error),) = errors.items()
        winner = "bob" if victim == "alice" else "alice"
        assert isinstance(error, LockedError), repr(error)
        message = str(error)
        assert "a deadlock with another transaction" in message and "rolled back whole" in message
        assert "nothing was written" in message and "Running it again is safe" in message
        assert "busy timeout" not in message and SECRET not in message
        for user in ("alice", "bob"):  # the winner's two writes are there, none of the victim's
            assert store.get(user, "preference", f"by_{winner}") is not None
            assert store.get(user, "preference", f"by_{victim}") is None
        assert store.users() == {winner: 2, victim: 2} and store.health()["counters_consistent"]


@pytest.mark.parametrize("drift", [
    "UPDATE memkit_shards SET records = records + 1 WHERE shard = 0",  # the total: a view of the shards
    "UPDATE memkit_shards SET bytes = bytes + 1 WHERE shard = 3",  # the size counter
    "UPDATE user_counts SET records = 1 WHERE user_id = 'alice'",
    "DELETE FROM user_counts WHERE user_id = 'bob'",
    "INSERT INTO user_counts VALUES ('ghost', 0)",
])
def test_health_notices_counters_that_disagree_with_the_rows(pg_url, drift):
    schema = fresh()
    with PostgresStore(pg_url, schema=schema) as store:
        store.put("alice", "s1", "preference", "a", "v")
        store.put("alice", "s1", "preference", "b", "v")
        store.put("bob", "s1", "preference", "a", "v")
        assert store.health()["counters_consistent"] is True
        run(pg_url, schema, drift)
        assert store.health()["counters_consistent"] is False


def test_the_size_counter_is_the_bytes_of_the_rows_stored_now(server):
    with PostgresStore(server, schema=fresh(), clock=FakeClock(step_seconds=1)) as store:
        fill(store, "alice")
        store.forget_user("alice")
        fill(store, "bob")
        counted = store.connection.execute("SELECT bytes FROM store_size").fetchone()[0]
        measured = store.connection.execute("SELECT " + " + ".join(
            f"(SELECT coalesce(sum(24 + octet_length(r::text)), 0) FROM {table} r)"
            for table in ("memories", "memory_events", "transcript"))).fetchone()[0]
        assert counted == measured > 0
        assert store.health()["db_bytes"] == -(-counted // 8192) * 8192


def test_settings_of_every_connection_health_reports(pg_url):
    limits = Limits().replace(busy_timeout_ms=1234)
    with PostgresStore(pg_url, schema=fresh(), limits=limits, synchronous="NORMAL", pool_size=2) as store:
        health = store.health()
        with store.transaction() as conn:  # a pooled connection, not only the inspecting one
            shown = conn.execute("SELECT current_setting('synchronous_commit'), current_setting('lock_timeout'),"
                                 " current_schema()").fetchone()
    assert (health["synchronous"], health["synchronous_commit"], health["busy_timeout_ms"]) == ("NORMAL", "off", 1234)
    assert tuple(shown) == ("off", "1234ms", store.schema) and health["pool_size"] == 2
    with PostgresStore(pg_url, schema=fresh()) as durable:
        assert (durable.health()["synchronous_commit"], durable.health()["synchronous"]) == ("on", "FULL")


def test_search_uses_the_trigram_index_where_the_server_has_pg_trgm(pg_url, pg_trgm_url):
    with PostgresStore(pg_url, schema=fresh()) as plain:
        assert plain.health()["search_index"] == "scan"
    limits = Limits().replace(max_records_per_user=5000, max_records_total=5000)
    with PostgresStore(pg_trgm_url, schema=fresh(), limits=limits, synchronous="NORMAL") as store:
        assert store.health()["search_index"] == "pg_trgm"
        with store.transaction() as conn:
            conn.executemany(
                store.statements().insert_memory,
                [("alice", "episode", f"e{n}", f"note {n} about {'kyoto' if n == 7 else 'tea'}", "s", 1,
                  f"t{n:05d}", f"t{n:05d}", f"e{n}", f"note {n} about {'kyoto' if n == 7 else 'tea'}", n)
                 for n in range(3000)])
        store.connection.execute("ANALYZE memories")
        store.fts_min_user_rows = 1000
        assert [r["key"] for r in store.search("alice", "KYOTO")] == ["e7"]
        plan = "\n".join(row[0] for row in store.connection.execute(
            "EXPLAIN SELECT id FROM memories WHERE user_id = 'alice'"
            " AND (key_fold LIKE '%kyoto%' OR value_fold LIKE '%kyoto%') ORDER BY seq DESC LIMIT 5"))
        assert "memories_trgm" in plan, plan


# -- the same answers as SQLite ---------------------------------------------------------------------

ALPHABET = st.sampled_from(list('aAbBkK ßSsİiıﬁΣσςÅå茶绿喝"\'%_*\\-:.^()\t'))  # noqa: RUF001 -- dotless i, sigma: case folding on purpose
VALUES = st.text(ALPHABET, min_size=1, max_size=12).filter(lambda v: v.strip())
USERS = iter(range(10**9))


@pytest.fixture(scope="module")
def twin_stores(tmp_path_factory, server):
    """A SQLite store and a PostgreSQL store sharing one clock, to be given the same writes."""
    limits = Limits().replace(max_records_per_user=10_000, max_records_total=1_000_000)
    clock = FakeClock(step_seconds=1)
    with MemoryStore(tmp_path_factory.mktemp("twin") / "m.sqlite3", limits=limits, synchronous="NORMAL",
                     clock=clock) as lite, \
            PostgresStore(server, schema=fresh(), limits=limits, synchronous="NORMAL", clock=clock) as pg:
        yield lite, pg, clock


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.tuples(st.sampled_from(["preference", "episode"]), st.integers(0, 6), VALUES),
                       min_size=1, max_size=12),
       queries=st.lists(st.text(ALPHABET, max_size=4), min_size=1, max_size=4),
       picks=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11), st.integers(0, 4)), max_size=3),
       limit=st.integers(1, 12), threshold=st.sampled_from([0, 2, 10**9]))
def test_search_gives_sqlites_answers_for_the_same_data(twin_stores, values, queries, picks, limit, threshold):
    """The literal case-folded rule on both: search and search_many, by scan and by the index."""
    lite, pg, clock = twin_stores
    user = f"u{next(USERS)}"
    for number, (kind, key, value) in enumerate(values):
        at = clock.now
        for store in (lite, pg):
            clock.now = at  # the same timestamps on both, so "newest first" orders alike
            store.put(user, "s", kind, f"k{key}", f"{value} {number}")
    queries = queries + [values[i % len(values)][2][j:j + 1 + k] for i, j, k in picks]
    pg.fts_min_user_rows = threshold
    for query in queries:
        for kind in (None, "preference", "episode"):
            assert pg.search(user, query, limit, kind) == lite.search(user, query, limit, kind), (query, kind)
    assert pg.search_many(user, queries, limit) == lite.search_many(user, queries, limit)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.text(min_size=1, max_size=40).filter(
    lambda v: v.strip() and "\x00" not in v and not any(0xD800 <= ord(c) <= 0xDFFF for c in v)),
    min_size=1, max_size=5))
def test_a_user_moves_between_sqlite_and_postgresql_unchanged(twin_stores, values):
    lite, pg, _ = twin_stores
    user = f"u{next(USERS)}"
    for number, value in enumerate(values):
        lite.put(user, "s1", "episode", f"k{number % 3}", value, confirmation=f"c{number}")
    bundle = lite.export_user(user)
    counts = {"records": len(lite.records(user)), "events": sum(
        len(lite.history(user, "episode", f"k{n}")) for n in range(3))}
    assert pg.import_records(bundle) == counts
    assert pg.export_user(user) == bundle  # SQLite -> PostgreSQL, byte for byte
    assert pg.records(user) == lite.records(user)
    assert pg.history(user, "episode", "k0") == lite.history(user, "episode", "k0")
    lite.forget_user(user)
    lite.import_records(pg.export_user(user))  # and back
    assert lite.export_user(user) == bundle


def test_open_store_opens_sqlite_for_a_path_and_postgresql_for_a_url(tmp_path, pg_url):
    clock = FakeClock()
    with open_store(tmp_path / "m.sqlite3", clock=clock) as lite, open_store(pg_url, schema=fresh(), clock=clock) as pg:
        assert type(lite) is MemoryStore and type(pg) is PostgresStore
        assert (lite.put("alice", "s1", "preference", "drink", "tea")
                == pg.put("alice", "s1", "preference", "drink", "tea"))
        assert lite.path == tmp_path / "m.sqlite3" and pg.schema.startswith("t_")
    with pytest.raises(TypeError, match="check_integrity"):
        open_store(pg_url, check_integrity=True)  # a SQLite option: refused, never silently ignored


def test_the_postgresql_names_are_public_and_psycopg_is_imported_only_on_first_use(pg_url):
    import memkit

    assert {"open_store", "PostgresStore", "start_embedded_postgres"} <= set(memkit.__all__)
    assert memkit.PostgresStore is PostgresStore and memkit.open_store is open_store
    with memkit.open_store(pg_url, schema=fresh()) as store:
        assert isinstance(store, memkit.PostgresStore)
    with pytest.raises(AttributeError, match="no attribute 'PostgresStores'"):
        memkit.PostgresStores  # noqa: B018 - a misspelt name is an AttributeError, not a silent None
    # A fresh interpreter: `import memkit` (the SQLite kit) does not import psycopg; the name does.
    probe = ("import sys, memkit; assert 'psycopg' not in sys.modules, 'psycopg imported by import memkit'; "
             "memkit.PostgresStore; assert 'psycopg' in sys.modules; print('ok')")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
