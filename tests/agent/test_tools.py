"""The memory tools: schema-checked arguments, bound user, confirmation-gated writes."""

from __future__ import annotations

import json

import pytest

from memkit import Approvals, MemoryTools


@pytest.fixture
def tools(store):
    deleted: list[tuple[str, str]] = []
    tools = MemoryTools(store, "alice", "s1", Approvals("test"),
                        on_delete=lambda kind, key: deleted.append((kind, key)))
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
        ("memory_put", '{"kind": "preference", "key": "k", "value": "' + "x" * 513 + '"}',
         "513 characters; it must be at most 512"),
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
    assert tools.call("memory_delete", {"kind": "preference", "key": "drink"}) == {
        "ok": True, "result": {"deleted": True}}
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


# -- unconfirmed="propose": a write or delete with no confirmation waits for a person -------------


@pytest.fixture
def proposing(store):
    deleted: list[tuple[str, str]] = []
    tools = MemoryTools(store, "alice", "s1", Approvals("test"), unconfirmed="propose",
                        on_delete=lambda kind, key: deleted.append((kind, key)))
    tools.deleted = deleted
    return tools


def test_an_unconfirmed_save_becomes_a_proposal_and_the_result_says_not_saved(proposing, store):
    outcome = proposing.call("memory_put", {"kind": "preference", "key": "city", "value": "Porto"})
    assert outcome["ok"] is True
    result = outcome["result"]
    assert result["status"] == "waiting_for_approval" and "revision" not in result and "saved" not in result
    assert result["message"].startswith(f"NOT saved: proposal {result['proposal']} (save preference city = 'Porto')")
    assert "do not say it was saved" in result["message"]
    assert store.get("alice", "preference", "city") is None
    [waiting] = store.proposals("alice")
    assert (waiting["id"], waiting["value"], waiting["session"]) == (result["proposal"], "Porto", "s1")
    again = proposing.call("memory_put", {"kind": "preference", "key": "city", "value": "Porto"})
    assert again["result"]["proposal"] == result["proposal"] and "already proposed" in again["result"]["message"]
    assert len(store.proposals("alice")) == 1


def test_an_unconfirmed_delete_becomes_a_proposal_and_deletes_nothing(proposing, store):
    store.put("alice", "s0", "preference", "drink", "tea")
    outcome = proposing.call("memory_delete", {"kind": "preference", "key": "drink"})
    assert outcome["ok"] is True and "deleted" not in outcome["result"]  # the agent loop reads `deleted`
    assert outcome["result"]["message"].startswith("NOT deleted:")
    assert store.get("alice", "preference", "drink")["value"] == "tea" and proposing.deleted == []
    assert store.proposals("alice")[0]["action"] == "delete"
    nothing = proposing.call("memory_delete", {"kind": "preference", "key": "city"})
    assert nothing["ok"] is False and "nothing to delete" in nothing["error"]


def test_a_waiting_confirmation_still_saves_at_once_and_a_mismatch_is_proposed(proposing, store):
    confirmation = proposing.approvals.confirm_put("preference", "city", "Porto")
    saved = proposing.call("memory_put", {"kind": "preference", "key": "city", "value": "Porto"})
    assert saved["result"]["revision"] == 1
    assert store.history("alice", "preference", "city")[0]["confirmation"] == confirmation.id
    assert store.proposals("alice") == []
    other = proposing.call("memory_put", {"kind": "preference", "key": "city", "value": "Lisbon"})
    assert other["result"]["status"] == "waiting_for_approval"  # the confirmation was for Porto, and is spent
    assert store.get("alice", "preference", "city")["value"] == "Porto"


def test_proposals_are_bounded_and_the_model_is_told_so(tmp_path):
    from memkit import Limits, MemoryStore

    with MemoryStore(tmp_path / "m.sqlite3", limits=Limits(max_pending_proposals_per_user=1)) as store:
        tools = MemoryTools(store, "alice", "s1", Approvals(), unconfirmed="propose")
        assert tools.call("memory_put", {"kind": "preference", "key": "a", "value": "1"})["ok"]
        outcome = tools.call("memory_put", {"kind": "preference", "key": "b", "value": "2"})
        assert outcome["ok"] is False and "waiting for a person" in outcome["error"]


