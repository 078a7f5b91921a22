"""`MemkitSession` by memkit's own standards: exact items, all or nothing, restarts, users, sizes.

openai-agents' own session tests run against it in tests/integrations/test_openai_agents_sdk_session.py.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("agents", reason="the `agents` extra is not installed: pip install -e '.[agents]'")

from agents import Agent, Runner
from agents.memory import Session
from agents.testing import ScriptedModel, function_call

from memkit import Limits, MemoryStore, QuotaError, ValidationError
from memkit.integrations.openai_agents import MAX_ITEM_CHARS, ItemNotJSON, MemkitSession

BIG_OUTPUT = "".join(f"line {n}: " + "x" * 70 + "\n" for n in range(800))  # a 60 000-character file read

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Read notes.txt and tell me my seat"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Read the file first."}],
     "encrypted_content": "gAAAAB" + "Zm9v" * 50},
    {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": '{"path": "notes.txt"}',
     "id": "fc_1", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": BIG_OUTPUT},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
     "content": [{"type": "output_text", "text": "Window seat, row 12 🪟", "annotations": [], "logprobs": []}]},
    {"role": "user", "content": "odd text: NUL \x00, lone surrogate \ud800, quotes \" ' and \\ and 1e308",
     "extra": {"float": 0.1, "big": 12345678901234567890, "nested": [None, True, {"k": []}]}},
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_it_is_an_openai_agents_session(tmp_path):
    with MemkitSession("trip", tmp_path / "memory.sqlite3", user="alice") as session:
        assert isinstance(session, Session)
        assert session.session_id == "trip" and session.session_settings is not None


def test_items_of_every_kind_come_back_exactly(tmp_path):
    with MemkitSession("trip", tmp_path / "memory.sqlite3", user="alice") as session:
        run(session.add_items(ITEMS))
        assert run(session.get_items()) == ITEMS
        assert run(session.get_items(limit=2)) == ITEMS[-2:]
        assert run(session.pop_item()) == ITEMS[-1]
        assert run(session.get_items()) == ITEMS[:-1]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5), max_size=4),
                        max_size=4),
       pops=st.integers(min_value=0, max_value=3))
def test_any_json_items_come_back_exactly_and_never_to_another_user(tmp_path, batches, pops):
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        session_id = f"s{uuid.uuid4().hex[:12]}"  # hypothesis reuses tmp_path across examples
        mine, theirs = MemkitSession(session_id, store, user="alice"), MemkitSession(session_id, store, user="bob")
        run(theirs.add_items([{"role": "user", "content": "bob's"}]))
        expected: list[Any] = []
        for batch in batches:
            run(mine.add_items(batch))
            expected += batch
        for _ in range(pops):
            assert run(mine.pop_item()) == (expected.pop() if expected else None)
        assert run(mine.get_items()) == expected
        assert run(theirs.get_items()) == [{"role": "user", "content": "bob's"}]


def test_an_item_over_the_limit_is_refused_with_nothing_of_its_call_stored(tmp_path):
    limits = Limits(max_db_bytes=64 * 1024 * 1024)
    with MemkitSession("trip", tmp_path / "memory.sqlite3", user="alice", limits=limits) as session:
        fits = {"type": "function_call_output", "call_id": "c", "output": "y" * (MAX_ITEM_CHARS - 100)}
        too_big = {"type": "function_call_output", "call_id": "d", "output": "y" * MAX_ITEM_CHARS}
        run(session.add_items([fits]))
        with pytest.raises(ValidationError, match=r"item 2 is 1,000,0\d\d characters of JSON; .* up to 1,000,000"):
            run(session.add_items([ITEMS[0], too_big]))
        assert run(session.get_items()) == [fits]


def test_add_items_is_all_or_nothing(tmp_path):
    db = tmp_path / "memory.sqlite3"
    with MemkitSession("trip", db, user="alice") as session:
        run(session.add_items(ITEMS[:1]))
        with pytest.raises(ItemNotJSON, match="item 2 cannot be kept as JSON"):
            run(session.add_items([ITEMS[1], {"content": object()}, ITEMS[2]]))
        assert run(session.get_items()) == ITEMS[:1]
    # the store's size cap refuses a whole call, not the part of it past the cap
    small = Limits(max_db_bytes=256 * 1024)
    with MemkitSession("trip", db, user="alice", limits=small) as session:
        with pytest.raises(QuotaError, match="the cap is"):
            run(session.add_items([ITEMS[3]] * 6))
        assert run(session.get_items()) == ITEMS[:1]


def test_users_never_see_each_others_items_under_one_session_id(tmp_path):
    db = tmp_path / "memory.sqlite3"
    with MemoryStore(db) as store:
        alice, bob = (MemkitSession("trip", store, user=u) for u in ("alice", "bob"))
        run(alice.add_items(ITEMS[:2]))
        run(bob.add_items([{"role": "user", "content": "bob's secret"}]))
        assert run(alice.get_items()) == ITEMS[:2]
        assert run(bob.pop_item()) == {"role": "user", "content": "bob's secret"}
        assert run(bob.pop_item()) is None  # bob's pop never reaches alice's items
        run(bob.clear_session())
        assert run(alice.get_items()) == ITEMS[:2]
        run(MemkitSession("other", store, user="alice").clear_session())  # another session of hers
        assert run(alice.get_items()) == ITEMS[:2]
        alice.close()  # the store was given: the session leaves it open
        assert store.forget_user("alice")["transcript"] == 2  # the user's conversations, forgotten
        assert store.traces("alice") == {"records": 0, "events": 0, "transcript": 0, "proposals": 0}
        assert run(MemkitSession("trip", store, user="alice").get_items()) == []


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"session_id": "my\ttrip", "user": "alice"}, "session 'my\\\\ttrip' is not allowed"),
    ({"session_id": "trip", "user": ""}, "user is empty"),
    ({"session_id": "trip", "user": "alice "}, "spaces around it"),
    ({"session_id": "t" * 257, "user": "alice"}, "session is 257 characters"),
])
def test_bad_ids_are_refused_before_anything_is_stored(tmp_path, kwargs, says):
    with pytest.raises(ValidationError, match=says):
        MemkitSession(db_path=tmp_path / "memory.sqlite3", **kwargs)


CHILD = textwrap.dedent("""
    import asyncio, json, os, sys, time
    from agents import Agent, Runner
    from agents.testing import ScriptedModel, assistant_message
    from memkit.integrations.openai_agents import MemkitSession

    db, text = sys.argv[1], sys.argv[2]
    session = MemkitSession("trip", db, user="alice")
    model = ScriptedModel([[assistant_message("noted: " + text)]])
    result = asyncio.run(Runner.run(Agent(name="travel", model=model), text, session=session))
    seen = [i.get("content") for i in model.calls[-1].input]
    print(json.dumps({"answer": result.final_output, "model_saw": seen}), flush=True)
    time.sleep(60)  # killed here with SIGKILL: no close, no clean exit
