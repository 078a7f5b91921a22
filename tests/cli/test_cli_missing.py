"""A mistyped path or user is said, never done "successfully" on nothing.

A command that removes, maintains, decides or reads refuses a path where no memkit database is
(exit 2, `error: no memkit database at ...`) and creates nothing: no file, no folder, no -wal. Only a
save (put, import, chat) makes a store. Forgetting or exporting a user of whom nothing is stored is
refused too, with nothing changed; a user with something only in a window or the archive is forgotten.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from _cli_helpers import env_with, memkit
from memkit.store import MemoryStore
from memkit.window import StoreWindow

NEEDS_A_STORE = {
    "forget-user": ["forget-user", "--user", "alice", "--confirm"],
    "delete": ["delete", "--user", "alice", "--key", "drink", "--confirm"],
    "approve": ["approve", "1", "--user", "alice", "--confirm"],
    "reject": ["reject", "1", "--user", "alice"],
    "windows --drop": ["windows", "--drop", "redis://localhost:1", "--confirm"],
    "limits --set": ["limits", "--set", "max_records_per_user=10", "--confirm"],
    "migrate": ["migrate", "--confirm"],
}
"""The commands that remove, maintain or decide, each in a real process; every command that needs a
store, reading ones included, is run against these places in the reliability lab
(tests/reliability/test_reliability_mistyped_paths.py)."""

MISTYPED = {
    "a missing file": lambda base: ["--db", str(base / "typo.sqlite3")],
    "a missing folder": lambda base: ["--db", str(base / "no-such-folder" / "memory.sqlite3")],
    "a missing workspace": lambda base: ["--workspace", str(base / "no-such-workspace")],
    "a workspace without a database": lambda base: ["--workspace", str(base)],
}


def tree(folder: Path) -> dict[str, str]:
    """Every file and folder under `folder`, with each file's sha256: what a command may not change."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("where", MISTYPED)
@pytest.mark.parametrize("command", NEEDS_A_STORE)
def test_a_command_on_a_path_without_a_database_is_refused_and_creates_nothing(tmp_path, command, where):
    base = tmp_path / "here"
    base.mkdir()
    before = tree(tmp_path)
    done = memkit(*NEEDS_A_STORE[command], *MISTYPED[where](base), cwd=tmp_path, env=env_with())
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: no memkit database at "), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and done.stdout == ""
    assert tree(tmp_path) == before


def test_memkit_db_naming_a_missing_file_is_refused_too(tmp_path):
    done = memkit(*NEEDS_A_STORE["forget-user"], cwd=tmp_path, env=env_with(MEMKIT_DB=str(tmp_path / "typo.db")))
    assert done.returncode == 2 and "no memkit database at" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_forget_user_on_a_mistyped_path_leaves_the_real_store_holding_the_user(db, tmp_path):
    typo = tmp_path / "memroy.sqlite3"
    done = memkit("forget-user", "--db", str(typo), "--user", "alice", "--confirm")
    assert done.returncode == 2 and f"no memkit database at {typo}" in done.stderr
    assert not typo.exists()
    kept = memkit("get", "--db", str(db), "--user", "alice", "--key", "drink")
    assert json.loads(kept.stdout)["value"] == "tea"


def test_a_save_still_creates_its_store(tmp_path):
    done = memkit("put", "--workspace", str(tmp_path / "ws"), "--user", "alice", "--key", "drink",
                  "--value", "tea", "--confirm", env=env_with())
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ws" / "state" / "memory.sqlite3").is_file()


def test_forgetting_a_user_with_nothing_stored_is_refused_and_changes_nothing(db):
    before = tree(db.parent)
    done = memkit("forget-user", "--db", str(db), "--user", "alcie", "--confirm")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"error: nothing stored for user 'alcie' in {db}; no record, history, conversation, "
                           "proposal or window turn; nothing was forgotten. Check --user (ids are case-sensitive)\n")
    assert "alice" not in done.stderr  # who else is stored is never told
    assert tree(db.parent) == before
    kept = memkit("get", "--db", str(db), "--user", "alice", "--key", "drink")
    assert json.loads(kept.stdout)["value"] == "tea"


def test_exporting_a_user_with_nothing_stored_is_refused_and_writes_nothing(db, tmp_path):
    out = tmp_path / "nobody.jsonl"
    for extra in ([], ["--out", str(out)]):
        done = memkit("export", "--db", str(db), "--user", "nobody", *extra)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith("error: nothing stored for user 'nobody' in ") and "alice" not in done.stderr
    assert not out.exists()


def test_a_user_with_only_window_turns_and_archived_turns_is_still_forgotten(db):
    with MemoryStore(db) as store:
        turn = {"turn": 1, "role": "user", "content": "hello", "at": "2026-01-01T00:00:00Z"}
        store.archive_turns("bob", "s1", [turn])
        with StoreWindow(store, 4) as window:
            window.append("carol", "s1", "user", "hi")
    for user, removed in (("bob", "transcript"), ("carol", "window_turns")):
        done = memkit("forget-user", "--db", str(db), "--user", user, "--confirm")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["removed"][removed] == 1
    assert memkit("forget-user", "--db", str(db), "--user", "carol", "--confirm").returncode == 2


def test_exporting_a_user_with_only_history_still_writes_the_bundle(db):
    assert memkit("delete", "--db", str(db), "--user", "alice", "--key", "drink", "--confirm").returncode == 0
    done = memkit("export", "--db", str(db), "--user", "alice")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["events"] == 2
    assert os.path.exists(db)
