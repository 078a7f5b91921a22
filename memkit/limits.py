"""Every teaching constant of the kit in one value, so a lesson can point at it and a store can raise it."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from typing import Any

from .errors import ValidationError
from .limit_ranges import check_range

KINDS = ("preference", "episode")
"""The two kinds of long-term memory: stable facts about the user, and things that happened."""

_ID_REFUSED = {"Cc": "control", "Cf": "invisible", "Cs": "surrogate", "Zl": "line-break", "Zp": "line-break"}
_KEY_RE = re.compile(r"[a-z][a-z0-9_.:-]*")
KEY_PATTERN = _KEY_RE.pattern
"""What a memory key looks like (the tool schemas use it too, so the two cannot drift apart)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """The bounds memkit enforces: teaching defaults, each raised per store within its range (limit_ranges.py).

    Example:
        >>> Limits().max_records_per_user
        64
        >>> Limits().replace(max_records_total=200_000).max_records_total
        200000
    """

    # Long-term store.
    max_value_chars: int = 512
    max_key_chars: int = 64
    max_id_chars: int = 256
    max_records_per_user: int = 64
    max_records_total: int = 1024
    max_db_bytes: int = 16 * 1024 * 1024
    # Per user, so one user cannot fill the size cap and starve the others: a write past one removes that user's
    # oldest history events (never a held key's newest), archived turns or agent session items, in its transaction.
    max_events_per_user: int = 256
    max_archived_turns_per_user: int = 64
    max_agent_item_chars_per_user: int = 1_000_000
    max_query_chars: int = 256
    max_search_limit: int = 50
    busy_timeout_ms: int = 5000
    # Proposals: saves and deletes the model proposed, waiting for a person (memkit.store.proposals).
    max_pending_proposals_per_user: int = 16
    proposal_ttl_seconds: int = 7 * 24 * 3600
    # Retrieval: what is offered to the model for one task.
    retrieval_max_preferences: int = 5
    retrieval_max_terms: int = 8
    retrieval_max_episodes: int = 8
    retrieval_budget_chars: int = 2200
    # Short-term history inside the prompt.
    history_max_exchanges: int = 8
    history_max_chars: int = 4000
    history_max_text_chars: int = 1000
    # The whole model request (messages + tool schemas, canonical JSON).
    request_budget_chars: int = 16000

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            check_range(f"Limits.{field.name}", getattr(self, field.name))

    def replace(self, **changes: Any) -> Limits:
        """A copy with some limits changed."""
        return dataclasses.replace(self, **changes)

    @property
    def window_turns(self) -> int:
        """How many recent turns a window keeps so a request's history can be full (`turns_for`)."""
        return turns_for(self.history_max_exchanges)

    # -- validation of the values that name and carry memories ---------------------------------

    def check_id(self, what: str, value: object) -> str:
        """Check a user or session id: 1 to `max_id_chars` characters of visible text; data, never a path."""
        if not isinstance(value, str):
            raise ValidationError(f"{what} must be a string, not {type(value).__name__}")
        if not value.strip() or len(value) > self.max_id_chars:
            size = f"{len(value)} characters" if value.strip() else "blank" if value else "empty"
            raise ValidationError(f"{what} is {size}; ids are 1 to {self.max_id_chars} characters of visible text")
        bad = next((char for char in value if unicodedata.category(char) in _ID_REFUSED), None)
        if bad or value != value.strip():
            why = f"{_ID_REFUSED[unicodedata.category(bad)]} character U+{ord(bad):04X}" if bad else "spaces around it"
            raise ValidationError(f"{what} {value!r} is not allowed ({why}); give visible text, e.g. 'auth0|123'")
        return value

    def check_kind(self, kind: object) -> str:
        """Check a kind: `preference` or `episode`."""
        if kind not in KINDS:
            raise ValidationError(f"kind {kind!r} is unknown; use one of {', '.join(KINDS)}")
        return kind  # type: ignore[return-value]

    def check_key(self, key: object) -> str:
        """Check a memory key: 1 to `max_key_chars` of `[a-z][a-z0-9_.:-]`."""
        if not isinstance(key, str):
            raise ValidationError(f"key must be a string, not {type(key).__name__}")
        if not key:
            raise ValidationError(f"key is empty; keys are 1-{self.max_key_chars} characters")
        if len(key) > self.max_key_chars:
            raise ValidationError(f"key {key[:20]!r}... is {len(key)} characters; "
                                  f"keys are at most {self.max_key_chars}")
        if not _KEY_RE.fullmatch(key):
            raise ValidationError(f"key {key!r} is not allowed; use lower-case letters, digits, '_', '.', ':', '-' "
                                  "and start with a letter")
        return key

    def check_value(self, value: object) -> str:
        """Check a memory value: 1 to `max_value_chars` code points, not blank, no NUL, valid Unicode."""
        if not isinstance(value, str):
            raise ValidationError(f"value must be a string, not {type(value).__name__}")
        check_text("value", value)
        if len(value) > self.max_value_chars:
            raise ValidationError(
                f"value is {len(value)} characters; values are at most {self.max_value_chars} (nothing was cut)"
            )
        if not value.strip():
            raise ValidationError("value is blank; a memory needs some text")
        return value

    def check_confirmation(self, confirmation: object) -> str:
        """Check a confirmation id, stored beside every change it allowed: a value's bounds."""
        if not isinstance(confirmation, str):
            raise ValidationError(f"confirmation must be a string or None, not {type(confirmation).__name__}")
        check_text("confirmation", confirmation)
        if not confirmation.strip():
            raise ValidationError("confirmation is blank; pass None when nothing confirmed the change")
        if len(confirmation) > self.max_value_chars:
            raise ValidationError(f"confirmation is {len(confirmation)} characters; confirmations are at most "
                                  f"{self.max_value_chars}")
        return confirmation

    def check_query(self, query: object) -> str:
        """Check a search query: at most `max_query_chars` code points, no NUL (empty means 'most recent')."""
        if not isinstance(query, str):
            raise ValidationError(f"query must be a string, not {type(query).__name__}")
        check_text("query", query)
        if len(query) > self.max_query_chars:
            raise ValidationError(f"query is {len(query)} characters; queries are at most {self.max_query_chars}")
        return query

    def check_limit(self, limit: object) -> int:
        """Check a result limit: an integer from 1 to `max_search_limit`."""
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise ValidationError(f"limit must be an integer, not {type(limit).__name__}")
        if not 1 <= limit <= self.max_search_limit:
            raise ValidationError(f"limit is {limit}; it must be from 1 to {self.max_search_limit}")
        return limit


