"""What a person is asked to confirm shows every character that is saved: hidden ones as escapes.

A value may hold characters that show nothing or move other text: line and paragraph separators
(U+2028/9) that start a new line inside a quoted value, a right-to-left override (U+202E), zero-width
spaces and joiners, variation selectors and tag characters that carry invisible text. Every text that
asks a person to confirm a value shows it through one of these functions, so a model cannot forge a
line of the question or hide a word. The value is saved exactly as given: escaping is for display.

Example:
    >>> visible("tea\\u2028now: nothing saved")
    'tea\\\\u2028now: nothing saved'
    >>> quoted("tea\\u200b")
    "'tea\\\\u200b'"
"""

from __future__ import annotations

import unicodedata

HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
"""Control, format, surrogate, private-use, unassigned, line and paragraph separators, and spaces
(the plain space U+0020 excepted: a no-break or thin space looks like it, or like nothing)."""

# Default-ignorable code points outside those categories (combining marks and letters that render as
# nothing: variation selectors, the grapheme joiner, Hangul fillers, Khmer and Mongolian invisibles),
# and the braille blank, which renders as a space.
_INVISIBLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0, *range(0x180B, 0x1810),
     *range(0xFE00, 0xFE10), *range(0xE0000, 0xE1000)]
)

_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def hidden(char: str) -> bool:
    """Whether one character would not show as itself (the plain space U+0020 shows)."""
    return char != " " and (unicodedata.category(char) in HIDDEN_CATEGORIES or ord(char) in _INVISIBLE)


def _escape(char: str) -> str:
    """`\\n`, `\\x85`, `\\u202e` or `\\U000e0041`: the escape Python itself would read back."""
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with each backslash doubled and each hidden character as its escape; the rest as it is.

    Every backslash shown starts an escape, so the shown text reads back to exactly one text (Python's
    `unicode_escape` reads it). Accents, CJK, emoji and plain spaces are left alone; a joiner or a
    variation selector inside an emoji sequence is shown as its escape, since it is saved too.
    """
    return "".join(_escape(char) if char == "\\" or hidden(char) else char for char in text)


def quoted(text: str) -> str:
    """`repr(text)`, with the hidden characters repr leaves as they are escaped too: a Python literal
    that reads back to exactly `text` (`ast.literal_eval`). What `'tea'`-style descriptions use."""
    return "".join(_escape(char) if hidden(char) else char for char in repr(text))


def visible_json(json_text: str) -> str:
    """JSON text as `json.dumps` wrote it, with every hidden character a `\\u` escape: the same data.

    `json.dumps(ensure_ascii=False)` escapes control characters but leaves U+2028, U+202E or U+200B
    as they are; `ensure_ascii=True` would escape every accent too. The line breaks of `indent` are
    the only raw control characters json.dumps writes, so they are kept.
    """
    out = []
    for char in json_text:
        if char == "\n" or not hidden(char):
            out.append(char)
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:  # JSON has no \U: a pair of surrogate escapes, as ensure_ascii writes them
            high, low = divmod(ord(char) - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}")
    return "".join(out)
