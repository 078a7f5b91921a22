"""PostgreSQL's forms of the store's statements: SQLite's (standard SQL), but where PostgreSQL differs.

`take_sequence`, `store_id`, the inserts' ids, the retire mark, `search` (`strpos` and the `pg_trgm`
indexes), `prune_events` and where the store-wide count lives (`select_for_put`, `total_records`);
memkit/store/statements.py has the rest and says what each statement takes.
"""

from __future__ import annotations

import dataclasses

from ..statements import INSERT_EVENT_COLUMNS, INSERT_MEMORY_COLUMNS, SQLITE_STATEMENTS, SearchSql, Statements
from ..statements import select_for_put


def like_pattern(folded: str) -> str:
    """A LIKE pattern that matches `folded` as a literal substring (backslash is LIKE's escape)."""
    return "%" + folded.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


PG_SEARCH = SearchSql(
    match="(strpos(key_fold, ?) > 0 OR strpos(value_fold, ?) > 0)",
    # `fold LIKE '%query%'` with every `%`, `_` and `\` escaped: the GIN index can serve it and
    # PostgreSQL then rechecks it exactly. The "C" collation makes both tests byte comparisons.
    index_sql="SELECT {columns} FROM memories WHERE user_id = ? {kind} AND (key_fold LIKE ? OR value_fold LIKE ?)"
              " ORDER BY seq DESC LIMIT ?",
    index_terms=lambda folded: (like_pattern(folded),) * 2,
)
"""Search on PostgreSQL: `strpos` (as SQLite's `instr`) and the `pg_trgm` indexes over each fold."""

PG_STATEMENTS: Statements = dataclasses.replace(
    SQLITE_STATEMENTS,
    # The numbers come from a sequence (no row lock); with other sessions taking numbers at the
    # same moment they need not be consecutive, but the last is the highest this session was given.
    take_sequence="SELECT coalesce(max(nextval('memkit_seq')), (SELECT last_value FROM memkit_seq))"
                  " FROM generate_series(1, ?)",
    store_id="SELECT database_id FROM memkit_meta",
    # Ids from the tables' own identity columns (SQLite takes them from its sequence, step 15).
    insert_memory=INSERT_MEMORY_COLUMNS + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    insert_event=INSERT_EVENT_COLUMNS + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    # The retire mark in its own table (SQLite keeps it beside the user's count from step 15).
    retire_history=(
        "INSERT INTO history_retired (user_id, at) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET"
        " at = CASE WHEN excluded.at > history_retired.at THEN excluded.at ELSE history_retired.at END"
    ),
    forget_retired="DELETE FROM history_retired WHERE user_id = ?",
    search=PG_SEARCH,
    # PostgreSQL plans the join as it always has (SQLite's form was chosen by SQLite's timings).
    prune_events=(
        "DELETE FROM memory_events WHERE id IN (SELECT id FROM memory_events WHERE user_id = ? AND id NOT IN ("
        "SELECT max(e.id) FROM memory_events e JOIN memories m ON m.user_id = e.user_id AND m.kind = e.kind"
        " AND m.memory_key = e.memory_key WHERE e.user_id = ? GROUP BY e.kind, e.memory_key)"
        " ORDER BY id LIMIT ?)"
    ),
    # PostgreSQL keeps the store-wide count in its own table (SQLite moved it into store_meta, step 12).
    select_for_put=select_for_put("total_count"),
    total_records="SELECT records FROM total_count",
)
"""The statements of the PostgreSQL backend: SQLite's (standard SQL), but for `take_sequence`, `store_id`,
`search`, `prune_events` and where the store-wide count lives (`select_for_put`, `total_records`)."""
