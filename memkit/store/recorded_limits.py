"""The limits a store was made with, kept in the store itself (table `store_limits`, both backends).

Every open that passes no limits uses the recorded ones, so the `memkit` command, a notebook and a
worker all enforce what the store was made for. `memkit limits --set` changes them, never below
what the store already holds (`floors`) and never outside a limit's range (limit_ranges.py); a
recorded value outside it (a table edited by hand) is refused at open, naming how to mend it.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from typing import Any
from collections.abc import Mapping

from ..errors import StoreError, ValidationError
from ..limit_ranges import UPPER, check_range
from ..limits import DEFAULT_LIMITS, Limits
from .statements import SQLITE_STATEMENTS, total_records_sql

LIMIT_NAMES = tuple(field.name for field in dataclasses.fields(Limits))
"""Every limit a store records (all of `Limits`: the store's own bounds and its agent's budgets)."""


def has_table(conn: Any) -> bool:
    """Whether the store's schema has the limits table (files older than its step have not)."""
    try:
        conn.execute("SELECT count(*) FROM store_limits").fetchone()
    except sqlite3.Error:
        return False
    except Exception as exc:  # psycopg's UndefinedTable: psycopg is an optional extra, not imported here
        if type(exc).__name__ != "UndefinedTable":
            raise
        return False
    return True


def recorded(rows: list[Any]) -> dict[str, Any]:
    """`{name: value}` from the rows of `SELECT name, value FROM store_limits` (unknown names kept; a
    value edited by hand into something other than an integer kept as its text, for `limits_from` to refuse)."""
    return {str(row[0]): row[1] if isinstance(row[1], int) else str(row[1]) for row in rows}


def limits_from(values: Mapping[str, Any], base: Limits = DEFAULT_LIMITS) -> Limits:
    """`base` with every recorded limit it knows applied (a name this memkit does not know is ignored:
    a newer memkit may record more).

    Raises:
        StoreError: a recorded value is outside its limit's range; it names the limit and the mend.
    """
    known = {name: value for name, value in values.items() if name in LIMIT_NAMES}
    for name, value in known.items():
        try:
            check_range(name, value)
        except ValidationError as exc:
            raise StoreError(f"the store records a limit out of range: {exc}. Set it with "
                             f"`memkit limits --set {name}=N --confirm`; nothing was changed") from None
    return base.replace(**known)


def limits_in_range(values: Mapping[str, Any], base: Limits = DEFAULT_LIMITS) -> Limits:
    """`base` with every recorded limit that is in its range applied (the others left at `base`'s):
    what `memkit limits --set` opens a store with, so it can mend a limit out of range."""
    def fits(name: str, value: Any) -> bool:
        try:
            check_range(name, value)
        except ValidationError:
            return False
        return True
    return base.replace(**{name: value for name, value in values.items() if name in LIMIT_NAMES and fits(name, value)})


