"""A user's openai-agents session items wherever their memory is shown, on SQLite and PostgreSQL.

`forget_user` removes a user's `MemkitSession` items, so what a person may ask to see carries them
too: the export bundle (and its import, under another user id), `health`, the inspector. And the
ids applications use (`thread/42`, `alice@example.com`) work end to end; `":memory:"` makes no file.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents", reason="the `agents` extra is not installed: pip install -e '.[agents]'")

from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from _store_helpers import open_store
from memkit import MemoryStore, StoreError, ValidationError
from memkit.inspector import MemoryInspector
from memkit.integrations.openai_agents import MemkitSession

pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend

USER, THREAD = "alice@example.com", "thread/42"
ODD = {"role": "user", "content": "<b>bold</b> & NUL \x00 and a lone surrogate \ud800"}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def converse(store: Any, user: str = USER, session: str = THREAD) -> list[Any]:
    """A real Runner turn through openai-agents into a MemkitSession on `store`; the session's items."""
    model = ScriptedModel([[assistant_message("Noted: a window seat.")]])
    with MemkitSession(session, store, user=user) as memory:
        run(Runner.run(Agent(name="travel", model=model), "I like window seats", session=memory))
        run(memory.add_items([ODD]))
        return run(memory.get_items())


def test_application_ids_hold_a_conversation_end_to_end(tmp_path):
    with open_store(tmp_path / "memory.sqlite3") as store:
        items = converse(store)
        assert [item.get("content") for item in items[:1]] == ["I like window seats"] and items[-1] == ODD
        # Stored as given: the rows carry the ids exactly, and another user's same thread is apart.
        assert store.agent_sessions(USER)[0]["session"] == THREAD
        assert run(MemkitSession(THREAD, store, user="auth0|123").get_items()) == []
        assert store.exportable(USER) == {"records": 0, "events": 0, "items": len(items)}


def test_session_items_round_trip_through_export_and_import_as_another_user(tmp_path):
    with open_store(tmp_path / "memory.sqlite3") as store:
        items = converse(store)
        converse(store, session="other trip")
        store.put(USER, THREAD, "preference", "seat", "window")
        bundle = store.export_user(USER)
        header = json.loads(bundle.split("\n", 1)[0])
        assert (header["format_version"], header["records"], header["items"]) == (2, 1, 2 * len(items))
        lines = [json.loads(line) for line in bundle.split("\n")[1:-2]]
        assert {line["session"] for line in lines if line["type"] == "item"} == {THREAD, "other trip"}
        # The same bytes again: the bundle has no time of its own.
        assert store.export_user(USER) == bundle
        # Into another store under another id (`--as-user`): the items come back exactly, in order.
        with open_store(tmp_path / "other.sqlite3") as other:
            assert other.import_records(bundle, user="auth0|123") == {"records": 1, "events": 1,
                                                                      "items": 2 * len(items)}
            assert run(MemkitSession(THREAD, other, user="auth0|123").get_items()) == items
            assert other.agent_item_rows("auth0|123", THREAD) == store.agent_item_rows(USER, THREAD)
            # Importing again would meet the items already there: refused, nothing changed.
            with pytest.raises(StoreError, match="session items"):
                other.import_records(bundle, user="auth0|123")
            # And back under the bundle's own user, the export is byte for byte the same.
            store.forget_user(USER)
            assert store.export_user(USER).count('"type": "item"') == 0
            store.import_records(bundle)
            assert store.export_user(USER) == bundle


def test_a_user_with_only_session_items_is_exported_and_counted(tmp_path):
    with open_store(tmp_path / "memory.sqlite3") as store:
        items = converse(store)
        assert store.traces(USER)["records"] == 0
        bundle = store.export_user(USER)
        assert json.loads(bundle.split("\n", 1)[0])["items"] == len(items)
        health = store.health()
        assert health["rows"]["agent_items"] == len(items) and health["rows"]["memories"] == 0
        assert health["session_items_per_user"] == {USER: len(items)}
        store.forget_user(USER)
        assert store.health()["rows"]["agent_items"] == 0 and store.health()["session_items_per_user"] == {}


def test_a_bundle_without_session_items_is_still_version_1(tmp_path):
    with open_store(tmp_path / "memory.sqlite3") as store:
        store.put("bob", "s1", "preference", "drink", "tea")
        header = json.loads(store.export_user("bob").split("\n", 1)[0])
        assert header["format_version"] == 1 and "items" not in header  # what an older memkit imports


@pytest.mark.parametrize(("change", "words"), [
    (lambda line: line.update(item="{not json"), "is not JSON text"),
    (lambda line: line.update(session="bad\nsession"), "item session 'bad\\\\nsession' is not allowed"),
    (lambda line: line.update(position=0), "item position 0"),
    (lambda line: line.update(item=42), "not text"),
    (lambda line: line.pop("at"), "bundle entry has fields"),
])
def test_a_damaged_item_line_is_refused_and_nothing_is_imported(tmp_path, change, words):
    from memkit.store import seal_bundle

    with open_store(tmp_path / "memory.sqlite3") as store:
        converse(store)
        lines = [json.loads(line) for line in store.export_user(USER).split("\n")[:-2]]
        change(next(line for line in lines if line.get("type") == "item"))
        with open_store(tmp_path / "other.sqlite3") as other:
            with pytest.raises(ValidationError, match=words):
                other.import_records(seal_bundle(lines))
            assert other.exportable(USER) == {"records": 0, "events": 0, "items": 0}


