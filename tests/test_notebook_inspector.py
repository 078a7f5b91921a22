"""Headless tests of memkit.notebook: the memory inspector, its plain methods and the widget that
drives them.
"""

from __future__ import annotations

import html
import sqlite3
import subprocess
import sys

import pytest
from _notebook_demo import demo  # noqa: F401  (a fixture; skips this module without the notebook extra)

from memkit import Limits, MemoryStore
from memkit.errors import ApprovalError, StoreError, ValidationError
from memkit.notebook import MemoryInspector
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
    inspector.widget  # build it, as displaying it would
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
        inspector.store.connection
    shared = MemoryInspector(demo)
    shared.close()
    assert demo.users() == {"alice": 3, "bob": 2}  # a store passed in stays open


def test_inspector_on_an_empty_database_explains_instead_of_failing(tmp_path):
    with MemoryStore(tmp_path / "empty.sqlite3") as store:
        inspector = MemoryInspector(store)
        inspector.widget  # build it, as displaying it would
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
    inspector.widget  # displayed; the rest happens in cells, not by clicks
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
    inspector.widget
    assert "padding" in inspector.controls["records"].value and 'class="dataframe memkit-table"' in inspector.controls["records"].value
    width = int(inspector.controls["kind"].style.button_width.removesuffix("px"))
    assert width >= 10 * len("preference")  # about 10 px a character at the default size
