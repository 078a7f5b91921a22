"""Shared fixtures: every test gets its own real SQLite file under pytest's tmp_path."""

from __future__ import annotations

import pytest

from memkit.store import MemoryStore


@pytest.fixture
def store(tmp_path):
    """A fresh store with the teaching limits, closed after the test."""
    with MemoryStore(tmp_path / "memory.sqlite3") as opened:
        yield opened
