"""The CLI tests' shared fixture: a database the real `memkit` command made, with one record."""

from __future__ import annotations

import pytest

from _cli_helpers import memkit


@pytest.fixture
def db(tmp_path):
    """A SQLite file made by `memkit put`: alice's preference drink = tea."""
    path = tmp_path / "memory.sqlite3"
    done = memkit("put", "--db", str(path), "--user", "alice", "--key", "drink", "--value", "tea", "--confirm")
    assert done.returncode == 0, done.stderr
    return path
