"""`InspectorCore`: the memory inspector's state and the plain methods every control of its widget
calls (the widget is `layout`; corrections are `edits`; opening and reading a database `reading`).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..approvals import Approvals
from ..errors import ApprovalError, MemkitError, ValidationError
from ..store import SCHEMA_VERSION, Record, Store
from ..tools import MemoryTools
from ..visible import quoted
from . import edits, reading
from ._support import View
from .proposals_panel import decide, refusal
from .reading import SORTS, open_target, warm_up
from .tables import history_table, records_table

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed

    from ..window import ShortTermWindow
    from .proposals_panel import ProposalsPanel

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _shows_refusals(method: F) -> F:
    """A refusal raised by an inspector method is also shown in the widget's status line, however
    the method was called (a click, or a cell)."""
    @functools.wraps(method)
    def wrapper(self: InspectorCore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except MemkitError as exc:
            self.notice = (str(exc), False)
            self._changed(None)
            raise
    return cast(F, wrapper)


class InspectorCore(View):
    """The memory inspector without its widget: what it shows, and the plain methods its controls
    call. `MemoryInspector` (in `layout`) adds the widget; its docstring has the arguments."""

    ALL = "all"
    SORTS = SORTS

    def __init__(self, target: Store | str | os.PathLike[str], *, edit: bool = False, page_size: int = 20,
                 window: ShortTermWindow | None = None) -> None:
        if not isinstance(page_size, int) or isinstance(page_size, bool) or not 1 <= page_size <= 500:
            raise ValidationError(f"page_size is {page_size!r}; use 1 to 500 records a page")
        if isinstance(target, Store):
            self.store, self._owns_store, self._target = target, False, None
        else:
            self._target = target
            self.store, self._owns_store = open_target(target, edit), True
        self.session = "inspector"
        self.approvals = Approvals("inspector", self.store.limits)
        self.window = window
        self.user: str | None = next(iter(self.users()), None)  # the first user, if there is one
        self.kind: str | None = None
        self.query = ""
        self.sort = SORTS[0]
        self.page = 0
        self.page_size = page_size
        self.show_deleted = False
        self.session_shown: str | None = None
        self.agent_session_shown: str | None = None
        self.selected: tuple[str, str] | None = None
        self.staged: dict[str, Any] | None = None
        self.notice: tuple[str, bool] | None = None  # the status line's last change done or refused (text, ok)
        self.done: list[dict[str, Any]] = []
        """Every change `confirm` made, oldest first, with the confirmation id the history recorded (what
        an exercise check reads to tell a change made through the inspector from one written around it)."""
        self.busy: str | None = None  # what a slow action is doing right now (shown in the status line)
        self.controls: dict[str, Any] = {}  # the widget's controls by name, once it is built
        self._tools: dict[str, MemoryTools] = {}
        self.shown_turns: pandas.DataFrame | None = None  # what `turns` returned last
        self.shown_items: pandas.DataFrame | None = None  # what `items` returned last
        self.warming: threading.Thread | None = warm_up() if self.editing else None  # see `reading.warm_up`

    @property
    def editing(self) -> bool:
        """Whether changes can be staged and confirmed (the store is open for writing)."""
        return not self.store.read_only

    @property
    def where(self) -> str:
        """The database shown, as it may be printed: a file name, or PostgreSQL's host, port, database
        and schema (`Store.location`: no user, no password)."""
        return self.store.path.name if self.store.path is not None else self.store.location

    @property
    def can_reopen(self) -> bool:
        """Whether the Edit switch can reopen the database (the inspector opened it itself)."""
        return self._owns_store

    def to_edit(self) -> str:
        """What a person does to make changes here: the Edit switch, or (an inspector given an open
        store, as `memkit inspect`'s page is) open the database for writing where it was opened."""
        if self.can_reopen:
            return "switch Edit on"
        return ("start `memkit inspect` again with --edit (in a notebook: give the inspector a store opened "
                "for writing)")

    def note(self) -> str:
        """One line saying how the database is open: read-only or editing, and an older schema's version."""
        opened = self.store.opened
        if self.editing:
            return f"editing {self.where}: a confirmed change is written to it"
        text = f"read-only: {self.where} is not changed by looking ({self.to_edit()} to make changes)"
        if opened["how"] == "snapshot":
            text += (f"; its schema is version {opened['file_version']}, older than this memkit's "
                     f"{SCHEMA_VERSION}: shown from a migrated copy in memory, the file itself is never "
                     "migrated here (`memkit migrate --db FILE --confirm` does it, on purpose)")
        return text

    @_shows_refusals
    def set_edit(self, on: bool) -> str:
        """The Edit switch: reopen the database for writing (on) or read-only (off); returns `note()`.

        Keeps the user, filters and selection; drops a staged change.

        Raises:
            ValidationError: the inspector was given an open store (it did not open it, so it cannot
                reopen it); open that store for writing yourself.
            StoreError: the database cannot be opened for writing (a read-only file, a newer schema);
                the inspector stays read-only.
        """
        on = bool(on)
        if on == self.editing:
            return self.note()
        if not self._owns_store or self._target is None:
            raise ValidationError(f"the inspector was given an open store, so it cannot reopen it "
                                  f"{'for writing' if on else 'read-only'}; " + (
                                      f"to make changes, {self.to_edit()}" if on else
                                      "to only look, start `memkit inspect` without --edit (in a notebook: "
                                      "give the inspector the path)"))
        reopened = open_target(self._target, on)  # before closing: a refusal leaves the old store in use
        self.store.close()
        self.store, self.staged, self._tools = reopened, None, {}
        self.notice = (self.note(), True)
        if on:
            self.warming = warm_up()
        self._changed(None)
        return self.note()

    # -- reading ------------------------------------------------------------------------------------

    def users(self) -> list[str]:
        """Every user with records or openai-agents session items, by user id."""
        return sorted({*self.store.users(), *self.store.agent_item_users()})

    def find_users(self, text: str, limit: int = 50) -> list[str]:
        """Users whose id contains `text` (case-insensitive), by id, at most `limit`: what typing in
        the user box offers."""
        folded = text.strip().casefold()
        return [u for u in self.users() if folded in u.casefold()][:limit]

    def records(self) -> list[Record]:
        """The current user's records that pass the kind filter and the search box, in `sort` order
        (`reading.records`: with text in the search box, the store's own search results)."""
        return [] if self.user is None else reading.records(self.store, self.user, self.kind, self.query, self.sort)

    def pages(self) -> int:
        """How many pages the records table has (at least 1)."""
        return max(1, -(-len(self.records()) // self.page_size))

    def page_records(self) -> list[Record]:
        """The records on the current page."""
        found = self.records()
        self.page = min(self.page, max(0, -(-len(found) // self.page_size) - 1))
        return found[self.page * self.page_size:(self.page + 1) * self.page_size]

    def table(self) -> pandas.DataFrame:
        """The records table the widget shows: the current page."""
        return records_table(self.page_records())

    def history(self) -> pandas.DataFrame:
        """The revision history of the selected key (empty when none is selected)."""
        if self.user is None or self.selected is None:
            return history_table([])
        return history_table(self.store.history(self.user, *self.selected))

    def deleted(self) -> pandas.DataFrame:
        """The current user's deleted keys (their history ends in a delete), newest first."""
        return reading.deleted(self.store, self.user)

    def sessions(self) -> pandas.DataFrame:
        """The current user's sessions: archived turns (and live ones, when a window was given)."""
        return reading.sessions(self.store, self.user, self.window)

    def agent_sessions(self) -> pandas.DataFrame:
        """The current user's openai-agents sessions (`MemkitSession`): items, first and last; latest first."""
        return reading.agent_sessions(self.store, self.user)

    @_shows_refusals
    def items(self, session: str) -> pandas.DataFrame:
        """The items of one openai-agents session of the current user, in order (`reading.items`)."""
        self.agent_session_shown = self.store.limits.check_id("session", session)
        self.shown_items = reading.items(self.store, self.user, session)
        return self._changed(self.shown_items)

    @_shows_refusals
    def turns(self, session: str) -> pandas.DataFrame:
        """What was said in one session of the current user: archived turns, then the live window's
        turns not archived yet (when a window was given), in turn order."""
        self.session_shown = self.store.limits.check_id("session", session)
        self.shown_turns = reading.turns(self.store, self.user, session, self.window)
        return self._changed(self.shown_turns)

    def state(self) -> dict[str, Any]:
        """The inspector's current choices, and the staged change if any."""
        return {"user": self.user, "kind": self.kind or self.ALL, "query": self.query,
                "selected": ":".join(self.selected) if self.selected else None,
                "staged": self.staged["describe"] if self.staged else None}

    # -- choosing (each returns what the widget then shows) --------------------------------------------

    @_shows_refusals
    def select_user(self, user: str) -> pandas.DataFrame:
        """Show `user`'s records; clears the selected key, the page and any staged change."""
        self.user = self.store.limits.check_id("user", user)
        self.selected, self.staged, self.notice, self.page, self.session_shown = None, None, None, 0, None
        self.agent_session_shown = None
        return self._changed(self.table())

    def pending_proposals(self) -> list[dict[str, Any]]:
        """The selected user's proposals waiting for a person (what a model proposed: notebook 10)."""
        return [] if self.user is None else self.store.proposals(self.user)

    def decide_proposal(self, proposal_id: int, decision: str) -> dict[str, Any]:
        """Approve or reject one of the selected user's proposals, as the panel's buttons do; returns
        `proposals_panel.decide`'s result (a refusal has `ok` False and changed nothing). Approving
        writes, so it needs the Edit switch on; the history names `inspector` as where it was approved."""
        if self.user is None:
            return refusal(proposal_id, "invalid", "select a user first")
        if not self.editing:
            return refusal(proposal_id, "read-only",
                           f"the inspector is read-only: {self.to_edit()} to approve or reject a proposal")
        result = decide(self.store, self.user, proposal_id, decision, origin="inspector")
        if self._panel is not None:
            self._panel.refresh()
        self.after_decision(result)
        return result

    @property
    def _panel(self) -> ProposalsPanel | None:
        """The proposals panel of the widget (none here: `MemoryInspector` has one once it shows a user)."""
        return None

    def after_decision(self, result: dict[str, Any]) -> None:
        """A decision may have written a record: show the records and the history as they are now."""
        self.notice = None
        self._changed(None)

    @_shows_refusals
    def set_kind(self, kind: str | None) -> pandas.DataFrame:
        """Filter by kind (`preference`, `episode`, or `all`/None); returns the records table."""
        self.kind = None if kind in (None, self.ALL) else self.store.limits.check_kind(kind)
        self.notice, self.page = None, 0
        return self._changed(self.table())

    @_shows_refusals
    def set_query(self, query: str) -> pandas.DataFrame:
        """Filter by a search text (empty shows everything); returns the records table."""
        self.query = self.store.limits.check_query(query)
        self.notice, self.page = None, 0
        return self._changed(self.table())

    @_shows_refusals
    def set_sort(self, sort: str) -> pandas.DataFrame:
        """Order the records: `kind, key`, `newest` (first) or `key`; back to the first page."""
        if sort not in SORTS:
            raise ValidationError(f"sort {sort!r} is unknown; use one of {', '.join(SORTS)}")
        self.sort, self.page = sort, 0
        return self._changed(self.table())

    @_shows_refusals
    def set_page(self, page: int) -> pandas.DataFrame:
        """Show page `page` (0-based) of the records table."""
        last = self.pages() - 1
        if not isinstance(page, int) or isinstance(page, bool) or not 0 <= page <= last:
            raise ValidationError(f"page {page!r} does not exist; the pages are 0 to {last}")
        self.page = page
        return self._changed(self.table())

    def set_show_deleted(self, on: bool) -> pandas.DataFrame:
        """Show (or hide) the deleted keys' table; returns it."""
        self.show_deleted = bool(on)
        return self._changed(self.deleted())

    @_shows_refusals
    def select_key(self, kind: str, key: str) -> pandas.DataFrame:
        """Select one key (deleted keys too: their history remains); returns its revision history."""
        self.store.limits.check_kind(kind)
        self.store.limits.check_key(key)
        if (kind, key) != self.selected:
            self.staged = None  # a change staged for another key must not be confirmed by accident
        self.selected, self.notice = (kind, key), None
        return self._changed(self.history())

    # -- confirm-gated changes ---------------------------------------------------------------------

    def _current(self) -> Record:
        if not self.editing:
            how = "switch Edit on (or open it with edit=True)" if self.can_reopen else self.to_edit()
            raise ApprovalError(f"{self.where} is open read-only; {how} to stage a change. Nothing was staged")
        if self.user is None or self.selected is None:
            raise ValidationError("select a user and a key first")
        record = self.store.get(self.user, *self.selected)
        if record is None:
            raise ValidationError(f"{self.selected[0]} {self.selected[1]!r} of {self.user!r} does not exist (any more)")
        return record

    @_shows_refusals
    def stage_edit(self, value: str) -> dict[str, Any]:
        """Describe a new value for the selected key; nothing is written until `confirm`.

        Raises:
            ApprovalError: the inspector is read-only.
            ValidationError: no key selected, the key is gone, or the value breaks a rule.
        """
        record = self._current()
        self.store.limits.check_value(value)
        if value == record["value"]:
            raise ValidationError(f"the new value is the value {record['key']!r} already holds; nothing to change")
        return self._stage("edit", record, value,
                           f"edit {record['kind']} {record['key']!r}: {quoted(record['value'])} -> {quoted(value)}")

    @_shows_refusals
    def stage_delete(self) -> dict[str, Any]:
        """Describe deleting the selected key; nothing is deleted until `confirm`."""
        record = self._current()
        return self._stage("delete", record, None,
                           f"delete {record['kind']} {record['key']!r} (now {quoted(record['value'])})")

    def _stage(self, action: str, record: Record, new_value: str | None, describe: str) -> dict[str, Any]:
        assert self.user is not None
        self.staged = edits.stage(self.store, self.user, action, record, new_value, describe)
        self._changed(None)
        return edits.staged_view(self.staged)

    def cancel(self) -> dict[str, Any]:
        """Drop the staged change; nothing is written."""
        dropped, self.staged = self.staged, None
        self.notice = (f"cancelled: {dropped['describe']}; nothing was written" if dropped
                       else "nothing was staged", True)
        self._changed(None)
        return {"cancelled": dropped["describe"] if dropped else None, "written": False}

    def _tools_for(self, user: str) -> MemoryTools:
        """One `MemoryTools` per user, kept: its four JSON-Schema validators are compiled once."""
        if user not in self._tools:
            self._tools[user] = MemoryTools(self.store, user, self.session, self.approvals)
        return self._tools[user]

    @_shows_refusals
    def confirm(self) -> dict[str, Any]:
        """The Confirm click: perform exactly the staged change under a new one-time confirmation
        (`edits.make`), provided the record is still exactly the one shown when staging.

        Returns:
            action, kind, key, the confirmation id (also kept in the event history), the new revision.

        Raises:
            ApprovalError: nothing is staged, or the record changed since it was staged.
            MemkitError: the store refused the write (locked, a quota); nothing was written.
        """
        staged = self.staged
        if staged is None:
            raise ApprovalError("nothing is staged; stage an edit or a delete first, then confirm it")
        tools = self._tools_for(staged["user"])
        self.busy = f"writing: {staged['describe']}"
        self._changed(None)
        try:
            result = edits.make(self.store, self.approvals, tools, staged)
        finally:
            self.staged, self.busy = None, None
            self._changed(None)
        self.done.append({"action": staged["action"], "user": staged["user"], "kind": result["kind"],
                          "key": result["key"], "value": staged["new_value"], "revision": result["revision"],
                          "confirmation": result["confirmation"]})
        self.notice = (f"done: {staged['describe']}, on confirmation {result['confirmation']}", True)
        self._changed(None)
        return result

    def close(self) -> None:
        """Close the store if the inspector opened it."""
        if self._owns_store:
            self.store.close()

    # -- the widget (`MemoryInspector` draws one) ---------------------------------------------------

    def _changed(self, result: T) -> T:
        self._refresh()
        return result

    def _refresh(self) -> None:
        """Bring the widget in line with the inspector's state (there is none here)."""

    def __repr__(self) -> str:
        return f"MemoryInspector(user={self.user!r}, kind={self.kind or self.ALL!r}, query={self.query!r})"
