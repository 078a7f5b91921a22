"""The memory inspector: browse any memkit database, read-only unless editing is asked for.

Opening a database to look at it must not change it: the inspector opens it read-only by default
(`MemoryStore(read_only=True)`: the file's bytes and mtime stay the same, no `-wal`/`-shm` is made,
an older schema is shown, never migrated). `edit=True`, or the Edit switch, reopens it for writing.

Every control of the widget calls a plain method that returns data, so a notebook (or a test) can
call the same methods to see, headless, what the widget shows. A correction goes the way an agent's
does: a one-time confirmation in an `Approvals`, then the `memory_put` or `memory_delete` tool of
`MemoryTools`, which finds that confirmation, writes with its id in the event history, and spends it.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast
from collections.abc import Callable, Mapping

from ..approvals import Approvals
from ..jsonutil import import_jsonschema
from ..errors import ApprovalError, MemkitError, StoreError, ValidationError
from ..limits import KINDS, Limits
from ..store import SCHEMA_VERSION, MemoryStore, Record, open_store
from ..store.peers import what_is
from ..store.targets import masked, postgres_conninfo
from ..tools import MemoryTools
from ._support import pandas as _pandas, widgets as _widgets
from .peer_views import NotInspectable, PeerInspector
from .proposals_view import ProposalsPanel, decide
from .tables import history_table, html_table, records_table
from .views import _View, status_html

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed

    from ..window import ShortTermWindow

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

SORTS = ("kind, key", "newest", "key")
"""How the records table can be ordered: by kind then key (the store's order), newest first, by key."""

SHOWN_FIELDS = ("value", "revision", "created_at", "updated_at", "source_session")
"""What of a record the inspector keeps when a change is staged, with the store's write number:
`confirm` does the change only if all of it is still what was shown."""


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


def _warm_tools() -> None:
    """Import jsonschema before the first Confirm needs it, the way the tools import it
    (`import_jsonschema`: without compiling the IRI grammar, which cost seconds)."""
    import_jsonschema()


class MemoryInspector(_View):
    """Browse any memkit database (read-only unless asked), and make confirm-gated corrections.

    Every widget control calls one of the plain methods below, which return data; a notebook (or a
    test) can call the same methods to see, headless, what the widget shows. Edits and deletes are
    two-step: `stage_edit`/`stage_delete` only describe the change; `confirm` (the Confirm button)
    makes a one-time confirmation, performs exactly the staged change with its id recorded in the
    event history, and spends it, provided the record is still exactly the one shown when staging.

    Args:
        target: an open `MemoryStore` (left open on `close`; editable unless it was opened
            read-only), the path of an existing database file, or a PostgreSQL URL (any spelling
            `open_store` takes; its password is never shown). A path or URL is opened here, closed on
            `close`, and never created.
        edit: open a path or URL for writing; without it the store is read-only (see the module
            docstring) and `set_edit(True)` (the Edit switch) reopens it for writing.
        approvals: where confirmations come from (default: a new `Approvals("inspector")`).
        session: the session id recorded with the inspector's writes.
        limits: the limits to open a path or URL with (default: the ones the store recorded).
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

    ALL = "all"
    SORTS = SORTS

    def __init__(self, target: MemoryStore | str | os.PathLike[str], *, edit: bool = False,
                 approvals: Approvals | None = None, session: str = "inspector", limits: Limits | None = None,
                 page_size: int = 20, window: ShortTermWindow | None = None) -> None:
        self._limits = limits
        if isinstance(target, MemoryStore):
            self.store, self._owns_store, self._target = target, False, None
        else:
            self._target = target
            self.store, self._owns_store = self._open(target, edit), True
        if not isinstance(page_size, int) or isinstance(page_size, bool) or not 1 <= page_size <= 500:
            raise ValidationError(f"page_size is {page_size!r}; use 1 to 500 records a page")
        self.session = self.store.limits.check_id("session", session)
        self.approvals = approvals if approvals is not None else Approvals("inspector", self.store.limits)
        self.window = window
        self.user: str | None = None
        self.kind: str | None = None
        self.query = ""
        self.sort = SORTS[0]
        self.page = 0
        self.page_size = page_size
        self.show_deleted = False
        self.session_shown: str | None = None
        self.selected: tuple[str, str] | None = None
        self.staged: dict[str, Any] | None = None
        self.notice: tuple[str, bool] | None = None
        """What the status line says when nothing is staged: the last change done or refused (text, ok)."""
        self.done: list[dict[str, Any]] = []
        """Every change `confirm` made, oldest first: action, user, kind, key, value and the
        confirmation id the history recorded (what an exercise check reads to tell a change made
        through the inspector from one written around it)."""
        self.busy: str | None = None
        """What a slow action is doing right now (shown in the status line while it runs)."""
        self.controls: dict[str, Any] = {}
        """The widget's controls by name, filled when the widget is built (tests set and click them)."""
        self._tools: dict[str, MemoryTools] = {}
        self._turns: pandas.DataFrame | None = None
        self._refreshing = False
        self._panel: ProposalsPanel | None = None  # made when a user is first selected in the widget
        users = self.users()
        if users:
            self.user = users[0]
        self.warming: threading.Thread | None = None
        """The background import of jsonschema started when editing begins (None when read-only)."""
        if self.editing:
            self._warm()

    def _warm(self) -> None:
        # The first Confirm needs jsonschema, whose import takes seconds with jupyter's format
        # checkers installed: start it now, while the person is still choosing what to change.
        self.warming = threading.Thread(target=_warm_tools, name="memkit-inspector-warm", daemon=True)
        self.warming.start()

    def _open(self, target: str | os.PathLike[str], edit: bool) -> MemoryStore:
        conninfo = postgres_conninfo(target) if isinstance(target, str) else None
        if conninfo is None:
            path = Path(target)
            if not path.exists():
                raise StoreError(f"there is no database at {path}; the inspector opens existing files only")
            return open_store(path, limits=self._limits, read_only=not edit)
        return open_store(conninfo, limits=self._limits, read_only=not edit, create=False)

    @property
    def editing(self) -> bool:
        """Whether changes can be staged and confirmed (the store is open for writing)."""
        return not getattr(self.store, "read_only", False)

    @property
    def where(self) -> str:
        """The database shown, as it may be printed (a file name, or a URL with its password masked)."""
        path = getattr(self.store, "path", None)
        return path.name if path is not None else masked(str(getattr(self.store, "url", "")))

    def note(self) -> str:
        """One line saying how the database is open: read-only or editing, and an older schema's version."""
        opened = self.store.opened
        if self.editing:
            return f"editing {self.where}: a confirmed change is written to it"
        text = f"read-only: {self.where} is not changed by looking (switch Edit on to make changes)"
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
            raise ValidationError("the inspector was given an open store; it cannot reopen it. Pass a path or "
                                  "URL to switch, or give it a store opened for writing")
        reopened = self._open(self._target, on)  # before closing: a refusal leaves the old store in use
        self.store.close()
        self.store, self.staged, self._tools = reopened, None, {}
        self.notice = (self.note(), True)
        if on:
            self._warm()
        self._changed(None)
        return self.note()

    # -- reading ------------------------------------------------------------------------------------

    def users(self) -> list[str]:
        """Every user with records, by user id."""
        return list(self.store.users())

    def find_users(self, text: str, limit: int = 50) -> list[str]:
        """Users whose id contains `text` (case-insensitive), by id, at most `limit`: what typing in
        the user box offers."""
        folded = text.strip().casefold()
        return [u for u in self.users() if folded in u.casefold()][:limit]

    def records(self) -> list[Record]:
        """The current user's records that pass the kind filter and the search box, in `sort` order.

        With text in the search box these are the store's own search results (`MemoryStore.search`:
        a literal, case-insensitive substring of key or value), at most `Limits.max_search_limit`
        of them, the newest; without, every record of the user.
        """
        if self.user is None:
            return []
        if not self.query:
            found = self.store.records(self.user, self.kind)
        else:
            found = self.store.search(self.user, self.query, limit=self.store.limits.max_search_limit, kind=self.kind)
        if self.sort == "newest":
            return sorted(found, key=lambda r: (r["updated_at"], r["kind"], r["key"]), reverse=True)
        if self.sort == "key":
            return sorted(found, key=lambda r: (r["key"], r["kind"]))
        return sorted(found, key=lambda r: (r["kind"], r["key"]))

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
        pd = _pandas()
        columns = ["kind", "key", "value", "revision", "deleted_at", "events"]
        rows = self.store.deleted_keys(self.user) if self.user is not None else []
        return pd.DataFrame(rows, columns=columns)

    def sessions(self) -> pandas.DataFrame:
        """The current user's sessions: archived turns (and live ones, when a window was given)."""
        pd = _pandas()
        rows = self.store.sessions(self.user) if self.user is not None else []
        if self.window is not None and self.user is not None:
            for row in rows:
                row["live turns"] = len(self.window.recent(self.user, row["session"]))
        columns = ["session", "turns", "first", "last"] + (["live turns"] if self.window is not None else [])
        return pd.DataFrame(rows, columns=columns)

    @_shows_refusals
    def turns(self, session: str) -> pandas.DataFrame:
        """What was said in one session of the current user: archived turns, then the live window's
        turns not archived yet (when a window was given), in turn order."""
        pd = _pandas()
        self.store.limits.check_id("session", session)
        self.session_shown = session
        rows: list[dict[str, Any]] = []
        if self.user is not None:
            archived = self.store.archived_turns(self.user, session)
            rows = [{**t, "where": "archive"} for t in archived]
            if self.window is not None:
                last = max((t["turn"] for t in archived), default=0)
                rows += [{**t, "where": "window"} for t in self.window.recent(self.user, session) if t["turn"] > last]
        self._turns = pd.DataFrame(rows, columns=["turn", "role", "content", "at", "where"])
        return self._changed(self._turns)

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
        return self._changed(self.table())

    def pending_proposals(self) -> list[dict[str, Any]]:
        """The selected user's proposals waiting for a person (what a model proposed: notebook 10)."""
        return [] if self.user is None else self.store.proposals(self.user)

    def decide_proposal(self, proposal_id: int, decision: str) -> dict[str, Any]:
        """Approve or reject one of the selected user's proposals, as the panel's buttons do.

        Approving writes, so it needs the Edit switch on; the history then names the proposal and
        `inspector` as where it was approved. Returns `proposals_view.decide`'s result: a refusal is
        a result with `ok` False and the reason, and changes nothing.
        """
        if self.user is None:
            return {"ok": False, "proposal": proposal_id, "reason": "invalid", "error": "select a user first"}
        if not self.editing:
            return {"ok": False, "proposal": proposal_id, "reason": "read-only",
                    "error": "the inspector is read-only: switch Edit on to approve or reject a proposal"}
        result = decide(self.store, self.user, proposal_id, decision, origin="inspector")
        if self._panel is not None:
            self._panel.refresh()
        self._after_decision(result)
        return result

    def _after_decision(self, result: dict[str, Any]) -> None:
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
            raise ApprovalError(f"{self.where} is open read-only; switch Edit on (or open it with edit=True) "
                                "to stage a change. Nothing was staged")
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
                           f"edit {record['kind']} {record['key']!r}: {record['value']!r} -> {value!r}")

    @_shows_refusals
    def stage_delete(self) -> dict[str, Any]:
        """Describe deleting the selected key; nothing is deleted until `confirm`."""
        record = self._current()
        return self._stage("delete", record, None, f"delete {record['kind']} {record['key']!r} (now {record['value']!r})")

    def _stage(self, action: str, record: Record, new_value: str | None, describe: str) -> dict[str, Any]:
        # The whole record seen when staging is kept, with the store's number of its last write, so
        # confirm can refuse a change to anything else: an edit, or the key forgotten and written
        # again (revision 1 again, perhaps the same value).
        assert self.user is not None
        shown = {field: record[field] for field in SHOWN_FIELDS}  # type: ignore[literal-required]
        shown["write"] = self.store.write_number(self.user, record["kind"], record["key"])
        self.staged = {"action": action, "user": self.user, "kind": record["kind"], "key": record["key"],
                       "old_value": record["value"], "new_value": new_value, "revision": record["revision"],
                       "shown": shown, "describe": describe}
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

    def _tools_for(self, user: str) -> MemoryTools:
        """One `MemoryTools` per user, kept: its four JSON-Schema validators are compiled once."""
        if user not in self._tools:
            self._tools[user] = MemoryTools(self.store, user, self.session, self.approvals)
        return self._tools[user]

    def _differences(self, staged: Mapping[str, Any], current: Record | None) -> list[str]:
        if current is None:
            return ["deleted"]
        now = {field: current[field] for field in SHOWN_FIELDS}  # type: ignore[literal-required]
        now["write"] = self.store.write_number(staged["user"], staged["kind"], staged["key"])
        changed = [field for field in (*SHOWN_FIELDS, "write") if now[field] != staged["shown"][field]]
        if changed == ["write"]:
            return ["written again since (the same value: forgotten and rewritten, or restored)"]
        return [f"{field} {staged['shown'][field]!r} -> {now[field]!r}" for field in changed if field != "write"]

    @_shows_refusals
    def confirm(self) -> dict[str, Any]:
        """The Confirm click: perform exactly the staged change under a new one-time confirmation.

        The record must still be exactly the one shown when staging: its value, revision, times,
        source session, and the store's number of its last write (so a key forgotten and written
        again at revision 1 is not mistaken for it). The check and the write run in one transaction,
        so nothing can slip in between. Otherwise nothing is written and the change must be staged
        again after a fresh look. The change is made the way an agent's is: the confirmation goes
        into `approvals`, and the `memory_put` or `memory_delete` tool of `MemoryTools` finds it,
        writes, and spends it.

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
        tools = self._tools_for(user)
        self.busy = f"writing: {staged['describe']}"
        self._changed(None)
        def refuse_if_changed() -> None:
            changed = self._differences(staged, self.store.get(user, kind, key))
            if changed:
                raise ApprovalError(
                    f"{kind} {key!r} changed since it was staged ({'; '.join(changed)}); nothing was "
                    "written. Look again and stage a new change")

        try:
            refuse_if_changed()  # a first look, before any confirmation is made for it
        except ApprovalError:
            self.staged, self.busy = None, None
            self._changed(None)
            raise
        if staged["action"] == "edit":
            confirmation = self.approvals.confirm_put(kind, key, staged["new_value"])
        else:
            confirmation = self.approvals.confirm_delete(kind, key)
        try:
            with self.store.transaction():
                refuse_if_changed()  # again holding the write lock: nothing can slip in between
                if staged["action"] == "edit":
                    outcome = tools.call("memory_put", {"kind": kind, "key": key, "value": staged["new_value"]})
                else:
                    outcome = tools.call("memory_delete", {"kind": kind, "key": key})
        except MemkitError as exc:
            if isinstance(exc, ApprovalError):
                raise
            outcome = {"ok": False, "error": str(exc)}  # the lock or the commit failed: nothing was written
        finally:
            if confirmation in self.approvals.pending:
                # Not spent (the write failed): a click confirms one attempt, never a later replay.
                self.approvals.spend(confirmation)
            self.staged, self.busy = None, None
            self._changed(None)
        if not outcome["ok"]:
            raise StoreError(f"{staged['describe']}: not done, nothing was written ({outcome['error']})")
        if staged["action"] == "delete" and not outcome["result"]["deleted"]:
            raise ApprovalError(f"{kind} {key!r} was deleted by someone else meanwhile; nothing was written")
        revision = outcome["result"]["revision"] if staged["action"] == "edit" else staged["revision"]
        # The id the event history recorded: the tool spends the first waiting confirmation of
        # exactly this change, which is an older one if a person had already confirmed it.
        recorded = self.store.history(user, kind, key)[-1]["confirmation"]
        self.done.append({"action": staged["action"], "user": user, "kind": kind, "key": key,
                          "value": staged["new_value"], "revision": revision, "confirmation": recorded})
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
        c["note"] = w.HTML()
        c["edit"] = w.ToggleButton(value=self.editing, description="Edit", icon="pencil",
                                   tooltip="reopen the database for writing (off: read-only)")
        # Typing filters the users (hundreds of them); a whole id selects that user.
        c["user"] = w.Combobox(options=self.users(), value=self.user or "", description="user",
                               placeholder="type to find a user", ensure_option=False,
                               layout=w.Layout(width="280px"))
        # Wide enough for "preference" in any default font; the row wraps rather than cutting a label.
        c["kind"] = w.ToggleButtons(options=[self.ALL, *KINDS], value=self.kind or self.ALL,
                                    description="kind", style={"button_width": "110px"})
        c["sort"] = w.Dropdown(options=list(SORTS), value=self.sort, description="sort",
                               layout=w.Layout(width="200px"))
        c["query"] = w.Text(value=self.query, description="search", placeholder="text in key or value")
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
        c["show_deleted"] = w.Checkbox(value=self.show_deleted, description="list deleted keys")
        c["deleted"] = w.HTML()
        c["session"] = w.Dropdown(description="session", options=[])
        c["sessions"] = w.HTML()
        c["turns"] = w.HTML()
        c["edit"].observe(lambda ch: self._slow(f"reopening {self.where}", self.set_edit, ch["new"]), names="value")
        c["user"].observe(self._on_user, names="value")
        c["kind"].observe(lambda ch: self._handle(self.set_kind, ch["new"]), names="value")
        c["sort"].observe(lambda ch: self._handle(self.set_sort, ch["new"]), names="value")
        c["query"].observe(lambda ch: self._handle(self.set_query, ch["new"]), names="value")
        c["previous"].on_click(lambda _b: self._handle(self.set_page, self.page - 1))
        c["next"].on_click(lambda _b: self._handle(self.set_page, self.page + 1))
        c["key"].observe(self._on_key, names="value")
        c["stage_edit"].on_click(lambda _b: self._handle(self.stage_edit, c["value"].value))
        c["stage_delete"].on_click(lambda _b: self._handle(self.stage_delete))
        c["confirm"].on_click(lambda _b: self._slow("writing", self.confirm))
        c["cancel"].on_click(lambda _b: self._handle(self.cancel))
        c["show_deleted"].observe(lambda ch: self._handle(self.set_show_deleted, ch["new"]), names="value")
        c["session"].observe(lambda ch: ch["new"] and self._handle(self.turns, ch["new"]), names="value")
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
                                     c["proposals"]])
        more.set_title(0, "deleted keys")
        more.set_title(1, "sessions and what was said")
        more.set_title(2, "proposals waiting for a person")
        box = w.VBox([
            w.HBox([c["edit"], c["note"]]),
            w.HBox([c["user"], c["kind"], c["sort"]], layout=w.Layout(flex_flow="row wrap")), c["query"],
            # The record list and the selected key side by side: history and edit controls stay in
            # view however long the list, which is paged besides.
            w.HBox([records, detail], layout=w.Layout(flex_flow="row wrap")),
            more,
        ])
        self._widget = box
        self._refresh()
        return box

    def _show_proposals(self) -> None:
        """The proposals panel follows the selected user and the store in use (it reopens on Edit)."""
        if self.user is None:
            return
        panel = self._panel
        if panel is None:
            self._panel = ProposalsPanel(self.store, self.user, origin="inspector",
                                         on_decide=self._after_decision)
            self.controls["proposals"].children = (self._panel.widget,)
        elif panel.store is not self.store or panel.user != self.user:
            panel.store = self.store
            panel.show_user(self.user)

    def _slow(self, doing: str, method: Callable[..., Any], *args: Any) -> Any:
        """Run a method that may take more than a moment, saying so in the status line meanwhile."""
        if self._refreshing:
            return None
        self.busy = f"{doing}…"
        if "status" in self.controls:
            self.controls["status"].value = status_html(self.busy)
        try:
            return self._handle(method, *args)
        finally:
            self.busy = None
            self._changed(None)

    def _on_user(self, change: Mapping[str, Any]) -> None:
        typed = change["new"] or ""
        if typed in self.users():
            self._handle(self.select_user, typed)
        elif not self._refreshing:
            found = self.find_users(typed, limit=6)
            hint = ", ".join(found) + (" …" if len(found) == 6 else "") if found else "no user id contains it"
            self.controls["status"].value = status_html(f"{typed!r}: {hint}", ok=bool(found))

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
            c["note"].value = status_html(self.note(), ok=True)
            c["edit"].value = self.editing
            c["edit"].disabled = not self._owns_store
            users = self.users()
            if self.user is not None and self.user not in users:
                users.append(self.user)  # a user whose last record was just deleted stays selectable
            c["user"].options = users
            c["user"].value = self.user or ""
            c["kind"].value = self.kind or self.ALL
            c["sort"].value = self.sort
            c["query"].value = self.query
            found = self.records()
            records = self.page_records()
            c["records"].value = html_table(records_table(records), "no records match")
            c["page"].value = (f"<span style='padding:0 8px'>page {self.page + 1} of {self.pages()} "
                               f"({len(found)} records)</span>")
            c["previous"].disabled = self.page == 0
            c["next"].disabled = self.page >= self.pages() - 1
            keys = [f"{r['kind']}:{r['key']}" for r in records]
            if self.selected and ":".join(self.selected) not in keys:
                keys.append(":".join(self.selected))  # keep a deleted key's history in view
            c["key"].options = keys
            c["key"].value = ":".join(self.selected) if self.selected else None
            c["history"].value = html_table(self.history(), "select a key to see its history")
            for name in ("value", "stage_edit", "stage_delete"):
                c[name].disabled = not self.editing
            c["confirm"].disabled = self.staged is None
            c["cancel"].disabled = self.staged is None
            self._show_proposals()
            c["show_deleted"].value = self.show_deleted
            c["deleted"].value = html_table(self.deleted(), "no deleted keys") if self.show_deleted else ""
            sessions = self.sessions()
            c["sessions"].value = html_table(sessions, "no archived sessions")
            c["session"].options = list(sessions["session"])
            c["session"].value = self.session_shown if self.session_shown in c["session"].options else None
            shown = self._turns if self.session_shown is not None else None
            c["turns"].value = "" if shown is None else html_table(shown, "no turns in this session")
            if self.busy is not None:
                c["status"].value = status_html(self.busy)
            elif self.staged is not None:
                c["status"].value = status_html("staged: " + self.staged["describe"] + " (not written yet)")
            else:
                c["status"].value = status_html(*self.notice) if self.notice else ""
        finally:
            self._refreshing = False

    def __repr__(self) -> str:
        return f"MemoryInspector(user={self.user!r}, kind={self.kind or self.ALL!r}, query={self.query!r})"


def inspect(target: MemoryStore | str | os.PathLike[str], **options: Any) -> MemoryInspector | PeerInspector | NotInspectable:
    """Open whatever `target` is for inspection, read-only, without ever raising for the file itself.

    A memkit store (a path, an open store, a PostgreSQL URL) gets a `MemoryInspector` (`options`
    go to it); another framework's file a `PeerInspector`; anything else, or a store that cannot be
    opened, a `NotInspectable` that shows one line saying what it is not. Bad options still raise.

    Example:
        >>> inspect("peer/agent_memory.db")      # doctest: +SKIP
        PeerInspector('agent_memory.db', format='openai-agents SQLiteSession', session='alice-1')
    """
    if isinstance(target, MemoryStore):
        return MemoryInspector(target, **options)
    try:
        if isinstance(target, str) and postgres_conninfo(target) is not None:
            return MemoryInspector(target, **options)
        kind, line = what_is(target)
        if kind == "memkit":
            return MemoryInspector(target, **options)
        if kind == "peer":
            return PeerInspector(target)
    except StoreError as exc:
        return NotInspectable(str(exc))
    return NotInspectable(line)
