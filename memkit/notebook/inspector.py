"""The memory inspector: browse any memkit database and make confirm-gated corrections.

Every control of the widget calls a plain method that returns data, so a notebook (or a test) can
call the same methods to see, headless, what the widget shows. A correction goes the way an agent's
does: a one-time confirmation in an `Approvals`, then the `memory_put` or `memory_delete` tool of
`MemoryTools`, which finds that confirmation, writes with its id in the event history, and spends it.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar, cast

from ..approvals import Approvals
from ..errors import ApprovalError, MemkitError, StoreError, ValidationError
from ..limits import DEFAULT_LIMITS, KINDS, Limits
from ..store import MemoryStore, Record
from ..tools import MemoryTools
from ._support import widgets as _widgets
from .tables import history_table, html_table, records_table
from .views import _View, status_html

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _shows_refusals(method: F) -> F:
    """A refusal raised by an inspector method is also shown in the widget's status line, however
    the method was called (a click, or a cell)."""
    @functools.wraps(method)
    def wrapper(self: MemoryInspector, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except MemkitError as exc:
            self.notice = (str(exc), False)
            self._changed(None)
            raise
    return cast(F, wrapper)


class MemoryInspector(_View):
    """Browse and carefully edit any memkit database: users, records, history, confirm-gated changes.

    Every widget control calls one of the plain methods below, which return data; a notebook (or a
    test) can call the same methods to see, headless, what the widget shows. Edits and deletes are
    two-step: `stage_edit`/`stage_delete` only describe the change; `confirm` (the Confirm button)
    makes a one-time confirmation, performs exactly the staged change with its id recorded in the
    event history, and spends it.

    Args:
        store_or_path: an open `MemoryStore` (left open on `close`) or the path of an existing
            database file (opened here, closed on `close`; a missing file is refused, not created).
        approvals: where confirmations come from (default: a new `Approvals("inspector")`).
        session: the session id recorded with the inspector's writes.
        limits: the limits to open a path with (ignored for an open store).

    Raises:
        StoreError: the path does not exist or is not a memkit database.

    Example:
        >>> inspector = MemoryInspector("memory.sqlite3")     # doctest: +SKIP
        >>> inspector.select_user("alice")                    # the records table   # doctest: +SKIP
        >>> inspector.select_key("preference", "drink")       # its history         # doctest: +SKIP
        >>> inspector.stage_edit("green tea"); inspector.confirm()                  # doctest: +SKIP
    """

    ALL = "all"

    def __init__(self, store_or_path: MemoryStore | str | os.PathLike[str], *, approvals: Approvals | None = None,
                 session: str = "inspector", limits: Limits = DEFAULT_LIMITS) -> None:
        if isinstance(store_or_path, MemoryStore):
            self.store, self._owns_store = store_or_path, False
        else:
            path = Path(store_or_path)
            if not path.exists():
                raise StoreError(f"there is no database at {path}; the inspector opens existing files only")
            self.store, self._owns_store = MemoryStore(path, limits=limits), True
        self.session = self.store.limits.check_id("session", session)
        self.approvals = approvals if approvals is not None else Approvals("inspector", self.store.limits)
        self.user: str | None = None
        self.kind: str | None = None
        self.query = ""
        self.selected: tuple[str, str] | None = None
        self.staged: dict[str, Any] | None = None
        self.notice: tuple[str, bool] | None = None
        """What the status line says when nothing is staged: the last change done or refused (text, ok)."""
        self.controls: dict[str, Any] = {}
        """The widget's controls by name, filled when the widget is built (tests set and click them)."""
        self._refreshing = False
        users = self.users()
        if users:
            self.user = users[0]

    # -- reading ------------------------------------------------------------------------------------

    def users(self) -> list[str]:
        """Every user with records, by user id."""
        return list(self.store.users())

    def records(self) -> list[Record]:
        """The current user's records that pass the kind filter and the search box, by kind then key.

        With text in the search box these are the store's own search results (`MemoryStore.search`:
        a literal, case-insensitive substring of key or value), at most `Limits.max_search_limit`
        of them, the newest; without, every record of the user.
        """
        if self.user is None:
            return []
        if not self.query:
            return self.store.records(self.user, self.kind)
        found = self.store.search(self.user, self.query, limit=self.store.limits.max_search_limit, kind=self.kind)
        return sorted(found, key=lambda r: (r["kind"], r["key"]))

    def table(self) -> pandas.DataFrame:
        """The records table the widget shows."""
        return records_table(self.records())

    def history(self) -> pandas.DataFrame:
        """The revision history of the selected key (empty when none is selected)."""
        if self.user is None or self.selected is None:
            return history_table([])
        return history_table(self.store.history(self.user, *self.selected))

    def state(self) -> dict[str, Any]:
        """The inspector's current choices, and the staged change if any."""
        return {"user": self.user, "kind": self.kind or self.ALL, "query": self.query,
                "selected": ":".join(self.selected) if self.selected else None,
                "staged": self.staged["describe"] if self.staged else None}

    # -- choosing (each returns what the widget then shows) --------------------------------------------

    @_shows_refusals
    def select_user(self, user: str) -> pandas.DataFrame:
        """Show `user`'s records; clears the selected key and any staged change."""
        self.user = self.store.limits.check_id("user", user)
        self.selected, self.staged, self.notice = None, None, None
        return self._changed(self.table())

    @_shows_refusals
    def set_kind(self, kind: str | None) -> pandas.DataFrame:
        """Filter by kind (`preference`, `episode`, or `all`/None); returns the records table."""
        self.kind = None if kind in (None, self.ALL) else self.store.limits.check_kind(kind)
        self.notice = None
        return self._changed(self.table())

    @_shows_refusals
    def set_query(self, query: str) -> pandas.DataFrame:
        """Filter by a search text (empty shows everything); returns the records table."""
        self.query = self.store.limits.check_query(query)
        self.notice = None
        return self._changed(self.table())

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
            ValidationError: no key selected, the key is gone, or the value breaks a rule.
        """
        record = self._current()
        self.store.limits.check_value(value)
        if value == record["value"]:
            raise ValidationError(f"the new value is the value {record['key']!r} already holds; nothing to change")
        return self._stage("edit", record, value,
                           f"edit {record['kind']} {record['key']!r}: {record['value']!r} -> {value!r}")

    @_shows_refusals
    def stage_delete(self) -> dict[str, Any]:
        """Describe deleting the selected key; nothing is deleted until `confirm`."""
        record = self._current()
        return self._stage("delete", record, None, f"delete {record['kind']} {record['key']!r} (now {record['value']!r})")

    def _stage(self, action: str, record: dict[str, Any], new_value: str | None, describe: str) -> dict[str, Any]:
        # What was seen when staging (value and revision) is kept, so confirm can refuse a stale change.
        self.staged = {"action": action, "user": self.user, "kind": record["kind"], "key": record["key"],
                       "old_value": record["value"], "new_value": new_value, "revision": record["revision"],
                       "describe": describe}
        self._changed(None)
        return self._staged_view()

    def _staged_view(self) -> dict[str, Any]:
        assert self.staged is not None
        return {"staged": self.staged["describe"], "revision seen": self.staged["revision"],
                "written": False, "next": "press Confirm to do exactly this, or Cancel"}

    def cancel(self) -> dict[str, Any]:
        """Drop the staged change; nothing is written."""
        dropped, self.staged = self.staged, None
        self.notice = (f"cancelled: {dropped['describe']}; nothing was written" if dropped else "nothing was staged", True)
        self._changed(None)
        return {"cancelled": dropped["describe"] if dropped else None, "written": False}

    @_shows_refusals
    def confirm(self) -> dict[str, Any]:
        """The Confirm click: perform exactly the staged change under a new one-time confirmation.

        The record must still be at the revision seen when staging; if someone changed it since,
        nothing is written and the change must be staged again after a fresh look. The change is
        made the way an agent's is: the confirmation goes into `approvals`, and the `memory_put` or
        `memory_delete` tool of `MemoryTools` finds it, writes, and spends it.

        Returns:
            action, kind, key, the confirmation id (also kept in the event history), the new revision.

        Raises:
            ApprovalError: nothing is staged, or the record changed since it was staged.
            MemkitError: the store refused the write (locked, a quota); nothing was written.
        """
        staged = self.staged
        if staged is None:
            raise ApprovalError("nothing is staged; stage an edit or a delete first, then confirm it")
        user, kind, key = staged["user"], staged["kind"], staged["key"]
        current = self.store.get(user, kind, key)
        if current is None or current["revision"] != staged["revision"]:
            self.staged = None
            self._changed(None)
            now = "deleted" if current is None else f"at revision {current['revision']}"
            raise ApprovalError(
                f"{kind} {key!r} changed since it was staged (revision {staged['revision']}, "
                f"now {now}); nothing was written. Look again and stage a new change"
            )
        tools = MemoryTools(self.store, user, self.session, self.approvals)
        if staged["action"] == "edit":
            confirmation = self.approvals.confirm_put(kind, key, staged["new_value"])
            outcome = tools.call("memory_put", {"kind": kind, "key": key, "value": staged["new_value"]})
        else:
            confirmation = self.approvals.confirm_delete(kind, key)
            outcome = tools.call("memory_delete", {"kind": kind, "key": key})
        if confirmation in self.approvals.pending:
            # The tool did not spend it (the write failed): a click confirms one attempt, never a later replay.
            self.approvals.spend(confirmation)
        self.staged = None
        self._changed(None)
        if not outcome["ok"]:
            raise StoreError(f"{staged['describe']}: not done, nothing was written ({outcome['error']})")
        if staged["action"] == "delete" and not outcome["result"]["deleted"]:
            raise ApprovalError(f"{kind} {key!r} was deleted by someone else meanwhile; nothing was written")
        revision = outcome["result"]["revision"] if staged["action"] == "edit" else staged["revision"]
        # The id the event history recorded: the tool spends the first waiting confirmation of
        # exactly this change, which is an older one if a person had already confirmed it.
        recorded = self.store.history(user, kind, key)[-1]["confirmation"]
        self.notice = (f"done: {staged['describe']}, on confirmation {recorded}", True)
        self._changed(None)
        return {"done": staged["action"], "kind": kind, "key": key, "confirmation": recorded, "revision": revision}

    def close(self) -> None:
        """Close the store if the inspector opened it."""
        if self._owns_store:
            self.store.close()

    # -- the widget ----------------------------------------------------------------------------------

    def _build(self) -> Any:
        w = _widgets()
        c = self.controls
        c["user"] = w.Dropdown(options=self.users(), value=self.user, description="user",
                               layout=w.Layout(width="240px"))
        # Wide enough for "preference" in any default font; the row wraps rather than cutting a label.
        c["kind"] = w.ToggleButtons(options=[self.ALL, *KINDS], value=self.kind or self.ALL,
                                    description="kind", style={"button_width": "110px"})
        c["query"] = w.Text(value=self.query, description="search", placeholder="text in key or value")
        c["records"] = w.HTML()
        c["key"] = w.Dropdown(description="key", options=[])
        c["history"] = w.HTML()
        c["value"] = w.Text(description="new value")
        c["stage_edit"] = w.Button(description="Stage edit", icon="pencil")
        c["stage_delete"] = w.Button(description="Stage delete", icon="trash")
        c["confirm"] = w.Button(description="Confirm", button_style="danger", icon="check")
        c["cancel"] = w.Button(description="Cancel")
        c["status"] = w.HTML()
        c["user"].observe(lambda ch: self._handle(self.select_user, ch["new"]), names="value")
        c["kind"].observe(lambda ch: self._handle(self.set_kind, ch["new"]), names="value")
        c["query"].observe(lambda ch: self._handle(self.set_query, ch["new"]), names="value")
        c["key"].observe(self._on_key, names="value")
        c["stage_edit"].on_click(lambda _b: self._handle(self.stage_edit, c["value"].value))
        c["stage_delete"].on_click(lambda _b: self._handle(self.stage_delete))
        c["confirm"].on_click(lambda _b: self._handle(self.confirm))
        c["cancel"].on_click(lambda _b: self._handle(self.cancel))
        box = w.VBox([
            w.HBox([c["user"], c["kind"]], layout=w.Layout(flex_flow="row wrap")), c["query"], c["records"],
            w.HTML("<b>revision history</b>"), c["key"], c["history"],
            w.HBox([c["value"], c["stage_edit"], c["stage_delete"]]), w.HBox([c["confirm"], c["cancel"]]),
            c["status"],
        ])
        self._widget = box
        self._refresh()
        return box

    def _handle(self, method: Callable[..., Any], *args: Any) -> Any:
        """Run a plain method for a control; its refusal is shown (by the method), not raised into the frontend."""
        if self._refreshing:
            return None
        try:
            return method(*args)
        except MemkitError:
            return None

    def _on_key(self, change: Mapping[str, Any]) -> None:
        if change["new"]:
            kind, key = change["new"].split(":", 1)
            self._handle(self.select_key, kind, key)

    def _changed(self, result: T) -> T:
        if self._widget is not None:
            self._refresh()
        return result

    def _refresh(self) -> None:
        """Bring every control in line with the inspector's state (without firing their handlers)."""
        c = self.controls
        self._refreshing = True
        try:
            users = self.users()
            if self.user is not None and self.user not in users:
                users.append(self.user)  # a user whose last record was just deleted stays selectable
            c["user"].options = users
            c["user"].value = self.user
            c["kind"].value = self.kind or self.ALL
            c["query"].value = self.query
            records = self.records()
            c["records"].value = html_table(records_table(records), "no records match")
            keys = [f"{r['kind']}:{r['key']}" for r in records]
            if self.selected and ":".join(self.selected) not in keys:
                keys.append(":".join(self.selected))  # keep a deleted key's history in view
            c["key"].options = keys
            c["key"].value = ":".join(self.selected) if self.selected else None
            c["history"].value = html_table(self.history(), "select a key to see its history")
            c["confirm"].disabled = self.staged is None
            c["cancel"].disabled = self.staged is None
            if self.staged is not None:
                c["status"].value = status_html("staged: " + self.staged["describe"] + " (not written yet)")
            else:
                c["status"].value = status_html(*self.notice) if self.notice else ""
        finally:
            self._refreshing = False

    def __repr__(self) -> str:
        return f"MemoryInspector(user={self.user!r}, kind={self.kind or self.ALL!r}, query={self.query!r})"