def test_the_proposing_tools_tell_a_model_when_to_propose(proposing, tools):
    put = {s["function"]["name"]: s["function"]["description"] for s in proposing.schemas}["memory_put"]
    assert "lasting fact or preference" in put and "one-off instruction" in put and "waits for the person" in put
    assert {s["function"]["name"]: s["function"]["description"] for s in tools.schemas}["memory_put"] == (
        "Save a memory. Works only if the user confirmed exactly this value outside the chat.")
    with pytest.raises(Exception, match="unconfirmed is 'save'; use 'refuse' or 'propose'"):
        MemoryTools(tools.store, "alice", "s1", Approvals(), unconfirmed="save")  # type: ignore[arg-type]


def test_proposing_tools_never_write_memory_never_raise_and_stay_bounded(tmp_path_factory):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from memkit import Limits, MemoryStore

    arguments = st.fixed_dictionaries({}, optional={
        "kind": st.sampled_from(["preference", "episode", "secret", ""]),
        "key": st.sampled_from(["city", "name", "drink", "Bad", "", "a" * 70]),
        "value": st.one_of(st.sampled_from(["Porto", "tea", " ", "x" * 600]), st.text(max_size=12)),
        "user": st.just("bob")})
    calls = st.lists(st.tuples(st.sampled_from(["memory_put", "memory_delete"]), arguments), max_size=10)

    @settings(max_examples=120, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(calls=calls)
    def check(calls):
        path = tmp_path_factory.mktemp("fuzz") / "m.sqlite3"
        with MemoryStore(path, limits=Limits(max_pending_proposals_per_user=3)) as store:
            store.put("alice", "s0", "preference", "drink", "tea")
            memory = (store.export_user("alice"), store.export_user("bob"))
            tools = MemoryTools(store, "alice", "s1", Approvals(), unconfirmed="propose")
            for name, args in calls:
                outcome = tools.call(name, args)
                assert set(outcome) in ({"ok", "result"}, {"ok", "error"})
                if outcome["ok"]:
                    assert outcome["result"]["status"] == "waiting_for_approval"
                    assert outcome["result"]["message"].startswith("NOT ")
            assert (store.export_user("alice"), store.export_user("bob")) == memory  # memory untouched
            assert len(store.proposals("alice")) <= 3 and store.proposals("bob") == []

    check()


def test_tools_of_the_same_limits_share_their_validators_and_other_limits_get_their_own(tmp_path):
    from memkit import Limits, MemoryStore

    with MemoryStore(tmp_path / "a.sqlite3") as one, MemoryStore(tmp_path / "b.sqlite3") as two, \
            MemoryStore(tmp_path / "c.sqlite3", limits=Limits(max_value_chars=10)) as small:
        first, second = (MemoryTools(s, "alice", "s1", Approvals()).validators for s in (one, two))
        other = MemoryTools(small, "alice", "s1", Approvals()).validators
        assert all(first[name] is second[name] for name in first)
        assert other["memory_put"] is not first["memory_put"]
        refused = MemoryTools(small, "alice", "s1", Approvals(), unconfirmed="propose").call(
            "memory_put", {"kind": "preference", "key": "drink", "value": "x" * 11})
        assert refused["ok"] is False and "at most 10" in refused["error"]


def test_jsonschema_is_imported_without_the_iri_grammar_and_still_checks_iris():
    """memkit.validators defers the optional rfc3987_syntax package (seconds of lark grammars); the
    "iri" format checker stays registered and right, and a later import gets the real package."""
    import subprocess
    import sys

    probe = (
        "import importlib.util, sys\n"
        "from memkit.validators import import_jsonschema\n"
        "installed = importlib.util.find_spec('rfc3987_syntax') is not None\n"
        "checker = import_jsonschema().Draft202012Validator.FORMAT_CHECKER\n"
        "assert 'rfc3987_syntax' not in sys.modules and 'lark' not in sys.modules\n"
        "if installed:\n"
        "    assert checker.conforms('http://example.com/caf\\u00e9', 'iri')\n"
        "    assert not checker.conforms('not an iri', 'iri')\n"
        "    import rfc3987_syntax\n"
        "    assert rfc3987_syntax.__file__ and hasattr(rfc3987_syntax, 'RFC3987_SYNTAX_TERMS')\n"
        "print('ok', installed)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")
