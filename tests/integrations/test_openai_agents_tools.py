"""`memory_tools`: memkit's tools in openai-agents, each write approved in the SDK's own interruption flow.

The agent is driven by openai-agents' real `Runner` against the kit's local chat-completions server
(tests/_model_server.py: a real HTTP endpoint answering from a script), so the tool calls, the
interruption, the approval or rejection and the resumed run are the SDK's own. A run resumed from a
serialized `RunState` runs in another process (`python -c CHILD`), as an application that asks the
person and carries on later does.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents", reason="the `agents` extra is not installed: pip install -e '.[agents]'")

from agents import Agent, FunctionTool, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

from memkit import MemoryStore, Store, open_store
from memkit.integrations.agents_tools import memory_tools

from _model_server import ChatServer

set_tracing_disabled(True)  # no trace export to OpenAI's servers from a test

USER = "alice@example.com"  # an application's own id, as MemkitSession takes it
TEA = {"kind": "preference", "key": "drink", "value": "tea"}


def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A model's chat-completions reply that calls one tool."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def agent_for(store: Store, server: ChatServer, user: str = USER) -> Agent[Any]:
    model = OpenAIChatCompletionsModel("scripted", AsyncOpenAI(base_url=server.url, api_key="test"))
    return Agent(name="helper", model=model, tools=memory_tools(store, user))


def tool_outputs(server: ChatServer) -> list[dict[str, Any]]:
    """What the model was told each tool call returned, in order, across every request it received."""
    seen: dict[str, dict[str, Any]] = {}
    for request in server.received:
        for message in request["body"]["messages"]:
            if message["role"] == "tool":
                seen.setdefault(json.dumps(message, sort_keys=True), json.loads(message["content"]))
    return list(seen.values())


@pytest.fixture
def store(tmp_path):
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        yield store


def test_the_tools_are_function_tools_and_only_the_changes_need_approval(store):
    from memkit.integrations import openai_agents

    assert openai_agents.memory_tools is memory_tools  # where MemkitSession users look for it
    tools = memory_tools(store, USER)
    assert all(isinstance(t, FunctionTool) for t in tools)
    assert {t.name: t.needs_approval for t in tools} == {
        "memory_get": False, "memory_search": False, "memory_put": True, "memory_delete": True}
    for tool in tools:  # memkit's closed schemas: no argument can name a user
        assert tool.params_json_schema["additionalProperties"] is False
        assert "user" not in tool.params_json_schema["properties"]


def test_an_approved_write_is_made_once_under_a_confirmation_named_for_its_call(store):
    server = ChatServer([tool_call("memory_put", TEA, "call_tea1"), said("Saved: you drink tea.")])
    agent = agent_for(store, server)

    async def body() -> None:
        first = await Runner.run(agent, "I drink tea; remember it")
        [item] = first.interruptions  # the SDK paused: a person must decide
        assert item.tool_name == "memory_put" and json.loads(item.raw_item.arguments) == TEA
        assert store.get(USER, "preference", "drink") is None  # nothing before the approval
        state = first.to_state()
        state.approve(item)
        resumed = await Runner.run(agent, state)
        assert resumed.final_output == "Saved: you drink tea." and not resumed.interruptions

    asyncio.run(body())
    assert store.get(USER, "preference", "drink")["value"] == "tea"
    [event] = store.history(USER, "preference", "drink")
    assert event["confirmation"] == "openai-agents-approval@call_tea1#1" and event["session"] == "openai-agents"
    [told] = tool_outputs(server)
    assert told["ok"] is True and told["result"]["revision"] == 1  # the model is told what was stored


def test_a_rejected_write_stores_nothing(store):
    server = ChatServer([tool_call("memory_put", TEA, "call_tea1"), said("I did not save it.")])
    agent = agent_for(store, server)

    async def body() -> None:
        first = await Runner.run(agent, "I drink tea; remember it")
        state = first.to_state()
        state.reject(first.interruptions[0], rejection_message="The person said no; nothing was saved.")
        resumed = await Runner.run(agent, state)
        assert resumed.final_output == "I did not save it."

    asyncio.run(body())
    assert store.get(USER, "preference", "drink") is None
    assert store.history(USER, "preference", "drink") == []
    assert store.traces(USER)["proposals"] == 0  # a "no" leaves no proposal behind either
    last = server.received[-1]["body"]["messages"][-1]
    assert last["role"] == "tool" and last["content"] == "The person said no; nothing was saved."


def test_an_approved_delete_is_made_once_and_named_in_the_history(store):
    store.put(USER, "cli", "preference", "drink", "tea", confirmation="cli#1")
    forget = {"kind": "preference", "key": "drink"}
    server = ChatServer([tool_call("memory_delete", forget, "call_del1"), said("Forgotten.")])
    agent = agent_for(store, server)

    async def body() -> None:
        first = await Runner.run(agent, "Forget what I drink")
        assert store.get(USER, "preference", "drink") is not None  # still there while the person decides
        state = first.to_state()
        state.approve(first.interruptions[0])
        await Runner.run(agent, state)

    asyncio.run(body())
    assert store.get(USER, "preference", "drink") is None
    assert [(e["action"], e["confirmation"]) for e in store.history(USER, "preference", "drink")] == [
        ("create", "cli#1"), ("delete", "openai-agents-approval@call_del1#1")]


def test_reads_need_no_approval_and_a_users_argument_is_refused(store):
    store.put(USER, "cli", "preference", "drink", "tea")
    store.put("bob", "cli", "preference", "drink", "rum")
    server = ChatServer([tool_call("memory_search", {"query": "", "user": "bob"}, "call_s1"),
                         tool_call("memory_get", {"kind": "preference", "key": "drink"}, "call_g1"),
                         said("You drink tea.")])
    agent = agent_for(store, server)
    result = asyncio.run(Runner.run(agent, "What do I drink?"))
    assert result.final_output == "You drink tea." and not result.interruptions
    refused, got = tool_outputs(server)
    assert refused["ok"] is False and "user" in refused["error"]  # the closed schema: no other user's data
    assert got == {"ok": True, "result": store.get(USER, "preference", "drink")}


def test_a_standing_approval_of_every_call_changes_nothing(store):
    server = ChatServer([tool_call("memory_put", TEA, "call_tea1"), said("Not saved.")])
    agent = agent_for(store, server)

    async def body() -> None:
        first = await Runner.run(agent, "I drink tea; remember it")
        state = first.to_state()
        state.approve(first.interruptions[0], always_approve=True)
        await Runner.run(agent, state)

    asyncio.run(body())
    assert store.get(USER, "preference", "drink") is None
    [told] = tool_outputs(server)
    assert told["ok"] is False and "always_approve" in told["error"]


# -- across processes -----------------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import asyncio, json, sys
    from agents import Agent, OpenAIChatCompletionsModel, Runner, RunState, set_tracing_disabled
    from openai import AsyncOpenAI
    from memkit import open_store
    from memkit.integrations.agents_tools import memory_tools

    db, url, state_file, user, approve_here = sys.argv[1:6]
    set_tracing_disabled(True)

    async def resume():
        with open_store(db) as store:
            model = OpenAIChatCompletionsModel("scripted", AsyncOpenAI(base_url=url, api_key="test"))
            agent = Agent(name="helper", model=model, tools=memory_tools(store, user))
            state = await RunState.from_string(agent, open(state_file).read())
            for item in state.get_interruptions() if approve_here == "yes" else []:
                state.approve(item)  # the person's "yes", given in this process
            result = await Runner.run(agent, state)
            print(json.dumps({"answer": result.final_output}))

    asyncio.run(resume())
""")


