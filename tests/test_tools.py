"""The memory tools: schema-checked arguments, bound user, confirmation-gated writes."""

from __future__ import annotations

import json

import pytest

from memkit import Approvals, MemoryTools


@pytest.fixture
def tools(store):
    deleted: list[tuple[str, str]] = []
    tools = MemoryTools(store, "alice", "s1", Approvals("test"), on_delete=lambda kind, key: deleted.append((kind, key)))
    tools.deleted = deleted  # what the agent would be told, to retire the short-term window
    return tools


def test_outcomes_are_json_ready_dicts(tools):
    outcome = tools.call("memory_get", '{"kind": "preference", "key": "drink"}')
    assert outcome == {"ok": True, "result": None}
    json.dumps(outcome)


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("memory_get", '{"kind": "preference", "key": "drink", "user": "bob"}', "'user' was unexpected"),
        ("memory_get", '{"kind": "secret", "key": "drink"}', "is not one of"),
        ("memory_get", '{"kind": "preference"}', "'key' is a required property"),
        ("memory_get", '{"kind": "preference", "key": "Drink"}', "does not match"),
        ("memory_get", '{"kind": "preference", "key": "drink"', "not valid JSON"),
        ("memory_get", '["preference", "drink"]', "must be a JSON object"),
        ("memory_search", '{"query": "x", "limit": 500}', "maximum"),
        ("memory_search", '{"query": 5}', "is not of type 'string'"),
        ("memory_put", '{"kind": "preference", "key": "k", "value": "' + "x" * 513 + '"}', "513 characters; it must be at most 512"),
        ("memory_drop_table", "{}", "unknown tool"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_error(tools, store, name, arguments, message):
    before = store.export_user("alice")
    outcome = tools.call(name, arguments)
    assert outcome["ok"] is False and message in outcome["error"]
    assert store.export_user("alice") == before


def test_put_needs_a_confirmation_and_spends_it(tools, store):
    args = {"kind": "preference", "key": "drink", "value": "tea"}
    refused = tools.call("memory_put", args)
    assert refused["ok"] is False and "no confirmation" in refused["error"]
    assert store.get("alice", "preference", "drink") is None
    confirmation = tools.approvals.confirm_put("preference", "drink", "tea")
    saved = tools.call("memory_put", args)
    assert saved["ok"] and saved["result"]["revision"] == 1
    assert store.history("alice", "preference", "drink")[0]["confirmation"] == confirmation.id
    again = tools.call("memory_put", {**args, "value": "tea!"})
    assert again["ok"] is False


def test_the_tools_are_bound_to_their_user(tools, store):
    store.put("bob", "s9", "preference", "drink", "espresso")
    assert tools.call("memory_get", {"kind": "preference", "key": "drink"})["result"] is None
    assert tools.call("memory_search", {"query": "espresso"})["result"] == []


def test_a_confirmed_delete_tells_the_agent_to_retire_short_term_history(tools, store):
    store.put("alice", "s0", "preference", "drink", "tea")
    refused = tools.call("memory_delete", {"kind": "preference", "key": "drink"})
    assert refused["ok"] is False and tools.deleted == []
    tools.approvals.confirm_delete("preference", "drink")
    assert tools.call("memory_delete", {"kind": "preference", "key": "drink"}) == {"ok": True, "result": {"deleted": True}}
    assert tools.deleted == [("preference", "drink")] and store.get("alice", "preference", "drink") is None


def test_store_errors_come_back_as_outcomes_not_exceptions(tmp_path):
    from memkit import Limits, MemoryStore

    with MemoryStore(tmp_path / "m.sqlite3", limits=Limits().replace(max_records_per_user=1)) as store:
        tools = MemoryTools(store, "alice", "s1", Approvals())
        tools.approvals.confirm_put("preference", "a", "1")
        tools.approvals.confirm_put("preference", "b", "2")
        assert tools.call("memory_put", {"kind": "preference", "key": "a", "value": "1"})["ok"]
        outcome = tools.call("memory_put", {"kind": "preference", "key": "b", "value": "2"})
        assert outcome["ok"] is False and "quota" in outcome["error"]
        assert len(tools.approvals.pending) == 1  # a refused write does not spend its confirmation


def test_a_refusal_does_not_echo_a_huge_argument_back(tools):
    outcome = tools.call("memory_put", {"kind": "preference", "key": "k", "value": "x" * 5000})
    assert outcome["ok"] is False and "5000 characters" in outcome["error"] and len(outcome["error"]) < 200
