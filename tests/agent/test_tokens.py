"""Token counts with the real o200k_base and cl100k_base vocabularies (offline), and the wrapper's token budget."""

from __future__ import annotations

import asyncio
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit import BudgetedModel, BudgetError, ScriptedModel, ValidationError
from memkit.jsonutil import canonical_json
from memkit.models import say
from memkit.request import Request
from memkit.tokens import (ENCODINGS, MAX_TEXT_CHARS, SAMPLES, Tokenizer, chars_per_token, count_tokens,
                           get_tokenizer, request_json, request_tokens)

TOOLS = [{"type": "function", "function": {"name": "memory_get", "parameters": {"type": "object"}}}]
CHINESE = "我早上喜欢喝绿茶，住在车站附近安静的酒店。"  # noqa: RUF001 -- Chinese text uses the full-width comma
ENGLISH = "In the morning I like green tea, and a quiet hotel near the station."


def make_request(history=(), task="What do I like?"):
    return Request(system="You are helpful.", task=task, tools=TOOLS, history=list(history))


@pytest.mark.parametrize("encoding, text, ids", [
    # The ids tiktoken gives with the same vocabularies (its README's own example text).
    ("cl100k_base", "hello world", [15339, 1917]),
    ("o200k_base", "hello world", [24912, 2375]),
])
def test_known_strings_encode_to_the_vocabulary_ids(encoding, text, ids):
    tokenizer = get_tokenizer(encoding)
    assert tokenizer.encode(text) == ids
    assert tokenizer.decode(ids) == text and tokenizer.count(text) == 2


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=200), encoding=st.sampled_from(ENCODINGS))
def test_encoding_round_trips_any_text(text, encoding):
    tokenizer = get_tokenizer(encoding)
    tokens = tokenizer.encode(text)
    assert tokenizer.decode(tokens) == text
    assert len(tokens) <= len(text.encode("utf-8"))  # a token covers at least one byte
    assert (len(tokens) == 0) == (text == "")


def test_special_tokens_in_data_are_counted_as_plain_text():
    tokenizer = get_tokenizer()
    tokens = tokenizer.encode("<|endoftext|>")
    assert len(tokens) > 1 and tokenizer.decode(tokens) == "<|endoftext|>"


def test_json_counts_are_the_tokens_of_canonical_json():
    value = {"b": [1, 2], "a": "茶 tea"}
    assert (get_tokenizer().count_json(value) == count_tokens(canonical_json(value))
            == count_tokens('{"a":"茶 tea","b":[1,2]}'))


def test_chinese_takes_fewer_characters_per_token_than_english_and_json():
    rows = {(row["sample"], row["encoding"]): row for row in chars_per_token()}
    assert {sample for sample, _ in rows} == set(SAMPLES) and {enc for _, enc in rows} == set(ENCODINGS)
    for encoding in ENCODINGS:
        english, chinese, json_ = (rows[(name, encoding)] for name in ("English", "Chinese", "JSON"))
        assert chinese["chars_per_token"] < json_["chars_per_token"] < english["chars_per_token"]
        assert english["chars"] == len(SAMPLES["English"])
        assert english["tokens"] == count_tokens(SAMPLES["English"], encoding)
    # o200k_base's larger vocabulary holds more Chinese: fewer tokens for the same text.
    assert rows[("Chinese", "o200k_base")]["tokens"] < rows[("Chinese", "cl100k_base")]["tokens"]


def test_the_request_counted_is_the_json_the_wrapper_sends():
    request = make_request(history=[{"user": CHINESE, "assistant": ENGLISH}])
    wrapper = BudgetedModel(ScriptedModel([]), tokenizer="cl100k_base")
    prepared = wrapper.prepare(request)
    assert request_json(request) == prepared.body
    assert (prepared.measurement.tokens == request_tokens(request, "cl100k_base")
            == count_tokens(prepared.body, "cl100k_base"))
    # A tokenizer alone counts; it sets no token budget.
    assert prepared.measurement.budget_tokens is None and prepared.measurement.sent
    assert prepared.measurement.row()["tokens"] == prepared.measurement.tokens


