"""Store: the long-term memory's one façade, every read and write bound to one user, over either
backend (`Backend`, backend.py); its methods are grouped in parts by concept (store_core.py says
which)."""

from __future__ import annotations

from .store_proposals import StoreProposals
from .sessions import StoreSessions


class Store(StoreProposals, StoreSessions):
    """A user-scoped long-term memory, on whichever backend it was opened: the type to annotate with
    wherever a store of either backend is accepted.

    Every method behaves the same on SQLite and on PostgreSQL: one row per (user, kind, key);
    revisions and the append-only event history; quotas and the size cap checked inside each
    write's transaction; the same search rule, proposals, export bundles, transcript archive and
    `forget_user`. Where the backends differ, the difference is a method of the backend, never an
    override here.

    `Store` is not constructed itself: open one with `MemoryStore(path)` (a SQLite file),
    `PostgresStore(url)` (a PostgreSQL database, the `postgres` extra) or `open_store(target)`
    (either, from a path or a URL). Both are a `Store`; neither is the other.

    Example:
        >>> with open_store(tmp / "memory.sqlite3") as store:            # doctest: +SKIP
        ...     isinstance(store, Store), store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        (True, 1)
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError(
            "Store is the façade over either backend and is not opened itself: use "
            "MemoryStore(path) for a SQLite file, PostgresStore(url) for PostgreSQL, "
            "or open_store(target) for either")
