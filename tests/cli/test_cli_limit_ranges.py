"""`memkit limits --set` outside a limit's range: one error line naming the limit, the value and the
range, exit 2, the store unchanged (the issue: an OverflowError traceback for max_db_bytes=10^26)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from _cli_helpers import env_with, memkit
from memkit.limit_ranges import UPPER
from memkit.store import MemoryStore

OUT_OF_RANGE = [
    ("max_db_bytes", "99999999999999999999999999"),  # the outside attack's reproducer
    ("max_db_bytes", str(UPPER["max_db_bytes"] + 1)),
    ("busy_timeout_ms", str(2**31)),
    ("proposal_ttl_seconds", "1_000_000_000_000"),
    ("max_value_chars", str(2**30 + 1)),
    ("max_archived_turns_per_user", str(2**63)),
    ("max_records_total", "0"),
    ("history_max_exchanges", "-3"),
    ("request_budget_chars", "9" * 5000),
]


@pytest.fixture
def made(tmp_path):
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    return path


@pytest.mark.parametrize(("name", "value"), OUT_OF_RANGE)
def test_a_value_out_of_range_is_one_error_line_and_changes_nothing(made, name, value):
    before = made.read_bytes()
    refused = memkit("limits", "--db", str(made), "--set", f"{name}={value}", "--confirm", env=env_with())
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert "Traceback" not in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith(f"error: --set {name}=")
    assert f"positive integer from 1 to {UPPER[name]}" in refused.stderr and "nothing was changed" in refused.stderr
    assert made.read_bytes() == before


def test_the_upper_bound_itself_is_set_and_shown(made):
    done = memkit("limits", "--db", str(made), "--set", f"max_db_bytes={UPPER['max_db_bytes']}",
                  "--set", "max_archived_turns_per_user=500", "--confirm", env=env_with())
    assert done.returncode == 0, done.stderr
    shown = json.loads(memkit("limits", "--db", str(made), env=env_with()).stdout)["limits"]
    assert shown["max_db_bytes"] == UPPER["max_db_bytes"] and shown["max_archived_turns_per_user"] == 500


def test_a_store_made_before_a_limit_existed_shows_its_default_in_force_and_records_it_when_set(made):
    with sqlite3.connect(made) as conn:  # as a store made before max_archived_turns_per_user was recorded
        conn.execute("DELETE FROM store_limits WHERE name = 'max_archived_turns_per_user'")
    conn.close()
    shown = json.loads(memkit("limits", "--db", str(made), env=env_with()).stdout)
    assert shown["limits"]["max_archived_turns_per_user"] == 64
    assert shown["not_recorded"] == ["max_archived_turns_per_user"]
    done = memkit("limits", "--db", str(made), "--set", "max_archived_turns_per_user=80", "--confirm", env=env_with())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["not_recorded"] == [] and report["limits"]["max_archived_turns_per_user"] == 80
