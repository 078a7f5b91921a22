"""What the inspector tells a person is true where it runs: in a notebook, and on `memkit inspect`'s page.

The page's kernel gives the inspector an already-open store, so its Edit switch cannot reopen it:
its note and refusals used to say "switch Edit on" and "Pass a path or URL to switch", which no one
on the page can do. A peer file read from a private copy (a `-wal` without its `-shm`) was labelled
"beside its writer". Plain calls, as the page's controls make them; no browser needed.
"""

from __future__ import annotations

import shutil
import sqlite3

import pytest

pytest.importorskip("pandas", reason="the inspector needs the notebook extra: pip install -e '.[notebook]'")

from memkit import MemoryStore
from memkit.errors import ApprovalError, ValidationError
from memkit.inspector.core import InspectorCore
from memkit.inspector.peers import PeerFile


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        store.propose_put("alice", "s1", "preference", "city", "Porto")
    return path


def test_an_inspector_given_a_read_only_store_says_how_to_edit_where_it_runs(db):
    with MemoryStore(db, read_only=True) as store:  # what the page's kernel hands the inspector
        inspector = InspectorCore(store)
        assert not inspector.can_reopen
        note = inspector.note()
        assert "switch Edit on" not in note and "--edit" in note and note.startswith("read-only: memory.sqlite3")
        with pytest.raises(ValidationError) as refused:
            inspector.set_edit(True)
        assert "Pass a path" not in str(refused.value) and "cannot reopen it for writing" in str(refused.value)
        assert "memkit inspect` again with --edit" in str(refused.value)
        [waiting] = inspector.pending_proposals()
        decided = inspector.decide_proposal(waiting["id"], "approve")
        assert "switch Edit on" not in str(decided) and "--edit" in str(decided)
        inspector.select_key("preference", "drink")
        with pytest.raises(ApprovalError, match="--edit") as staged:
            inspector.stage_edit("coffee")
        assert "switch Edit on" not in str(staged.value)
        inspector.close()


def test_an_inspector_that_opened_the_file_itself_still_offers_its_edit_switch(db):
    inspector = InspectorCore(db)
    assert inspector.can_reopen and "(switch Edit on to make changes)" in inspector.note()
    inspector.close()


def _session_file(path):
    """An openai-agents SQLiteSession file, its writer still open (a -wal and a -shm beside it)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE agent_sessions (session_id TEXT PRIMARY KEY, created_at TEXT, updated_at TEXT)")
    conn.execute("CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, message_data TEXT,"
                 " created_at TEXT)")
    conn.execute("INSERT INTO agent_sessions VALUES ('s1', '2026-01-01', '2026-01-01')")
    conn.execute("INSERT INTO agent_messages VALUES (1, 's1', '{\"role\": \"user\"}', '2026-01-01')")
    return conn


def test_a_peer_file_says_truly_how_it_is_read_in_each_sidecar_state(tmp_path):
    live = tmp_path / "live" / "agents.db"
    live.parent.mkdir()
    writer = _session_file(live)
    copied = tmp_path / "copied" / "agents.db"  # the folder copied file by file, the -shm left behind
    copied.parent.mkdir()
    shutil.copyfile(live, copied)
    shutil.copyfile(f"{live}-wal", f"{copied}-wal")
    try:
        with PeerFile(live) as peer:
            assert peer.how == "ro" and "beside its writer" in peer.describe()
        with PeerFile(copied) as peer:
            assert peer.how == "copy" and "beside its writer" not in peer.describe()
            assert "private copy" in peer.describe() and peer.items("s1")
    finally:
        writer.close()
    with PeerFile(live) as peer:  # the writer closed: no -wal left
        assert peer.how == "immutable" and "no lock taken" in peer.describe()
