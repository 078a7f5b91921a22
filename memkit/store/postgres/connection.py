"""A psycopg connection that speaks the store's SQL, and what must never leak from a connection string.

The store's SQL is written once, with `?` placeholders (sqlite3's paramstyle) and rows read by name
or position (`sqlite3.Row`). `PgConnection` runs the same text on PostgreSQL: `pyformat` rewrites it
for psycopg once per statement (cached), and `Row` reads like `sqlite3.Row`. Parameters are bound on
the client (`psycopg.ClientCursor`), so `? IS NULL` works as in SQLite and one statement is one
round trip.

`scrub` keeps passwords out of every message and log line memkit writes.
"""

from __future__ import annotations

import functools
import re
from typing import Any
from collections.abc import Callable, Iterable, Iterator, Sequence

from ...errors import install_hint
from ..targets import masked, url_password

try:
    import psycopg
    from psycopg.pq import TransactionStatus
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"the PostgreSQL store needs psycopg: {install_hint('postgres')}"
    ) from exc

_NUMBERED = re.compile(r"\?\d")
_INSERT_VALUES = re.compile(r"(?P<head>\s*INSERT\s+INTO\s.+?\sVALUES\s*)"
                            r"(?P<row>\(\s*\?(?:\s*,\s*\?)*\s*\))(?P<tail>[^?]*)", re.IGNORECASE | re.DOTALL)
BATCH_ROWS = 500
"""Rows per multi-row INSERT that `PgConnection.executemany` sends."""


@functools.lru_cache(maxsize=1024)
def pyformat(sql: str) -> str:
    """`sql` with `?` placeholders as psycopg's `%s`, and every literal `%` doubled.

    A `?` inside a quoted literal or identifier is text and stays as it is. Numbered placeholders
    (`?1`) have no psycopg equivalent and are refused.

    Raises:
        ValueError: the statement uses numbered placeholders.
    """
    if _NUMBERED.search(sql):
        raise ValueError(f"numbered placeholders are not supported on PostgreSQL: {sql[:80]!r}")
    out: list[str] = []
    quote: str | None = None
    for char in sql:
        if char == "%":
            out.append("%%")  # psycopg reads % everywhere, inside literals too
        elif quote is not None:
            out.append(char)
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
            out.append(char)
        else:
            out.append("%s" if char == "?" else char)
    return "".join(out)


