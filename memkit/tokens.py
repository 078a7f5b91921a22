"""Tokens: what a model really counts, next to the characters memkit budgets in (the `tokens` extra).

A model bills and limits in tokens, pieces of text from a byte-pair-encoding vocabulary; memkit
budgets in characters of canonical JSON, which anyone can recompute. This module counts tokens
offline with the real vocabularies of OpenAI's models (`o200k_base`, GPT-4o and later;
`cl100k_base`, GPT-4), shipped inside the `bpe-openai` wheel. It is imported when first used.

Example:
    >>> count_tokens("hello world")                     # doctest: +SKIP
    2
"""

from __future__ import annotations

import functools
import importlib
import warnings
from typing import TYPE_CHECKING, Any
from collections.abc import Sequence

from .errors import ValidationError, install_hint
from .jsonutil import canonical_json

if TYPE_CHECKING:
    from .request import Request

INSTALL_HINT = install_hint("tokens")
DEFAULT_ENCODING = "o200k_base"
ENCODINGS = ("o200k_base", "cl100k_base")
MAX_TEXT_CHARS = 999_999
"""The longest text counted in one piece (bpe-openai refuses a million characters or more)."""

SAMPLES: dict[str, str] = {
    "English": "I prefer green tea in the morning and a quiet hotel room near the station, "
               "away from the lift. Please remember that I am allergic to peanuts.",
    # Chinese is written with full-width punctuation: the sample counts tokens of real Chinese text.
    "Chinese": "我早上喜欢喝绿茶，也喜欢住在车站附近、远离电梯的安静酒店房间。请记住我对花生过敏。",  # noqa: RUF001
    "JSON": canonical_json([
        {"kind": "preference", "key": "drink.morning", "value": "green tea"},
        {"kind": "preference", "key": "hotel.room", "value": "quiet, near the station, away from the lift"},
        {"kind": "fact", "key": "allergy", "value": "peanuts"},
    ]),
}
"""The same preferences in English and in Chinese, and as the JSON records memkit stores and sends."""


def _bpe_openai() -> Any:
    try:
        return importlib.import_module("bpe_openai")
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError(f"counting tokens needs bpe-openai; install the tokens extra: {INSTALL_HINT}") from None


class Tokenizer:
    """Counts the tokens of a text with one real BPE vocabulary, offline.

    Special tokens such as `<|endoftext|>` are counted as the plain text they are: a request's
    data is never read as a control token.

    Raises:
        ValidationError: `encoding` is not one of `ENCODINGS`.
        ImportError: the `tokens` extra is not installed.

    Example:
        >>> tokenizer = Tokenizer("cl100k_base")     # doctest: +SKIP
        >>> tokenizer.encode("hello world")          # doctest: +SKIP
        [15339, 1917]
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        if encoding not in ENCODINGS:
            raise ValidationError(f"encoding is {encoding!r}; choose one of {', '.join(ENCODINGS)}")
        self.name = encoding
        with warnings.catch_warnings():
            # bpe-openai 0.1.4 reads its vocabulary with importlib.resources.open_binary, which
            # Python 3.11 and 3.12 call deprecated (3.13 keeps it): nothing a caller can act on.
            warnings.filterwarnings("ignore", "open_binary is deprecated", DeprecationWarning)
            self._encoding = _bpe_openai().get_encoding(encoding)

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r})"

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`."""
        if not isinstance(text, str):
            raise ValidationError(f"text is a {type(text).__name__}; tokens are counted in a str "
                                  "(use count_json for other values)")
        if len(text) > MAX_TEXT_CHARS:
            raise ValidationError(f"text is {len(text)} characters; the tokenizer takes at most "
                                  f"{MAX_TEXT_CHARS} at once: count it in parts")
        tokens: list[int] = self._encoding.encode_ordinary(text)
        return tokens

    def decode(self, tokens: Sequence[int]) -> str:
        """The text of token ids (the inverse of `encode`)."""
        text: str = self._encoding.decode(list(tokens))
        return text

    def count(self, text: str) -> int:
        """The number of tokens of `text`."""
        return len(self.encode(text))

    def count_json(self, obj: Any) -> int:
        """The number of tokens of `obj`'s canonical JSON (the form memkit measures and sends)."""
        return self.count(canonical_json(obj))


@functools.cache
def get_tokenizer(encoding: str = DEFAULT_ENCODING) -> Tokenizer:
    """The shared `Tokenizer` of an encoding (loading a vocabulary takes a fraction of a second)."""
    return Tokenizer(encoding)


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """The number of tokens of `text` in `encoding`."""
    return get_tokenizer(encoding).count(text)


def request_json(request: Request) -> str:
    """A request's canonical JSON, `{"messages": ..., "tools": ...}`: what the budget wrapper measures."""
    return request.encode().body


def request_tokens(request: Request, encoding: str = DEFAULT_ENCODING) -> int:
    """The number of tokens of a request's canonical JSON (see `request_json`)."""
    return count_tokens(request_json(request), encoding)


def chars_per_token() -> list[dict[str, Any]]:
    """Rows for a table: `sample`, `encoding`, `chars`, `tokens` and `chars_per_token` (two decimals)
    of each of `SAMPLES` in both `ENCODINGS`."""
    rows = []
    for name, text in SAMPLES.items():
        for encoding in ENCODINGS:
            tokens = count_tokens(text, encoding)
            rows.append({"sample": name, "encoding": encoding, "chars": len(text), "tokens": tokens,
                         "chars_per_token": round(len(text) / tokens, 2) if tokens else 0.0})
    return rows
