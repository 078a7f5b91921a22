"""The codec of tool results in the window: tagged JSON that brings each value back as it was."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit import codec
from memkit.errors import ValidationError


_scalars = (
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.decimals(allow_nan=False, allow_infinity=False)
    | st.binary(max_size=20)
    | st.datetimes(timezones=st.none() | st.just(dt.UTC) | st.just(dt.timezone(dt.timedelta(hours=-5))))
)
_keys = st.sampled_from(codec.TAGS) | st.text(max_size=10)
_values = st.recursive(
    _scalars | st.frozensets(st.integers() | st.text(max_size=5) | st.binary(max_size=5), max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_codec_round_trips_tagged_values(value):
    text = codec.dumps(value)
    assert codec.loads(text) == value
    assert codec.dumps(codec.loads(text)) == text  # canonical: one value, one text


@pytest.mark.parametrize("value, text", [
    (Decimal("9.990"), '{"$decimal":"9.990"}'),
    (dt.datetime(2026, 1, 1, 9, 30, tzinfo=dt.UTC), '{"$datetime":"2026-01-01T09:30:00+00:00"}'),
    (b"\x00\xff", '{"$bytes":"AP8="}'),
    ({"tea", "green"}, '{"$set":["green","tea"]}'),
    ({"$set": 1}, '{"$object":[["$set",1]]}'),
    ({"b": 1, "a": "é"}, '{"a":"é","b":1}'),
])
def test_codec_writes_the_documented_encoding(value, text):
    assert codec.dumps(value) == text
    assert codec.loads(text) == value


@pytest.mark.parametrize("value, words", [
    (float("nan"), "NaN"),
    ({"x": float("inf")}, "infinity"),
    (Decimal("NaN"), "finite"),
    ({1: "one"}, "int key"),
    (object(), "object"),
])
def test_codec_refuses_what_it_cannot_bring_back(value, words):
    with pytest.raises(ValidationError, match=words):
        codec.dumps(value)


def test_codec_reports_malformed_tags_and_text():
    with pytest.raises(ValidationError, match="decimal"):
        codec.loads('{"$decimal":"nine"}')
    with pytest.raises(ValidationError, match="not JSON"):
        codec.loads("{")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys | st.text(max_size=6), inner, max_size=4),
    max_leaves=15,
)


@settings(max_examples=300, deadline=None)
@given(_json, st.booleans(), st.booleans())
def test_decoding_without_the_tag_hook_gives_what_the_hook_gives(value, ascii_only, as_bytes):
    # Any JSON text, also one that spells a tag with an escape ("\u0024set"): loads takes the plain
    # path only when no key can be a tag, and must answer exactly as the tag-aware decoder does.
    import json

    text = json.dumps(value, ensure_ascii=ascii_only).replace("$", "\\u0024" if ascii_only else "$")
    raw = text.encode() if as_bytes else text
    try:
        expected = json.loads(raw, object_hook=codec._from_json)
    except ValidationError:
        with pytest.raises(ValidationError):
            codec.loads(raw)
        return
    assert codec.loads(raw) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(_values, max_size=12), st.booleans())
def test_decoding_many_texts_gives_what_decoding_each_gives(values, as_bytes):
    texts = [codec.dumps(value) for value in values]
    raw = [text.encode() for text in texts] if as_bytes else texts
    assert codec.loads_many(raw) == [codec.loads(text) for text in raw]


@pytest.mark.parametrize("as_bytes", [False, True])
@pytest.mark.parametrize("texts", [
    ['{"a":1}', '1,2'],              # joined, the second splits into two values: [{"a":1},1,2]
    ['[1', '2]', '3'],               # two texts merge into one value: [[1,2],3]
    ['{"a":1}', '{'],                # not JSON at all
])
def test_decoding_many_refuses_texts_that_do_not_split_back_into_as_many_values(texts, as_bytes):
    # Decoded one by one, each of these raises; joined into one array the first two would parse,
    # into more values or fewer than there are texts.
    with pytest.raises(ValidationError, match="not JSON"):
        codec.loads_many([text.encode() for text in texts] if as_bytes else texts)
