"""Sample memory files of other frameworks, for lessons and tests: a peer's file to inspect.

The libraries themselves are not needed (openai-agents, langgraph-checkpoint-sqlite and mem0ai each
bring dozens of dependencies): each file is made with the statements its library runs (from the
source named in `memkit.inspector.peers.PEER_FORMATS[...].source`) and filled with rows shaped as the
library writes them.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any
from collections.abc import Callable


Rows = list[tuple[str, tuple[Any, ...]]]


def _make(path: Path, statements: list[str], rows: Rows, wal: bool = False) -> Path:
    if path.exists():
        raise FileExistsError(f"{path} exists; a sample is made only where there is no file")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        for statement in statements:
            conn.execute(statement)
        for sql, args in rows:
            conn.execute(sql, args)
    finally:
        conn.close()
    return path


def openai_agents_session(path: str | os.PathLike[str]) -> Path:
    """agents.SQLiteSession("alice-1", path): sessions and their JSON items."""
    statements = [
        """CREATE TABLE IF NOT EXISTS agent_sessions (
                session_id TEXT PRIMARY KEY,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
            )""",
        """CREATE TABLE IF NOT EXISTS agent_messages (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL,
                message_data TEXT NOT NULL,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                FOREIGN KEY (session_id) REFERENCES agent_sessions (session_id)
                    ON DELETE CASCADE
            )""",
        "CREATE INDEX IF NOT EXISTS idx_agent_messages_session_id ON agent_messages (session_id, id)",
    ]
    rows: Rows = []
    for session, said in (("alice-1", ["My drink is green tea", "Noted: green tea."]),
                          ("bob-7", ["I live in Oslo", "Oslo it is."])):
        rows.append(("INSERT INTO agent_sessions (session_id, created_at, updated_at) VALUES (?, ?, ?)",
                     (session, "2026-05-01 10:00:00", "2026-05-01 10:01:00")))
        for n, text in enumerate(said):
            item = {"role": "user", "content": text} if n % 2 == 0 else \
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
            rows.append(("INSERT INTO agent_messages (session_id, message_data, created_at) VALUES (?, ?, ?)",
                         (session, json.dumps(item), f"2026-05-01 10:0{n}:00")))
    return _make(Path(path), statements, rows)


def langgraph_store(path: str | os.PathLike[str]) -> Path:
    """langgraph.store.sqlite.SqliteStore: namespaces (dotted prefixes), JSON values, TTL columns."""
    statements = [
        """CREATE TABLE IF NOT EXISTS store (
    -- 'prefix' represents the doc's 'namespace'
    prefix text NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (prefix, key)
)""",
        "CREATE INDEX IF NOT EXISTS store_prefix_idx ON store (prefix)",
        "ALTER TABLE store ADD COLUMN expires_at TIMESTAMP",
        "ALTER TABLE store ADD COLUMN ttl_minutes REAL",
        "CREATE INDEX IF NOT EXISTS idx_store_expires_at ON store (expires_at) WHERE expires_at IS NOT NULL",
        "CREATE TABLE IF NOT EXISTS migrations (v INTEGER PRIMARY KEY)",
        "INSERT INTO migrations (v) VALUES (0), (1), (2), (3), (4)",
    ]
    put = ("INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)"
           " VALUES (?, ?, ?, ?, ?, ?, ?)")
    rows = [
        (put, ("memories.alice", "drink", json.dumps({"text": "prefers green tea"}), "2026-05-01 10:00:00",
               "2026-05-02 09:00:00", None, None)),
        (put, ("memories.alice", "trip", json.dumps({"text": "Lisbon in May"}), "2026-05-01 10:00:00",
               "2026-05-01 10:00:00", "2026-05-08 10:00:00", 10080.0)),
        (put, ("memories.bob", "city", json.dumps({"text": "lives in Oslo"}), "2026-05-01 11:00:00",
               "2026-05-01 11:00:00", None, None)),
    ]
    return _make(Path(path), statements, rows, wal=True)


def langgraph_saver(path: str | os.PathLike[str]) -> Path:
    """langgraph.checkpoint.sqlite.SqliteSaver: threads and their checkpoints (msgpack BLOBs)."""
    statements = [
        """CREATE TABLE IF NOT EXISTS checkpoints (
                thread_id TEXT NOT NULL,
                checkpoint_ns TEXT NOT NULL DEFAULT '',
                checkpoint_id TEXT NOT NULL,
                parent_checkpoint_id TEXT,
                type TEXT,
                checkpoint BLOB,
                metadata BLOB,
                PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
            )""",
        """CREATE TABLE IF NOT EXISTS writes (
                thread_id TEXT NOT NULL,
                checkpoint_ns TEXT NOT NULL DEFAULT '',
                checkpoint_id TEXT NOT NULL,
                task_id TEXT NOT NULL,
                task_path TEXT NOT NULL DEFAULT '',
                idx INTEGER NOT NULL,
                channel TEXT NOT NULL,
                type TEXT,
                value BLOB,
                PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
            )""",
    ]
    save = ("INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,"
            " checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)")
    rows: Rows = []
    for thread in ("thread-alice", "thread-bob"):
        parent = None
        for step in range(3):
            checkpoint_id = f"1ef4f797-8335-6428-800{step}-8a1503f9b875"
            metadata = json.dumps({"source": "loop", "step": step, "thread": thread}).encode()
            rows.append((save, (thread, "", checkpoint_id, parent, "msgpack", b"\x83\xa1v\x01\xa2id\xa1x\xa2ts\xa1y",
                                metadata)))
            parent = checkpoint_id
        rows.append(("INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value)"
                     " VALUES (?, '', ?, 'task-1', 0, 'messages', 'msgpack', ?)", (thread, parent, b"\x91\xa2hi")))
    return _make(Path(path), statements, rows, wal=True)


def mem0_history(path: str | os.PathLike[str]) -> Path:
    """mem0's history.db (SQLiteManager): every ADD, UPDATE and DELETE of a memory."""
    statements = [
        """CREATE TABLE IF NOT EXISTS history (
                        id           TEXT PRIMARY KEY,
                        memory_id    TEXT,
                        old_memory   TEXT,
                        new_memory   TEXT,
                        event        TEXT,
                        created_at   DATETIME,
                        updated_at   DATETIME,
                        is_deleted   INTEGER,
                        actor_id     TEXT,
                        role         TEXT
                    )""",
        """CREATE TABLE IF NOT EXISTS messages (
                        id TEXT PRIMARY KEY,
                        session_scope TEXT,
                        role TEXT,
                        content TEXT,
                        name TEXT,
                        created_at DATETIME
                    )""",
    ]
    add = ("INSERT INTO history (id, memory_id, old_memory, new_memory, event, created_at, updated_at, is_deleted,"
           " actor_id, role) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    mem = "9b2f6c1e-3d1a-4d8e-9c61-0f3b1e2a7d10"
    gone = "5a7e2d90-1b4c-4f0a-8e2d-6c9b3a1f4e22"
    rows = [
        (add, ("e1", mem, None, "Likes green tea", "ADD", "2026-05-01T10:00:00", None, 0, None, "user")),
        (add, ("e2", mem, "Likes green tea", "Likes oolong tea", "UPDATE", "2026-05-02T10:00:00",
               "2026-05-02T10:00:00", 0, None, "user")),
        (add, ("e3", gone, None, "Lives in Oslo", "ADD", "2026-05-01T11:00:00", None, 0, None, "user")),
        (add, ("e4", gone, "Lives in Oslo", None, "DELETE", "2026-05-03T11:00:00", "2026-05-03T11:00:00", 1,
               None, "user")),
    ]
    return _make(Path(path), statements, rows)


PEERS: dict[str, Callable[[str | os.PathLike[str]], Path]] = {
    "openai-agents SQLiteSession": openai_agents_session, "LangGraph SqliteStore": langgraph_store,
    "LangGraph SqliteSaver": langgraph_saver, "mem0 history": mem0_history}
"""The format's name (as `memkit.inspector.peers` calls it) -> the function that makes such a file."""


def make_peer_file(name: str, path: str | os.PathLike[str]) -> Path:
    """Make a sample memory file of the framework format `name` (a key of `PEERS`) at `path`.

    Raises:
        ValueError: `name` is not one of `PEERS`. FileExistsError: `path` exists.
    """
    if name not in PEERS:
        raise ValueError(f"no sample of {name!r}; the samples are {', '.join(PEERS)}")
    return PEERS[name](path)
