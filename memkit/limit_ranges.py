"""The range of every limit in `memkit.limits.Limits`: the least and the most it may be, and why.

A limit below 1 would refuse everything. Above its upper bound a number only looks like a limit:
it overflows what carries it (SQLite's and PostgreSQL's integers, a C int timeout, a date) or
admits more than any store can hold. `Limits` checks every value here when it is made, so a value
out of range is one error wherever it comes from: code, `memkit limits --set`, or a store's
recorded limits edited by hand.
"""

from __future__ import annotations

from typing import Any

from .errors import ValidationError

COUNT = 2**31 - 1
"""A count of rows, results or turns: PostgreSQL's `integer` and a C int, far past any store."""
TEXT = 2**30
"""A length in characters: past SQLite's longest text (10^9 bytes), so every text a store can keep."""
BYTES = 2**48
"""A size in bytes: SQLite's largest database (2^32 pages of 64 KiB), within both backends' integers."""
MILLISECONDS = 2**31 - 1
"""A lock wait: `sqlite3_busy_timeout` and PostgreSQL's `lock_timeout` take a C int (24.8 days)."""
SECONDS = 100 * 366 * 24 * 3600
"""A time to live: a century, so an expiry is always a date Python and both backends can hold."""

UPPER: dict[str, int] = {
    "max_value_chars": TEXT, "max_key_chars": TEXT, "max_id_chars": TEXT, "max_query_chars": TEXT,
    "max_records_per_user": COUNT, "max_records_total": COUNT, "max_db_bytes": BYTES,
    "max_events_per_user": COUNT, "max_archived_turns_per_user": COUNT, "max_agent_item_chars_per_user": TEXT,
    "max_search_limit": COUNT,
    "busy_timeout_ms": MILLISECONDS,
    "max_pending_proposals_per_user": COUNT, "proposal_ttl_seconds": SECONDS,
    "retrieval_max_preferences": COUNT, "retrieval_max_terms": COUNT, "retrieval_max_episodes": COUNT,
    "retrieval_budget_chars": TEXT,
    "history_max_exchanges": COUNT, "history_max_chars": TEXT, "history_max_text_chars": TEXT,
    "request_budget_chars": TEXT,
}
"""The most each limit may be (every limit's least is 1)."""


def check_range(name: str, value: Any) -> int:
    """`value` when it is an integer in the range of the limit `name`; otherwise a ValidationError.

    Args:
        name: the limit, as `Limits` names it (a `Limits.` prefix is allowed and kept in messages).
        value: what was given.

    Raises:
        ValidationError: one line naming the limit, the value and its range.
    """
    upper = UPPER[name.removeprefix("Limits.")]
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= upper:
        shown = value if isinstance(value, int) and not isinstance(value, bool) else repr(value)
        raise ValidationError(f"{name} is {shown}; it must be a positive integer from 1 to {upper}")
    return value