""")


def test_the_conversation_survives_a_killed_process(tmp_path):
    db = str(tmp_path / "memory.sqlite3")
    seen = []
    for text in ("I like the window seat", "Which seat do I like?"):
        child = subprocess.Popen([sys.executable, "-c", CHILD, db, text], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            seen.append(json.loads(child.stdout.readline()))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
    # The second process's model received the first process's turn from the store.
    first = seen[1]["model_saw"]
    assert first[0] == "I like the window seat" and first[-1] == "Which seat do I like?"
    assert first[1][0]["text"] == "noted: I like the window seat"
    with MemkitSession("trip", db, user="alice") as session:
        assert len(run(session.get_items())) == 4


def test_an_agent_run_with_a_tool_keeps_every_item(tmp_path):
    def read_file(path: str) -> str:
        """Read a file."""
        return BIG_OUTPUT

    from agents import function_tool
    from agents.testing import assistant_message

    model = ScriptedModel([[function_call("read_file", {"path": "notes.txt"}, call_id="call_1")],
                           [assistant_message("Row 12")]])
    agent = Agent(name="reader", model=model, tools=[function_tool(read_file)])
    with MemkitSession("trip", tmp_path / "memory.sqlite3", user="alice") as session:
        result = run(Runner.run(agent, "Where do I sit?", session=session))
        assert result.final_output == "Row 12"
        items = run(session.get_items())
    kinds = [item.get("type", "message") for item in items]
    assert kinds == ["message", "function_call", "function_call_output", "message"]
    assert items[2]["output"] == BIG_OUTPUT


@pytest.mark.postgres
def test_a_postgresql_store_keeps_sessions_apart_per_user(pg_url):
    import uuid

    alice, bob = (f"agents-{u}-{uuid.uuid4().hex[:8]}" for u in ("alice", "bob"))
    with MemkitSession("trip", pg_url, user=alice) as session:
        run(session.add_items(ITEMS))
        assert run(session.get_items()) == ITEMS
    with MemkitSession("trip", pg_url, user=bob) as other:
        assert run(other.get_items()) == []
    with MemkitSession("trip", pg_url, user=alice) as again:  # a new connection: what was committed
        assert run(again.pop_item()) == ITEMS[-1]
        run(again.clear_session())
        assert run(again.get_items()) == []


@pytest.mark.postgres
def test_an_open_postgresql_store_is_used_as_it_is_and_left_open(pg_url):
    from memkit.store import PostgresStore

    with PostgresStore(pg_url, schema=f"t_{uuid.uuid4().hex[:16]}") as store:
        with MemkitSession("trip", store, user="alice") as session:  # a Store, not a path or a URL
            assert session.store is store
            run(session.add_items(ITEMS[:2]))
            assert run(session.get_items()) == ITEMS[:2]
        assert store.forget_user("alice")["transcript"] == 2  # the session left the given store open
