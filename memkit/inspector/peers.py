"""Other frameworks' memory files, read-only: recognised by their schema, browsed, never changed.

The formats (`PEER_FORMATS`, each as its library writes it): openai-agents `SQLiteSession`,
LangGraph `SqliteStore` and `SqliteSaver`, mem0's `history.db`. A file is opened with
`readonly.connect_read_only` (no write, no `-wal`/`-shm` made) and read with plain SELECTs, always
in the same shape: groups (sessions, namespaces, threads, memories), a group's items, a search.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..store.files import SQLITE_MAGIC
from ..store.readonly import connect_read_only


@dataclasses.dataclass(frozen=True)
class PeerFormat:
    """How one framework keeps its memory in SQLite (`needs`: tables and their columns), and the
    SELECTs that browse it: `groups_sql` gives (group, items, last); `items_sql` takes a group and
    gives `columns`; `search_sql` takes a case-folded text (once per `?`) and gives (group, *columns).
    """

    name: str
    needs: dict[str, frozenset[str]]
    group: str
    columns: tuple[str, ...]
    groups_sql: str
    items_sql: str
    search_sql: str
    source: str


PEER_FORMATS: tuple[PeerFormat, ...] = (
    PeerFormat(
        name="openai-agents SQLiteSession",
        needs={"agent_sessions": frozenset({"session_id", "created_at", "updated_at"}),
               "agent_messages": frozenset({"id", "session_id", "message_data", "created_at"})},
        group="session",
        columns=("id", "message_data", "created_at"),
        groups_sql="SELECT s.session_id, count(m.id), max(coalesce(m.created_at, s.updated_at)) FROM agent_sessions s"
                   " LEFT JOIN agent_messages m ON m.session_id = s.session_id GROUP BY s.session_id"
                   " ORDER BY 3 DESC, 1",
        items_sql="SELECT id, message_data, created_at FROM agent_messages WHERE session_id = ? ORDER BY id",
        search_sql="SELECT session_id, id, message_data, created_at FROM agent_messages"
                   " WHERE instr(lower(message_data), ?) > 0 ORDER BY id DESC LIMIT 200",
        source="agents/memory/sqlite_session.py (_init_db_for_connection)",
    ),
    PeerFormat(
        name="LangGraph SqliteStore",
        needs={"store": frozenset({"prefix", "key", "value", "created_at", "updated_at"})},
        group="namespace",
        columns=("key", "value", "created_at", "updated_at", "expires_at", "ttl_minutes"),
        groups_sql="SELECT prefix, count(*), max(updated_at) FROM store GROUP BY prefix ORDER BY 3 DESC, 1",
        items_sql="SELECT key, value, created_at, updated_at, {expires_at}, {ttl_minutes} FROM store WHERE prefix = ?"
                  " ORDER BY updated_at DESC, key",
        search_sql="SELECT prefix, key, value, created_at, updated_at, {expires_at}, {ttl_minutes} FROM store"
                   " WHERE instr(lower(key), ?) > 0 OR instr(lower(value), ?) > 0 ORDER BY updated_at DESC LIMIT 200",
        source="langgraph/store/sqlite/base.py (MIGRATIONS)",
    ),
    PeerFormat(
        name="LangGraph SqliteSaver",
        needs={"checkpoints": frozenset({"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
                                         "type", "checkpoint", "metadata"}),
               "writes": frozenset({"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel"})},
        group="thread",
        columns=("checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type", "metadata", "writes"),
        groups_sql="SELECT thread_id, count(*), max(checkpoint_id) FROM checkpoints"
                   " GROUP BY thread_id ORDER BY 3 DESC, 1",
        items_sql="SELECT c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type,"
                  " CAST(c.metadata AS TEXT), (SELECT count(*) FROM writes w WHERE w.thread_id = c.thread_id"
                  " AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id)"
                  " FROM checkpoints c WHERE c.thread_id = ? ORDER BY c.checkpoint_id DESC",
        search_sql="SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, CAST(metadata AS TEXT),"
                   " NULL FROM checkpoints WHERE instr(lower(thread_id), ?) > 0"
                   " OR instr(lower(CAST(metadata AS TEXT)), ?) > 0 ORDER BY checkpoint_id DESC LIMIT 200",
        source="langgraph/checkpoint/sqlite/__init__.py (SqliteSaver.setup)",
    ),
    PeerFormat(
        name="mem0 history",
        needs={"history": frozenset({"id", "memory_id", "old_memory", "new_memory", "event", "created_at",
                                     "updated_at", "is_deleted"})},
        group="memory",
        columns=("event", "old_memory", "new_memory", "created_at", "updated_at", "is_deleted"),
        groups_sql="SELECT memory_id, count(*), max(coalesce(updated_at, created_at)) FROM history"
                   " GROUP BY memory_id ORDER BY 3 DESC, 1",
        items_sql="SELECT event, old_memory, new_memory, created_at, updated_at, is_deleted FROM history"
                  " WHERE memory_id = ? ORDER BY created_at, updated_at",
        search_sql="SELECT memory_id, event, old_memory, new_memory, created_at, updated_at, is_deleted FROM history"
                   " WHERE instr(lower(coalesce(new_memory, '')), ?) > 0"
                   " OR instr(lower(coalesce(old_memory, '')), ?) > 0"
                   " ORDER BY created_at DESC LIMIT 200",
        source="mem0/memory/storage.py (SQLiteManager._create_history_table)",
    ),
)
"""The formats recognised, most specific first. A file may hold several (one SQLite file for a
LangGraph store and its checkpointer)."""


def _tables(conn: sqlite3.Connection) -> dict[str, frozenset[str]]:
    names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {name: frozenset(row[1] for row in conn.execute(f'PRAGMA table_info("{name}")')) for name in names}


def detect(tables: dict[str, frozenset[str]]) -> list[PeerFormat]:
    """The formats whose tables (with at least their columns) the file holds."""
    return [f for f in PEER_FORMATS if all(t in tables and cols <= tables[t] for t, cols in f.needs.items())]


class PeerFile:
    """Another framework's memory file, open read-only.

    Args:
        path: the SQLite file.

    Raises:
        StoreError: one line saying what the file is not (not SQLite, empty, another program's
            tables); nothing was changed and no file was made.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._conn, self.how = connect_read_only(self.path)
        try:
            self.tables = _tables(self._conn)
        except sqlite3.Error as exc:
            self._conn.close()
            raise StoreError(f"{self.path.name} cannot be read as SQLite ({exc})") from None
        self.formats = detect(self.tables)
        if not self.formats:
            self._conn.close()
            raise StoreError(unrecognised(self.path.name, self.tables))

    def format(self, name: str | None = None) -> PeerFormat:
        """The format called `name` (default: the first the file holds)."""
        if name is None:
            return self.formats[0]
        for found in self.formats:
            if found.name == name:
                return found
        raise StoreError(f"{self.path.name} holds no {name} tables; it holds {', '.join(f.name for f in self.formats)}")

    def _sql(self, sql: str) -> str:
        have = self.tables.get("store", frozenset())
        return sql.format(expires_at="expires_at" if "expires_at" in have else "NULL",
                          ttl_minutes="ttl_minutes" if "ttl_minutes" in have else "NULL")

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return [tuple(row) for row in self._conn.execute(sql, args).fetchall()]
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read {self.path.name}: {exc}") from None

    def groups(self, name: str | None = None) -> list[dict[str, Any]]:
        """The groups of one format (sessions, namespaces, threads or memories): id, items, last."""
        fmt = self.format(name)
        return [{fmt.group: g, "items": n, "last": last} for g, n, last in self._rows(self._sql(fmt.groups_sql))]

    def items(self, group: str, name: str | None = None) -> list[dict[str, Any]]:
        """The items of one group, in the order the framework reads them."""
        fmt = self.format(name)
        rows = self._rows(self._sql(fmt.items_sql), (group,))
        return [dict(zip(fmt.columns, _text(row), strict=True)) for row in rows]

    def search(self, text: str, name: str | None = None) -> list[dict[str, Any]]:
        """Items whose text contains `text` (case-insensitive, ASCII case), newest first, at most 200."""
        fmt = self.format(name)
        folded = text.lower()
        args = (folded,) * fmt.search_sql.count("?")
        return [dict(zip((fmt.group, *fmt.columns), _text(row), strict=True))
                for row in self._rows(self._sql(fmt.search_sql), args)]

    def describe(self) -> str:
        """One line: what the file is and how it is read."""
        how = {"immutable": "read-only, no lock taken",  # the ways of `connect_read_only`
               "copy": "read-only, from a private copy of it and its -wal (no -shm beside them)"}.get(
                   self.how, "read-only, beside its writer")
        return f"{self.path.name}: {' + '.join(f.name for f in self.formats)} ({how}; never changed)"

    def close(self) -> None:
        """Close the connection. Safe to call twice."""
        self._conn.close()

    def __enter__(self) -> PeerFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PeerFile({self.path.name!r}, formats={[f.name for f in self.formats]!r})"


