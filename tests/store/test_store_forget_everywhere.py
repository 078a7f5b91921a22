"""Forgetting reaches every table that names a user: the list of tables is read from the database
itself (every table with a `user_id` column), so a table a later schema step adds is covered the
day it is added, and the test fails until `forget_user` removes its rows too."""

from __future__ import annotations

from typing import Any

import pytest

from memkit.semantic import load_embedder
from memkit.store import MemoryStore

from _store_helpers import open_store

pytestmark = pytest.mark.usefixtures("backend")


def user_tables(store: MemoryStore) -> list[str]:
    """Every table of the store's schema with a `user_id` column, read from the catalogue."""
    if hasattr(store, "schema"):  # PostgreSQL: this store's own namespace
        rows = store._db.fetch(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = ?"
            " AND column_name = 'user_id' ORDER BY table_name", (store.schema,))
        return [row[0] for row in rows]
    conn = store.connection
    tables = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return [t for t in tables if any(col[1] == "user_id" for col in conn.execute(f"PRAGMA table_info({t})"))]


def rows_of(store: MemoryStore, user: str) -> dict[str, int]:
    return {table: store._db.fetch(f"SELECT count(*) FROM {table} WHERE user_id = ?", (user,))[0][0]
            for table in user_tables(store)}


def fill(store: MemoryStore, user: str) -> None:
    """Leave `user` in every place the store keeps something of a user, through the public API."""
    store.put(user, "s1", "preference", "drink", "espresso")
    store.put(user, "s1", "preference", "drink", "green tea")
    store.put(user, "s1", "episode", "ticket", "T-4417 about a refund")
    store.delete(user, "episode", "ticket", session="s1")
    store.put(user, "s1", "preference", "city", "Lisbon")
    store.propose_put(user, "s2", "preference", "city", "Porto")
    store.archive_turns(user, "s1", [
        {"turn": 1, "role": "user", "content": "hello", "at": "2026-12-01T10:00:00+00:00"},
        {"turn": 2, "role": "assistant", "content": "hi", "at": "2026-12-01T10:00:01+00:00"}])


def test_forget_leaves_no_row_of_the_user_in_any_table_and_keeps_the_others(tmp_path):
    with open_store(tmp_path / "memory.sqlite3", embedder=load_embedder()) as store:
        fill(store, "alice")
        fill(store, "bob")
        before: dict[str, Any] = rows_of(store, "alice")
        # The fill reaches the tables it should: a test that filled nothing would prove nothing.
        for table in ("memories", "memory_events", "transcript", "proposals", "memory_embeddings"):
            assert before[table] > 0, f"the fill left nothing of alice in {table}"
        bob_before = rows_of(store, "bob")

        store.forget_user("alice")

        left = {table: n for table, n in rows_of(store, "alice").items() if n}
        assert left == {}, f"forget_user left rows of alice in {left}"
        assert rows_of(store, "bob") == bob_before
        assert all(n == 0 for n in store.traces("alice").values())
