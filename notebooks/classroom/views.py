"""Views: small ipywidgets skins over plain functions, and the scans behind the isolation view.

Every view here is a thin skin over a plain function or method that returns data (a DataFrame, a
dict, a chart). A notebook shows the view in one cell and calls the same function in the next, so
nbval can check headless exactly what the view would show, and tests can drive the views by
setting their values and clicking their buttons.

Views render into `HTML` and `Image` widgets (never by printing into an `Output`), so displaying a
view in a cell adds nothing but the widget itself to that cell's outputs.
"""

from __future__ import annotations

import contextlib
import html
import json
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterable, Mapping, Sequence

from memkit.agent import MemoryAgent
from memkit.approvals import Approvals, Confirmation
from memkit.errors import MemkitError, ValidationError
from memkit.limits import KINDS
from memkit.models import FixtureModel, user_envelope
from memkit.store import Store
from memkit.inspector._support import View, pandas as _pandas, status_html, widgets as _widgets
from .charts import budget_chart, budget_summary, png
from .sync import run_sync
from .tables import approvals_table, html_table

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas  # type: ignore[import-untyped]  # no stubs unless pandas-stubs is installed


# -- budgets ----------------------------------------------------------------------------------------


class BudgetExplorer(View):
    """A budget slider that reruns a conversation and redraws its chart.

    Args:
        run: the plain function behind the slider: a budget in, rows out (e.g. a `functools.partial`
            of `conversation_rows`).
        budget: the starting budget.
        min, max, step: the slider's range.

    Example:
        >>> explorer = BudgetExplorer(lambda b: conversation_rows(store, "alice", b))   # doctest: +SKIP
        >>> explorer.slider.value = 4000          # what dragging the slider does        # doctest: +SKIP
    """

    def __init__(self, run: Callable[[int], Any], budget: int = 6000, *, min: int = 1000,
                 max: int = 16000, step: int = 250) -> None:
        w = _widgets()
        self.run = run
        self.slider = w.IntSlider(value=budget, min=min, max=max, step=step, description="budget",
                                  continuous_update=False, layout=w.Layout(width="60%"))
        self.image = w.Image(format="png")
        self.summary = w.HTML()
        self.rows: list[dict[str, Any]] = []
        self.slider.observe(self._on_budget, names="value")
        self.update(budget)

    def update(self, budget: int) -> list[dict[str, Any]]:
        """Rerun under `budget`, redraw; returns the rows (what the slider does on each move)."""
        self.rows = list(self.run(budget))
        self.image.value = png(budget_chart(self.rows, budget))
        summary = budget_summary(self.rows)
        self.summary.value = status_html(
            ", ".join(f"{k}: {v}" for k, v in summary.items()), ok=summary["refused"] == 0)
        return self.rows

    def _on_budget(self, change: Mapping[str, Any]) -> None:
        try:
            self.update(int(change["new"]))
        except MemkitError as exc:  # shown, not raised into the frontend (where nobody would see it)
            self.rows, self.image.value = [], b""
            self.summary.value = status_html(f"budget {change['new']}: {exc}", ok=False)

    def _build(self) -> Any:
        return _widgets().VBox([self.slider, self.summary, self.image])

    def __repr__(self) -> str:
        return f"BudgetExplorer(budget slider {self.slider.min}-{self.slider.max})"


# -- confirmations ------------------------------------------------------------------------------------


def confirm_from_form(approvals: Approvals, action: str, kind: str, key: str, value: str = "") -> dict[str, Any]:
    """What the Confirm button does: make one confirmation from the form's fields.

    Args:
        approvals: the session's confirmations (shared with the agent's tools).
        action: `put` (save exactly `value`) or `delete`.
        kind, key, value: the form's fields (`value` only for `put`).

    Returns:
        `{"ok": True, "id": ..., "allows": ...}`, or `{"ok": False, "error": ...}` when a field
        breaks a rule (then nothing was confirmed).
    """
    try:
        if action == "put":
            confirmation: Confirmation = approvals.confirm_put(kind, key.strip(), value)
        elif action == "delete":
            confirmation = approvals.confirm_delete(kind, key.strip())
        else:
            raise ValidationError(f"action {action!r} is unknown; use 'put' or 'delete'")
    except MemkitError as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "id": confirmation.id, "allows": confirmation.describe()}


