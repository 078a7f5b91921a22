"""Records and histories as pandas DataFrames with fixed columns, as the inspector shows them.

On a projector a table must be read from the back of the room: these DataFrames (`text_table`)
show their text columns left-aligned, where pandas right-aligns everything, and at most `MAX_ROWS`
rows. The classroom's own tables (tool results, messages, confirmations) build on them.
"""

from __future__ import annotations

import functools
import html
import re
from typing import TYPE_CHECKING, Any
from collections.abc import Iterable, Mapping

from ..store import Record
from ._support import pandas as _pandas

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed

MAX_ROWS = 15  # about a screen at a projector's resolution

RECORD_COLUMNS = ("kind", "key", "value", "revision", "source_session", "updated_at")
HISTORY_COLUMNS = ("action", "revision", "session", "old_value", "new_value", "confirmation", "at")


def records_table(records: Iterable[Record]) -> pandas.DataFrame:
    """Records as a table (kind, key, value, revision, source session, updated at)."""
    pd = _pandas()
    return text_table(pd.DataFrame([{c: r[c] for c in RECORD_COLUMNS} for r in records],
                                   columns=list(RECORD_COLUMNS)))


def history_table(events: Iterable[Mapping[str, Any]]) -> pandas.DataFrame:
    """`Store.history` events as a table, oldest first; missing values shown as empty cells."""
    pd = _pandas()
    rows = [{c: ("" if e[c] is None else e[c]) for c in HISTORY_COLUMNS} for e in events]
    return text_table(pd.DataFrame(rows, columns=list(HISTORY_COLUMNS)))


_CELL = re.compile(r"<(t[dh])([ >])")
_ROW = re.compile(r"<tr[^>]*>.*?</tr>", re.S)
LEFT = ' style="text-align: left;"'


def left_aligned(table_html: str, text_columns: Iterable[int], index: bool = True) -> str:
    """A table's HTML with the cells of `text_columns` (0-based, not counting the index) left-aligned.

    Each row's cells are counted in order (the index's `th` first when `index`), and a cell of a
    text column gets an inline `text-align: left`, which wins over a notebook's own table style.
    """
    wanted = {column + (1 if index else 0) for column in text_columns}

    def row(match: re.Match[str]) -> str:
        position = -1

        def cell(found: re.Match[str]) -> str:
            nonlocal position
            position += 1
            return f"<{found.group(1)}{LEFT}{found.group(2)}" if position in wanted else found.group(0)

        return _CELL.sub(cell, match.group(0))

    return _ROW.sub(row, table_html)


@functools.cache
def _text_table_class() -> type:
    """`TextTable`, made the first time it is needed (pandas is an optional import)."""
    pd = _pandas()

    class TextTable(pd.DataFrame):  # type: ignore[misc, name-defined]  # pandas has no stubs here
        """A DataFrame that shows its text columns left-aligned and at most `MAX_ROWS` rows."""

        @property
        def _constructor(self) -> type:
            return TextTable

        def _repr_html_(self) -> str | None:
            shown = pd.DataFrame(self.head(MAX_ROWS))
            page = shown._repr_html_()
            if page is None:
                return None
            text = [i for i, name in enumerate(shown.columns)
                    if pd.api.types.is_object_dtype(shown[name]) or pd.api.types.is_string_dtype(shown[name])]
            page = left_aligned(page, text)
            if len(self) > MAX_ROWS:
                page += f"<p>the first {MAX_ROWS} of {len(self)} rows</p>"
            return page

        def __repr__(self) -> str:
            text = repr(pd.DataFrame(self.head(MAX_ROWS)))
            return text + (f"\nthe first {MAX_ROWS} of {len(self)} rows" if len(self) > MAX_ROWS else "")

    return TextTable


def text_table(frame: pandas.DataFrame) -> pandas.DataFrame:
    """`frame` as a `TextTable`: the same data, shown with text columns left-aligned and at most
    `MAX_ROWS` rows (the first ones, then a line saying how many there are)."""
    return _text_table_class()(frame)


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
