"""How the inspector opens what it is given, what it asks the store about how it is open, and the
warm-up that spares the first Confirm a slow import.

Opening must not change a database: a path or URL is opened read-only unless editing is asked for,
and never created (`open_store(..., read_only=True)`; see `memkit.store`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..errors import StoreError
from ..validators import import_jsonschema
from ..store import Store, open_store
from ..store.targets import postgres_conninfo


def open_target(target: str | os.PathLike[str], edit: bool) -> Store:
    """Open an existing database file or a PostgreSQL URL, for writing only when `edit`, with the
    limits the store recorded.

    Raises:
        StoreError: there is no file at the path, or the store cannot be opened.
    """
    conninfo = postgres_conninfo(target) if isinstance(target, str) else None
    if conninfo is None:
        path = Path(target)
        if not path.exists():
            raise StoreError(f"there is no database at {path}; the inspector opens existing files only")
        return open_store(path, read_only=not edit)
    return open_store(conninfo, read_only=not edit, create=False)


def where(store: Store) -> str:
    """The database shown, as it may be printed: a file name, or PostgreSQL's host, port, database and
    schema (`Store.location`: no user, no password)."""
    return store.path.name if store.path is not None else store.location


def warm_up() -> threading.Thread:
    """Start importing jsonschema in the background, the way the tools import it.

    The first Confirm needs jsonschema, whose import takes seconds with jupyter's format checkers
    installed: started when editing begins, it runs while the person is still choosing what to
    change (`import_jsonschema`: without compiling the IRI grammar, which cost seconds more).
    """
    thread = threading.Thread(target=import_jsonschema, name="memkit-inspector-warm", daemon=True)
    thread.start()
    return thread