class ConfirmForm(View):
    """A small form a person uses to confirm one save or delete, outside any model.

    Args:
        approvals: the confirmations the agent's tools will look in.
        action: `put` (kind, key, value) or `delete` (kind, key).

    Example:
        >>> form = ConfirmForm(agent.approvals, "put")                    # doctest: +SKIP
        >>> form.key.value, form.value.value = "drink", "tea"; form.button.click()   # doctest: +SKIP
    """

    def __init__(self, approvals: Approvals, action: str = "put") -> None:
        if action not in ("put", "delete"):
            raise ValidationError(f"action {action!r} is unknown; use 'put' or 'delete'")
        w = _widgets()
        self.approvals, self.action = approvals, action
        self.kind = w.Dropdown(options=list(KINDS), value=KINDS[0], description="kind")
        self.key = w.Text(description="key", placeholder="e.g. drink")
        self.value = w.Text(description="value", placeholder="the exact value to allow")
        self.button = w.Button(description="Confirm save" if action == "put" else "Confirm delete",
                               button_style="warning" if action == "put" else "danger")
        self.status = w.HTML()
        self.table = w.HTML(html_table(approvals_table(approvals), "no confirmations yet"))
        self.last: dict[str, Any] | None = None
        self.button.on_click(lambda _button: self.submit())

    def submit(self) -> dict[str, Any]:
        """Confirm what the form holds (the button's handler); returns `confirm_from_form`'s result."""
        self.last = confirm_from_form(self.approvals, self.action, self.kind.value, self.key.value,
                                      self.value.value)
        if self.last["ok"]:
            self.status.value = status_html(f"{self.last['id']}: allows one {self.last['allows']}")
        else:
            self.status.value = status_html(self.last["error"], ok=False)
        self.table.value = html_table(approvals_table(self.approvals), "no confirmations yet")
        return self.last

    def _build(self) -> Any:
        w = _widgets()
        fields = [self.kind, self.key] + ([self.value] if self.action == "put" else [])
        return w.VBox([w.HBox(fields), w.HBox([self.button, self.status]), self.table])

    def __repr__(self) -> str:
        return f"ConfirmForm(action={self.action!r}, origin={self.approvals.origin!r})"


# -- isolation --------------------------------------------------------------------------------------


