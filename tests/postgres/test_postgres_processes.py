"""PostgresStore under real processes: racing writers at the quota and size edges, writers killed
with SIGKILL mid-stream and mid-transaction, the server stopped and restarted under a running agent.

Every writer is a fresh interpreter (tests/postgres/_pg_worker.py) with its own connections to a real
PostgreSQL server; the checks read the database afterwards from a store of their own. The figures
are recorded with the `figures` fixture (printed, and in the table at the end of the run).
"""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from _store_helpers import DEBIAN_POSTGRES, TEST_SERVER_SETTINGS
from lab.workers import expect, read_answer, run_together, send
from memkit.limits import Limits
from memkit.store import PostgresStore
from memkit.store.postgres import start_embedded_postgres

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("_pg_worker.py")
SECRET = "hunter2-Pw"


def start(mode: str, payload: dict[str, Any]) -> subprocess.Popen[str]:
    """Start tests/postgres/_pg_worker.py MODE in a fresh interpreter and send it its payload line."""
    process = subprocess.Popen([sys.executable, str(WORKER), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, encoding="utf-8")
    send(process, json.dumps(payload))
    return process


def fresh() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def consistent(store: PostgresStore) -> bool:
    """The quota counters and the size counter agree with the rows."""
    measured = store.connection.execute("SELECT " + " + ".join(
        f"(SELECT coalesce(sum(24 + octet_length(r::text)), 0) FROM {table} r)"
        for table in ("memories", "memory_events", "transcript"))).fetchone()[0]
    counted = store.connection.execute("SELECT bytes FROM store_size").fetchone()[0]
    return bool(store.health()["counters_consistent"] and measured == counted)


def race(url: str, schema: str, plans: list[list[tuple[str, str, str, str]]],
         limits: dict[str, int]) -> list[list[str]]:
    return run_together([start("race", {"url": url, "schema": schema, "ops": plan, "limits": limits})
                         for plan in plans], "race writer")


# -- racing writers ---------------------------------------------------------------------------------


def test_racing_processes_never_pass_the_per_user_or_the_global_quota(pg_url, figures):
    schema, per_user, total = fresh(), 10, 25
    PostgresStore(pg_url, schema=schema).close()
    limits = {"max_records_per_user": per_user, "max_records_total": total, "busy_timeout_ms": 30_000}
    # alice has three racers over one per-user quota; the four users together exceed the global one.
    racers = [("alice", "a"), ("alice", "b"), ("alice", "c"), ("bob", "a"), ("carol", "a"), ("dave", "a")]
    plans = [[(user, "preference", f"{prefix}{n}", f"value {n}") for n in range(12)] for user, prefix in racers]
    outcomes = race(pg_url, schema, plans, limits)
    flat = [outcome for writer in outcomes for outcome in writer]
    with PostgresStore(pg_url, schema=schema) as store:
        counts = {row[0]: row[1] for row in store.connection.execute(
            "SELECT user_id, count(*) FROM memories GROUP BY user_id")}
        assert set(flat) <= {"ok", "quota"}, [o for o in flat if o not in ("ok", "quota")][:3]
        assert all(count <= per_user for count in counts.values())
        assert sum(counts.values()) == total == flat.count("ok")  # 72 attempts for 25 places: full, never over
        assert counts["alice"] == sum(writer.count("ok") for writer in outcomes[:3])
        assert consistent(store) and store.users() == counts
    figures("PostgreSQL: racing creates at the quotas", writers=len(plans), attempts=len(flat),
            stored=sum(counts.values()), over_per_user=max(0, max(counts.values()) - per_user),
            over_total=max(0, sum(counts.values()) - total))


def test_racing_updates_of_one_key_lose_none(pg_url, figures):
    schema = fresh()
    with PostgresStore(pg_url, schema=schema) as store:
        store.put("alice", "s0", "preference", "counter", "start")
    writers, each = 4, 15
    plans = [[("alice", "preference", "counter", f"writer {w} step {n}") for n in range(each)] for w in range(writers)]
    outcomes = race(pg_url, schema, plans, {"busy_timeout_ms": 30_000})
    with PostgresStore(pg_url, schema=schema) as store:
        history = store.history("alice", "preference", "counter")
        assert all(outcome == "ok" for writer in outcomes for outcome in writer)
        assert [event["revision"] for event in history] == list(range(1, writers * each + 2))
        written = sorted(event["new_value"] for event in history[1:])
        assert written == sorted(value for plan in plans for *_, value in plan)  # every update, once
        assert all(later["old_value"] == earlier["new_value"] for earlier, later in itertools.pairwise(history))
        assert store.get("alice", "preference", "counter")["revision"] == writers * each + 1
    figures("PostgreSQL: racing updates of one key", writers=writers, updates=writers * each,
            lost=writers * each + 1 - len(history))


def test_racing_writers_never_pass_the_size_cap(pg_url, figures):
    schema = fresh()
    cap = 10 * 8192
    PostgresStore(pg_url, schema=schema).close()
    limits = {"max_db_bytes": cap, "max_records_per_user": 1000, "max_records_total": 10_000, "busy_timeout_ms": 30_000}
    plans = [[(f"user{w}", "episode", f"e{n}", f"{w} {n} " + "x" * 480) for n in range(30)] for w in range(4)]
    outcomes = race(pg_url, schema, plans, limits)
    flat = [outcome for writer in outcomes for outcome in writer]
    with PostgresStore(pg_url, schema=schema, limits=Limits().replace(max_db_bytes=cap)) as store:
        health = store.health()
        assert set(flat) <= {"ok", "quota"} and "quota" in flat
        assert health["db_bytes"] <= cap and health["records_total"] == flat.count("ok")
        assert consistent(store)
    figures("PostgreSQL: racing writers at the size cap", writers=4, attempts=len(flat), stored=flat.count("ok"),
            over_cap_bytes=max(0, health["db_bytes"] - cap))


# -- SIGKILL ----------------------------------------------------------------------------------------


def test_a_writer_killed_inside_a_transaction_leaves_nothing_and_no_lock(pg_url):
    schema = fresh()
    PostgresStore(pg_url, schema=schema).close()
    process = start("hold", {"url": pg_url, "schema": schema, "user": "alice", "keys": ["drink", "food", "city"]})
    try:
        expect(process, "inside")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    limits = Limits().replace(busy_timeout_ms=2000)  # a lock left behind would make the put below fail
    with PostgresStore(pg_url, schema=schema, limits=limits) as store:
        started = time.monotonic()
        store.put("alice", "s1", "preference", "drink", "tea")
        assert time.monotonic() - started < 2
        assert [r["key"] for r in store.records("alice")] == ["drink"]
        assert [e["new_value"] for e in store.history("alice", "preference", "drink")] == ["tea"]
        assert store.history("alice", "preference", "food") == [] and consistent(store)


def test_no_acknowledged_write_is_lost_when_writers_are_killed_mid_stream(pg_url, figures):
    schema, rounds, rng = fresh(), 6, random.Random(7)
    PostgresStore(pg_url, schema=schema).close()
    acked: dict[str, int] = {}
    for number in range(rounds):
        prefix = f"r{number}"
        process = start("stream", {"url": pg_url, "schema": schema, "user": "crash", "prefix": prefix, "count": 500,
                                   "limits": {"max_records_per_user": 10_000, "max_records_total": 10_000}})
        try:
            expect(process, "ready")
            assert process.stdout is not None
            lines = [process.stdout.readline() for _ in range(rng.randint(3, 30))]
            time.sleep(rng.random() * 0.05)  # land the kill anywhere: in a put, in its commit
            process.send_signal(signal.SIGKILL)
            lines += process.stdout.read().splitlines()  # acknowledgements already in the pipe count too
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == -signal.SIGKILL
        for line in lines:
            if line.startswith("ack "):
                acked[f"{prefix}-{int(line.split()[1]):05d}"] = int(line.split()[2])
    with PostgresStore(pg_url, schema=schema, limits=Limits().replace(max_records_per_user=10_000)) as store:
        stored = {r["key"]: r for r in store.records("crash")}
        lost = [key for key in acked if key not in stored]
        wrong = [key for key, record in stored.items() if record["value"] != f"value of {key}"]
        half = [key for key in stored if [e["action"] for e in store.history("crash", "episode", key)] != ["create"]]
        assert lost == [] and wrong == [] and half == [] and consistent(store)
    figures("PostgreSQL: SIGKILL mid-stream", kills=rounds, acknowledged=len(acked), lost=len(lost),
            half_written=len(half))


# -- the server stopped and restarted under a running agent ----------------------------------------


@pytest.fixture
def own_server():
    """A server of its own (Debian's binaries where present: they start fastest), to be stopped."""
    options = {"bin_dir": DEBIAN_POSTGRES} if (DEBIAN_POSTGRES / "postgres").exists() else {}
    with start_embedded_postgres(settings=TEST_SERVER_SETTINGS, **options) as server:
        yield server


def test_an_agent_survives_its_server_stopping_and_restarting(own_server, figures):
    url, schema = own_server.url.replace("postgres@", f"postgres:{SECRET}@", 1), fresh()
    PostgresStore(url, schema=schema).close()
    process = start("agent", {"url": url, "schema": schema, "user": "alice", "count": 12,
                              "limits": {"busy_timeout_ms": 1000}})
    lines: list[dict[str, Any]] = []

    def until(condition, what: str) -> None:
        deadline = time.monotonic() + 60
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {lines[-3:]}"
            lines.append(read_answer(process))

    try:
        expect(process, "ready")
        outages = []
        for mode, acks_before in (("fast", 3), ("immediate", 7)):  # a clean shutdown, then a crash
            until(lambda acks_before=acks_before: sum("ack" in line for line in lines) >= acks_before,
                  "acknowledged writes")
            own_server.stop(mode)
            seen = len(lines)
            until(lambda seen=seen: sum("error" in line for line in lines[seen:]) >= 2,
                  "errors while the server is down")
            outages.append(lines[seen:])
            own_server.start()
        until(lambda: sum("ack" in line for line in lines) >= 12, "the rest of the writes")
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    errors = [line["error"] for line in lines if "error" in line]
    assert all(SECRET not in error for error in errors)
    assert all("cannot reach the PostgreSQL server" in error or "connection" in error for error in errors), errors
    acked = {line["ack"]: line["revision"] for line in lines if "ack" in line}
    with PostgresStore(url, schema=schema) as store:
        stored = {r["key"]: r for r in store.records("alice")}
        assert {key: record["revision"] for key, record in stored.items()} == acked == {f"k{n}": 1 for n in range(12)}
        assert all(stored[f"k{n}"]["value"] == f"v{n}" for n in range(12)) and consistent(store)
    figures("PostgreSQL: server stopped and restarted under an agent", outages=2,
            errors_while_down=len(errors), acknowledged=len(acked), lost=12 - len(stored))
