"""PostgreSQL's store-wide counters in shards (pg_counters.py, schema step 13; postgres.py, the lock order):
writers of different users commit side by side, and the global quota and the size cap stay exact
however many race for the last of them.

Real servers throughout (the embedded PostgreSQL 16 and Debian's 15, conftest.py), real writer
processes for the races (tests/postgres/_pg_worker.py), and the checks read the database afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lab.workers import run_together, send
from memkit.errors import LockedError, QuotaError
from memkit.limits import Limits
from memkit.store import SCHEMA_VERSION, PostgresStore
from memkit.store.postgres.steps import PG_MIGRATIONS
from memkit.store.postgres.counters import SHARD_LOCK_CLASS, SHARDS
pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("_pg_worker.py")


@pytest.fixture(scope="module", params=["pg", "pg-trgm"])
def server(request):
    """A PostgreSQL server's URL: the embedded one (16, no pg_trgm) and Debian's (15, with pg_trgm)."""
    return request.getfixturevalue("pg_url" if request.param == "pg" else "pg_trgm_url")


def fresh() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def shards(store: PostgresStore) -> list[dict[str, Any]]:
    """Every shard row, in shard order."""
    cursor = store.connection.execute("SELECT * FROM memkit_shards ORDER BY shard")
    names = [column.name for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def real_counts(store: PostgresStore) -> tuple[int, int]:
    """(records, bytes) counted from the rows themselves, the way the size triggers count bytes."""
    tables = ("memories", "memory_events", "transcript", "proposals", "memory_embeddings", "agent_items")
    records, size = store.connection.execute(
        "SELECT (SELECT count(*) FROM memories), " + " + ".join(
            f"(SELECT coalesce(sum(24 + octet_length(r::text)), 0) FROM {table} r)" for table in tables)
    ).fetchone()
    return int(records), int(size)


def assert_escrow_holds(store: PostgresStore, records_cap: int, bytes_cap: int) -> None:
    """The shards add up to the rows, and no shard is past an allowance that the caps could not back."""
    rows = shards(store)
    assert len(rows) == SHARDS
    assert (sum(r["records"] for r in rows), sum(r["bytes"] for r in rows)) == real_counts(store)
    assert store.health()["counters_consistent"]
    for used, allowed, cap, limit in (("records", "records_allowed", "records_cap", records_cap),
                                      ("bytes", "bytes_allowed", "bytes_cap", bytes_cap)):
        open_ = [r for r in rows if r[allowed] is not None and r[cap] == limit]
        assert all(r[used] <= r[allowed] for r in open_)
        if open_:
            assert sum(r[allowed] for r in rows if r[allowed] is not None) <= limit


def start(mode: str, payload: dict[str, Any]) -> subprocess.Popen[str]:
    """Start tests/postgres/_pg_worker.py MODE in a fresh interpreter and send it its payload line."""
    process = subprocess.Popen([sys.executable, str(WORKER), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, encoding="utf-8")
    send(process, json.dumps(payload))
    return process


def race(url: str, schema: str, plans: list[list[tuple[str, str, str, str]]], limits: dict[str, int]) -> list[str]:
    """Writer processes, one per plan, started together; every outcome, with QuotaError messages."""
    outcomes = run_together([start("race", {"url": url, "schema": schema, "ops": plan, "limits": limits,
                                            "messages": True}) for plan in plans], "race writer")
    return [outcome for writer in outcomes for outcome in writer]


# -- side by side -------------------------------------------------------------------------------------


def test_a_writer_of_another_user_commits_while_one_holds_its_transaction_open(server):
    """Before the shards, every write held the store's one size row until commit: bob waited for
    alice's open transaction, and with a short busy timeout gave up."""
    schema, short = fresh(), Limits().replace(busy_timeout_ms=1500)
    PostgresStore(server, schema=schema).close()
    with PostgresStore(server, schema=schema, limits=short) as first, \
            PostgresStore(server, schema=schema, limits=short) as second:
        second.put("carol", "s0", "preference", "warm", "up")  # its first rebalance, done before
        with first.transaction():
            first.put("alice", "s1", "preference", "tea", "green")
            done: list[Any] = []
            bob = threading.Thread(target=lambda: done.append(second.put("bob", "s1", "preference", "tea", "black")))
            bob.start()
            bob.join(timeout=10)
            assert done and done[0]["revision"] == 1  # committed while alice's transaction is open
            assert second.get("alice", "preference", "tea") is None  # hers is not committed yet
        assert first.get("alice", "preference", "tea")["value"] == "green"
        assert second.users() == {"alice": 1, "bob": 1, "carol": 1}
        held = [r for r in shards(first) if r["records"]]
        assert len(held) >= 2  # the two users' records were settled into different shards
        assert_escrow_holds(first, Limits().max_records_total, Limits().max_db_bytes)