class Row(Sequence[Any]):
    """One result row, read by position (`row[0]`) or by column name (`row["value"]`), like `sqlite3.Row`."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self._values[self._index[key]]
        return self._values[key]

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Row):
            return tuple(self._values) == tuple(other._values)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __repr__(self) -> str:
        return f"Row({tuple(self._values)!r})"


@functools.lru_cache(maxsize=256)
def _column_index(names: tuple[bytes | None, ...]) -> dict[str, int]:
    return {(name or b"").decode("utf-8", "replace"): number for number, name in enumerate(names)}


def row_factory(cursor: Any) -> Callable[[Sequence[Any]], Row]:
    """psycopg's row factory for `Row`: the column names are read once per result, straight from
    the result (`cursor.description` builds a Column object per column, which cost a read of one
    row more than the rest of memkit's part of it), and their index is shared by equal results."""
    result = cursor.pgresult
    index = _column_index(tuple(result.fname(n) for n in range(result.nfields))) if result is not None else {}
    return lambda values: Row(values, index)


CONNECTION_OPTIONS: dict[str, Any] = {
    "autocommit": True, "row_factory": row_factory, "cursor_factory": psycopg.ClientCursor,
}
"""How every store connection is made (the pool's too): autocommit, so transactions are explicit
`BEGIN`s; parameters bound on the client; `Row`s."""


def connect(conninfo: str, **options: Any) -> psycopg.Connection[Row]:
    """A new connection made with `CONNECTION_OPTIONS`."""
    return psycopg.Connection.connect(conninfo, **CONNECTION_OPTIONS, **options)


def with_settings(conninfo: str, settings: str, connect_timeout: int) -> str:
    """`conninfo` with the store's session `settings` (`-c name=value ...`) added to its `options`,
    and `application_name` (memkit) and `connect_timeout` (seconds) unless it names them.

    Raises:
        psycopg.Error: `conninfo` is not a valid connection string.
    """
    given = psycopg.conninfo.conninfo_to_dict(conninfo)
    extra: dict[str, Any] = {"options": f"{given.get('options', '')} {settings}".strip()}
    extra.setdefault("application_name", given.get("application_name", "memkit"))
    if "connect_timeout" not in given:
        extra["connect_timeout"] = connect_timeout
    return psycopg.conninfo.make_conninfo(conninfo, **extra)


class PgConnection:
    """A psycopg connection that runs the store's `?` SQL and returns `Row`s.

    Statements without arguments go to psycopg as they are (so DDL with `$$` bodies and `%` stays
    untouched); with arguments, the text goes through `pyformat` first.

    Attributes:
        raw: the psycopg connection underneath (autocommit; transactions are explicit `BEGIN`s).
        pooled: whether it goes back to a pool when done (else it is closed).
        sent: how many statements went through `execute` and `executemany` (a write settled after
            the last of them has nothing left to settle at commit: backend.py).
        settled_at: `sent` when the store last settled the transaction's counts (-1: not yet).
    """

    def __init__(self, raw: psycopg.Connection[Row], *, pooled: bool = True) -> None:
        self.raw = raw
        self.pooled = pooled
        self.sent = 0
        self.settled_at = -1

    def execute(self, sql: str, args: Sequence[Any] = ()) -> psycopg.Cursor[Row]:
        """Run one statement; its cursor has `fetchone`, `fetchall`, `rowcount` and iteration."""
        self.sent += 1
        if args:
            return self.raw.execute(pyformat(sql), tuple(args))
        return self.raw.execute(sql)

    def value(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """The first column of the first row of one statement's result (None if it has no row)."""
        row = self.execute(sql, args).fetchone()
        return None if row is None else row[0]

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        """Run `sql` for every row of arguments; return how many rows it changed in all.

        An `INSERT ... VALUES (?, ...)` is sent as multi-row inserts of up to `BATCH_ROWS` rows
        each: one round trip, and one firing of the statement-level counter triggers, per batch.
        """
        self.sent += 1
        rows = [tuple(row) for row in rows]
        cursor = self.raw.cursor()
        match = _INSERT_VALUES.fullmatch(sql)
        if match is None:
            cursor.executemany(pyformat(sql), rows)
            return max(cursor.rowcount, 0)
        changed = 0
        for start in range(0, len(rows), BATCH_ROWS):
            batch = rows[start:start + BATCH_ROWS]
            cursor.execute(pyformat(match["head"] + ", ".join([match["row"]] * len(batch)) + match["tail"]),
                           [value for row in batch for value in row])
            changed += max(cursor.rowcount, 0)
        return changed

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (or failed and not yet rolled back) on this connection."""
        return self.raw.info.transaction_status not in (TransactionStatus.IDLE, TransactionStatus.UNKNOWN)

    @property
    def broken(self) -> bool:
        """Whether the connection to the server is lost (a restart, a network cut)."""
        return self.raw.broken or self.raw.closed


# -- connection strings and the secrets inside them -----------------------------------------------

def password_of(conninfo: str) -> str | None:
    """The password a connection string carries (None if it has none or cannot be parsed)."""
    try:
        password = psycopg.conninfo.conninfo_to_dict(conninfo).get("password")
        return str(password) if password else None
    except psycopg.Error:
        return url_password(conninfo)


def scrub(text: str, secret: str | None) -> str:
    """`text` masked (`targets.masked`, the kit's one masking rule), and with any copy of `secret` (a
    password) replaced by `***`."""
    text = masked(text)
    return text.replace(secret, "***") if secret else text
