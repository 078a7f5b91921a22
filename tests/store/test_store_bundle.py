"""MemoryStore's export bundles and forget_user against a real SQLite file: round trips, bad bundles
refused with nothing changed.

Every test uses a real file under tmp_path.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _store_helpers import fill, open_store, snapshot
from memkit.errors import QuotaError, StoreError, ValidationError
from memkit.limits import Limits
from memkit.store import SCHEMA_VERSION, MemoryStore, seal_bundle


pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend


@pytest.mark.sqlite_only  # reads the FTS5 index (tests/postgres/test_postgres.py: on PostgreSQL)
def test_forget_user_removes_records_events_and_transcript(tmp_path):
    # A quota that lets a user reach fts_min_user_rows: this store keeps the trigram index.
    limits = Limits().replace(max_records_per_user=MemoryStore.fts_min_user_rows)
    with open_store(tmp_path / "memory.sqlite3", limits=limits) as clocked:
        _forget_user_removes_records_events_and_transcript(clocked)


def _forget_user_removes_records_events_and_transcript(clocked):
    fill(clocked, "alice")
    fill(clocked, "bob")
    bob_before = clocked.export_user("bob")
    assert clocked.forget_user("alice") == {"records": 2, "events": 5, "transcript": 2, "proposals": 0}
    conn = clocked.connection
    for table in ("memories", "memory_events", "user_counts", "transcript"):
        assert conn.execute(f"SELECT count(*) FROM {table} WHERE user_id = 'alice'").fetchone()[0] == 0, table
    # The search index forgets too: bob's copy of "tea" is the only one left in it.
    hits = conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH '\"tea\"'").fetchall()
    assert [row[0] for row in hits] == [r[0] for r in conn.execute("SELECT id FROM memories WHERE user_id = 'bob'"
                                                                   " AND value_fold LIKE '%tea%'")]
    assert clocked.search("alice", "") == [] and clocked.archived_turns("alice", "s1") == []
    assert clocked.export_user("bob") == bob_before
    assert clocked.users() == {"bob": 2} and clocked.health()["counters_consistent"]
    assert clocked.forget_user("alice") == {"records": 0, "events": 0, "transcript": 0, "proposals": 0}


def test_export_forget_import_export_is_identical(clocked, tmp_path):
    fill(clocked, "alice")
    fill(clocked, "bob")
    bundle = clocked.export_user("alice")
    lines = _lines(bundle)
    assert json.loads(lines[0])["format"] == "memkit-export" and len(lines) == 1 + 2 + 5 + 1
    clocked.forget_user("alice")
    assert clocked.import_records(bundle) == {"records": 2, "events": 5}
    assert clocked.export_user("alice") == bundle
    assert clocked.history("alice", "preference", "drink")[1]["confirmation"] == "cli#2"
    # Through a file, into a new store, under another user id.
    clocked.export_user("alice", tmp_path / "alice.jsonl")
    assert not (tmp_path / "alice.jsonl.partial").exists()
    with open_store(tmp_path / "other.sqlite3") as other:
        assert other.import_records(tmp_path / "alice.jsonl") == {"records": 2, "events": 5}
        assert other.export_user("alice") == bundle
        other.import_records(bundle, user="alice2")
        assert other.records("alice2") == other.records("alice")
        assert other.health()["counters_consistent"]


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.text(min_size=1, max_size=40).filter(
    lambda v: v.strip() and "\x00" not in v and not any(0xD800 <= ord(c) <= 0xDFFF for c in v)),
    min_size=1, max_size=5))
def test_any_valid_value_survives_export_and_import(tmp_path_factory, values):
    folder = tmp_path_factory.mktemp("bundle")
    with open_store(folder / "a.sqlite3", synchronous="NORMAL") as source, \
            open_store(folder / "b.sqlite3", synchronous="NORMAL") as target:
        for number, value in enumerate(values):
            source.put("alice", "s1", "episode", f"k{number % 3}", value)
        bundle = source.export_user("alice")
        target.import_records(bundle)
        assert target.export_user("alice") == bundle
        assert target.records("alice") == source.records("alice")


def _resigned(bundle: str, change) -> str:
    """Apply `change` to the parsed lines and write a valid checksum again: only the content is wrong."""
    lines = [json.loads(line) for line in bundle.split("\n")[:-2]]
    change(lines)
    return seal_bundle(lines)


def _lines(bundle: str) -> list[str]:
    # Not str.splitlines(): it also breaks at U+2028 and U+0085, which the values in `fill` hold.
    return [line + "\n" for line in bundle.split("\n")[:-1]]


BAD_BUNDLES = {
    "tampered value": (lambda b: b.replace('"tea"', '"TEA"'), ValidationError, "checksum does not match"),
    "tampered checksum": (lambda b: b[:-4] + "00\"}\n", ValidationError, "checksum does not match"),
    "truncated at a line": (lambda b: "".join(_lines(b)[:3]), ValidationError, "checksum line"),
    "truncated mid-line": (lambda b: b[: len(b) // 2], ValidationError, "truncated"),
    "last byte cut": (lambda b: b[:-1], ValidationError, "truncated"),
    "checksum cut": (lambda b: b[:-20], ValidationError, "truncated"),
    "empty": (lambda b: "", ValidationError, "truncated"),
    "a line dropped": (lambda b: "".join(line for i, line in enumerate(_lines(b)) if i != 2),
                       ValidationError, "checksum does not match"),
    "wrong format": (lambda b: _resigned(b, lambda ls: ls[0].update(format="other-export")), ValidationError,
                     "memkit export header"),
    "wrong format version": (lambda b: _resigned(b, lambda ls: ls[0].update(format_version=3)), ValidationError,
                             "format version 3 is not 1 or 2"),
    "an item line in a version 1 bundle": (lambda b: _resigned(b, lambda ls: ls.append(
        {"type": "item", "session": "s1", "position": 1, "item": "{}", "at": "2026-01-01T00:00:00Z"})),
        ValidationError, "line counts"),
    "wrong schema version": (lambda b: _resigned(b, lambda ls: ls[0].update(schema_version=SCHEMA_VERSION + 1)),
                             ValidationError, "schema version"),
    "count mismatch": (lambda b: _resigned(b, lambda ls: ls[0].update(records=9)), ValidationError, "line counts"),
    "value over the limit": (lambda b: _resigned(b, lambda ls: ls[1].update(value="x" * 513)), ValidationError,
                             "513 characters"),
    "bad event kind": (lambda b: _resigned(b, lambda ls: ls[-1].update(kind="fact")), ValidationError, "kind"),
    "event time missing": (lambda b: _resigned(b, lambda ls: ls[-1].update(at=None)), ValidationError, "'at'"),
    "boolean revision": (lambda b: _resigned(b, lambda ls: ls[1].update(revision=True)), ValidationError,
                         "revision"),
    "duplicate record": (lambda b: _resigned(b, lambda ls: (ls.insert(2, dict(ls[1])), ls[0].update(records=3))),
                         ValidationError, "twice"),
}


@pytest.mark.parametrize("case", BAD_BUNDLES, ids=str)
def test_import_refuses_a_bad_bundle_and_changes_nothing(clocked, case):
    damage, error, words = BAD_BUNDLES[case]
    fill(clocked, "alice")
    bundle = clocked.export_user("alice")
    clocked.forget_user("alice")
    fill(clocked, "bob")
    before = snapshot(clocked)
    with pytest.raises(error, match=words):
        clocked.import_records(damage(bundle))
    assert snapshot(clocked) == before
    clocked.import_records(bundle)  # the undamaged bundle still imports


def test_import_refuses_a_user_who_has_data_or_would_break_a_quota(clocked, tmp_path):
    fill(clocked, "alice")
    bundle = clocked.export_user("alice")
    clocked.put("bob", "s1", "preference", "drink", "water")
    before = snapshot(clocked)
    with pytest.raises(StoreError, match="'alice' already has memory"):
        clocked.import_records(bundle)
    with pytest.raises(StoreError, match="'bob' already has memory"):
        clocked.import_records(bundle, user="bob")
    with pytest.raises(ValidationError, match="cannot read the bundle file"):
        clocked.import_records(tmp_path / "missing.jsonl")
    assert snapshot(clocked) == before
    with open_store(tmp_path / "small.sqlite3", limits=Limits().replace(max_records_per_user=1)) as small:
        with pytest.raises(QuotaError, match="per-user quota is 1"):
            small.import_records(bundle)
        assert all(rows in ([], [(1, 0)]) for rows in snapshot(small).values())