# -- the races at the edges -----------------------------------------------------------------------------


def test_writers_of_different_users_race_for_the_last_records_of_the_global_quota(server, figures):
    schema, cap, prefill, writers, tries = fresh(), 40, 30, 8, 6
    limits = {"max_records_total": cap, "busy_timeout_ms": 30_000}
    with PostgresStore(server, schema=schema, limits=Limits().replace(**limits)) as store:
        for n in range(prefill):  # shared out over the shards by the rebalances this makes
            store.put(f"early{n % 5}", "s0", "preference", f"k{n}", f"value {n}")
        assert sum(r["records_allowed"] or 0 for r in shards(store)) == cap
    plans = [[(f"racer{w}", "preference", f"k{n}", f"racer {w} value {n}") for n in range(tries)]
             for w in range(writers)]
    flat = race(server, schema, plans, limits)
    refusals = [o for o in flat if o != "ok"]
    with PostgresStore(server, schema=schema, limits=Limits().replace(**limits)) as store:
        stored = real_counts(store)[0]
        assert stored == cap == prefill + flat.count("ok")  # every last place taken, none twice
        # Every refusal the global quota's, with the exact figure: the store was full when refused.
        assert refusals and set(refusals) == {f"quota: the store holds {cap} records; the global quota is {cap}"}
        assert_escrow_holds(store, cap, Limits().max_db_bytes // 8192 * 8192)
        with pytest.raises(QuotaError, match=f"the global quota is {cap}"):
            store.put("late", "s9", "preference", "one", "more")
    figures(f"PostgreSQL shards: racing for the last records ({server_name(server)})", writers=writers,
            attempts=len(flat), places=cap - prefill, stored=stored, over_total=max(0, stored - cap),
            refused=len(refusals))


def test_writers_of_different_users_race_for_the_last_bytes_of_the_size_cap(server, figures):
    schema, cap, writers, tries = fresh(), 12 * 8192, 8, 30
    limits = {"max_db_bytes": cap, "max_records_per_user": 1000, "max_records_total": 10_000,
              "busy_timeout_ms": 30_000}
    PostgresStore(server, schema=schema).close()
    plans = [[(f"user{w}", "episode", f"e{n}", f"{w} {n} " + "x" * 480) for n in range(tries)] for w in range(writers)]
    flat = race(server, schema, plans, limits)
    refusals = [o for o in flat if o != "ok"]
    with PostgresStore(server, schema=schema, limits=Limits().replace(**limits)) as store:
        health = store.health()
        assert health["db_bytes"] <= cap and health["records_total"] == flat.count("ok")
        assert refusals and all(o.startswith("quota: the write would grow the database to ") for o in refusals)
        grown = {int(o.split(" to ")[1].split(" bytes")[0]) for o in refusals}
        assert all(size > cap and size % 8192 == 0 for size in grown)  # exact sizes, each past the cap
        assert all(o.endswith(f"; the cap is {cap} bytes") for o in refusals)
        before = real_counts(store)
        with pytest.raises(QuotaError, match="would grow the database"):  # full: one more does not fit
            store.put("latecomer", "s9", "episode", "e29", "99 29 " + "x" * 480)  # a little larger than any
        assert real_counts(store) == before
        assert_escrow_holds(store, 10_000, cap)
    figures(f"PostgreSQL shards: racing for the last bytes ({server_name(server)})", writers=writers,
            attempts=len(flat), stored=flat.count("ok"), refused=len(refusals),
            over_cap_bytes=max(0, health["db_bytes"] - cap))


def server_name(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        return f"PostgreSQL {conn.info.server_version // 10000}"


# -- rebalancing --------------------------------------------------------------------------------------


def test_writes_fill_every_shard_to_the_last_place_and_a_delete_gives_room_back(server):
    schema, cap = fresh(), 2 * SHARDS
    limits = Limits().replace(max_records_total=cap)
    with PostgresStore(server, schema=schema, limits=limits) as store:
        store.put("alice", "s1", "preference", "k0", "v")  # the first write rebalances: 2 places each
        assert [r["records_allowed"] - r["records"] for r in shards(store)].count(1) == SHARDS - 1
        for n in range(1, cap):  # its shard fills, then each free one with room, to the last place
            store.put(f"u{n % 20}", "s1", "preference", f"k{n}", "v")
        assert real_counts(store)[0] == cap
        assert all(r["records_allowed"] == r["records"] for r in shards(store))  # no room anywhere
        with pytest.raises(QuotaError, match=f"the store holds {cap} records; the global quota is {cap}"):
            store.put("bob", "s1", "preference", "k", "v")
        assert store.delete("alice", "preference", "k0")
        store.put("bob", "s1", "preference", "k", "v")  # the room the delete gave back
        assert real_counts(store)[0] == cap
        assert_escrow_holds(store, cap, limits.max_db_bytes // 8192 * 8192)


def test_stores_opened_with_different_quotas_each_hold_to_their_own(server):
    schema = fresh()
    with PostgresStore(server, schema=schema, limits=Limits().replace(max_records_total=10)) as low, \
            PostgresStore(server, schema=schema, limits=Limits().replace(max_records_total=12)) as high:
        for n in range(10):
            low.put(f"u{n}", "s1", "preference", "k", "v")
        with pytest.raises(QuotaError, match="holds 10 records; the global quota is 10"):
            low.put("x", "s1", "preference", "k", "v")
        high.put("x", "s1", "preference", "k", "v")  # the shares granted under 10 do not bind a 12
        high.put("y", "s1", "preference", "k", "v")
        with pytest.raises(QuotaError, match="holds 12 records; the global quota is 12"):
            high.put("z", "s1", "preference", "k", "v")
        with pytest.raises(QuotaError, match="holds 12 records; the global quota is 10"):
            low.put("z", "s1", "preference", "k", "v")
        assert real_counts(low)[0] == 12 and low.health()["counters_consistent"]


def test_a_store_past_its_caps_refuses_every_checked_write_whatever_its_sign(server):
    """Caps lowered below what a store holds: a write that is checked is refused, as before the shards
    and as on SQLite, even one that shrinks the store or adds as many records as it removes; and the
    answer does not depend on whether another writer happens to hold the shards."""
    schema = fresh()
    with PostgresStore(server, schema=schema) as store:
        for n in range(20):
            store.put(f"u{n % 2}", "s1", "preference", f"k{n}", "x" * 500)
        size = store.health()["db_bytes"]
    with PostgresStore(server, schema=schema, limits=Limits().replace(max_records_total=19)) as store:
        with pytest.raises(QuotaError, match="the global quota is 19"), store.transaction():
            store.delete("u0", "preference", "k0")
            store.put("u0", "s1", "preference", "new", "v")  # as many records as the delete removed
        assert real_counts(store)[0] == 20 and store.get("u0", "preference", "k0") is not None
    with PostgresStore(server, schema=schema, limits=Limits().replace(max_db_bytes=size // 2)) as store:
        with pytest.raises(QuotaError, match=f"the cap is {size // 2} bytes"):
            store.put("u1", "s1", "preference", "k1", "shorter")  # shrinks the store, still past the cap
        assert store.get("u1", "preference", "k1")["value"] == "x" * 500
        assert store.health()["counters_consistent"]


def test_a_writer_that_bypasses_memkit_is_counted_and_closes_every_allowance(server):
    schema, cap = fresh(), 8
    limits = Limits().replace(max_records_total=cap)
    with PostgresStore(server, schema=schema, limits=limits) as store:
        for n in range(cap - 2):
            store.put(f"u{n}", "s1", "preference", "k", "v")
        with psycopg.connect(server, autocommit=True, options=f"-c search_path={schema}") as raw:
            for key in ("a", "b"):  # psql's way: the triggers settle, under the rebalance lock
                raw.execute("INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision,"
                            " created_at, updated_at, key_fold, value_fold) VALUES ('raw', 'preference', %s, 'v',"
                            " 's', 1, 't', 't', %s, 'v')", (key, key))
        assert all(r["records_allowed"] is None and r["bytes_allowed"] is None for r in shards(store))
        assert store.health()["counters_consistent"] and store.health()["records_total"] == cap
        with pytest.raises(QuotaError, match=f"holds {cap} records; the global quota is {cap}"):
            store.put("late", "s1", "preference", "k", "v")
        assert store.delete("u0", "preference", "k")
        store.put("late", "s1", "preference", "k", "v")
        assert_escrow_holds(store, cap, limits.max_db_bytes // 8192 * 8192)


def test_a_transaction_holding_a_shard_gives_way_to_a_rebalance_instead_of_waiting_in_a_cycle(pg_url):
    schema, cap = fresh(), SHARDS * 4
    limits = Limits().replace(max_records_total=cap, busy_timeout_ms=5000)
    with PostgresStore(pg_url, schema=schema, limits=limits) as store:
        store.put("warm", "s0", "preference", "k", "v")  # the room shared out: 63 places
    with PostgresStore(pg_url, schema=schema, limits=limits) as holder, \
            PostgresStore(pg_url, schema=schema, limits=limits) as other:
        with pytest.raises(LockedError, match="another writer is rebalancing"), holder.transaction():
            holder.put("alice", "s1", "preference", "k0", "v")  # settles into a shard it keeps
            with psycopg.connect(pg_url, autocommit=True) as lock:  # a rebalance under way elsewhere
                lock.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (SHARD_LOCK_CLASS, schema))
                for n in range(1, cap):  # past all the room shared out: it must rebalance, and may not wait
                    holder.put("alice", "s1", "preference", f"k{n}", "v")
        other.put("bob", "s1", "preference", "k", "v")  # nothing left held
        assert holder.get("alice", "preference", "k0") is None  # rolled back whole
        assert real_counts(other)[0] == 2 and other.health()["counters_consistent"]


def test_a_store_of_the_previous_version_keeps_its_figures_exact(server):
    schema = fresh()
    previous = 12  # the version before the shards (step 13)
    statements = [s for step in PG_MIGRATIONS[:previous] for s in step]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    with psycopg.connect(server, options=f"-c search_path={schema}") as conn:
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO memkit_meta (\"only\", schema_version) VALUES (1, %s)", (previous,))
        for n in range(7):  # rows as the previous version's triggers counted them
            conn.execute("INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision,"
                         " created_at, updated_at, key_fold, value_fold, seq) VALUES (%s, 'preference', 'k', %s,"
                         " 's', 1, 't', 't', 'k', %s, %s)", (f"u{n % 3}-{n}", f"value {n}", f"value {n}", n + 1))
        conn.execute("INSERT INTO transcript VALUES ('u0', 's', 1, 'user', 'hello there', 't')")
        records, size = (conn.execute("SELECT (SELECT records FROM total_count), (SELECT bytes FROM store_size)")
                         .fetchone())
    assert records == 7 and size > 0
    with PostgresStore(server, schema=schema) as store:
        assert store.health()["schema_version"] == SCHEMA_VERSION
        rows = shards(store)
        assert (sum(r["records"] for r in rows), sum(r["bytes"] for r in rows)) == (records, size)
        assert real_counts(store) == (records, size)
        assert store.health()["records_total"] == records and store.health()["counters_consistent"]
        store.put("u9", "s", "preference", "k", "v")
        assert real_counts(store)[0] == records + 1 and store.health()["counters_consistent"]


def test_rebalances_under_a_race_keep_the_quota_exact(server, figures):
    """No prefill: the shards' first shares run out mid-race, many times over, in many writers."""
    schema, cap, writers, tries = fresh(), 120, 8, 20
    limits = {"max_records_total": cap, "busy_timeout_ms": 30_000}
    PostgresStore(server, schema=schema).close()
    plans = [[(f"racer{w}", "preference", f"k{n}", f"racer {w} value {n}") for n in range(tries)]
             for w in range(writers)]
    flat = race(server, schema, plans, limits)
    with PostgresStore(server, schema=schema, limits=Limits().replace(**limits)) as store:
        stored = real_counts(store)[0]
        assert stored == cap == flat.count("ok")
        assert set(flat) - {"ok"} == {f"quota: the store holds {cap} records; the global quota is {cap}"}
        settled_in = sum(1 for r in shards(store) if r["records"])
        assert settled_in >= 2  # the writers' records went to shards of their own
        assert_escrow_holds(store, cap, Limits().max_db_bytes // 8192 * 8192)
    figures(f"PostgreSQL shards: rebalancing under a race ({server_name(server)})", writers=writers,
            attempts=len(flat), stored=stored, over_total=max(0, stored - cap), shards_used=settled_in)
