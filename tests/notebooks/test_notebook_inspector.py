"""Headless tests of classroom: the memory inspector, its plain methods and the widget that
drives them.
"""

from __future__ import annotations

import html
import sqlite3
import subprocess
import sys

import pytest
import _notebook_demo  # noqa: F401  (skips this module without the notebook extra)

from memkit import Approvals, Limits, MemoryStore, MemoryTools
from memkit.errors import ApprovalError, StoreError, ValidationError
from classroom import MemoryInspector
from memkit.store import fingerprint


def test_inspector_methods_filter_and_show_history(demo):
    inspector = MemoryInspector(demo)
    assert inspector.users() == ["alice", "bob"] and inspector.user == "alice"
    assert list(inspector.set_kind("episode")["key"]) == ["trip.lisbon"]
    assert list(inspector.set_kind("all")["key"]) == ["trip.lisbon", "city", "drink"]
    assert list(inspector.set_query("LIS")["key"]) == ["trip.lisbon", "city"]
    assert inspector.select_user("bob").empty  # the search box still says "LIS"
    assert list(inspector.set_query("")["value"]) == ["Oslo", "espresso"]
    history = inspector.select_key("preference", "drink")
    assert list(history["new_value"]) == ["espresso"]
    assert inspector.state() == {"user": "bob", "kind": "all", "query": "", "selected": "preference:drink",
                                 "staged": None}
    with pytest.raises(ValidationError):
        inspector.set_kind("secret")


def test_inspector_changes_nothing_until_confirm_and_records_the_confirmation(demo):
    inspector = MemoryInspector(demo)
    inspector.select_key("preference", "drink")
    before = fingerprint(demo)
    staged = inspector.stage_edit("green tea")
    assert staged["written"] is False and "'jasmine tea' -> 'green tea'" in staged["staged"]
    assert fingerprint(demo) == before
    assert inspector.cancel() == {"cancelled": staged["staged"], "written": False}
    with pytest.raises(ApprovalError, match="nothing is staged"):
        inspector.confirm()
    assert fingerprint(demo) == before

    inspector.stage_edit("green tea")
    done = inspector.confirm()
    assert done == {"done": "edit", "kind": "preference", "key": "drink", "confirmation": "inspector#1",
                    "revision": 2}
    assert demo.get("alice", "preference", "drink")["value"] == "green tea"
    last = inspector.history().iloc[-1]
    assert (last["action"], last["confirmation"], last["session"]) == ("update", "inspector#1", "inspector")
    with pytest.raises(ApprovalError):
        inspector.confirm()  # a confirmation covers one change, once

    inspector.stage_delete()
    assert inspector.confirm()["confirmation"] == "inspector#2"
    assert demo.get("alice", "preference", "drink") is None
    assert list(inspector.history()["action"]) == ["create", "update", "delete"]
    assert [c.id for c in inspector.approvals.spent] == ["inspector#1", "inspector#2"]
    assert inspector.approvals.pending == []


def test_inspector_refuses_a_stale_staged_change(demo, tmp_path):
    inspector = MemoryInspector(demo)
    inspector.select_key("preference", "city")
    inspector.stage_edit("Porto")
    # Someone else (another process) changes the record between staging and the click.
    script = ("import sys; from memkit import MemoryStore; "
              "MemoryStore(sys.argv[1]).put('alice', 'other', 'preference', 'city', 'Faro', confirmation='cli#1')")
    subprocess.run([sys.executable, "-c", script, str(demo.path)], check=True)
    with pytest.raises(ApprovalError, match="changed since it was staged"):
        inspector.confirm()
    assert demo.get("alice", "preference", "city")["value"] == "Faro"
    assert inspector.staged is None and inspector.approvals.pending == []


def test_inspector_refuses_bad_edits(demo):
    inspector = MemoryInspector(demo)
    with pytest.raises(ValidationError, match="select a user and a key"):
        inspector.stage_edit("x")
    inspector.select_key("preference", "drink")
    with pytest.raises(ValidationError, match="already holds"):
        inspector.stage_edit("jasmine tea")
    with pytest.raises(ValidationError, match="at most 512"):
        inspector.stage_edit("x" * 600)
    inspector.select_key("preference", "nothing")
    with pytest.raises(ValidationError, match="does not exist"):
        inspector.stage_delete()