def test_by_default_the_wrapper_counts_characters_only():
    wrapper = BudgetedModel(ScriptedModel([]))
    measurement = wrapper.prepare(make_request()).measurement
    assert wrapper.tokenizer is None and measurement.tokens is None and "tokens" not in measurement.row()


def test_refuses_a_request_over_the_token_budget_before_calling_the_model():
    model = ScriptedModel([say("never sent")])
    request = make_request(task=CHINESE * 4)
    needed = request_tokens(request)
    wrapper = BudgetedModel(model, budget_chars=16000, budget_tokens=needed - 1)
    assert wrapper.measure(request)[0] < 16000  # the characters fit: only the tokens are over
    with pytest.raises(BudgetError, match=f"needs {needed} tokens .* token budget is {needed - 1}"):
        asyncio.run(wrapper.complete(request))
    assert model.requests == [] and wrapper.measurements[-1].sent is False
    assert wrapper.measurements[-1].tokens == needed


def test_a_request_at_the_token_budget_is_sent_as_measured():
    model = ScriptedModel([say("ok")])
    request = make_request(task=CHINESE)
    wrapper = BudgetedModel(model, budget_tokens=request_tokens(request))
    asyncio.run(wrapper.complete(request))
    assert len(model.requests) == 1 and wrapper.measurements[-1].sent
    assert count_tokens(canonical_json(model.requests[0])) == wrapper.measurements[-1].tokens


def test_token_budget_trims_chinese_history_that_fits_the_character_budget():
    history = [{"user": f"{n} {CHINESE}", "assistant": ENGLISH} for n in range(6)]
    request = make_request(history=history)
    full_chars, full_tokens = BudgetedModel(ScriptedModel([])).measure(request)[0], request_tokens(request)
    budget = request_tokens(make_request(history=history[-2:]))  # room for the two newest exchanges
    wrapper = BudgetedModel(ScriptedModel([]), budget_chars=full_chars, budget_tokens=budget)
    measurement = wrapper.prepare(request).measurement
    assert measurement.sent and measurement.tokens is not None and measurement.tokens <= budget < full_tokens
    assert [t["part"] for t in measurement.trimmed] == ["history"] * 4
    assert all(t["reason"] == "oldest history exchange, request over token budget" for t in measurement.trimmed)
    assert request.history == history[-2:]
    # Nothing was trimmed that did not have to be: with the last trimmed exchange back it is over.
    assert request_tokens(make_request(history=history[-3:])) > budget


def test_the_character_budget_still_holds_beside_a_token_budget():
    history = [{"user": "x" * 300, "assistant": "y"} for _ in range(4)]
    request = make_request(history=history)
    chars_budget = BudgetedModel(ScriptedModel([])).measure(make_request(history=history[-1:]))[0]
    wrapper = BudgetedModel(ScriptedModel([]), budget_chars=chars_budget, budget_tokens=100_000)
    measurement = wrapper.prepare(request).measurement
    assert measurement.sent and measurement.total_chars <= chars_budget and len(request.history) == 1
    assert all(t["reason"] == "oldest history exchange, request over budget" for t in measurement.trimmed)


@pytest.mark.parametrize("bad", [0, -3, 1.5, True])
def test_a_token_budget_must_be_a_positive_integer(bad):
    with pytest.raises(ValidationError, match="budget_tokens"):
        BudgetedModel(ScriptedModel([]), budget_tokens=bad)


def test_bad_input_is_refused_with_the_value_and_the_remedy():
    with pytest.raises(ValidationError, match=r"'p50k_base'.*o200k_base, cl100k_base"):
        Tokenizer("p50k_base")
    with pytest.raises(ValidationError, match=r"a bytes.*count_json"):
        get_tokenizer().count(b"hello")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=f"{MAX_TEXT_CHARS + 1} characters.*in parts"):
        get_tokenizer().count("a" * (MAX_TEXT_CHARS + 1))


def test_without_the_extra_the_error_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # what an environment without it imports
    with pytest.raises(ImportError, match=r"pip install -e '\.\[tokens\]'"):
        Tokenizer()
