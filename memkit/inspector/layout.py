"""`MemoryInspector`, the inspector with its widget: the controls, how they are laid out, and how
they follow the inspector's state (`core.InspectorCore`).

Every control calls one of `MemoryInspector`'s plain methods (a refusal is shown in the status
line by the method, never raised into the frontend); `refresh` brings every control in line with
the inspector's state without firing their handlers, so a change made from a cell shows too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import MemkitError
from ..limits import KINDS
from ._support import status_html
from ._support import widgets as _widgets
from .core import InspectorCore
from .proposals_panel import ProposalsPanel
from .reading import SORTS
from .tables import html_table, records_table


class MemoryInspector(InspectorCore):
    """Browse any memkit database (read-only unless asked), and make confirm-gated corrections.

    Every widget control calls one of the plain methods of `InspectorCore`, which return data; a
    notebook (or a test) calls the same methods to see, headless, what the widget shows. Edits and
    deletes are two-step: `stage_edit`/`stage_delete` only describe the change; `confirm` (the
    Confirm button) makes a one-time confirmation, performs exactly the staged change with its id
    recorded in the event history, and spends it, provided the record is still exactly the one shown.

    Args:
        target: an open `Store` (left open on `close`; editable unless it was opened
            read-only), the path of an existing database file, or a PostgreSQL URL (any spelling
            `open_store` takes; its password is never shown). A path or URL is opened here, closed on
            `close`, and never created.
        edit: open a path or URL for writing; without it the store is read-only (see
            `memkit.inspector`) and `set_edit(True)` (the Edit switch) reopens it for writing.
            A path or URL is opened with the limits the store recorded; the inspector's writes are
            recorded under session `inspector`, with confirmations of its own `Approvals("inspector")`.
        page_size: records per page of the records table.
        window: a short-term window to show a session's live turns from (beside the archived ones).

    Raises:
        StoreError: the path does not exist or is not a memkit database, or the URL cannot be used.

    Example:
        >>> inspector = MemoryInspector("memory.sqlite3")     # read-only  # doctest: +SKIP
        >>> inspector.select_user("alice")                    # the records table   # doctest: +SKIP
        >>> inspector.select_key("preference", "drink")       # its history         # doctest: +SKIP
        >>> inspector.set_edit(True)                          # reopen for writing  # doctest: +SKIP
        >>> inspector.stage_edit("green tea"); inspector.confirm()                  # doctest: +SKIP
    """

    _layout: InspectorLayout | None = None

    def _build(self) -> Any:
        self._layout = InspectorLayout(self)
        return self._layout.box

    def _refresh(self) -> None:
        """Bring every control in line with the inspector's state (once the widget is built)."""
        if self._layout is not None:
            self._layout.refresh()

    @property
    def _panel(self) -> ProposalsPanel | None:
        """The proposals panel of the widget (None until the widget shows a user)."""
        return self._layout.panel if self._layout is not None else None


