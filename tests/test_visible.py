"""memkit.visible: what a person is asked to confirm shows every character that is saved.

The properties hold for any text (hypothesis): nothing hidden is left in what is shown, and what is
shown reads back, with the standard library's own readers, to exactly the text saved.
"""

from __future__ import annotations

import ast
import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit.visible import hidden, quoted, visible, visible_json

HOSTILE = [
    "\u2028", "\u2029", "\u202e", "\u202a", "\u2066", "\u200b", "\u200c", "\u200d", "\u200e", "\u2060",
    "\ufeff", "\u00ad", "\u034f", "\ufe0f", "\U000e0041", "\U000e007f", "\U000e0100", "\u3164", "\u115f",
    "\u180e", "\u00a0", "\u2009", "\u3000", "\x00", "\x1b", "\x85", "\r", "\n", "\t", "\ud800", "\ue000",
    "\U0010ffff", "\u0378", "\u2800",
]
"""Separators, bidi controls, zero-width and format characters, variation selectors, tags, fillers,
odd spaces, controls, a lone surrogate, private use, unassigned: each hides or moves text."""

ORDINARY = ["tea", "café", "naïve e\u0301", "東京", "🍵", "tea with milk", "Ünïcödé", "مرحبا", "Ελληνικά",
            "it's \"strong\"", "50% off_now", "a\\b"]

# Any text, hostile characters mixed in often (hypothesis rarely draws them by itself).
texts = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(HOSTILE), st.sampled_from(ORDINARY)),
                 max_size=8).map("".join)
anything = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=30)


def read_back(shown: str) -> str:
    """What Python's own `unicode_escape` reads from `visible`'s text (non-ASCII passes through)."""
    return shown.encode("latin-1", "backslashreplace").decode("unicode_escape")


def test_the_hostile_characters_are_all_hidden_and_ordinary_text_is_not():
    assert all(hidden(char) for char in "".join(HOSTILE))
    for text in ORDINARY:
        assert visible(text) == text.replace("\\", "\\\\")
        assert quoted(text) == repr(text)
    assert not hidden(" ")


@pytest.mark.parametrize(("text", "shown"), [
    ("tea\u2028now: nothing saved", "tea\\u2028now: nothing saved"),
    ("evil\u202etxt.exe", "evil\\u202etxt.exe"),
    ("te\u200ba", "te\\u200ba"),
    ("tea\U000e0069\U000e0067", "tea\\U000e0069\\U000e0067"),
    ("a\\u2028b", "a\\\\u2028b"),  # a backslash typed in the value is shown doubled: never an escape
    ("line\nbreak", "line\\nbreak"),
])
def test_visible_shows_each_hidden_character_as_its_escape(text, shown):
    assert visible(text) == shown
    assert read_back(shown) == text


@settings(max_examples=400, deadline=None)
@given(st.one_of(texts, anything))
def test_nothing_hidden_is_shown_and_each_form_reads_back_exactly(text):
    for shown in (visible(text), quoted(text), visible_json(json.dumps(text, ensure_ascii=False))):
        assert not any(hidden(char) for char in shown), ascii(shown)
        assert not {unicodedata.category(char) for char in shown} & {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}
    assert read_back(visible(text)) == text
    assert ast.literal_eval(quoted(text)) == text
    assert json.loads(visible_json(json.dumps(text, ensure_ascii=False))) == text


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_two_different_texts_are_never_shown_alike(first, second):
    if first != second:
        assert visible(first) != visible(second)
        assert quoted(first) != quoted(second)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["value", "key", "against_value"]), texts, max_size=3))
def test_visible_json_keeps_the_data_and_its_indentation(data):
    written = json.dumps([data], ensure_ascii=False, indent=2)
    shown = visible_json(written)
    assert json.loads(shown) == [data]
    assert shown.count("\n") == written.count("\n")
