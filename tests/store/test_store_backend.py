"""The store's one façade over either backend: what it declares about the store, the same on both.

`Store` (memkit/store/store.py) runs over a `Backend` (memkit/store/backend.py): `SqliteDatabase`,
opened by `MemoryStore(path)`, or `PostgresDatabase`, opened by `PostgresStore(url)`. Callers read
where a store is from the façade (`path`, `location`, `files()`, `read_only`) instead of probing
for attributes one backend has and the other lacks.
"""

from __future__ import annotations

import pytest

from _store_helpers import open_store
from memkit.store import Backend, MemoryStore, Store

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
    assert not overridden, (f"PostgresStore overrides {sorted(overridden)}: "
                            "the difference belongs in postgres/backend.py")
    assert PostgresStore.statements() is not MemoryStore.statements()
    assert PostgresStore.statements().take_sequence != MemoryStore.statements().take_sequence


@pytest.mark.sqlite_only
def test_each_constructor_only_opens_the_facade_and_neither_is_the_other():
    from memkit.store import PostgresStore

    for constructor in (MemoryStore, PostgresStore):
        assert constructor.__bases__ == (Store,)
        overridden = {name for name, value in vars(constructor).items()
                      if callable(value) and hasattr(Store, name)} - {"__init__", "__repr__"}
        assert not overridden, f"{constructor.__name__} overrides {sorted(overridden)}: it belongs in its backend"
    assert not issubclass(PostgresStore, MemoryStore) and not issubclass(MemoryStore, PostgresStore)
    assert MemoryStore.statements().take_sequence != PostgresStore.statements().take_sequence


def test_a_store_of_every_backend_is_a_store_and_of_its_own_constructor(store, backend):
    assert isinstance(store, Store)
    if backend.name == "sqlite":
        assert type(store) is MemoryStore
    else:
        from memkit.store import PostgresStore

        assert type(store) is PostgresStore and not isinstance(store, MemoryStore)


@pytest.mark.sqlite_only
def test_the_facade_is_not_opened_itself_and_names_the_constructors_that_open_it(tmp_path):
    path = tmp_path / "memory.sqlite3"
    for attempt in (lambda: Store(path), lambda: Store(path, read_only=True), lambda: Store()):
        with pytest.raises(TypeError, match=r"MemoryStore\(path\).*PostgresStore\(url\).*open_store\(target\)"):
            attempt()
    assert list(tmp_path.iterdir()) == []  # nothing was made
    with pytest.raises(TypeError, match=r"MemoryStore\.statements\(\).*PostgresStore\.statements\(\)"):
        Store.statements()  # the façade runs whichever backend's SQL it is opened on


@pytest.mark.sqlite_only
def test_the_facade_is_public_under_its_own_name():
    import memkit
    import memkit.store

    assert "Store" in memkit.__all__ and "Store" in memkit.store.__all__
    assert memkit.Store is memkit.store.Store is Store


def test_a_read_only_store_refuses_every_write_with_read_only_error_on_every_backend(tmp_path):
    from memkit.errors import ReadOnlyError

    path = tmp_path / "memory.sqlite3"
    with open_store(path) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
    with open_store(path, read_only=True) as reader:
        writes = {
            "put": lambda: reader.put("alice", "s1", "preference", "drink", "coffee"),
            "delete": lambda: reader.delete("alice", "preference", "drink"),
            "forget_user": lambda: reader.forget_user("alice"),
            "propose_put": lambda: reader.propose_put("alice", "s1", "preference", "food", "rice"),
        }
        for name, write in writes.items():
            with pytest.raises(ReadOnlyError, match="read-only; nothing was written") as refused:
                write()
            assert "Open it for writing" in str(refused.value), name
        with pytest.raises(ReadOnlyError), reader.transaction():
            pass
        assert reader.get("alice", "preference", "drink")["value"] == "tea"
        assert reader.proposals("alice") == []
