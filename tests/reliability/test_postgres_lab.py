"""The reliability lab's experiments, their store on PostgreSQL: hostile input to every store
method, and user isolation through every read, search, retrieval, window and request.

The experiments are the lab's own (tests/reliability/test_reliability_hostile_store.py and
tests/reliability/test_reliability_isolation.py, with their generators in tests/_reliability.py), run as they
are with `MemoryStore` replaced, in their module only and for this test only, by a factory of
PostgresStores; their figures are recorded with "(PostgreSQL)" added to the experiment's name.
"""

from __future__ import annotations

import uuid
from typing import Any
from collections.abc import Callable

import pytest

import test_reliability_hostile_store as hostile_store
import test_reliability_isolation as isolation
from memkit.store import PostgresStore
from test_reliability_isolation import redis_client  # noqa: F401 - the experiment's own Redis fixture

pytestmark = pytest.mark.postgres


def on_postgres(monkeypatch: pytest.MonkeyPatch, module: Any, url: str) -> list[PostgresStore]:
    """Make `module`'s `MemoryStore(path, **options)` open a PostgresStore in a fresh schema."""
    opened: list[PostgresStore] = []

    def open_postgres(path: object, **options: Any) -> PostgresStore:
        store = PostgresStore(url, schema=f"t_{uuid.uuid4().hex[:16]}", **options)
        opened.append(store)
        return store

    monkeypatch.setattr(module, "MemoryStore", open_postgres)
    return opened


def renamed(figures: Callable[..., None]) -> Callable[..., None]:
    return lambda experiment, **values: figures(f"{experiment} (PostgreSQL)", **values)


def test_hostile_input_to_every_store_method_round_trips_or_is_refused_on_postgresql(
        pg_trgm_url, tmp_path, figures, monkeypatch):
    opened = on_postgres(monkeypatch, hostile_store, pg_trgm_url)
    hostile_store.test_hostile_input_to_every_store_method_round_trips_or_is_refused(tmp_path, renamed(figures))
    assert len(opened) == 1  # the experiment really ran on PostgreSQL


def test_no_read_search_retrieval_history_export_window_or_request_holds_another_users_value_on_postgresql(
        pg_url, tmp_path, figures, monkeypatch, redis_client):  # noqa: F811
    opened = on_postgres(monkeypatch, isolation, pg_url)
    isolation.test_isolation_no_read_search_retrieval_history_export_window_or_request_holds_another_users_value(
        tmp_path, renamed(figures), redis_client)
    assert len(opened) == 1