def _strings(obj: Any) -> Iterable[str]:
    """Every string inside a JSON-like value (keys included; other scalars as text)."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _strings(item)
    elif obj is not None:
        yield str(obj)


def scan_requests(requests: Sequence[Mapping[str, Any]], memories: Mapping[str, str], *,
                  roles: Sequence[str] | None = None) -> pandas.DataFrame:
    """Look for each memory's value in every request a model received; one row per memory.

    The scan covers every string in each request (system prompt, the user message's JSON envelope,
    tool calls, tool results, tool schemas), compared case-insensitively after `casefold()`, with
    JSON escapes undone (a value is found whether it sits in a string or in JSON inside one).

    Args:
        requests: `model.requests` of a fixture model (`{"messages": ..., "tools": ...}` each).
        memories: a label naming each memory -> the value to look for
            (e.g. `"bob preference drink" -> "double espresso"`).
        roles: scan only the messages with these roles (e.g. `("tool",)`: what the tools returned);
            by default everything, tool schemas included.

    Returns:
        Columns: memory (the label), value, requests scanned, hits, in requests (the 1-based numbers
        of the requests with a hit).
    """
    pd = _pandas()

    def texts(request: Mapping[str, Any]) -> list[str]:
        found = []
        for text in _strings(request):
            found.append(text.casefold())
            with contextlib.suppress(ValueError, TypeError):  # contents are often JSON text: decode
                found.extend(t.casefold() for t in _strings(json.loads(text)))  # so escapes hide nothing
        return found

    if roles is not None:
        requests = [{"messages": [m for m in r["messages"] if m["role"] in roles]} for r in requests]
    scanned = [texts(r) for r in requests]
    rows = []
    for label, value in memories.items():
        folded = value.casefold()
        where = [n for n, request in enumerate(scanned, start=1) if any(folded in t for t in request)]
        rows.append({"memory": label, "value": value, "requests scanned": len(scanned), "hits": len(where),
                     "in requests": ", ".join(map(str, where))})
    return pd.DataFrame(rows, columns=["memory", "value", "requests scanned", "hits", "in requests"])


def cross_user_scan(store: Store, requests_by_user: Mapping[str, Sequence[Mapping[str, Any]]], *,
                    roles: Sequence[str] | None = None) -> pandas.DataFrame:
    """Scan each user's model requests for the values of every *other* user in the store.

    Args:
        store: where the users' values are read from (every user with records).
        requests_by_user: user -> the requests a model received while serving that user.
        roles: passed to `scan_requests`.

    Returns:
        One row per (requests of, other user's record): the `scan_requests` columns plus
        `requests of`. Zero hits everywhere means no value crossed between users.
    """
    pd = _pandas()
    frames = []
    stored = {user: store.records(user) for user in store.users()}  # read once, not once per pair
    for user, requests in requests_by_user.items():
        others = {f"{other} {r['kind']} {r['key']}": r["value"]
                  for other, records in stored.items() if other != user for r in records}
        frame = scan_requests(requests, others, roles=roles)
        frame.insert(0, "requests of", user)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["requests of", "memory", "value", "requests scanned", "hits", "in requests"])
    return pd.concat(frames, ignore_index=True)


def what_user_sees(store: Store, user: str, task: str) -> dict[str, Any]:
    """Run one `ask` of `user`'s agent (fixture model) and return what that agent saw and said.

    Returns:
        `{"user", "task", "retrieved": [{"kind", "key", "value"}, ...], "answer", "requests"}` where
        `retrieved` is the memory inside the request the model received, read back from the request
        itself, and `requests` counts the model's requests.
    """
    model = FixtureModel()
    agent = MemoryAgent(store, user, "switcher", model)
    reply = run_sync(agent.ask(task))
    envelope = user_envelope(model.requests[0]["messages"])
    return {"user": user, "task": task, "retrieved": envelope["retrieved_memory"], "answer": reply.text,
            "requests": len(model.requests)}


class UserSwitcher(View):
    """A dropdown of users; choosing one runs that user's agent on a task and shows what it saw.

    The dropdown stands for the trusted caller (a logged-in session) choosing the user id: the
    model never gets to choose it.

    Args:
        store: the long-term store.
        task: the task each user's agent is asked (every user with records is offered).
    """

    def __init__(self, store: Store, task: str) -> None:
        w = _widgets()
        self.store, self.task = store, task
        options = list(store.users())
        if not options:
            raise ValidationError("there are no users to switch between; save a memory first")
        self.dropdown = w.Dropdown(options=options, value=options[0], description="user")
        self.view = w.HTML()
        self.seen: dict[str, Any] = {}
        self.dropdown.observe(self._on_user, names="value")
        self.show(options[0])

    def show(self, user: str) -> dict[str, Any]:
        """Run `what_user_sees` for `user` and render it (what choosing `user` does)."""
        self.seen = what_user_sees(self.store, user, self.task)
        pd = _pandas()
        memory = pd.DataFrame(self.seen["retrieved"], columns=["kind", "key", "value"])
        self.view.value = (
            f"<p><b>task</b>: {html.escape(self.task)}</p>"
            + html_table(memory, "nothing retrieved")
            + f"<p><b>answer</b>: {html.escape(self.seen['answer'])}</p>"
        )
        return self.seen

    def _on_user(self, change: Mapping[str, Any]) -> None:
        try:
            self.show(change["new"])
        except MemkitError as exc:  # never leave the previous user's data under the new name
            self.seen = {}
            self.view.value = status_html(f"cannot show {change['new']}: {exc}", ok=False)

    def _build(self) -> Any:
        return _widgets().VBox([self.dropdown, self.view])

    def __repr__(self) -> str:
        return f"UserSwitcher(users={list(self.dropdown.options)!r})"
