"""The store's one façade over either backend: what it declares about the store, the same on both.

`MemoryStore` runs over a `Backend` (memkit/store/backend.py): `SqliteDatabase` or
`PostgresDatabase`. Callers read where a store is from the façade (`path`, `location`, `files()`,
`read_only`) instead of probing for attributes one backend has and the other lacks.
"""

from __future__ import annotations

import pytest

from _store_helpers import open_store
from memkit.store import Backend, MemoryStore

pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend


def test_the_facade_says_where_the_store_is_and_which_files_are_its_own(tmp_path, backend):
    path = tmp_path / "memory.sqlite3"
    with open_store(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        assert store.read_only is False
        if backend.name == "sqlite":
            assert store.path == path and store.location == str(path)
            assert store.files() == [path, tmp_path / "memory.sqlite3-wal", tmp_path / "memory.sqlite3-shm",
                                     tmp_path / "memory.sqlite3-journal"]
            assert all(own.exists() for own in store.files()[:3])  # the file, and WAL's two beside it
            assert repr(store) == f"MemoryStore({str(path)!r})"
        else:
            assert store.path is None and store.files() == []
            schema = store.location.rsplit(" schema=", 1)[1]
            assert store.location.startswith("host=") and " dbname=" in store.location
            assert schema.startswith("t_") and "password" not in store.location
            assert repr(store).startswith("PostgresStore(")
    with open_store(path, read_only=True) as reader:
        assert reader.read_only is True and reader.location == store.location
        assert reader.get("alice", "preference", "drink")["value"] == "tea"


def test_every_backend_offers_what_the_protocol_declares(store, backend):
    declared = {name for name in dir(Backend) if not name.startswith("_")}
    database = store._db
    missing = sorted(name for name in declared if not hasattr(database, name))
    assert not missing, f"{type(database).__name__} lacks {missing}"
    assert database.name == ("sqlite" if backend.name == "sqlite" else "postgres")


@pytest.mark.sqlite_only
def test_postgres_store_only_opens_the_facade_and_overrides_none_of_it():
    from memkit.store import PostgresStore

    overridden = {name for name, value in vars(PostgresStore).items()
                  if callable(value) and hasattr(MemoryStore, name)} - {"__init__", "__repr__"}
    assert not overridden, f"PostgresStore overrides {sorted(overridden)}: the difference belongs in postgres.py"
    assert PostgresStore.statements() is not MemoryStore.statements()
    assert PostgresStore.statements().take_sequence != MemoryStore.statements().take_sequence