def record(conn: Any, limits: Limits) -> None:
    """Record every limit not recorded yet (inside the caller's write transaction)."""
    for name in LIMIT_NAMES:
        conn.execute("INSERT INTO store_limits (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                     (name, int(getattr(limits, name))))


def _longest(*columns: str) -> str:
    """The length of the longest text in any of `columns` (`table.column`), 0 when there is none."""
    parts = " UNION ALL ".join(f"SELECT max(length({column})) AS n FROM {table}"
                               for table, column in (name.split(".") for name in columns))
    return f"SELECT coalesce(max(n), 0) FROM ({parts}) AS longest"


FLOOR_SQL: dict[str, str] = {
    "max_records_per_user": "SELECT coalesce(max(records), 0) FROM user_counts",
    "max_records_total": SQLITE_STATEMENTS.total_records,  # PostgreSQL's: `total_records_sql`
    # Values, keys and ids live beyond `memories`: in the history (an export carries it, and an
    # import checks it against the limits), in proposals (an approval writes them) and in agent
    # session items (forget checks the user id). A limit below any of them would strand that row.
    "max_value_chars": _longest("memories.value", "memory_events.old_value", "memory_events.new_value",
                                "proposals.value"),
    "max_key_chars": _longest("memories.memory_key", "memory_events.memory_key", "proposals.memory_key"),
    "max_id_chars": _longest("memories.user_id", "memories.source_session", "memory_events.user_id",
                             "memory_events.session_id", "transcript.user_id", "transcript.session_id",
                             "proposals.user_id", "proposals.session_id", "agent_items.user_id",
                             "agent_items.session_id"),
}
"""For each limit that bounds stored data, the smallest value that still admits everything stored
(`max_records_total`'s: the store-wide count, read where the backend keeps it)."""


def floors(conn: Any, size_bytes: int) -> dict[str, int]:
    """The least each limit may be set to: what the store already holds (`size_bytes`: its size now)."""
    total = total_records_sql(conn)
    found = {name: int(conn.execute(total if name == "max_records_total" else sql).fetchone()[0] or 0)
             for name, sql in FLOOR_SQL.items()}
    found["max_db_bytes"] = size_bytes
    return found


def parse_settings(settings: list[str]) -> dict[str, int]:
    """`["max_records_total=200000", ...]` -> `{name: value}`; refuses unknown names and bad numbers.

    Raises:
        ValidationError: naming the setting and what is allowed.
    """
    changes: dict[str, int] = {}
    for setting in settings:
        name, sep, text = setting.partition("=")
        name = name.strip()
        if not sep:
            raise ValidationError(f"--set {setting!r} is not name=value (e.g. max_records_total=200000)")
        if name not in LIMIT_NAMES:
            raise ValidationError(f"--set {name!r}: no such limit; the limits are {', '.join(LIMIT_NAMES)}")
        digits = text.strip().replace("_", "")
        if not re.fullmatch(r"[+-]?[0-9]+", digits):
            raise ValidationError(f"--set {name}={text!r}: the value must be a whole number")
        if len(digits) > 30:  # past every range, and int() refuses more than 4,300 digits
            raise ValidationError(f"--set {name}={digits[:20]}... ({len(digits)} digits): {name} must be a "
                                  f"positive integer from 1 to {UPPER[name]}; nothing was changed")
        try:
            changes[name] = check_range(name, int(digits))
        except ValidationError as exc:
            raise ValidationError(f"--set {name}={digits}: {exc}; nothing was changed") from None
    if not changes:
        raise ValidationError("nothing to set; give --set name=value")
    return changes


def check_floors(changes: Mapping[str, int], least: Mapping[str, int]) -> None:
    """Refuse any change below what the store already holds (`floors`).

    Raises:
        ValidationError: naming the limit, the value asked and what is stored.
    """
    for name, value in changes.items():
        if value < least.get(name, 1):
            raise ValidationError(
                f"{name}={value} is below what the store already holds ({least[name]}); nothing was changed. "
                f"Set it to {least[name]} or more, or delete data first"
            )


def write(conn: Any, changes: Mapping[str, int]) -> None:
    """Store the changed limits (inside the caller's write transaction, after `check_floors`)."""
    for name, value in changes.items():
        conn.execute("INSERT INTO store_limits (name, value) VALUES (?, ?)"
                     " ON CONFLICT (name) DO UPDATE SET value = excluded.value", (name, int(value)))


def adopt(db: Any, given: Limits | None, read_only: bool) -> Limits:
    """The limits a store opened on `db` enforces: `given`, else those it recorded; a store that
    recorded none yet records `given` (or the defaults) now, unless it is open read-only."""
    values = recorded(db.fetch("SELECT name, value FROM store_limits")) if has_table(db.connection) else None
    chosen = given if given is not None else limits_from(values or {})
    if not values and values is not None and not read_only:
        with db.transaction() as conn:
            record(conn, chosen)
    db.use_limits(chosen)
    return chosen
