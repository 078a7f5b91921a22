"""MemoryStore.health against a real SQLite file: settings, quotas, and the counter check.

Every test uses a real file under tmp_path.
"""

from __future__ import annotations

import sqlite3

import pytest

from _store_helpers import open_store
from memkit.limits import Limits
from memkit.store import SCHEMA_VERSION


pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend


# -- health ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_health_reports_the_settings_and_the_quotas(tmp_path, synchronous):
    limits = Limits().replace(busy_timeout_ms=1234, max_records_per_user=5)
    with open_store(tmp_path / "m.sqlite3", limits=limits, synchronous=synchronous) as store:
        store.put("alice", "s1", "preference", "a", "v")
        store.put("alice", "s1", "preference", "b", "v")
        store.put("bob", "s1", "preference", "a", "v")
        health = store.health()
    assert health["schema_version"] == SCHEMA_VERSION
    assert health["journal_mode"] == "wal"
    assert health["synchronous"] == synchronous
    assert health["busy_timeout_ms"] == 1234
    assert 0 < health["db_bytes"] < health["max_db_bytes"]
    assert health["max_db_bytes"] == 16 * 1024 * 1024
    assert (health["records_total"], health["max_records_total"], health["users"]) == (3, 1024, 2)
    assert health["records_per_user"] == {"alice": 2, "bob": 1}
    assert health["max_records_per_user"] == 5
    assert health["counters_consistent"] is True


@pytest.mark.parametrize(
    "drift",
    [
        "UPDATE store_meta SET records = records + 1",
        "UPDATE user_counts SET records = 1 WHERE user_id = 'alice'",  # total still right
        "DELETE FROM user_counts WHERE user_id = 'bob'",
        "INSERT INTO user_counts (user_id, records) VALUES ('ghost', 0)",
        "INSERT INTO user_counts (user_id, records) VALUES ('ghost', 1)",
    ],
)
@pytest.mark.sqlite_only  # edits the file with sqlite3 (tests/postgres/test_postgres.py: on PostgreSQL)
def test_health_notices_counters_that_disagree_with_the_rows(tmp_path, drift):
    path = tmp_path / "m.sqlite3"
    with open_store(path) as store:
        store.put("alice", "s1", "preference", "a", "v")
        store.put("alice", "s1", "preference", "b", "v")
        store.put("bob", "s1", "preference", "a", "v")
        assert store.health()["counters_consistent"] is True
        with sqlite3.connect(path) as raw:
            raw.execute(drift)
        raw.close()
        assert store.health()["counters_consistent"] is False
