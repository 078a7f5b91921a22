"""Tables of the agent's turn: tool results, a request's messages, confirmations and proposals, as
pandas DataFrames.

Each takes what the package returns (`AgentReply.tool_results`, a request's messages, an
`Approvals`, a store's pending proposals) and gives a DataFrame with fixed columns, shown like the
inspector's tables (text left-aligned, at most `MAX_ROWS` rows), so a notebook shows the same table
on every run.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any
from collections.abc import Iterable, Mapping

from memkit.approvals import Approvals
from memkit.inspector._support import pandas as _pandas
from memkit.inspector.proposals_panel import against, note
from memkit.inspector.tables import MAX_ROWS, history_table, html_table, left_aligned, records_table, text_table
from memkit.limits import shorten
from memkit.store import Store
from memkit.store.proposals import describe

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed

__all__ = ["MAX_ROWS", "approvals_table", "history_table", "html_table", "left_aligned", "messages_table",
           "pending_table", "records_table", "text_table", "times_of_day", "tool_results_table"]

TOOL_RESULT_COLUMNS = ("tool", "arguments", "ok", "result or error")


def tool_results_table(tool_results: Iterable[Mapping[str, Any]]) -> pandas.DataFrame:
    """`AgentReply.tool_results` as a table: tool, arguments the model wrote, ok, and result or error.

    A result is shown as JSON with a space after each comma and colon, so a table cell can wrap it
    between values, and cut to 100 characters with a visible marker, like the arguments: the table
    stays as wide as the notebook. An error is shown whole: it is the explanation.
    """
    pd = _pandas()
    rows = []
    for item in tool_results:
        outcome = item["outcome"]
        if outcome.get("ok"):
            detail = shorten(json.dumps(outcome.get("result"), ensure_ascii=False, sort_keys=True), 100)
        else:
            detail = str(outcome.get("error"))
        values = (item["name"], shorten(item["arguments"], 100), bool(outcome.get("ok")), detail)
        rows.append(dict(zip(TOOL_RESULT_COLUMNS, values, strict=True)))
    return text_table(pd.DataFrame(rows, columns=list(TOOL_RESULT_COLUMNS)))


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
    return text_table(pd.DataFrame(rows, columns=["#", "role", "content"]))


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
    return text_table(pd.DataFrame(rows, columns=["id", "allows", "state"]))


def pending_table(store: Store, user: str) -> pandas.DataFrame:
    """`user`'s proposals waiting for a person, oldest first: what the panel lists, as a table
    (a DataFrame shown with text columns left-aligned and at most 15 rows).

    Columns: `id`, `proposed` (e.g. `save preference city = 'Porto'`), `against` (the record it
    was proposed against: `rev 1: 'Lisbon'`, or `no record`), `note` (`stale`: the record changed
    since, an approval is refused; `expired`), `session`.
    """
    pd = _pandas()
    rows = [{"id": p["id"], "proposed": describe(p), "against": against(p), "note": note(p),
             "session": p["session"]} for p in store.proposals(user)]
    return text_table(pd.DataFrame(rows, columns=["id", "proposed", "against", "note", "session"]))


_STAMP = re.compile(r"\d{4}-\d\d-\d\dT(\d\d:\d\d:\d\d)(?:\.\d+)?Z")


def times_of_day(frame: pandas.DataFrame) -> pandas.DataFrame:
    """`frame` (an inspector's table) with each column of timestamps shown as the time of day, to the
    second: `2026-12-06T21:41:16.413233Z` as `21:41:16`.

    A timestamp has no space to wrap at, so a history's `at` beside a confirmation id pushed the
    table past a projector's width (1280x800 at 150%). Only a column holding nothing but timestamps
    (or empty cells) changes; a confirmation id (`cli@<time>#1`) is an id and stays whole.
    """
    pd = _pandas()
    shown = pd.DataFrame(frame).copy()
    for column in shown.columns:
        values = list(shown[column])
        if values and all(v == "" or (isinstance(v, str) and _STAMP.fullmatch(v)) for v in values):
            shown[column] = [_STAMP.sub(r"\1", v) for v in values]
    return text_table(shown)
