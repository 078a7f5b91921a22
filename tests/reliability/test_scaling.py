"""Scaling out (classroom.lab.scaling and classroom.lab.replicas) on real processes and real servers:
agent instances behind a round-robin, with their own SQLite file and in-process window or sharing
one redis-server and one PostgreSQL; writer processes racing a quota on both backends; every model
request scanned for another user's data; the writer curve's counts. Sizes are small; speed is
measured in bench/ and notebook 09, never asserted here."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import pytest

from memkit.errors import ValidationError
from lab import isolation_scan, quota_race, round_robin, start_instance, writer_curve, writer_throughput
from classroom.lab.replicas import Instance
from memkit.limits import Limits
from memkit.store import open_store
from memkit.window import start_embedded_redis

pytestmark = pytest.mark.postgres


def fresh() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def target_of(kind: str, tmp_path: Path, pg_url: str) -> tuple[str, str | None]:
    """A store target and its schema: a new SQLite file, or a new schema on the PostgreSQL server."""
    if kind == "sqlite":
        return str(tmp_path / "memory.sqlite3"), None
    return pg_url, fresh()


def opened(target: str, schema: str | None) -> Any:
    roomy = Limits().replace(max_records_per_user=10**6, max_records_total=10**6)
    return open_store(target, limits=roomy, **({"schema": schema} if schema else {}))


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    with start_embedded_redis(persistence="none") as handle:
        yield handle.url


@pytest.fixture(scope="module")
def shared_instances(pg_url: str, redis_url: str) -> Iterator[list[Instance]]:
    """Three instances sharing one redis-server and one PostgreSQL schema."""
    schema = fresh()
    instances = [start_instance(name, pg_url, redis_url, schema=schema) for name in "ABC"]
    try:
        yield instances
    finally:
        for instance in instances:
            instance.close()


# -- the round-robin ---------------------------------------------------------------------------------


def test_a_user_hopping_between_instances_that_share_redis_and_postgresql_is_recalled_by_each(shared_instances):
    rows = round_robin(shared_instances, "alice", fresh())
    assert [row["instance"] for row in rows] == ["A", "B", "C", "A", "B", "C"]
    asked = [row for row in rows if row["recalled"] is not None]
    assert [row["instance"] for row in asked] == ["B", "C", "B", "C"]
    assert all(row["recalled"] for row in asked), rows
    # the ticket came through the shared window, the drink through the shared store
    assert [row["exchanges in request"] for row in rows] == [0, 1, 2, 3, 4, 5]
    assert [row["memories in request"] for row in rows[4:]] == [1, 1]
    assert "revision 1" in rows[3]["reply"]


def test_instances_with_their_own_sqlite_file_and_in_process_window_forget_the_user_at_each_hop(tmp_path):
    instances = [start_instance(name, tmp_path / f"{name}.sqlite3") for name in "ABC"]
    try:
        rows = round_robin(instances, "alice", "support")
    finally:
        for instance in instances:
            instance.close()
    assert [row["recalled"] for row in rows if row["recalled"] is not None] == [False] * 4
    assert [row["exchanges in request"] for row in rows] == [0, 0, 0, 1, 1, 1]  # each saw only its own
    assert all(row["memories in request"] == 0 for row in rows)
    assert "revision 1" in rows[3]["reply"]  # A saved the drink, in A's file only
    assert [i.shared for i in instances] == [False] * 3 and all(i.process.poll() == 0 for i in instances)


def test_an_instance_reports_a_failure_of_its_agent_as_an_error(shared_instances):
    with pytest.raises(RuntimeError, match=r"instance A failed: ValidationError: .*empty"):
        shared_instances[0].ask("alice", fresh(), "   ")
    assert shared_instances[0].ask("alice", fresh(), "hello")["reply"]  # and it goes on serving


# -- the isolation scan ------------------------------------------------------------------------------


def test_no_model_request_of_one_user_holds_another_users_value(shared_instances):
    scan = isolation_scan(shared_instances, fresh())
    assert scan["leaks"] == 0 and scan["leaked"] == []
    assert scan["own facts recalled"] == scan["own facts asked"] == 4
    assert scan["model requests scanned"] >= scan["asks"] == 8


def test_the_isolation_scan_finds_a_value_that_is_in_another_users_requests(shared_instances):
    # Two users with the same drink: bob's value is in every request of alice's that carries her
    # drink, so the scan must count those. (A scan that cannot find a leak proves nothing.)
    users = {"alice": {"ticket number": "T-1001", "drink": "mint tea"},
             "bob": {"ticket number": "T-2002", "drink": "mint tea"}}
    scan = isolation_scan(shared_instances, fresh(), users)
    assert scan["leaks"] > 0
    assert any("'mint tea' in a request for alice" in line for line in scan["leaked"])


# -- quotas racing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "pg"])
def test_writer_processes_racing_one_user_at_the_quota_never_pass_it_nor_lose_an_update(kind, tmp_path, pg_url):
    target, schema = target_of(kind, tmp_path, pg_url)
    race = quota_race(target, writers=3, quota=5, creates_per_writer=2, updates_per_writer=3, schema=schema)
    assert race["backend"] == ("SQLite" if kind == "sqlite" else "PostgreSQL")
    assert race["errors"] == 0
    assert race["records stored"] == 5 and race["over quota"] == 0
    assert race["creates accepted"] == 1 and race["creates refused (quota)"] == 5
    assert race["updates confirmed"] == 9 and race["final revision"] == 10
    assert race["lost updates"] == 0 and race["repeated revisions"] == 0
    with opened(target, schema) as store:
        history = store.history("racer", "preference", "shared")
    assert len(history) == 10


def test_quota_race_refuses_a_quota_it_cannot_race_at(tmp_path):
    with pytest.raises(ValidationError, match="quota is 1"):
        quota_race(tmp_path / "q.sqlite3", quota=1)
    assert not (tmp_path / "q.sqlite3").exists()


# -- the writer curve --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "pg"])
def test_writer_throughput_counts_confirmed_puts_of_every_writer_process(kind, tmp_path, pg_url):
    target, schema = target_of(kind, tmp_path, pg_url)
    result = writer_throughput(target, 3, puts=4, schema=schema)
    assert {k: result[k] for k in ("writers", "puts", "busy", "errors")} == {"writers": 3, "puts": 12, "busy": 0,
                                                                               "errors": 0}
    assert result["puts_per_s"] > 0 and result["ms_per_put"] > 0 and result["seconds"] > 0
    with opened(target, schema) as store:
        assert store.users() == {"writer-1": 4, "writer-2": 4, "writer-3": 4}


def test_writer_throughput_for_a_duration_keeps_writing_until_it_ends(tmp_path):
    result = writer_throughput(tmp_path / "w.sqlite3", 1, seconds=0.3)
    assert result["seconds"] >= 0.3 and result["puts"] >= 1
    with opened(str(tmp_path / "w.sqlite3"), None) as store:
        assert store.users() == {"writer-1": result["puts"]}


def test_writer_curve_reuses_its_writers_and_never_overwrites_a_record(tmp_path, pg_url):
    schema = fresh()
    rows = writer_curve({"file": tmp_path / "c.sqlite3", "server": pg_url}, writer_counts=(1, 2), puts=3, schema=schema)
    assert [(r["label"], r["backend"], r["writers"], r["puts"]) for r in rows] == [
        ("file", "SQLite", 1, 3), ("file", "SQLite", 2, 6),
        ("server", "PostgreSQL", 1, 3), ("server", "PostgreSQL", 2, 6)]
    for target, name in ((str(tmp_path / "c.sqlite3"), None), (pg_url, schema)):
        with opened(target, name) as store:
            assert store.users() == {"writer-1": 6, "writer-2": 3}  # writer-1 wrote in both rounds, new keys


@pytest.mark.parametrize("options, message", [
    ({"writers": 0, "puts": 1}, "writers is 0"),
    ({"writers": True, "puts": 1}, "writers is True"),
    ({"writers": 2, "puts": 1, "seconds": 1.0}, "both given"),
    ({"writers": 2, "seconds": 0}, "positive"),
    ({"writers": 2, "puts": 0}, "positive"),
])
def test_writer_throughput_refuses_a_run_it_cannot_measure_and_starts_nothing(tmp_path, options, message):
    with pytest.raises(ValidationError, match=message):
        writer_throughput(tmp_path / "none.sqlite3", **options)
    assert not (tmp_path / "none.sqlite3").exists()