def test_inspector_widget_drives_the_same_methods(demo):
    inspector = MemoryInspector(demo)
    _ = inspector.widget  # build it, as displaying it would
    c = inspector.controls
    assert "jasmine tea" in c["records"].value and c["confirm"].disabled
    c["user"].value = "bob"
    assert "espresso" in c["records"].value and "jasmine" not in c["records"].value
    c["kind"].value = "episode"
    assert "no records match" in c["records"].value
    c["kind"].value = "all"
    c["query"].value = "osl"
    assert "Oslo" in c["records"].value and "espresso" not in c["records"].value
    c["query"].value = ""
    c["key"].value = "preference:drink"
    assert "espresso" in c["history"].value
    c["value"].value = "ristretto"
    c["stage_edit"].click()
    assert not c["confirm"].disabled and "not written yet" in c["status"].value
    assert demo.get("bob", "preference", "drink")["value"] == "espresso"
    c["confirm"].click()
    assert demo.get("bob", "preference", "drink")["value"] == "ristretto"
    assert "inspector#1" in c["status"].value and "inspector#1" in c["history"].value
    assert c["confirm"].disabled
    c["confirm"].click()  # nothing staged: refused on screen, not raised into the frontend
    assert "nothing is staged" in c["status"].value
    c["stage_delete"].click()
    c["cancel"].click()
    assert demo.get("bob", "preference", "drink") is not None
    c["stage_delete"].click()
    c["confirm"].click()
    assert demo.get("bob", "preference", "drink") is None
    assert "preference:drink" in c["key"].options  # a deleted key keeps its history in view
    assert "delete" in c["history"].value
    assert inspector._repr_mimebundle_()["text/plain"] == "MemoryInspector(user='bob', kind='all', query='')"


def test_inspector_opens_a_path_and_closes_what_it_opened(demo, tmp_path):
    with pytest.raises(StoreError, match="there is no database"):
        MemoryInspector(tmp_path / "missing.sqlite3")
    assert not (tmp_path / "missing.sqlite3").exists()
    inspector = MemoryInspector(demo.path)
    assert inspector.users() == ["alice", "bob"]
    inspector.close()
    with pytest.raises(StoreError, match="closed"):
        _ = inspector.store.connection
    shared = MemoryInspector(demo)
    shared.close()
    assert demo.users() == {"alice": 3, "bob": 2}  # a store passed in stays open


def test_inspector_on_an_empty_database_explains_instead_of_failing(tmp_path):
    with MemoryStore(tmp_path / "empty.sqlite3") as store:
        inspector = MemoryInspector(store)
        _ = inspector.widget  # build it, as displaying it would
        assert inspector.user is None and inspector.table().empty and inspector.history().empty
        assert "no records match" in inspector.controls["records"].value
        inspector.controls["stage_delete"].click()
        assert "select a user and a key first" in inspector.controls["status"].value


def test_inspector_search_is_the_stores_search(demo):
    inspector = MemoryInspector(demo)
    for query, kind in (("lis", None), ("TEA", "preference"), ("a", "episode"), ("zzz", None)):
        inspector.set_kind(kind)
        inspector.set_query(query)
        expected = sorted((r["kind"], r["key"]) for r in demo.search("alice", query, limit=50, kind=kind))
        assert [(r["kind"], r["key"]) for r in inspector.records()] == expected


def test_inspector_write_refused_by_the_store_writes_nothing_and_spends_the_click(tmp_path):
    path = tmp_path / "locked.sqlite3"
    with MemoryStore(path, limits=Limits().replace(busy_timeout_ms=100)) as store:
        store.put("alice", "s0", "preference", "drink", "tea")
        inspector = MemoryInspector(store)
        inspector.select_key("preference", "drink")
        inspector.stage_edit("coffee")
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
        try:
            with pytest.raises(StoreError, match="not done, nothing was written"):
                inspector.confirm()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.get("alice", "preference", "drink")["value"] == "tea"
        assert inspector.approvals.pending == [] and [c.id for c in inspector.approvals.spent] == ["inspector#1"]
        assert inspector.staged is None


def test_the_status_line_follows_changes_made_from_code(demo):
    inspector = MemoryInspector(demo)
    _ = inspector.widget  # displayed; the rest happens in cells, not by clicks
    def status() -> str:
        return html.unescape(inspector.controls["status"].value)

    inspector.select_key("preference", "drink")
    inspector.stage_edit("green tea")
    assert "not written yet" in status()
    inspector.confirm()
    assert "not written yet" not in status() and "done: edit preference 'drink'" in status()
    assert "inspector#1" in status() and inspector.controls["confirm"].disabled
    with pytest.raises(ApprovalError):
        inspector.confirm()
    assert "nothing is staged" in status()
    inspector.select_key("preference", "city")
    assert status() == ""
    inspector.stage_delete()
    inspector.cancel()
    assert "cancelled: delete preference 'city'" in status() and "nothing was written" in status()


def test_widget_tables_have_padding_and_the_kind_labels_fit(demo):
    inspector = MemoryInspector(demo)
    _ = inspector.widget  # build it, as displaying it would
    records = inspector.controls["records"].value
    assert "padding" in records and 'class="dataframe memkit-table"' in records
    width = int(inspector.controls["kind"].style.button_width.removesuffix("px"))
    assert width >= 10 * len("preference")  # about 10 px a character at the default size


