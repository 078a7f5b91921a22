"""The command-line tests' shared fixture: a store the `memkit` command made."""

from __future__ import annotations

import pytest

from _cli_helpers import memkit


@pytest.fixture
def db(tmp_path):
    """A SQLite store holding alice's drink, tea, written by `memkit put` in a process of its own."""
    path = tmp_path / "memory.sqlite3"
    done = memkit("put", "--db", str(path), "--user", "alice", "--key", "drink", "--value", "tea", "--confirm")
    assert done.returncode == 0, done.stderr
    return path
