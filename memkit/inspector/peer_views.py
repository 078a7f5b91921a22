"""Views of other frameworks' memory files (read-only), and the one line for a file of no known kind.

`PeerInspector` browses a file `memkit.inspector.peers` recognises (openai-agents, LangGraph, mem0): its
groups, a group's items, a search. `NotInspectable` is what `inspect` shows instead of a traceback.
Like every view, each control calls a plain method that returns data.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from ..errors import MemkitError
from .peers import PeerFile
from ._support import View, pandas as _pandas, status_html, widgets as _widgets
from .tables import html_table

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed


class PeerInspector(View):
    """Another framework's memory file, read-only: its groups, a group's items, a search.

    Groups are what the framework keys its memory by: openai-agents sessions, LangGraph store
    namespaces and checkpointer threads, mem0 memories (whose items are their events). The file is
    never changed (see `memkit.inspector.peers`).

    Args:
        path: the file (its format is recognised from its tables).

    Raises:
        StoreError: the file is of no known format (one line; `inspect` shows it instead of raising).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.file = PeerFile(path)
        self.format = self.file.formats[0].name
        self.group: str | None = None
        self.query = ""
        self.controls: dict[str, Any] = {}
        """The widget's controls by name, filled when the widget is built."""
        self._refreshing = False
        groups = self.file.groups(self.format)
        if groups:
            self.group = str(groups[0][self.file.format(self.format).group])

    def note(self) -> str:
        """One line: what the file is, and that it is read-only."""
        return self.file.describe()

    def groups(self) -> pandas.DataFrame:
        """The groups of the chosen format (sessions, namespaces, threads or memories), latest first."""
        pd = _pandas()
        fmt = self.file.format(self.format)
        return pd.DataFrame(self.file.groups(self.format), columns=[fmt.group, "items", "last"])

    def items(self) -> pandas.DataFrame:
        """The items of the chosen group, or the search results when the search box holds text."""
        pd = _pandas()
        fmt = self.file.format(self.format)
        if self.query:
            return pd.DataFrame(self.file.search(self.query, self.format), columns=[fmt.group, *fmt.columns])
        rows = self.file.items(self.group, self.format) if self.group is not None else []
        return pd.DataFrame(rows, columns=list(fmt.columns))

    def select_format(self, name: str) -> pandas.DataFrame:
        """Choose one of the formats the file holds; returns its groups."""
        fmt = self.file.format(name)
        self.format, self.query = fmt.name, ""
        groups = self.file.groups(self.format)
        self.group = str(groups[0][fmt.group]) if groups else None
        self._changed()
        return self.groups()

    def select_group(self, group: str) -> pandas.DataFrame:
        """Show one group's items (clears the search)."""
        self.group, self.query = group, ""
        self._changed()
        return self.items()

    def set_query(self, text: str) -> pandas.DataFrame:
        """Search every group's items for `text` (empty: back to the chosen group)."""
        self.query = text.strip()
        self._changed()
        return self.items()

    def close(self) -> None:
        """Close the file."""
        self.file.close()

    def _build(self) -> Any:
        w = _widgets()
        c = self.controls
        fmt = self.file.format(self.format)
        c["note"] = w.HTML()
        c["format"] = w.Dropdown(options=[f.name for f in self.file.formats], value=self.format, description="format")
        c["group"] = w.Combobox(options=[], description=fmt.group, placeholder=f"type to find a {fmt.group}",
                                ensure_option=False, layout=w.Layout(width="360px"))
        c["query"] = w.Text(description="search", placeholder="text in any item")
        c["groups"] = w.HTML()
        c["items"] = w.HTML()
        c["format"].observe(lambda ch: self._guard(self.select_format, ch["new"]), names="value")
        c["group"].observe(lambda ch: ch["new"] in c["group"].options and self._guard(self.select_group, ch["new"]),
                           names="value")
        c["query"].observe(lambda ch: self._guard(self.set_query, ch["new"]), names="value")
        self._widget = w.VBox([c["note"], w.HBox([c["format"], c["group"]]), c["query"],
                               w.HBox([c["groups"], c["items"]], layout=w.Layout(flex_flow="row wrap"))])
        self._refresh()
        return self._widget

    def _guard(self, method: Callable[..., Any], *args: Any) -> Any:
        if self._refreshing:
            return None
        try:
            return method(*args)
        except MemkitError as exc:  # shown, never raised into the frontend
            self.controls["note"].value = status_html(str(exc), ok=False)
            return None

    def _changed(self) -> None:
        if self._widget is not None:
            self._refresh()

    def _refresh(self) -> None:
        c = self.controls
        self._refreshing = True
        try:
            fmt = self.file.format(self.format)
            groups = self.groups()
            c["note"].value = status_html(self.note())
            c["format"].value = self.format
            c["group"].description = fmt.group
            c["group"].options = [str(g) for g in groups[fmt.group]]
            c["group"].value = self.group or ""
            c["query"].value = self.query
            c["groups"].value = html_table(groups.head(50), f"no {fmt.group}s")
            c["items"].value = html_table(self.items(), "nothing matches" if self.query else "no items")
        finally:
            self._refreshing = False

    def __repr__(self) -> str:
        group = self.file.format(self.format).group
        return f"PeerInspector({self.file.path.name!r}, format={self.format!r}, {group}={self.group!r})"


class NotInspectable(View):
    """What `inspect` shows for a file it cannot open: one line saying what the file is not."""

    def __init__(self, line: str) -> None:
        self.line = line

    def _build(self) -> Any:
        return _widgets().HTML(status_html(self.line, ok=False))

    def __repr__(self) -> str:
        return f"NotInspectable({self.line!r})"