def turns_for(exchanges: int) -> int:
    """How many turns hold `exchanges` exchanges: a user turn and the reply to it, each."""
    return 2 * exchanges


def check_text(what: str, text: str) -> None:
    """Refuse NUL characters and lone surrogates, which SQLite and JSON cannot carry faithfully."""
    if "\x00" in text:
        raise ValidationError(f"{what} contains a NUL character at position {text.index(chr(0))}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{what} is not valid Unicode: a lone surrogate at position {exc.start}") from None


def check_positive(name: str, value: Any) -> int:
    """`value` when it is a positive integer (a bool is not one); otherwise a ValidationError naming it."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValidationError(f"{name} is {value!r}; it must be a positive integer")
    return value


DEFAULT_LIMITS = Limits()

SHORTENED_MARKER = " …[shortened: {n} more characters]"


def shorten(text: str, max_chars: int) -> str:
    """Cut `text` to at most `max_chars` code points, saying so with a visible marker."""
    if len(text) <= max_chars:
        return text
    keep = max_chars - len(SHORTENED_MARKER.format(n=len(text)))
    if keep < 1:
        raise ValidationError(f"max_chars {max_chars} leaves no room for the shortening marker")
    return text[:keep] + SHORTENED_MARKER.format(n=len(text) - keep)


def positive_or_default(name: str, value: int | None, default: int) -> int:
    """`value`, or `default` when None; anything but a positive integer is refused, not replaced."""
    return default if value is None else check_positive(name, value)
