"""Every limit has a range (memkit/limit_ranges.py): a value outside it is one error naming the limit,
the value and the range, whether it comes from code or from a store's recorded limits edited by hand.

The issue: `Limits(max_db_bytes=10**26)` was accepted and `memkit limits --set` of it ended in an
OverflowError traceback; a recorded limit edited into text ended every open in a ValueError.
"""

from __future__ import annotations

import dataclasses
import sqlite3

import pytest

from _cli_helpers import env_with, memkit
from memkit.errors import StoreError, ValidationError
from memkit.limit_ranges import BYTES, COUNT, MILLISECONDS, SECONDS, TEXT, UPPER
from memkit.limits import Limits
from memkit.store import MemoryStore, open_store

NAMES = [field.name for field in dataclasses.fields(Limits)]


def test_every_limit_has_a_range_and_every_range_a_limit():
    assert sorted(UPPER) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_limit_is_taken_up_to_its_upper_bound_and_refused_past_it(name):
    upper = UPPER[name]
    assert getattr(Limits(**{name: upper}), name) == upper
    for bad in (upper + 1, 10**26, 0, -1, True, 2.0, "5"):
        with pytest.raises(ValidationError) as refused:
            Limits(**{name: bad})
        message = str(refused.value)
        assert message.startswith(f"Limits.{name} is ") and f"from 1 to {upper}" in message
        assert "\n" not in message


def test_a_store_at_every_upper_bound_still_works(tmp_path):
    # The bounds are what carries them: SQLite's busy timeout (a C int), an expiry a century away.
    roomy = Limits(**{name: UPPER[name] for name in NAMES})
    assert (roomy.busy_timeout_ms, roomy.proposal_ttl_seconds, roomy.max_db_bytes) == (MILLISECONDS, SECONDS, BYTES)
    assert roomy.max_value_chars == TEXT and roomy.max_records_total == COUNT
    with MemoryStore(tmp_path / "memory.sqlite3", limits=roomy) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        proposal = store.propose_put("alice", "s1", "preference", "food", "soup")
        assert store.proposals("alice")[0]["id"] == proposal["id"]
        assert [r["value"] for r in store.search("alice", "tea", limit=COUNT)] == ["tea"]
        store.archive_turns("alice", "s1", [{"turn": 1, "role": "user", "content": "hi", "at": "t1"}])
    with MemoryStore(tmp_path / "memory.sqlite3") as reopened:
        assert reopened.limits == roomy


def _edit(path, value: str) -> None:
    """What someone with the sqlite3 shell does: a literal SQLite keeps as a float, or as text."""
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE store_limits SET value = {value} WHERE name = 'max_db_bytes'")
    conn.close()


@pytest.mark.parametrize("value", ["99999999999999999999999999", "'lots'", str(BYTES + 1)])
def test_a_recorded_limit_edited_out_of_range_is_refused_at_open_and_mended_by_the_cli(tmp_path, value):
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    _edit(path, value)
    with pytest.raises(StoreError, match=r"records a limit out of range: max_db_bytes is .*from 1 to 281474976710656"):
        MemoryStore(path)
    for argv in (["limits"], ["get", "--user", "alice", "--key", "drink"]):
        refused = memkit(*argv, "--db", str(path), env=env_with())
        assert refused.returncode == 2 and refused.stdout == "", refused
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
        assert "max_db_bytes" in refused.stderr and "memkit limits --set max_db_bytes=N --confirm" in refused.stderr
    mended = memkit("limits", "--db", str(path), "--set", "max_db_bytes=16777216", "--confirm", env=env_with())
    assert mended.returncode == 0, mended.stderr
    with MemoryStore(path) as store:
        assert store.limits.max_db_bytes == 16777216 and store.get("alice", "preference", "drink")["value"] == "tea"


def test_postgresql_refuses_a_recorded_limit_out_of_range_too(pg_url):
    pytest.importorskip("psycopg")
    schema = "limit_ranges_edited"
    with open_store(pg_url, schema=schema) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        with store.transaction() as conn:  # a bigint holds far more than any range allows
            conn.execute("UPDATE store_limits SET value = 9000000000000000000 WHERE name = 'busy_timeout_ms'")
    with pytest.raises(StoreError, match="busy_timeout_ms is 9000000000000000000; it must be a positive integer"):
        open_store(pg_url, schema=schema)
