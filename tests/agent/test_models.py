"""The live model against a real local HTTP server speaking chat completions; never a silent fixture."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from memkit import Approvals, BudgetedModel, MemoryAgent, ModelError, OpenAIModel
from memkit.jsonutil import canonical_json
from memkit.request import Request

from _model_server import ChatServer


@pytest.fixture
def chat_server():
    servers = []

    def start(replies, status=200):
        servers.append(ChatServer(replies, status))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def tool_call_message(name, arguments):
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def test_live_model_runs_the_tool_loop_over_http(store, chat_server):
    server = chat_server([
        tool_call_message("memory_put", {"kind": "preference", "key": "drink", "value": "tea"}),
        {"role": "assistant", "content": "Saved your drink."},
    ])
    approvals = Approvals()
    approvals.confirm_put("preference", "drink", "tea")

    async def scenario():
        model = OpenAIModel("test-model", api_key="sk-test-not-real", base_url=server.url)
        try:
            reply = await MemoryAgent(store, "alice", "s1", model, approvals=approvals).ask("remember my drink is tea")
        finally:
            await model.aclose()
        return model, reply

    model, reply = asyncio.run(scenario())
    assert reply.text == "Saved your drink." and model.closed
    assert store.get("alice", "preference", "drink")["value"] == "tea"
    first, second = server.received
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test-not-real"
    assert [t["function"]["name"] for t in first["body"]["tools"]] == [
        "memory_get", "memory_search", "memory_put", "memory_delete"]
    assert second["body"]["messages"][-1]["role"] == "tool"
    assert json.loads(second["body"]["messages"][-1]["content"])["ok"] is True


def test_the_live_model_sends_exactly_the_bytes_the_budget_wrapper_measured(store, chat_server):
    server = chat_server([{"role": "assistant", "content": "Noted."}, {"role": "assistant", "content": "Hi."}])
    tools = [{"type": "function", "function": {"name": "memory_get", "parameters": {"type": "object"}}}]
    request = Request(system="Be brief.", task='Say "hi" to Zoë \\ and 茶\n', tools=tools,
                      memory=[{"kind": "preference", "key": "drink", "value": 'green "sencha" tea'}],
                      history=[{"user": "earlier", "assistant": "yes"}])

    async def scenario():
        async with OpenAIModel("test-model", api_key="k", base_url=server.url) as model:
            wrapper = BudgetedModel(model, budget_chars=4000)
            first = await wrapper.complete(request)
            # No tools: endpoints refuse an empty list, so the key is left out of what is sent.
            bare = Request(system="Be brief.", task="hi", tools=[])
            second = await wrapper.complete(bare)
        return wrapper, first, second, bare

    wrapper, first, second, bare = asyncio.run(scenario())
    assert (first.content, second.content) == ("Noted.", "Hi.")
    sent, plain = server.received
    measured = wrapper.measurements[0]
    expected = canonical_json({"messages": request.messages(), "tools": tools})
    assert sent["raw"] == ('{"model":"test-model",' + expected[1:]).encode("utf-8")
    assert measured.total_chars == len(expected) == len(sent["raw"].decode("utf-8")) - len('"model":"test-model",')
    assert sent["content_type"] == "application/json"
    bare_json = canonical_json({"messages": bare.messages(), "tools": []})
    assert wrapper.measurements[1].total_chars == len(bare_json)
    assert plain["raw"] == ('{"model":"test-model",' + bare_json[1:-len(',"tools":[]}')] + "}").encode("utf-8")
    assert "tools" not in plain["body"]


def test_a_reply_with_a_lone_surrogate_cannot_be_sent_back_and_says_so(store, chat_server):
    # JSON may escape a lone surrogate ("\\ud800"); such text has no UTF-8 form, so the next request
    # cannot be sent. It is a ModelError naming the problem, not an encoder traceback.
    server = chat_server([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "memory_get", "arguments": '{"key": "\ud800"}'}}]}])

    async def scenario():
        async with OpenAIModel("m", api_key="k", base_url=server.url) as model:
            with pytest.raises(ModelError, match="not valid Unicode"):
                await MemoryAgent(store, "alice", "s1", model).ask("what do I drink?")

    asyncio.run(scenario())
    assert len(server.received) == 1 and store.records("alice") == []


def test_a_failing_endpoint_is_a_model_error_and_the_client_still_closes(store, chat_server):
    server = chat_server([], status=500)

    async def scenario():
        async with OpenAIModel("m", api_key="k", base_url=server.url) as model:
            with pytest.raises(ModelError, match="live model call failed"):
                await MemoryAgent(store, "alice", "s1", model).ask("hi")
        return model

    assert asyncio.run(scenario()).closed


def test_missing_credentials_fail_clearly(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        OpenAIModel("m")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(ModelError, match="OPENAI_MODEL"):
        OpenAIModel()


def test_cli_live_without_credentials_never_falls_back_to_the_fixture(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(tmp_path / "m.sqlite3"),
                           "--user", "alice", "--live", "--message", "hi"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and "OPENAI_API_KEY" in done.stderr and done.stdout == ""
    assert not (tmp_path / "m.sqlite3").exists()  # it failed before creating anything


def test_cli_live_talks_to_the_configured_endpoint(tmp_path, chat_server):
    server = chat_server([{"role": "assistant", "content": "Hello from the live path."},
                          {"role": "assistant", "content": "Still here."}])
    env = {**__import__("os").environ, "OPENAI_API_KEY": "sk-test-not-real", "OPENAI_MODEL": "test-model",
           "OPENAI_BASE_URL": server.url}
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(tmp_path / "m.sqlite3"),
                           "--user", "alice", "--live", "--message", "hi", "--message", "again"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert output["model"] == "live"
    assert [t["reply"] for t in output["turns"]] == ["Hello from the live path.", "Still here."]
    assert [r["body"]["model"] for r in server.received] == ["test-model", "test-model"]


# -- the fixture model: what a student will type, and the tool call it proposes -------------------

PUT, DELETE = "memory_put", "memory_delete"
PHRASINGS = [
    # what the person says -> the tool call the fixture proposes (None: nothing to remember)
    ("My city is Lisbon", (PUT, "preference", "city", "Lisbon")),
    ("my city is Lisbon.", (PUT, "preference", "city", "Lisbon")),
    ("I live in Lisbon", (PUT, "preference", "city", "Lisbon")),
    ("I live in Lisbon now", (PUT, "preference", "city", "Lisbon")),
    ("I moved to Porto", (PUT, "preference", "city", "Porto")),
    ("I've moved to Porto!", (PUT, "preference", "city", "Porto")),
    ("I'm vegetarian", (PUT, "preference", "diet", "vegetarian")),
    ("I am a vegan", (PUT, "preference", "diet", "vegan")),
    ("I'm allergic to peanuts", (PUT, "preference", "allergy", "peanuts")),
    ("call me Sam", (PUT, "preference", "name", "Sam")),
    ("Please call me Sam.", (PUT, "preference", "name", "Sam")),
    ("My name is Sam", (PUT, "preference", "name", "Sam")),
    ("My favourite drink is green tea", (PUT, "preference", "drink", "green tea")),
    ("Remember my drink is green tea", (PUT, "preference", "drink", "green tea")),
    ("remember that my pin is 4321", (PUT, "preference", "pin", "4321")),
    ("Remember that I live in Lisbon", (PUT, "preference", "city", "Lisbon")),
    ("Remember that the dentist moved to Friday",
     (PUT, "episode", "note.dentist-moved-friday", "The dentist moved to Friday")),
    ("Note episode trip.lisbon: walked up to the castle",
     (PUT, "episode", "trip.lisbon", "walked up to the castle")),
    ("forget my city", (DELETE, "preference", "city", None)),
    ("Forget where I live.", (DELETE, "preference", "city", None)),
    ("forget my drink please", (DELETE, "preference", "drink", None)),
    ("forget episode trip.lisbon", (DELETE, "episode", "trip.lisbon", None)),
    # one-off instructions, questions and conversation facts: nothing to remember
    ("answer in French this time", None),
    ("Answer in French, just this once", None),
    ("I'm in Lisbon this week", None),
    ("My ticket number is T-4471", None),
    ("Which city do I live in?", None),
    ("Do I live in Lisbon?", None),
    ("What is my city?", None),
    ("Plan a tea stop on my next trip to Lisbon", None),
]


@pytest.mark.parametrize(("said", "expected"), PHRASINGS, ids=[p[0] for p in PHRASINGS])
def test_the_fixture_proposes_the_tool_call_a_person_means(said, expected):
    from memkit.models import propose

    proposed = propose(said)
    if expected is None:
        assert proposed is None
        return
    tool, kind, key, value = expected
    arguments = {"kind": kind, "key": key, **({"value": value} if value is not None else {})}
    assert proposed == (tool, arguments)


@pytest.mark.parametrize("said", ["My city is Lisbon", "I live in Lisbon", "Remember that I live in Lisbon"])
def test_a_plain_statement_with_the_right_confirmation_is_saved_and_without_it_is_not(store, said):
    from memkit import FixtureModel

    approvals = Approvals()
    approvals.confirm_put("preference", "city", "Lisbon")
    model = FixtureModel()
    reply = asyncio.run(MemoryAgent(store, "alice", "s1", model, approvals=approvals).ask(said))
    assert reply.text == "Saved preference city = Lisbon (revision 1)."
    assert store.history("alice", "preference", "city")[-1]["confirmation"] == "confirm#1"
    refused = asyncio.run(MemoryAgent(store, "bob", "s1", FixtureModel()).ask(said))
    assert refused.text.startswith("I could not do that: no confirmation to save preference 'city' = 'Lisbon'")
    assert store.get("bob", "preference", "city") is None


def test_a_one_off_instruction_calls_no_tool_and_says_so(store):
    from memkit import FixtureModel

    model = FixtureModel()
    reply = asyncio.run(MemoryAgent(store, "alice", "s1", model).ask("Answer in French this time"))
    assert reply.tool_results == [] and reply.text == "Understood, for this time only: nothing to remember."
    assert store.records("alice") == []


def test_the_fixture_says_a_proposal_waits_for_the_person_never_that_it_was_saved(tmp_path):
    from memkit import FixtureModel, MemoryStore

    with MemoryStore(tmp_path / "m.sqlite3") as store:
        agent = MemoryAgent(store, "ann", "s1", FixtureModel(), unconfirmed="propose")
        reply = asyncio.run(agent.ask("I live in Lisbon"))
        assert store.get("ann", "preference", "city") is None and len(store.proposals("ann")) == 1
    assert "waits for your approval" in reply.text and "Saved" not in reply.text
    assert "city" in reply.text and "Lisbon" in reply.text