def test_the_inspector_shows_a_users_sessions_and_items_escaped(tmp_path):
    with open_store(tmp_path / "memory.sqlite3") as store:
        items = converse(store)
        inspector = MemoryInspector(store)
        assert inspector.users() == [USER]  # a user with session items only is listed
        assert inspector.select_user(USER).empty
        sessions = inspector.agent_sessions()
        assert list(sessions["session"]) == [THREAD] and list(sessions["items"]) == [len(items)]
        shown = inspector.items(THREAD)
        assert list(shown["item"]) == list(range(1, len(items) + 1))
        assert shown["type"].iloc[0] == "user" and json.loads(shown["json"].iloc[-1]) == ODD
        # The widget: pick the session, see its items as text (markup in an item escaped, never rendered).
        inspector.select_user(USER)
        _ = inspector.widget  # build it, as displaying it would
        c = inspector.controls
        assert c["agent_session"].options == (THREAD,) and c["items"].value == ""
        assert "thread/42" in c["agent_sessions"].value
        c["agent_session"].value = THREAD
        assert "&lt;b&gt;bold&lt;/b&gt;" in c["items"].value and "<b>bold</b>" not in c["items"].value
        inspector.close()


@pytest.mark.sqlite_only  # a path of the working directory: SQLite's alone
def test_memory_opens_a_temporary_store_and_makes_no_file(tmp_path):
    child = (
        "import asyncio, os\n"
        "from memkit.integrations.openai_agents import MemkitSession\n"
        "with MemkitSession('trip', ':memory:', user='alice') as s:\n"
        "    asyncio.run(s.add_items([{'role': 'user', 'content': 'hi'}]))\n"
        "    assert asyncio.run(s.get_items()) == [{'role': 'user', 'content': 'hi'}]\n"
        "    scratch = os.path.dirname(s.store.path)\n"
        "    assert os.path.isdir(scratch) and oct(os.stat(scratch).st_mode & 0o777) == '0o700'\n"
        "assert not os.path.exists(scratch), scratch\n"
        "print(sorted(os.listdir('.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", child], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]" and list(tmp_path.iterdir()) == []  # no file named ':memory:'
    # Each ':memory:' session is a store of its own, as SQLiteSession's in-memory databases are.
    with MemkitSession("t", ":memory:", user="a") as first, MemkitSession("t", ":memory:", user="a") as second:
        run(first.add_items([{"role": "user", "content": "one"}]))
        assert run(second.get_items()) == []
        assert isinstance(first.store, MemoryStore) and first.store.path != second.store.path
    assert not Path(first.store.path).exists()


@pytest.mark.sqlite_only  # the `memkit` command on a store file
def test_a_store_that_recorded_64_character_ids_keeps_them_until_raised(tmp_path):
    from _cli_helpers import env_with, memkit

    from memkit import Limits

    path, long_id = tmp_path / "old.sqlite3", "user-" + "x" * 95 + "@example.com"
    with MemoryStore(path, limits=Limits(max_id_chars=64)):  # what a store made before ids of 256 recorded
        pass
    with MemoryStore(path) as store, pytest.raises(ValidationError, match="ids are 1 to 64 characters"):
        MemkitSession(THREAD, store, user=long_id)
    raised = memkit("limits", "--db", str(path), "--set", "max_id_chars=256", "--confirm", env=env_with())
    assert raised.returncode == 0, raised.stderr
    with MemoryStore(path) as store, MemkitSession(THREAD, store, user=long_id) as session:
        run(session.add_items([{"role": "user", "content": "hi"}]))
        assert store.agent_sessions(long_id)[0]["items"] == 1


@pytest.mark.sqlite_only  # the `memkit` command on a store file
def test_memkit_export_and_import_carry_a_users_session_items(tmp_path):
    from _cli_helpers import env_with, memkit

    path, bundle = tmp_path / "memory.sqlite3", tmp_path / "alice.jsonl"
    with MemoryStore(path) as store:
        items = converse(store)  # session items only: no record, no history
    done = memkit("export", "--db", str(path), "--user", USER, "--out", str(bundle), env=env_with())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["items"] == len(items)
    done = memkit("import", "--db", str(path), "--file", str(bundle), "--as-user", "auth0|123", "--confirm",
                  env=env_with())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["items"] == len(items)
    health = json.loads(memkit("health", "--db", str(path), env=env_with()).stdout)
    assert health["session_items_per_user"] == {USER: len(items), "auth0|123": len(items)}
    with MemoryStore(path) as store:
        assert run(MemkitSession(THREAD, store, user="auth0|123").get_items()) == items
    nobody = memkit("export", "--db", str(path), "--user", "nobody@example.com", env=env_with())
    assert nobody.returncode == 2 and "nothing stored for user 'nobody@example.com'" in nobody.stderr


@pytest.mark.sqlite_only
def test_a_command_a_refusal_suggests_names_the_user_safely_for_a_shell(tmp_path):
    import re
    import shlex

    from memkit.errors import ProposalError

    with MemoryStore(tmp_path / "memory.sqlite3") as store, pytest.raises(ProposalError) as refused:
        store.reject("auth0|123; rm -rf ~", 5, origin="cli")
    command = re.search(r"`(memkit proposals [^`]*)`", str(refused.value)).group(1)
    assert shlex.split(command) == ["memkit", "proposals", "--user", "auth0|123; rm -rf ~"]
