"""The reliability lab: hostile tool calls round-trip or come back as errors.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import contextlib
import json

from hypothesis import given
from hypothesis import strategies as st

from _reliability import examples, hostile, json_wrong_types, keys, kinds, repeated, texts, values, wrong_types
from _store_helpers import snapshot
from memkit.approvals import Approvals
from memkit.jsonutil import canonical_json
from memkit.errors import MemkitError
from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.tools import MemoryTools


TOOL_NAMES = ["memory_get", "memory_search", "memory_put", "memory_delete"]
tool_names = st.one_of(st.sampled_from(TOOL_NAMES), st.sampled_from(TOOL_NAMES), texts)
tool_fields = st.sampled_from(["kind", "key", "value", "query", "limit", "user", "confirmation", "session"])
WELL_FORMED = {
    "memory_get": st.fixed_dictionaries({"kind": kinds, "key": keys}),
    "memory_search": st.fixed_dictionaries({"query": st.one_of(keys, values)},
                                           optional={"limit": st.integers(1, 50), "kind": kinds}),
    "memory_put": st.fixed_dictionaries({"kind": kinds, "key": st.one_of(keys, st.just("drink")), "value": values}),
    "memory_delete": st.fixed_dictionaries({"kind": kinds, "key": st.one_of(keys, st.just("drink"))}),
}
tool_arguments = st.one_of(
    st.fixed_dictionaries({"kind": kinds, "key": keys, "value": values}),
    st.fixed_dictionaries({"kind": kinds, "key": st.sampled_from(["drink", "food"]), "value": values}),
    st.fixed_dictionaries({"kind": hostile(kinds), "key": hostile(keys), "value": hostile(values)}),
    st.fixed_dictionaries({"query": st.one_of(keys, values)}, optional={"limit": st.integers(1, 50), "kind": kinds}),
    st.fixed_dictionaries({"query": hostile(values), "limit": hostile(st.integers(-1, 60))}),
    st.dictionaries(st.one_of(tool_fields, texts), st.one_of(texts, wrong_types, keys), max_size=5),
    st.builds(json.dumps, st.dictionaries(tool_fields, st.one_of(texts, json_wrong_types, keys), max_size=4)),
    st.sampled_from(["", " ", "{", "null", "[]", "1", '"x"', '{"kind": "preference", "key": "drink"}}',
                     '{"limit": 1e999}', '{"limit": NaN}',
                     '{"kind": "preference", "key": "drink", "value": "\\ud800"}']),
    st.builds(repeated, st.sampled_from(["[", "{\"a\":"]), st.sampled_from([10, 100_000])),
    st.builds(lambda digits: '{"query": "x", "limit": ' + digits + "}",
              st.builds(repeated, st.just("9"), st.just(5000))),
    texts,
)


def test_hostile_tool_calls_round_trip_or_come_back_as_errors(tmp_path, figures):
    store = MemoryStore(tmp_path / "tools.sqlite3", limits=Limits().replace(max_records_per_user=500))
    store.put("alice", "s1", "preference", "drink", "green tea")
    approvals = Approvals("widget", store.limits)
    tools = MemoryTools(store, "alice", "s1", approvals)
    tally = {"tool calls": 0, "ok": 0, "refused as an error outcome": 0, "exceptions": 0, "changed by a refusal": 0}

    @examples(150, 1500)
    @given(name=tool_names, data=st.data(), confirm=st.booleans())
    def one_call(name, data, confirm):
        well_formed = WELL_FORMED.get(name)
        arguments = data.draw(well_formed if well_formed is not None and data.draw(st.booleans()) else tool_arguments)
        if confirm and name == "memory_put" and isinstance(arguments, dict):
            with contextlib.suppress(MemkitError, TypeError):
                approvals.confirm_put(arguments.get("kind"), arguments.get("key"), arguments.get("value"))
        if confirm and name == "memory_delete" and isinstance(arguments, dict):
            with contextlib.suppress(MemkitError, TypeError):
                approvals.confirm_delete(arguments.get("kind"), arguments.get("key"))
        before = snapshot(store)
        tally["tool calls"] += 1
        try:
            outcome = tools.call(name, arguments)
        except BaseException:
            tally["exceptions"] += 1
            raise
        # Every outcome goes back to the model as JSON text; it must encode (a live model gets UTF-8).
        canonical_json(outcome).encode("utf-8")
        assert set(outcome) in ({"ok", "result"}, {"ok", "error"})
        if outcome["ok"]:
            tally["ok"] += 1
            if name == "memory_put":
                assert store.get("alice", arguments["kind"], arguments["key"])["value"] == arguments["value"]
            if name == "memory_delete":
                assert store.get("alice", arguments["kind"], arguments["key"]) is None
        else:
            tally["refused as an error outcome"] += 1
            assert isinstance(outcome["error"], str) and outcome["error"]
            tally["changed by a refusal"] += snapshot(store) != before
            assert snapshot(store) == before
        assert store.users().keys() <= {"alice"}  # no call reaches another user

    try:
        one_call()
    finally:
        store.close()
    figures("Hostile input: tool calls", **tally)
    assert tally["exceptions"] == tally["changed by a refusal"] == 0
