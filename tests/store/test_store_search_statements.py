"""What one literal search runs on SQLite: a store whose users can never reach the index's threshold
(`Store.fts_min_user_rows`) is searched by one statement, the scan, without reading the user's count
first; where a user can reach it, the count decides between the scan and the index. Answers are the
rule's either way, rows come back as the same records.
"""

from __future__ import annotations

import pytest

from memkit.limits import Limits
from memkit.store import MemoryStore


def _statements(store, call):
    seen: list[str] = []
    store.connection.set_trace_callback(seen.append)
    try:
        return call(), [s.split()[0] + " " + ("user_counts" if "user_counts" in s else "memories") for s in seen]
    finally:
        store.connection.set_trace_callback(None)


@pytest.mark.parametrize("quota, expected", [
    (64, ["SELECT memories"]),  # no user can hold 1,000 records: the scan alone
    (5_000, ["SELECT user_counts", "SELECT memories"]),  # one could: their count first
])
def test_a_search_reads_the_users_count_only_where_the_index_could_answer(tmp_path, quota, expected):
    limits = Limits(max_records_per_user=quota, max_records_total=10_000)
    with MemoryStore(tmp_path / "m.sqlite3", limits=limits) as store:
        for n in range(12):
            store.put("alice", "s1", "episode", f"trip{n}", f"A trip to Paris, number {n}")
        found, ran = _statements(store, lambda: store.search("alice", "PARIS", limit=5))
        assert ran == expected
        assert [r["key"] for r in found] == [f"trip{n}" for n in range(11, 6, -1)]  # newest first
        assert found[0] == store.get("alice", "episode", "trip11")  # the same record, every field


def test_a_user_past_a_shrunk_quota_is_still_counted_and_searched_the_same(tmp_path):
    path = tmp_path / "m.sqlite3"
    with MemoryStore(path, limits=Limits(max_records_per_user=50, max_records_total=10_000)) as store:
        for n in range(40):
            store.put("alice", "s1", "episode", f"k{n}", f"note {n} about tea")
    with MemoryStore(path, limits=Limits(max_records_per_user=10, max_records_total=10_000)) as store:
        store.fts_min_user_rows = 30  # alice holds 40, past the quota of 10: she may still use the index
        found, ran = _statements(store, lambda: store.search("alice", "tea", limit=3))
        assert ran[0] == "SELECT user_counts"
        assert [r["key"] for r in found] == ["k39", "k38", "k37"]
