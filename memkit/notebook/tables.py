"""Tables: records, histories, tool results, messages and confirmations as pandas DataFrames.

Each function takes what the package already returns (records, `MemoryStore.history` events,
`AgentReply.tool_results`, a request's messages, an `Approvals`) and gives a DataFrame with fixed
columns, so a notebook shows the same table on every run and a widget can render it as HTML.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..approvals import Approvals
from ..limits import shorten
from ..store import Record
from ._support import pandas as _pandas

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed

RECORD_COLUMNS = ("kind", "key", "value", "revision", "source_session", "updated_at")
HISTORY_COLUMNS = ("action", "revision", "session", "old_value", "new_value", "confirmation", "at")
TOOL_RESULT_COLUMNS = ("tool", "arguments", "ok", "result or error")


def records_table(records: Iterable[Record]) -> pandas.DataFrame:
    """Records as a table (kind, key, value, revision, source session, updated at)."""
    pd = _pandas()
    return pd.DataFrame([{c: r[c] for c in RECORD_COLUMNS} for r in records], columns=list(RECORD_COLUMNS))


def history_table(events: Iterable[Mapping[str, Any]]) -> pandas.DataFrame:
    """`MemoryStore.history` events as a table, oldest first; missing values shown as empty cells."""
    pd = _pandas()
    rows = [{c: ("" if e[c] is None else e[c]) for c in HISTORY_COLUMNS} for e in events]
    return pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))


def tool_results_table(tool_results: Iterable[Mapping[str, Any]], max_chars: int = 100) -> pandas.DataFrame:
    """`AgentReply.tool_results` as a table: tool, arguments the model wrote, ok, and result or error.

    A result is shown as JSON with a space after each comma and colon, so a table cell can wrap it
    between values, and cut to `max_chars` with a visible marker, like the arguments: the table
    stays as wide as the notebook. An error is shown whole: it is the explanation.
    """
    pd = _pandas()
    rows = []
    for item in tool_results:
        outcome = item["outcome"]
        if outcome.get("ok"):
            detail = shorten(json.dumps(outcome.get("result"), ensure_ascii=False, sort_keys=True), max_chars)
        else:
            detail = str(outcome.get("error"))
        values = (item["name"], shorten(item["arguments"], max_chars), bool(outcome.get("ok")), detail)
        rows.append(dict(zip(TOOL_RESULT_COLUMNS, values)))
    return pd.DataFrame(rows, columns=list(TOOL_RESULT_COLUMNS))


def messages_table(messages: Iterable[Mapping[str, Any]], max_chars: int = 120) -> pandas.DataFrame:
    """The messages of one model request, one row each: role and what it carries (shortened).

    An assistant message that calls tools shows the calls (`memory_put {"kind": ...}`); other
    messages show their content, cut to `max_chars` with a visible marker.
    """
    pd = _pandas()
    rows = []
    for number, message in enumerate(messages, start=1):
        calls = message.get("tool_calls") or []
        if calls:
            text = "; ".join(f"{c['function']['name']} {c['function']['arguments']}" for c in calls)
        else:
            text = message.get("content") or ""
        rows.append({"#": number, "role": message["role"], "content": shorten(text, max_chars)})
    return pd.DataFrame(rows, columns=["#", "role", "content"])


def approvals_table(approvals: Approvals) -> pandas.DataFrame:
    """Every confirmation of an `Approvals`, waiting or spent, in the order they were made."""
    pd = _pandas()

    def made(row: dict[str, str]) -> int:
        # Ids are `origin#N`, numbered in the order the confirmations were made.
        number = row["id"].rsplit("#", 1)[-1]
        return int(number) if number.isdigit() else 0

    rows = [{"id": c.id, "allows": c.describe(), "state": state}
            for state, group in (("waiting", approvals.pending), ("spent", approvals.spent)) for c in group]
    rows.sort(key=made)
    return pd.DataFrame(rows, columns=["id", "allows", "state"])


TABLE_STYLE = (
    "<style>.memkit-table {border-collapse: collapse; margin: 4px 0}"
    " .memkit-table th, .memkit-table td {padding: 3px 12px 3px 0; text-align: left; vertical-align: top;"
    " border-bottom: 1px solid #e0e0e0}</style>"
)
"""Padding and rules for the tables inside widgets (a notebook's own DataFrame display has its own)."""


def html_table(frame: pandas.DataFrame, empty: str) -> str:
    """A DataFrame as the HTML a widget shows, or `empty` (in italics) when it has no rows."""
    if frame.empty:
        return f"<p><i>{html.escape(empty)}</i></p>"
    return TABLE_STYLE + str(frame.to_html(index=False, escape=True, border=0, classes="memkit-table"))