# -- read-only by default (issue 24.1) ---------------------------------------------------------------

import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

from memkit import FakeClock, ReadOnlyError  # noqa: E402
from memkit.store import SCHEMA_VERSION, MIGRATIONS  # noqa: E402


def _look(path: Path) -> tuple[str, int, list[str]]:
    """What inspecting must not change: the file's bytes, its mtime, and the files of its folder."""
    return (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns, sorted(os.listdir(path.parent)))


def _closed_store(path: Path) -> Path:
    with MemoryStore(path, clock=FakeClock(step_seconds=1)) as store:
        for user, drink in (("alice", "jasmine tea"), ("bob", "espresso")):
            store.put(user, "s0", "preference", "drink", drink)
        store.put("alice", "s0", "preference", "city", "Lisbon")
        store.delete("alice", "preference", "city")
    return path


def _browse_everything(inspector: MemoryInspector) -> None:
    _ = inspector.widget  # build it, as displaying it would
    for user in inspector.users():
        inspector.select_user(user)
        inspector.set_sort("newest")
        inspector.set_query("e")
        inspector.select_key("preference", "drink")
        inspector.deleted()
        inspector.sessions()


def test_the_inspector_opens_read_only_and_changes_nothing(tmp_path):
    path = _closed_store(tmp_path / "theirs.sqlite3")
    before = _look(path)
    inspector = MemoryInspector(path)
    assert not inspector.editing and "read-only" in inspector.note()
    _browse_everything(inspector)
    inspector.select_key("preference", "drink")
    with pytest.raises(ApprovalError, match="open read-only; switch Edit on"):
        inspector.stage_edit("coffee")
    assert "switch Edit on" in inspector.controls["status"].value and inspector.controls["stage_edit"].disabled
    with pytest.raises(ReadOnlyError, match="read-only; nothing was written"):
        inspector.store.put("alice", "s1", "preference", "drink", "around the inspector")
    inspector.close()
    assert _look(path) == before  # same bytes, same mtime, no -wal or -shm beside it


def test_a_read_only_file_and_a_read_only_folder_open(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    path = _closed_store(folder / "theirs.sqlite3")
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        before = _look(path)
        inspector = MemoryInspector(path)
        assert inspector.users() == ["alice", "bob"]
        _browse_everything(inspector)
        with pytest.raises(StoreError, match="read-only"):
            inspector.set_edit(True)  # the file is read-only: writing is refused, reading goes on
        assert not inspector.editing and inspector.users() == ["alice", "bob"]
        inspector.close()
        assert _look(path) == before
    finally:
        folder.chmod(0o755)


def test_a_live_writer_is_seen_and_its_sidecars_left_as_they_were(tmp_path):
    path = _closed_store(tmp_path / "live.sqlite3")
    inspector = MemoryInspector(path)
    assert inspector.store.opened["how"] == "immutable"  # no sidecars: SQLite makes none
    with MemoryStore(path) as writer:  # another program starts writing: its -wal appears
        writer.put("carol", "s0", "preference", "drink", "mate")
        assert "carol" in inspector.users()  # reopened through the writer's -wal
        assert inspector.store.opened["how"] == "ro"
        sidecars = sorted(os.listdir(tmp_path))
    inspector.close()
    assert sorted(os.listdir(tmp_path)) <= sidecars


def _file_at_version(path: Path, version: int) -> Path:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for steps in MIGRATIONS[:version]:
        for statement in steps:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision, created_at,"
                 " updated_at, key_fold, value_fold) VALUES ('bob', 'preference', 'drink', 'Tea', 's0', 1,"
                 " '2025-01-01T00:00:00Z', '2025-01-01T00:00:00Z', 'drink', 'tea')")
    conn.close()
    return path


def test_an_older_schema_is_shown_with_its_version_and_never_migrated(tmp_path):
    path = _file_at_version(tmp_path / "old.sqlite3", 1)
    before = _look(path)
    inspector = MemoryInspector(path)
    assert list(inspector.select_user("bob")["value"]) == ["Tea"]
    assert list(inspector.set_query("TE")["key"]) == ["drink"]
    note = inspector.note()
    assert f"schema is version 1, older than this memkit's {SCHEMA_VERSION}" in note and "never migrated" in note
    _ = inspector.widget  # build it, as displaying it would
    assert "version 1" in inspector.controls["note"].value
    inspector.close()
    assert _look(path) == before
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1


