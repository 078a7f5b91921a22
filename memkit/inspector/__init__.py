"""The memory inspector: browse any memkit database, read-only unless editing is asked for.

Looking must not change a database: it is opened read-only by default (the file's bytes and mtime
stay the same, no `-wal`/`-shm` is made, an older schema is shown, never migrated); `edit=True`, or
the Edit switch, reopens it for writing. A correction goes the way an agent's does: a one-time
confirmation, then the `memory_put` or `memory_delete` tool of `MemoryTools` (`edits`).
Notes on the design: docs/design/inspector.md.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import StoreError
from ..store import Store
from ..store.targets import postgres_conninfo
from .layout import MemoryInspector
from .peer_views import NotInspectable, PeerInspector
from .peers import what_is

__all__ = ["MemoryInspector", "NotInspectable", "PeerInspector", "inspect"]


def inspect(target: Store | str | os.PathLike[str],
            **options: Any) -> MemoryInspector | PeerInspector | NotInspectable:
    """Open whatever `target` is for inspection, read-only, without ever raising for the file itself.

    A memkit store (a path, an open store, a PostgreSQL URL) gets a `MemoryInspector` (`options`
    go to it); another framework's file a `PeerInspector`; anything else, or a store that cannot be
    opened, a `NotInspectable` that shows one line saying what it is not. Bad options still raise.

    Example:
        >>> inspect("peer/agent_memory.db")      # doctest: +SKIP
        PeerInspector('agent_memory.db', format='openai-agents SQLiteSession', session='alice-1')
    """
    if isinstance(target, Store):
        return MemoryInspector(target, **options)
    try:
        if isinstance(target, str) and postgres_conninfo(target) is not None:
            return MemoryInspector(target, **options)
        kind, line = what_is(target)
        if kind == "memkit":
            return MemoryInspector(target, **options)
        if kind == "peer":
            return PeerInspector(target)
    except StoreError as exc:
        return NotInspectable(str(exc))
    return NotInspectable(line)