def _text(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Bytes (LangGraph's BLOB columns) shown as text where they are text, else by their size."""
    shown = []
    for value in row:
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                value = f"<{len(value)} bytes>"
        shown.append(value)
    return tuple(shown)


def unrecognised(name: str, tables: dict[str, frozenset[str]]) -> str:
    """The one line for a SQLite file of no known format."""
    if not tables:
        return f"{name} is an empty SQLite database: no memkit store and no other framework's memory"
    listed = ", ".join(sorted(tables)[:6]) + (" …" if len(tables) > 6 else "")
    return (f"{name} is not a memkit store, nor openai-agents, LangGraph or mem0 memory: "
            f"a SQLite database with tables {listed}")


def what_is(path: str | os.PathLike[str]) -> tuple[str, str]:
    """What a file is, read without changing it: (`memkit`, line), (`peer`, line) or (`unknown`, line).

    Never raises for a file that exists: a damaged, foreign or unreadable one is `unknown`, with one
    line saying what it is not.
    """
    path = Path(path)
    try:
        if not path.is_file():
            return "unknown", f"{path.name} is not a file" if path.exists() else f"there is no file {path.name}"
        with path.open("rb") as handle:
            head = handle.read(16)
        if not head:
            return "unknown", f"{path.name} is empty (0 bytes), not a database"
        if not head.startswith(SQLITE_MAGIC):
            return "unknown", f"{path.name} is not a SQLite database (it starts with {head[:16]!r})"
        conn, _ = connect_read_only(path)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = _tables(conn)
        finally:
            conn.close()
    except (OSError, sqlite3.Error, StoreError) as exc:
        return "unknown", f"{path.name} cannot be read: {exc}"
    if {"memories", "memory_events"} <= set(tables) and version >= 1:
        return "memkit", f"{path.name}: a memkit store, schema version {version}"
    found = detect(tables)
    if found:
        return "peer", f"{path.name}: {' + '.join(f.name for f in found)}"
    return "unknown", unrecognised(path.name, tables)