class InspectorLayout:
    """The widget of one inspector; its controls by name are `controls` (the inspector's)."""

    def __init__(self, inspector: InspectorCore) -> None:
        self.inspector = inspector
        self.controls = inspector.controls
        self.refreshing = False
        self.panel: ProposalsPanel | None = None  # made when a user is first selected in the widget
        self.box = self._build()
        self.refresh()

    def _build(self) -> Any:
        w, i, c = _widgets(), self.inspector, self.controls
        c["note"] = w.HTML()
        c["edit"] = w.ToggleButton(value=i.editing, description="Edit", icon="pencil",
                                   tooltip="reopen the database for writing (off: read-only)")
        # Typing filters the users (hundreds of them); a whole id selects that user.
        c["user"] = w.Combobox(options=i.users(), value=i.user or "", description="user",
                               placeholder="type to find a user", ensure_option=False,
                               layout=w.Layout(width="280px"))
        # Wide enough for "preference" in any default font; the row wraps rather than cutting a label.
        c["kind"] = w.ToggleButtons(options=[i.ALL, *KINDS], value=i.kind or i.ALL,
                                    description="kind", style={"button_width": "110px"})
        c["sort"] = w.Dropdown(options=list(SORTS), value=i.sort, description="sort",
                               layout=w.Layout(width="200px"))
        c["query"] = w.Text(value=i.query, description="search", placeholder="text in key or value")
        c["records"] = w.HTML()
        c["previous"] = w.Button(description="◀ previous", layout=w.Layout(width="110px"))
        c["next"] = w.Button(description="next ▶", layout=w.Layout(width="110px"))
        c["page"] = w.HTML()
        c["key"] = w.Dropdown(description="key", options=[])
        c["history"] = w.HTML()
        c["value"] = w.Text(description="new value")
        c["stage_edit"] = w.Button(description="Stage edit", icon="pencil")
        c["stage_delete"] = w.Button(description="Stage delete", icon="trash")
        c["confirm"] = w.Button(description="Confirm", button_style="danger", icon="check")
        c["cancel"] = w.Button(description="Cancel")
        c["status"] = w.HTML()
        c["status"].add_class("memkit-inspector-status")  # found by the browser test wherever it sits
        c["show_deleted"] = w.Checkbox(value=i.show_deleted, description="list deleted keys")
        c["deleted"] = w.HTML()
        c["session"] = w.Dropdown(description="session", options=[])
        c["sessions"] = w.HTML()
        c["turns"] = w.HTML()
        c["agent_session"] = w.Dropdown(description="session", options=[])
        c["agent_sessions"] = w.HTML()
        c["items"] = w.HTML()
        c["edit"].observe(lambda ch: self._slow(f"reopening {i.where}", i.set_edit, ch["new"]), names="value")
        c["user"].observe(self._on_user, names="value")
        c["kind"].observe(lambda ch: self._handle(i.set_kind, ch["new"]), names="value")
        c["sort"].observe(lambda ch: self._handle(i.set_sort, ch["new"]), names="value")
        c["query"].observe(lambda ch: self._handle(i.set_query, ch["new"]), names="value")
        c["previous"].on_click(lambda _b: self._handle(i.set_page, i.page - 1))
        c["next"].on_click(lambda _b: self._handle(i.set_page, i.page + 1))
        c["key"].observe(self._on_key, names="value")
        c["stage_edit"].on_click(lambda _b: self._handle(i.stage_edit, c["value"].value))
        c["stage_delete"].on_click(lambda _b: self._handle(i.stage_delete))
        c["confirm"].on_click(lambda _b: self._slow("writing", i.confirm))
        c["cancel"].on_click(lambda _b: self._handle(i.cancel))
        c["show_deleted"].observe(lambda ch: self._handle(i.set_show_deleted, ch["new"]), names="value")
        c["session"].observe(lambda ch: ch["new"] and self._handle(i.turns, ch["new"]), names="value")
        c["agent_session"].observe(lambda ch: ch["new"] and self._handle(i.items, ch["new"]), names="value")
        records = w.VBox([c["records"], w.HBox([c["previous"], c["page"], c["next"]])],
                         layout=w.Layout(min_width="420px", flex="1 1 55%"))
        detail = w.VBox([
            w.HTML("<b>selected key</b>"), c["key"], c["history"],
            w.HBox([c["value"], c["stage_edit"], c["stage_delete"]], layout=w.Layout(flex_flow="row wrap")),
            w.HBox([c["confirm"], c["cancel"]]), c["status"],
        ], layout=w.Layout(min_width="380px", flex="1 1 45%"))
        c["proposals"] = w.VBox([w.HTML("<i>pick a user to see what a model proposed for them</i>")])
        more = w.Accordion(children=[w.VBox([c["show_deleted"], c["deleted"]]),
                                     w.VBox([c["session"], c["sessions"], c["turns"]]),
                                     c["proposals"],
                                     w.VBox([c["agent_session"], c["agent_sessions"], c["items"]])])
        more.set_title(0, "deleted keys")
        more.set_title(1, "sessions and what was said")
        more.set_title(2, "proposals waiting for a person")
        more.set_title(3, "openai-agents sessions (MemkitSession items)")
        return w.VBox([
            w.HBox([c["edit"], c["note"]]),
            w.HBox([c["user"], c["kind"], c["sort"]], layout=w.Layout(flex_flow="row wrap")), c["query"],
            # The record list and the selected key side by side: history and edit controls stay in
            # view however long the list, which is paged besides.
            w.HBox([records, detail], layout=w.Layout(flex_flow="row wrap")),
            more,
        ])

    def _show_proposals(self) -> None:
        """The proposals panel follows the selected user and the store in use (it reopens on Edit)."""
        i = self.inspector
        if i.user is None:
            return
        if self.panel is None:
            self.panel = ProposalsPanel(i.store, i.user, origin="inspector", on_decide=i.after_decision)
            self.controls["proposals"].children = (self.panel.widget,)
        elif self.panel.store is not i.store or self.panel.user != i.user:
            self.panel.store = i.store
            self.panel.show_user(i.user)

    def _slow(self, doing: str, method: Callable[..., Any], *args: Any) -> Any:
        """Run a method that may take more than a moment, saying so in the status line meanwhile."""
        if self.refreshing:
            return None
        self.inspector.busy = f"{doing}…"
        self.controls["status"].value = status_html(self.inspector.busy)
        try:
            return self._handle(method, *args)
        finally:
            self.inspector.busy = None
            self.refresh()

    def _on_user(self, change: Mapping[str, Any]) -> None:
        typed = change["new"] or ""
        if typed in self.inspector.users():
            self._handle(self.inspector.select_user, typed)
        elif not self.refreshing:
            found = self.inspector.find_users(typed, limit=6)
            hint = ", ".join(found) + (" …" if len(found) == 6 else "") if found else "no user id contains it"
            self.controls["status"].value = status_html(f"{typed!r}: {hint}", ok=bool(found))

    def _handle(self, method: Callable[..., Any], *args: Any) -> Any:
        """Run a plain method for a control; its refusal is shown (by the method), not raised into the frontend."""
        if self.refreshing:
            return None
        try:
            return method(*args)
        except MemkitError:
            return None

    def _on_key(self, change: Mapping[str, Any]) -> None:
        if change["new"]:
            kind, key = change["new"].split(":", 1)
            self._handle(self.inspector.select_key, kind, key)

    def refresh(self) -> None:
        """Bring every control in line with the inspector's state (without firing their handlers)."""
        i, c = self.inspector, self.controls
        self.refreshing = True
        try:
            c["note"].value = status_html(i.note(), ok=True)
            c["edit"].value = i.editing
            c["edit"].disabled = not i.can_reopen
            users = i.users()
            if i.user is not None and i.user not in users:
                users.append(i.user)  # a user whose last record was just deleted stays selectable
            c["user"].options = users
            c["user"].value = i.user or ""
            c["kind"].value = i.kind or i.ALL
            c["sort"].value = i.sort
            c["query"].value = i.query
            found = i.records()
            records = i.page_records()
            c["records"].value = html_table(records_table(records), "no records match")
            c["page"].value = (f"<span style='padding:0 8px'>page {i.page + 1} of {i.pages()} "
                               f"({len(found)} records)</span>")
            c["previous"].disabled = i.page == 0
            c["next"].disabled = i.page >= i.pages() - 1
            keys = [f"{r['kind']}:{r['key']}" for r in records]
            if i.selected and ":".join(i.selected) not in keys:
                keys.append(":".join(i.selected))  # keep a deleted key's history in view
            c["key"].options = keys
            c["key"].value = ":".join(i.selected) if i.selected else None
            c["history"].value = html_table(i.history(), "select a key to see its history")
            for name in ("value", "stage_edit", "stage_delete"):
                c[name].disabled = not i.editing
            c["confirm"].disabled = i.staged is None
            c["cancel"].disabled = i.staged is None
            self._show_proposals()
            c["show_deleted"].value = i.show_deleted
            c["deleted"].value = html_table(i.deleted(), "no deleted keys") if i.show_deleted else ""
            sessions = i.sessions()
            c["sessions"].value = html_table(sessions, "no archived sessions")
            c["session"].options = list(sessions["session"])
            c["session"].value = i.session_shown if i.session_shown in c["session"].options else None
            shown = i.shown_turns if i.session_shown is not None else None
            c["turns"].value = "" if shown is None else html_table(shown, "no turns in this session")
            agent_sessions = i.agent_sessions()
            c["agent_sessions"].value = html_table(agent_sessions, "no openai-agents session items")
            c["agent_session"].options = list(agent_sessions["session"])
            shown_session = i.agent_session_shown if i.agent_session_shown in c["agent_session"].options else None
            c["agent_session"].value = shown_session
            items = i.shown_items if shown_session is not None else None
            c["items"].value = "" if items is None else html_table(items, "no items in this session")
            if i.busy is not None:
                c["status"].value = status_html(i.busy)
            elif i.staged is not None:
                c["status"].value = status_html("staged: " + i.staged["describe"] + " (not written yet)")
            else:
                c["status"].value = status_html(*i.notice) if i.notice else ""
        finally:
            self.refreshing = False
