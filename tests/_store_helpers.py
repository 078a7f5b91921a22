"""Helpers shared by the store tests: what "the database is unchanged" means, measured."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from memkit.store import MemoryStore

TABLES = ("memories", "memory_events", "user_counts", "total_count", "transcript")


def snapshot(store: MemoryStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order: equal snapshots mean nothing was written."""
    conn = store.connection
    return {
        table: sorted((tuple(row) for row in conn.execute(f"SELECT * FROM {table}")), key=repr)
        for table in TABLES
    }


def folder_state(folder: Path) -> dict[str, str]:
    """Name -> sha256 (or '<dir>', '<link>') of everything in a folder: shows a changed or a new file."""
    state = {}
    for name in sorted(os.listdir(folder)):
        entry = folder / name
        if entry.is_symlink():
            state[name] = "<link>" + os.readlink(entry)
        elif entry.is_dir():
            state[name] = "<dir>"
        else:
            state[name] = hashlib.sha256(entry.read_bytes()).hexdigest()
    return state