def resume_in_a_new_process(db: str, user: str, server: ChatServer, state_file: Path, approve_here: bool) -> str:
    done = subprocess.run([sys.executable, "-c", CHILD, db, server.url, str(state_file), user,
                           "yes" if approve_here else "no"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["answer"]


@pytest.mark.parametrize(("kind_of_store", "approved_before_saving"), [
    ("sqlite", False), ("sqlite", True), pytest.param("postgresql", False, marks=pytest.mark.postgres)])
def test_a_state_resumed_in_new_processes_applies_its_approval_exactly_once(tmp_path, request, kind_of_store,
                                                                           approved_before_saving):
    state_file, user = tmp_path / "paused-run.json", USER
    db = str(tmp_path / "memory.sqlite3")
    if kind_of_store == "postgresql":  # a server at MEMKIT_PG_URL keeps earlier runs' users
        db, user = request.getfixturevalue("pg_url"), f"{uuid.uuid4().hex[:8]}@example.com"
    server = ChatServer([tool_call("memory_put", TEA, "call_tea1"), said("Saved."), said("Saved, as before.")])
    with open_store(db) as store:
        first = asyncio.run(Runner.run(agent_for(store, server, user), "I drink tea; remember it"))
        assert [i.tool_name for i in first.interruptions] == ["memory_put"]
        state = first.to_state()
        if approved_before_saving:  # the person answered at once; a worker resumes the run later
            state.approve(first.interruptions[0])
        state_file.write_text(state.to_string())  # the application keeps the paused run
    assert resume_in_a_new_process(db, user, server, state_file, not approved_before_saving) == "Saved."
    with open_store(db) as store:
        assert store.get(user, "preference", "drink")["value"] == "tea"
        [event] = store.history(user, "preference", "drink")
        assert event["confirmation"] == "openai-agents-approval@call_tea1#1"
        # The person changes their mind by hand; then the same paused run is resumed again (a retried
        # request, a second worker): its approval is spent, so tea is not written back over coffee.
        store.put(user, "cli", "preference", "drink", "coffee", confirmation="cli#1")
    assert resume_in_a_new_process(db, user, server, state_file, not approved_before_saving) == "Saved, as before."
    with open_store(db) as store:
        assert store.get(user, "preference", "drink")["value"] == "coffee"
        assert [e["confirmation"] for e in store.history(user, "preference", "drink")] == [
            "openai-agents-approval@call_tea1#1", "cli#1"]
    again = tool_outputs(server)[-1]
    assert again["ok"] is True and "already carried out" in again["note"]