def test_memkit_migrate_migrates_only_when_confirmed_and_says_from_which_version(tmp_path):
    path = _file_at_version(tmp_path / "old.sqlite3", 1)
    before = _look(path)
    refused = subprocess.run([sys.executable, "-m", "memkit", "migrate", "--db", str(path)],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and f"from schema version 1 to {SCHEMA_VERSION}" in refused.stderr
    assert "newer than this memkit knows" in refused.stderr and _look(path) == before
    done = subprocess.run([sys.executable, "-m", "memkit", "migrate", "--db", str(path), "--confirm"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["from_version"], report["to_version"], report["migrated"]) == (1, SCHEMA_VERSION, True)
    again = json.loads(subprocess.run([sys.executable, "-m", "memkit", "migrate", "--db", str(path), "--confirm"],
                                      capture_output=True, text=True, check=True).stdout)
    assert (again["from_version"], again["migrated"]) == (SCHEMA_VERSION, False)
    with MemoryStore(path, read_only=True) as store:
        assert store.get("bob", "preference", "drink")["value"] == "Tea"


def test_the_edit_switch_reopens_for_writing_and_back(tmp_path):
    path = _closed_store(tmp_path / "mine.sqlite3")
    inspector = MemoryInspector(path)
    _ = inspector.widget  # build it, as displaying it would
    inspector.select_key("preference", "drink")
    inspector.controls["edit"].value = True  # the Edit switch
    assert inspector.editing and "editing" in inspector.controls["note"].value
    assert inspector.state()["selected"] == "preference:drink"  # the view is kept
    inspector.stage_edit("green tea")
    assert inspector.confirm()["revision"] == 2
    inspector.controls["edit"].value = False
    assert not inspector.editing
    with pytest.raises(ApprovalError, match="read-only"):
        inspector.stage_delete()
    inspector.close()
    editing = MemoryInspector(path, edit=True)
    assert editing.editing and editing.store.opened["how"] == "rw"
    editing.close()


def test_a_store_passed_in_keeps_its_own_mode(demo):
    inspector = MemoryInspector(demo)
    assert inspector.editing  # a store opened for writing
    with pytest.raises(ValidationError, match="given an open store"):
        inspector.set_edit(False)


# -- the inspector confirms only the record it showed (issue 21.5) -----------------------------------


@pytest.mark.parametrize("action", ["edit", "delete"])
@pytest.mark.parametrize("same_time", [False, True], ids=["clock moves", "clock stands still"])
def test_a_key_forgotten_and_written_again_is_not_the_record_shown(tmp_path, action, same_time):
    # A clock that stands still and the same value: revision, value and times all come back the
    # same; only the store's write number tells the new record from the one shown.
    clock = FakeClock(step_seconds=0 if same_time else 1)
    with MemoryStore(tmp_path / "m.sqlite3", clock=clock) as store:
        store.put("alice", "s0", "preference", "drink", "tea")
        inspector = MemoryInspector(store)
        inspector.select_key("preference", "drink")
        inspector.stage_edit("coffee") if action == "edit" else inspector.stage_delete()
        store.forget_user("alice")
        rewritten = store.put("alice", "s9", "preference", "drink", "tea" if same_time else "secret")
        assert rewritten["revision"] == 1
        with pytest.raises(ApprovalError, match="changed since it was staged"):
            inspector.confirm()
        assert store.get("alice", "preference", "drink") == rewritten
        assert [e["action"] for e in store.history("alice", "preference", "drink")] == ["create"]
        assert inspector.staged is None and inspector.approvals.pending == []


def test_a_change_to_any_shown_field_refuses_the_confirm(demo):
    inspector = MemoryInspector(demo)
    inspector.select_key("preference", "drink")
    inspector.stage_delete()
    demo.put("alice", "elsewhere", "preference", "drink", "oolong")
    with pytest.raises(ApprovalError, match="value 'jasmine tea' -> 'oolong'"):
        inspector.confirm()
    assert demo.get("alice", "preference", "drink")["value"] == "oolong"


# -- PostgreSQL URLs: every spelling recognised, the password never shown (issues 24.5, 21.11) --------

from memkit.store import open_store  # noqa: E402
from memkit.store.targets import is_database_url, masked, postgres_conninfo  # noqa: E402

SECRET = "hunter2-Pw"


@pytest.mark.parametrize("target, expected", [
    (f"postgresql://ann:{SECRET}@db/m", f"postgresql://ann:{SECRET}@db/m"),
    (f"postgres://ann:{SECRET}@db/m", f"postgresql://ann:{SECRET}@db/m"),
    (f"postgresql+psycopg://ann:{SECRET}@db/m", f"postgresql://ann:{SECRET}@db/m"),
    (f"POSTGRESQL://ann:{SECRET}@db/m", f"postgresql://ann:{SECRET}@db/m"),
    (f"  PostgreSQL+psycopg2://ann:{SECRET}@db/m ", f"postgresql://ann:{SECRET}@db/m"),
    (f"host=db dbname=m user=ann password={SECRET}", f"host=db dbname=m user=ann password={SECRET}"),
    (f"dbname = m password = '{SECRET}'", f"dbname = m password = '{SECRET}'"),
    ("memory.sqlite3", None),
    ("state/memory.sqlite3", None),
    ("a=b.sqlite3", None),
])
def test_every_postgresql_spelling_is_recognised(target, expected):
    assert postgres_conninfo(target) == expected
    assert is_database_url(target) is (expected is not None)


@pytest.mark.parametrize("target", [f"mysql://ann:{SECRET}@db/m", f"redis://:{SECRET}@localhost:6379/0",
                                    f"postgresq://ann:{SECRET}@db/m"])
def test_another_scheme_is_refused_without_its_password(tmp_path, target):
    for opener in (open_store, MemoryInspector, MemoryStore):
        with pytest.raises(StoreError) as refused:
            opener(target)
        assert SECRET not in str(refused.value) and "***" in str(refused.value), opener
    assert os.listdir(tmp_path) == [] and not any(SECRET in name for name in os.listdir("."))


@pytest.mark.parametrize("target", [f"POSTGRESQL://ann:{SECRET}@127.0.0.1:9/db?connect_timeout=2",
                                    f"postgresql+psycopg://ann:{SECRET}@127.0.0.1:9/db?connect_timeout=2",
                                    f"host=127.0.0.1 port=9 user=ann password={SECRET} connect_timeout=2"])
def test_an_unreachable_url_is_refused_without_its_password_and_makes_no_file(tmp_path, target, monkeypatch,
                                                                             caplog):
    pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    caplog.set_level("DEBUG")
    with pytest.raises(StoreError) as refused:
        MemoryInspector(target)
    viewer = inspect(target)
    assert isinstance(viewer, NotInspectable) and SECRET not in viewer.line + viewer.widget.value
    assert SECRET not in caplog.text
    assert SECRET not in str(refused.value) and "***" in str(refused.value) and "cannot connect" in str(refused.value)
    cli = subprocess.run([sys.executable, "-m", "memkit", "get", "--db", target, "--user", "a", "--key", "b"],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and SECRET not in cli.stderr + cli.stdout and "***" in cli.stderr
    assert os.listdir(tmp_path) == []
    assert masked(target).count(SECRET) == 0


def _fresh_database(pg_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return pg_url.replace("/postgres?", f"/{name}?", 1)


def test_an_open_postgresql_store_is_inspected_as_it_is_and_left_open(pg_url):
    pytest.importorskip("psycopg")
    import uuid

    from memkit.store import PostgresStore

    with PostgresStore(pg_url, schema=f"t_{uuid.uuid4().hex[:16]}") as store:
        store.put("alice", "s0", "preference", "drink", "tea")
        for viewer in (inspect(store), MemoryInspector(store)):  # a Store, not a path or a URL
            assert isinstance(viewer, MemoryInspector) and viewer.store is store
            assert viewer.users() == ["alice"] and viewer.editing  # a store passed in keeps its own mode
            viewer.close()
        assert store.get("alice", "preference", "drink")["value"] == "tea"  # left open: still usable


def test_a_url_string_opens_postgresql_read_only_and_never_shows_the_password(pg_url, caplog):
    pytest.importorskip("psycopg")
    caplog.set_level("DEBUG")
    url = _fresh_database(pg_url, "inspector_url")
    with open_store(url) as store:
        store.put("alice", "s0", "preference", "drink", "tea")
    with_password = url.replace("postgresql://postgres@", f"POSTGRESQL+psycopg://postgres:{SECRET}@", 1)
    inspector = MemoryInspector(with_password)
    assert inspector.users() == ["alice"] and not inspector.editing
    _ = inspector.widget  # build it, as displaying it would
    inspector.select_key("preference", "drink")
    with pytest.raises(ApprovalError, match="read-only"):
        inspector.stage_edit("coffee")
    with pytest.raises(StoreError):
        inspector.store.put("alice", "s1", "preference", "drink", "around")  # the server refuses it
    inspector.set_edit(True)
    inspector.stage_edit("coffee")
    assert inspector.confirm()["revision"] == 2
    shown = [repr(inspector), repr(inspector.store), inspector.note(), inspector.where,
             json.dumps(inspector.store.health()), *(str(getattr(c, "value", "")) for c in inspector.controls.values())]
    assert all(SECRET not in text for text in shown)
    assert any(":***@" in text for text in shown)
    inspector.close()
    assert SECRET not in caplog.text


# -- other frameworks' memory, read-only (issue 24.4) ------------------------------------------------

from _peer_files import PEERS  # noqa: E402

from classroom import NotInspectable, PeerInspector, inspect  # noqa: E402

PEER_EXPECTED = {
    # format: (group of the first listing, items of that group, a search text, what it must find)
    "openai-agents SQLiteSession": ("alice-1", 2, "OSLO", "bob-7"),
    "LangGraph SqliteStore": ("memories.alice", 2, "oslo", "memories.bob"),
    "LangGraph SqliteSaver": ("thread-alice", 3, "THREAD-BOB", "thread-bob"),
    "mem0 history": ("5a7e2d90-1b4c-4f0a-8e2d-6c9b3a1f4e22", 2, "oolong", "9b2f6c1e-3d1a-4d8e-9c61-0f3b1e2a7d10"),
}


@pytest.mark.parametrize("name", list(PEERS))
def test_another_frameworks_file_is_browsed_read_only_and_left_byte_identical(tmp_path, name):
    path = PEERS[name](tmp_path / "peer.db")
    before = _look(path)
    first_group, items, text, found_in = PEER_EXPECTED[name]
    viewer = inspect(path)
    assert isinstance(viewer, PeerInspector) and viewer.format == name and name in viewer.note()
    groups = viewer.groups()
    assert len(groups) == 2 and viewer.group == first_group
    assert len(viewer.items()) == items
    assert found_in in set(viewer.set_query(text).iloc[:, 0])
    _ = viewer.widget  # build it, as displaying it would
    assert name in viewer.controls["note"].value and "<table" in viewer.controls["items"].value
    other = next(g for g in groups.iloc[:, 0] if g != first_group)
    viewer.controls["query"].value = ""
    viewer.controls["group"].value = other  # typing a whole id selects it
    assert viewer.group == other
    with pytest.raises(StoreError, match="holds no"):
        viewer.select_format("not a format")
    viewer.close()
    assert _look(path) == before  # the same bytes and mtime, nothing beside it


def test_a_langgraph_store_shows_its_ttl_and_a_mem0_delete_its_events(tmp_path):
    store = inspect(PEERS["LangGraph SqliteStore"](tmp_path / "store.db"))
    trip = store.items().set_index("key").loc["trip"]
    assert trip["ttl_minutes"] == 10080.0 and trip["expires_at"] == "2026-05-08 10:00:00"
    history = inspect(PEERS["mem0 history"](tmp_path / "history.db"))
    assert list(history.items()["event"]) == ["ADD", "DELETE"]
    saver = inspect(PEERS["LangGraph SqliteSaver"](tmp_path / "saver.db"))
    checkpoints = saver.items()
    assert list(checkpoints["writes"]) == [1, 0, 0] and '"step": 2' in checkpoints["metadata"].iloc[0]


@pytest.mark.parametrize("content, says", [
    (b"", "is empty (0 bytes)"),
    (b"just some notes\n", "not a SQLite database"),
    (None, "is not a memkit store, nor openai-agents, LangGraph or mem0 memory: a SQLite database with tables"),
    ("empty", "an empty SQLite database"),
])
def test_an_unknown_file_gets_one_line_never_a_traceback(tmp_path, content, says):
    path = tmp_path / "mystery.db"
    if content is None:
        _make_foreign(path)
    elif content == "empty":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE scratch (x)")
        conn.execute("DROP TABLE scratch")  # a whole SQLite file, with no table left
        conn.close()
    else:
        path.write_bytes(content)
    before = _look(path)
    viewer = inspect(path)
    assert isinstance(viewer, NotInspectable) and says in viewer.line and "\n" not in viewer.line
    assert says in html.unescape(viewer.widget.value) and "Traceback" not in viewer.widget.value
    assert _look(path) == before


def _make_foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.commit()
    conn.close()


def test_inspect_opens_memkit_stores_and_says_why_one_cannot_be(tmp_path):
    path = _closed_store(tmp_path / "mine.sqlite3")
    viewer = inspect(path)
    assert isinstance(viewer, MemoryInspector) and not viewer.editing
    viewer.close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    newer = inspect(path)
    assert isinstance(newer, NotInspectable) and "newer than this memkit knows" in newer.line
    assert isinstance(inspect(tmp_path / "missing.db"), NotInspectable)


# -- made for a database of real size (issue 24.3) -----------------------------------------------------

from memkit.window import InProcessWindow  # noqa: E402


@pytest.fixture
def crowd(tmp_path):
    """300 users; u0042 holds 45 records, two of them deleted since, and two sessions with turns."""
    limits = Limits(max_records_total=5000, max_records_per_user=100)
    with MemoryStore(tmp_path / "crowd.sqlite3", limits=limits, clock=FakeClock(step_seconds=1)) as store:
        with store.transaction():
            for n in range(300):
                store.put(f"u{n:04d}", "s0", "preference", "drink", f"drink {n}")
            for n in range(47):
                store.put("u0042", "s0", "episode", f"note.{n:02d}", f"note number {n}")
        store.delete("u0042", "episode", "note.03", session="s1")
        store.delete("u0042", "episode", "note.05", session="s1")
        store.archive_turns("u0042", "morning", [
            {"turn": 1, "role": "user", "content": "my drink is tea", "at": "2026-05-01T09:00:00Z"},
            {"turn": 2, "role": "assistant", "content": "noted", "at": "2026-05-01T09:00:01Z"}])
        yield store


def test_a_user_is_found_by_typing_among_hundreds(crowd):
    inspector = MemoryInspector(crowd)
    assert len(inspector.users()) == 300
    assert inspector.find_users("u004") == [f"u{n:04d}" for n in range(40, 50)]
    assert inspector.find_users("U0042") == ["u0042"] and inspector.find_users("zz") == []
    _ = inspector.widget  # build it, as displaying it would
    inspector.controls["user"].value = "u004"  # part of an id: a hint, no change of user
    assert inspector.user == "u0000" and "u0040, u0041" in inspector.controls["status"].value
    inspector.controls["user"].value = "u0042"  # a whole id selects
    assert inspector.user == "u0042"


def test_records_are_paged_and_sorted_with_the_history_beside_them(crowd):
    inspector = MemoryInspector(crowd, page_size=20)
    inspector.select_user("u0042")
    assert inspector.pages() == 3 and len(inspector.table()) == 20
    assert list(inspector.table()["key"])[:2] == ["note.00", "note.01"]  # kind, key
    assert len(inspector.set_page(2)) == 6  # 46 records: 20 + 20 + 6
    with pytest.raises(ValidationError, match="pages are 0 to 2"):
        inspector.set_page(3)
    newest = inspector.set_sort("newest")
    assert inspector.page == 0 and list(newest["key"])[:2] == ["note.46", "note.45"]
    assert inspector.set_sort("key")["key"].iloc[0] == "drink"
    _ = inspector.widget  # build it, as displaying it would
    c = inspector.controls
    assert "page 1 of 3 (46 records)" in c["page"].value and c["previous"].disabled
    c["next"].click()
    assert inspector.page == 1 and "page 2 of 3" in c["page"].value
    c["key"].value = c["key"].options[0]
    assert "create" in c["history"].value
    # The records and the selected key sit side by side: history and edit controls never below the list.
    side_by_side = [child for child in inspector.widget.children if len(getattr(child, "children", ())) == 2
                    and c["records"] in getattr(child.children[0], "children", ())
                    and c["history"] in getattr(child.children[1], "children", ())
                    and c["confirm"] in child.children[1].children[4].children]
    assert len(side_by_side) == 1


def test_deleted_keys_are_listed_on_request_with_their_history(crowd):
    inspector = MemoryInspector(crowd)
    inspector.select_user("u0042")
    deleted = inspector.deleted()
    assert list(deleted["key"]) == ["note.05", "note.03"] and list(deleted["events"]) == [2, 2]
    assert list(deleted["value"]) == ["note number 5", "note number 3"]
    assert list(inspector.select_key("episode", "note.03")["action"]) == ["create", "delete"]
    _ = inspector.widget  # build it, as displaying it would
    c = inspector.controls
    assert c["deleted"].value == ""
    c["show_deleted"].value = True
    assert "note.05" in c["deleted"].value and "note.03" in c["deleted"].value


def test_a_users_sessions_show_what_was_said_archive_and_live_window(crowd):
    window = InProcessWindow(4, store=crowd)
    window.append("u0042", "evening", "user", "call me Sam")
    inspector = MemoryInspector(crowd, window=window)
    inspector.select_user("u0042")
    sessions = inspector.sessions()
    assert list(sessions["session"]) == ["morning"] and list(sessions["turns"]) == [2]
    turns = inspector.turns("morning")
    assert list(turns["content"]) == ["my drink is tea", "noted"] and set(turns["where"]) == {"archive"}
    live = inspector.turns("evening")  # not archived yet: only the window has it
    assert list(live["content"]) == ["call me Sam"] and list(live["where"]) == ["window"]
    _ = inspector.widget  # build it, as displaying it would
    c = inspector.controls
    c["session"].value = "morning"
    assert "my drink is tea" in c["turns"].value and "morning" in c["sessions"].value


def test_confirm_compiles_the_tool_schemas_once_and_says_it_is_working(crowd):
    inspector = MemoryInspector(crowd)
    inspector.select_user("u0042")
    _ = inspector.widget  # build it, as displaying it would
    seen = []
    inspector.controls["status"].observe(lambda ch: seen.append(ch["new"]), names="value")
    for value in ("a", "b"):
        inspector.select_key("preference", "drink")
        inspector.stage_edit(value)
        inspector.controls["confirm"].click()
    assert list(inspector._tools) == ["u0042"] and len(inspector.approvals.spent) == 2
    assert any("writing" in text for text in seen)  # shown while the write ran
    assert "done: edit" in inspector.controls["status"].value


def test_every_confirm_of_a_process_shares_one_compiled_set_of_tool_validators(tmp_path):
    """Issue 20: the four JSON-Schema validators are compiled once per process, not once per user,
    per reopen or per inspector; a store with other limits gets its own, with its own bounds."""
    path = tmp_path / "m.sqlite3"
    with MemoryStore(path) as store:
        for user in ("ann", "bob"):
            store.put(user, "s1", "preference", "drink", "tea")
    seen = []

    def correct(inspector: MemoryInspector, user: str, value: str) -> None:
        inspector.select_user(user)
        inspector.select_key("preference", "drink")
        inspector.stage_edit(value)
        assert inspector.confirm()["done"] == "edit"
        seen.append(inspector._tools[user].validators)

    first = MemoryInspector(str(path), edit=True)
    correct(first, "ann", "coffee")
    correct(first, "bob", "water")
    first.set_edit(False)
    first.set_edit(True)  # reopened: new tools, the same validators
    correct(first, "ann", "milk")
    first.close()
    second = MemoryInspector(str(path), edit=True)
    correct(second, "bob", "juice")
    second.close()
    assert len(seen) == 4
    for name in ("memory_get", "memory_search", "memory_put", "memory_delete"):
        assert len({id(validators[name]) for validators in seen}) == 1, name
    with MemoryStore(tmp_path / "small.sqlite3", limits=Limits(max_value_chars=10)) as small:
        refused = MemoryTools(small, "ann", "s1", Approvals("t", small.limits)).call(
            "memory_put", {"kind": "preference", "key": "drink", "value": "x" * 11})
        assert refused["ok"] is False and "at most 10" in refused["error"]


def test_the_inspector_benchmark_runs_at_a_small_size():
    # Timings are never asserted: this only keeps bench/inspector_bench.py working.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.inspector_bench import run
    from bench.report import inspector_markdown as markdown

    rows = run(records=200, users=20, rounds=1)
    names = [name for name, _, _ in rows]
    assert "select a user" in names and "a later Confirm (stage and write)" in names
    assert all(ms >= 0 for _, ms, _ in rows) and "## Inspector at size" in markdown(rows, 200, 20, 1)


def test_the_inspector_lists_a_users_proposals_and_approves_them_only_when_editing(tmp_path):
    """Issue 23: the inspector shows a user's pending proposals with Approve and Reject; read-only
    it refuses to decide (nothing changes), with Edit on an approval writes exactly the proposal and
    the history names it and the inspector."""
    path = tmp_path / "m.sqlite3"
    with MemoryStore(path) as store:
        store.put("ann", "s1", "preference", "city", "Lisbon")
        moved = store.propose_put("ann", "s2", "preference", "city", "Porto")
        vegan = store.propose_put("ann", "s2", "preference", "diet", "vegan")
        store.propose_put("bob", "s9", "preference", "city", "Oslo")
    before = path.read_bytes()
    inspector = MemoryInspector(str(path))
    inspector.select_user("ann")
    _ = inspector.widget  # build it, as displaying it would
    panel = inspector._panel
    assert panel is not None and panel.user == "ann" and set(panel.buttons) == {moved["id"], vegan["id"]}
    assert [p["key"] for p in inspector.pending_proposals()] == ["city", "diet"]
    refused = inspector.decide_proposal(moved["id"], "approve")
    assert refused["ok"] is False and "read-only" in refused["error"]
    panel.buttons[vegan["id"]][0].click()  # the panel's own button, read-only: refused in one line
    assert panel.last["ok"] is False and path.read_bytes() == before
    inspector.set_edit(True)
    done = inspector.decide_proposal(moved["id"], "approve")
    assert done["ok"] is True and done["decision"] == "approved"
    assert inspector.store.get("ann", "preference", "city")["value"] == "Porto"
    assert inspector.store.history("ann", "preference", "city")[-1]["confirmation"] == \
        f"proposal#{moved['id']} approved via inspector"
    inspector._panel.buttons[vegan["id"]][1].click()  # Reject, as a person would
    assert inspector._panel.last["decision"] == "rejected" and inspector.store.get("ann", "preference", "diet") is None
    assert inspector.pending_proposals() == []
    inspector.select_user("bob")
    inspector._refresh()
    assert inspector._panel.user == "bob" and len(inspector._panel.buttons) == 1
    inspector.close()
