"""Canonical JSON sizes, the bounded History, and the budget wrapper's trimming and refusal."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit import BudgetedModel, BudgetError, ScriptedModel
from memkit.jsonutil import canonical_json, json_chars
from memkit.limits import shorten
from memkit.models import say
from memkit.request import History, Request
from memkit.request import USER_ENVELOPE_NOTE
from memkit.models import call

TOOLS = [{"type": "function", "function": {"name": "memory_get", "parameters": {"type": "object"}}}]


def make_request(history=(), memory=(), exchanges=(), task="What do I like?"):
    return Request(system="You are helpful.", task=task, tools=TOOLS, memory=list(memory),
                   history=list(history), tool_rounds=[list(e) for e in exchanges],
                   packing=[{"kind": m["kind"], "key": m["key"], "matched_by": "t", "chars": json_chars(m),
                             "status": "included", "reason": ""} for m in memory])


def exchange(n, size=200):
    reply = call("memory_get", kind="preference", key=f"k{n}")
    tool = {"role": "tool", "tool_call_id": reply.tool_calls[0].id,
            "content": canonical_json({"ok": True, "result": "x" * size})}
    return [reply.as_message(), tool]


def test_canonical_json_counts_code_points_not_bytes():
    assert canonical_json({"b": 1, "a": "茶"}) == '{"a":"茶","b":1}'
    assert json_chars("茶") == 3


def test_shorten_marks_what_it_cut_and_respects_the_bound():
    text = shorten("x" * 5000, 1000)
    assert len(text) <= 1000 and "shortened" in text and text.startswith("x")
    assert shorten("short", 1000) == "short"


def turns_of(*exchanges):
    """Window turns (user, then assistant) for the given (user, assistant) text pairs."""
    turns = []
    for user_text, assistant_text in exchanges:
        turns += [{"role": "user", "content": user_text}, {"role": "assistant", "content": assistant_text}]
    return [{"turn": n, "at": "", **t} for n, t in enumerate(turns, start=1)]


def test_history_keeps_at_most_eight_exchanges_and_four_thousand_characters():
    history = History()
    view = history.view(turns_of(*[(f"question {n}", f"answer {n}") for n in range(20)]))
    assert len(view) == 8 and view[0]["user"] == "question 12"
    view = history.view(turns_of(*[(f"question {n}", f"answer {n}") for n in range(20)],
                                 *[("q" * 900, "a" * 900)] * 20))
    assert json_chars(view) <= 4000 and len(view) >= 1


def test_history_shortens_long_texts_with_a_marker():
    view = History().view(turns_of(("y" * 10_000, "ok")))
    assert len(view[0]["user"]) <= 1000 and "shortened" in view[0]["user"]


def test_history_leaves_out_a_question_with_no_reply_and_tool_turns():
    turns = turns_of(("first", "one"))
    turns += [{"turn": 3, "role": "user", "content": "never answered", "at": ""},
              {"turn": 4, "role": "tool", "content": "{}", "at": ""},
              *[{**t, "turn": t["turn"] + 4} for t in turns_of(("second", "two"))]]
    assert History().view(turns) == [{"user": "first", "assistant": "one"}, {"user": "second", "assistant": "two"}]


@settings(max_examples=60, deadline=None)
@given(
    history=st.lists(st.fixed_dictionaries({"user": st.text(max_size=50), "assistant": st.text(max_size=50)}),
                     max_size=5),
    values=st.lists(st.text(max_size=80), max_size=5),
    n_exchanges=st.integers(0, 3),
    task=st.text(max_size=100),
)
def test_measured_size_equals_the_canonical_json_of_the_real_request(history, values, n_exchanges, task):
    memory = [{"kind": "episode", "key": f"k{i}", "value": v} for i, v in enumerate(values)]
    request = make_request(history, memory, [exchange(i, 10) for i in range(n_exchanges)], task=task)
    total, parts = BudgetedModel(ScriptedModel([])).measure(request)
    assert total == json_chars({"messages": request.messages(), "tools": request.tools})
    assert sum(parts.values()) == total and min(parts.values()) >= 0
    # Memory and history count as they read inside the user message's JSON string.
    assert parts["memory"] == len(canonical_json(canonical_json(request.memory))) - 2
    assert parts["history"] == len(canonical_json(canonical_json(request.history))) - 2
    assert parts["tool_rounds"] == sum(json_chars(m) + 1 for e in request.tool_rounds for m in e)
    assert parts["system"] == json_chars(request.messages()[0]) and parts["tools"] == json_chars(request.tools)


@settings(max_examples=60, deadline=None)
@given(
    history=st.lists(st.fixed_dictionaries({"user": st.text(max_size=60), "assistant": st.text(max_size=60)}),
                     max_size=6),
    values=st.lists(st.text(max_size=80), max_size=6),
    n_exchanges=st.integers(1, 4),
    slack=st.integers(0, 1500),
)
def test_prepared_body_is_what_was_measured_and_trimming_stops_as_soon_as_it_fits(history, values, n_exchanges, slack):
    memory = [{"kind": "episode", "key": f"k{i}", "value": v} for i, v in enumerate(values)]
    request = make_request(history, memory, [exchange(i, 40) for i in range(n_exchanges)])
    before = {"history": list(request.history), "memory": list(request.memory), "exchanges": list(request.tool_rounds)}
    newest_alone = BudgetedModel(ScriptedModel([])).measure(make_request(exchanges=[request.tool_rounds[-1]]))[0]
    wrapper = BudgetedModel(ScriptedModel([]), budget_chars=newest_alone + slack)
    prepared = wrapper.prepare(request)
    measurement = prepared.measurement
    # The body is the canonical JSON of exactly the messages handed to the model, and its length is the total.
    assert prepared.body == canonical_json({"messages": prepared.messages, "tools": request.tools})
    assert measurement.total_chars == len(prepared.body) and sum(measurement.parts.values()) == len(prepared.body)
    assert measurement.sent and measurement.total_chars <= wrapper.budget_chars
    if measurement.trimmed:
        # Putting back the last thing trimmed would not fit: nothing was trimmed that did not have to be.
        part = measurement.trimmed[-1]["part"]
        restored = make_request(request.history, request.memory, request.tool_rounds)
        if part == "history":
            restored.history.insert(0, before["history"][len(before["history"]) - len(request.history) - 1])
        elif part == "memory":
            restored.memory.append(before["memory"][len(request.memory)])
        else:
            restored.tool_rounds.insert(0, before["exchanges"][len(before["exchanges"]) - len(request.tool_rounds) - 1])
        assert BudgetedModel(ScriptedModel([])).measure(restored)[0] > wrapper.budget_chars


def test_trimming_order_history_then_memory_then_old_exchanges():
    history = [{"user": f"old question {n}" + "h" * 300, "assistant": "a"} for n in range(4)]
    memory = [{"kind": "episode", "key": f"e{n}", "value": "m" * 300} for n in range(3)]
    request = make_request(history, memory, [exchange(n, 300) for n in range(3)])
    wrapper = BudgetedModel(ScriptedModel([]), budget_chars=1)
    full, _ = wrapper.measure(request)
    # A budget that forces every kind of trim but leaves room for the newest exchange.
    newest_only = make_request(exchanges=[exchange(9, 300)])
    wrapper.budget_chars = wrapper.measure(newest_only)[0] + 10
    measurement = wrapper.prepare(request).measurement
    parts = [t["part"] for t in measurement.trimmed]
    assert parts == ["history"] * 4 + ["memory"] * 3 + ["tool_rounds"] * 2
    assert measurement.sent and measurement.total_chars <= wrapper.budget_chars < full
    assert len(request.tool_rounds) == 1 and request.tool_rounds[0][0]["role"] == "assistant"
    assert [row["status"] for row in measurement.packing] == ["trimmed"] * 3
    # The next call of the same task no longer carries those records, and its report still says so.
    again = wrapper.prepare(request).measurement
    assert again.trimmed == [] and [row["status"] for row in again.packing] == ["trimmed"] * 3


def test_a_tool_result_never_travels_without_its_call():
    request = make_request(exchanges=[exchange(n, 500) for n in range(4)])
    wrapper = BudgetedModel(ScriptedModel([]), budget_chars=1800)
    wrapper.prepare(request)
    messages = request.messages()
    call_ids = {c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])}
    assert all(m["tool_call_id"] in call_ids for m in messages if m["role"] == "tool")


def test_refuses_before_calling_when_the_newest_exchange_cannot_fit():
    model = ScriptedModel([say("never sent")])
    wrapper = BudgetedModel(model, budget_chars=600)
    request = make_request(exchanges=[exchange(1, 2000)])
    with pytest.raises(BudgetError, match="model was not called"):
        asyncio.run(wrapper.complete(request))
    assert model.requests == []
    assert wrapper.measurements[-1].sent is False


def test_every_sent_request_fits_and_is_recorded():
    model = ScriptedModel([say("one"), say("two")])
    wrapper = BudgetedModel(model, budget_chars=16000)
    for _ in range(2):
        asyncio.run(wrapper.complete(make_request(history=[{"user": "q", "assistant": "a"}])))
    assert [m.call for m in wrapper.measurements] == [1, 2]
    for sent, measurement in zip(model.requests, wrapper.measurements, strict=True):
        assert json_chars(sent) == measurement.total_chars <= 16000
    assert wrapper.largest_request == max(m.total_chars for m in wrapper.measurements)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_sizes_must_be_positive_integers_not_silently_replaced(bad):
    from memkit import ValidationError

    with pytest.raises(ValidationError):
        BudgetedModel(ScriptedModel([]), budget_chars=bad)
    with pytest.raises(ValidationError):
        History(max_exchanges=bad)


@settings(max_examples=60, deadline=None)
@given(memory=st.lists(st.fixed_dictionaries({"kind": st.just("episode"), "key": st.text(max_size=5),
                                              "value": st.text(max_size=40)}), max_size=4),
       history=st.lists(st.fixed_dictionaries({"user": st.text(max_size=20), "assistant": st.text(max_size=20)}),
                        max_size=3),
       task=st.text(max_size=40))
def test_user_content_assembled_from_parts_is_the_canonical_json_of_the_envelope(memory, history, task):
    request = Request(system="s", task=task, tools=[], memory=memory, history=history)
    envelope = {"task": task, "retrieved_memory": memory, "recent_history": history, "note": USER_ENVELOPE_NOTE}
    assert request.user_content() == canonical_json(envelope)


def _reachable(root: object, depth: int = 6) -> list[object]:
    """Everything `root` keeps alive, `depth` references deep (gc's view of the object graph)."""
    import gc

    seen, frontier = {id(root): root}, [root]
    for _ in range(depth):
        found = []
        for obj in frontier:
            for ref in gc.get_referents(obj):
                if id(ref) not in seen and not isinstance(ref, type):  # classes reach everything
                    seen[id(ref)] = ref
                    found.append(ref)
        frontier = found
    return list(seen.values())


def test_a_measurement_keeps_its_part_sizes_not_the_sent_request():
    # Every measurement is kept for the model's life (`measurements`): one that held the request's
    # body, its messages and the tools' encoding would keep three copies of each request alive.
    wrapper = BudgetedModel(ScriptedModel([say("ok")]), budget_chars=100_000)
    memory = [{"kind": "preference", "key": f"k{n}", "value": "v" * 200} for n in range(20)]
    prepared = wrapper.prepare(make_request(memory=memory, exchanges=[exchange(1)]))
    kept = _reachable(prepared.measurement)
    assert not any(obj is prepared.body for obj in kept), "the measurement keeps the request body alive"
    assert not any(obj is prepared.messages for obj in kept), "the measurement keeps the messages alive"
    assert sum(prepared.measurement.parts.values()) == prepared.measurement.total_chars
