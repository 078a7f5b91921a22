"""Notebook helpers: small ipywidgets views and the plain functions behind them.

Every widget here is a thin skin over a plain function or method that returns data (a DataFrame,
a dict, a matplotlib Figure). A notebook shows the widget in one cell and calls the same function
in the next, so nbval can check headless exactly what the widget would show, and tests can drive
the widgets by setting their values and clicking their buttons.

ipywidgets, pandas and matplotlib are optional (`pip install 'memkit[notebooks]'`): they are
imported inside the functions that need them, so `import memkit` never pulls them in.

Widgets render into `HTML` and `Image` widgets (never by printing into an `Output`), so displaying
a view in a cell adds nothing but the widget itself to that cell's outputs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import html
import io
import itertools
import json
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping, Sequence, TypeVar

from .agent import MemoryAgent
from .approvals import Approvals, Confirmation
from .jsonutil import canonical_json
from .limits import shorten
from .errors import ApprovalError, BudgetError, MemkitError, StoreError, ValidationError
from .limits import DEFAULT_LIMITS, KINDS, Limits
from .models import FixtureModel, ModelReply, ScriptedModel, ToolCall, say, user_envelope
from .store import MemoryStore, Record, fingerprint

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    import pandas
    from matplotlib.figure import Figure

T = TypeVar("T")

INSTALL_HINT = "pip install 'memkit[notebooks]'"


# -- optional imports ----------------------------------------------------------------------------------


def _optional(name: str) -> Any:
    """Import an optional notebook dependency, or say which extra installs it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(f"memkit.widgets needs {name.split('.')[0]}; install the notebook extra: {INSTALL_HINT}") from None


def _widgets() -> Any:
    return _optional("ipywidgets")


def _pandas() -> Any:
    return _optional("pandas")


def _figure_class() -> Any:
    # A bare Figure (not pyplot): nothing is registered globally, so a chart made in a widget
    # callback never shows up a second time at the end of some later cell, and threads are safe.
    return _optional("matplotlib.figure").Figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    # No metadata: the same chart gives the same bytes, whatever the matplotlib build date.
    figure.savefig(buffer, format="png", dpi=80, metadata={"Software": None})
    return buffer.getvalue()


def _html_table(frame: pandas.DataFrame, empty: str) -> str:
    if frame.empty:
        return f"<p><i>{html.escape(empty)}</i></p>"
    return frame.to_html(index=False, escape=True, border=0)


def _status_html(message: str, ok: bool = True) -> str:
    colour = "#1b5e20" if ok else "#b71c1c"
    return f'<p style="color:{colour}">{html.escape(message)}</p>'


class _View:
    """Base of the views: builds its widget on first use and shows a short text in plain-text outputs.

    The text stands in for the widget where no widget can be drawn (a terminal, nbval), and it stays
    the same from run to run, unlike ipywidgets' own repr.
    """

    _widget: Any = None

    def _build(self) -> Any:  # pragma: no cover - each view overrides it
        raise NotImplementedError

    @property
    def widget(self) -> Any:
        """The ipywidgets box of this view (built on first use)."""
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude))
        bundle["text/plain"] = repr(self)
        return bundle


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run a coroutine to completion from synchronous code, even inside Jupyter.

    Widget callbacks are plain functions, but the agent is async. Where no event loop runs in this
    thread (a script, a test) the coroutine runs with `asyncio.run`; where one does (a Jupyter
    kernel) it runs in a private event loop in a worker thread, which the store allows (its
    connection is shared across threads under a lock).
    """
    async def main() -> T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


# -- tables --------------------------------------------------------------------------------------------

RECORD_COLUMNS = ("kind", "key", "value", "revision", "source_session", "updated_at")
HISTORY_COLUMNS = ("action", "revision", "session", "old_value", "new_value", "confirmation", "at")


def records_table(records: Iterable[Record]) -> pandas.DataFrame:
    """Records as a table (kind, key, value, revision, source session, updated at)."""
    pd = _pandas()
    return pd.DataFrame([{c: r[c] for c in RECORD_COLUMNS} for r in records], columns=list(RECORD_COLUMNS))


def history_table(events: Iterable[Mapping[str, Any]]) -> pandas.DataFrame:
    """`MemoryStore.history` events as a table, oldest first; missing values shown as empty cells."""
    pd = _pandas()
    rows = [{c: ("" if e[c] is None else e[c]) for c in HISTORY_COLUMNS} for e in events]
    return pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))


def tool_results_table(tool_results: Iterable[Mapping[str, Any]]) -> pandas.DataFrame:
    """`AgentReply.tool_results` as a table: tool, arguments the model wrote, ok, and result or error."""
    pd = _pandas()
    rows = []
    for item in tool_results:
        outcome = item["outcome"]
        detail = outcome.get("error") if not outcome.get("ok") else canonical_json(outcome.get("result"))
        rows.append({"tool": item["name"], "arguments": item["arguments"], "ok": bool(outcome.get("ok")),
                     "result or error": detail})
    return pd.DataFrame(rows, columns=["tool", "arguments", "ok", "result or error"])


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


def store_fingerprint(store: MemoryStore) -> dict[str, Any]:
    """Row counts and a SHA-256 of every row (`memkit.store.fingerprint`): equal, unchanged database."""
    return fingerprint(store)


# -- 03: budgets -----------------------------------------------------------------------------------------

PARTS = ("system", "tools", "task", "memory", "history", "tool_rounds")
"""The parts of a request in the order they are stacked in `budget_chart`."""

PART_LABELS = {"system": "system prompt", "tools": "tool schemas", "task": "task + envelope",
               "memory": "retrieved memory", "history": "history", "tool_rounds": "tool rounds"}
_PART_COLOURS = {"system": "#9e9e9e", "tools": "#bdbdbd", "task": "#ffb74d", "memory": "#64b5f6",
                 "history": "#81c784", "tool_rounds": "#ba68c8"}

DEFAULT_TASKS = (
    "Plan a tea stop on my next trip",
    "Which trip did I enjoy most?",
    "Suggest a dinner for my diet",
    "What should I pack for the trip?",
    "Book the dentist around my trip",
    "Recommend tea for the evening",
    "Summarise my trip plans so far",
    "One more idea for the trip, please",
)
"""The growing conversation `conversation_rows` replays: each task is one `ask` of the agent."""


def measurement_rows(measurements: Iterable[Any], turn: int | None = None) -> list[dict[str, Any]]:
    """Flatten `Measurement`s into table rows (`Measurement.row()`), optionally tagged with a turn."""
    rows = []
    for measurement in measurements:
        row = measurement.row()
        rows.append({"turn": turn, **row} if turn is not None else row)
    return rows


def conversation_rows(store: MemoryStore, user: str, budget_chars: int, *,
                      tasks: Sequence[str] = DEFAULT_TASKS, answer_chars: int = 600,
                      session: str = "budget-demo") -> list[dict[str, Any]]:
    """Replay a scripted, growing conversation under a request budget; one row per model request.

    Each task is one `MemoryAgent.ask`: the scripted model first calls `memory_search` with the
    task's first word of 4+ letters, then answers with `answer_chars` characters, so the history
    grows by one long exchange per turn and the budget wrapper must trim it. A turn the wrapper
    refuses (`BudgetError`) gets a row with `sent=False` and the conversation goes on.

    The store is only read, so replaying under another budget sees the same memory.

    Args:
        store: the long-term store holding `user`'s memory.
        user: whose agent talks.
        budget_chars: the request budget of the `BudgetedModel`.
        tasks: one ask per task.
        answer_chars: the length of each scripted answer.
        session: the session id of the agent.

    Returns:
        Rows of `Measurement.row()` plus `turn` (1-based) and `refused` (the BudgetError message or "").
    """
    call_numbers = itertools.count(1)

    def step(messages: list[dict[str, Any]]) -> ModelReply:
        if messages[-1]["role"] == "tool":
            return say(f"Answer {len(messages)}: " + "·" * answer_chars)
        task = user_envelope(messages)["task"]
        words = [w.strip("?,.!").lower() for w in task.split() if len(w.strip("?,.!")) >= 4]
        arguments = json.dumps({"query": words[0] if words else task[:20]})
        # Call ids numbered per replay (not by the process-wide counter of `models.call`), so a
        # replay measures the same sizes however often it runs in one kernel.
        return ModelReply(tool_calls=(ToolCall(f"call_{next(call_numbers)}", "memory_search", arguments),))

    # A step per request is enough however the budget trims: each step looks at the messages.
    model = ScriptedModel([step] * (2 * len(tasks) + 2))
    agent = MemoryAgent(store, user, session, model, budget_chars=budget_chars)
    rows: list[dict[str, Any]] = []
    for turn, task in enumerate(tasks, start=1):
        first = len(agent.model.measurements)
        refused = ""
        try:
            run_sync(agent.ask(task))
        except BudgetError as exc:
            refused = str(exc)
        for row in measurement_rows(agent.model.measurements[first:], turn):
            rows.append({**row, "refused": refused if not row["sent"] else ""})
    return rows


def budget_chart(rows: Any, budget: int | None = None, *, title: str | None = None) -> Figure:
    """A stacked bar per model request: its characters by part, against the budget line.

    Args:
        rows: `conversation_rows(...)` or `measurement_rows(...)` (a list of dicts or a DataFrame).
        budget: where to draw the budget line (default: the rows' own `budget`).
        title: the chart title.

    Returns:
        A matplotlib Figure (not registered with pyplot; display it or save it).
    """
    pd = _pandas()
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if budget is None:
        budget = int(frame["budget"].max()) if not frame.empty else 0
    figure = _figure_class()(figsize=(10, 4))
    ax = figure.add_subplot()
    x = list(range(len(frame)))
    bottom = [0] * len(frame)
    for part in PARTS:
        heights = [int(v) for v in frame[part]] if part in frame else [0] * len(frame)
        ax.bar(x, heights, bottom=bottom, color=_PART_COLOURS[part], label=PART_LABELS[part], width=0.8)
        bottom = [b + h for b, h in zip(bottom, heights)]
    refused = [i for i, sent in enumerate(frame.get("sent", [])) if not sent]
    if refused:
        # Refused requests were measured but never sent: outline them in red with a cross.
        ax.bar(refused, [bottom[i] for i in refused], fill=False, edgecolor="#b71c1c", hatch="xx",
               linewidth=1.2, width=0.8, label="refused (not sent)")
    ax.axhline(budget, color="#b71c1c", linestyle="--", linewidth=1.5, label=f"budget {budget}")
    if "turn" in frame and not frame.empty:
        labels = [f"{t}.{n}" for t, n in zip(frame["turn"], frame.groupby("turn").cumcount() + 1)]
        ax.set_xlabel("request (turn.call)")
    else:
        labels = [str(c) for c in frame.get("call", x)]
        ax.set_xlabel("request")
    ax.set_xticks(x, labels, fontsize=10, rotation=90 if len(x) > 24 else 0)
    ax.tick_params(axis="y", labelsize=10)
    ax.set_ylabel("characters (canonical JSON)", fontsize=10)
    ax.set_ylim(0, max([budget, *bottom]) * 1.12 if bottom or budget else 1)
    ax.set_title(title or f"Each request by part, budget {budget} characters")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=10, frameon=False)
    figure.tight_layout()
    return figure


def budget_summary(rows: Any) -> dict[str, Any]:
    """What a budget run came to: requests sent and refused, trims, and the largest request sent."""
    rows = list(rows.to_dict("records")) if hasattr(rows, "to_dict") else list(rows)
    sent = [r for r in rows if r["sent"]]
    return {"requests": len(rows), "sent": len(sent), "refused": len(rows) - len(sent),
            "trimmed items": sum(r["trimmed"] for r in rows),
            "largest sent": max((r["total"] for r in sent), default=0),
            "budget": rows[0]["budget"] if rows else None}


class BudgetExplorer(_View):
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
        self.image.value = _png(budget_chart(self.rows, budget))
        summary = budget_summary(self.rows)
        self.summary.value = _status_html(
            ", ".join(f"{k}: {v}" for k, v in summary.items()), ok=summary["refused"] == 0)
        return self.rows

    def _on_budget(self, change: Mapping[str, Any]) -> None:
        self.update(int(change["new"]))

    def _build(self) -> Any:
        return _widgets().VBox([self.slider, self.summary, self.image])

    def __repr__(self) -> str:
        return f"BudgetExplorer(budget slider {self.slider.min}-{self.slider.max})"


# -- 04: confirmations ----------------------------------------------------------------------------------


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


class ConfirmForm(_View):
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
        self.table = w.HTML(_html_table(approvals_table(approvals), "no confirmations yet"))
        self.last: dict[str, Any] | None = None
        self.button.on_click(self._on_click)

    def submit(self) -> dict[str, Any]:
        """Confirm what the form holds (the button's handler); returns `confirm_from_form`'s result."""
        self.last = confirm_from_form(self.approvals, self.action, self.kind.value, self.key.value,
                                      self.value.value)
        if self.last["ok"]:
            self.status.value = _status_html(f"{self.last['id']}: allows one {self.last['allows']}")
        else:
            self.status.value = _status_html(self.last["error"], ok=False)
        self.table.value = _html_table(approvals_table(self.approvals), "no confirmations yet")
        return self.last

    def _on_click(self, _button: Any) -> None:
        self.submit()

    def _build(self) -> Any:
        w = _widgets()
        fields = [self.kind, self.key] + ([self.value] if self.action == "put" else [])
        return w.VBox([w.HBox(fields), w.HBox([self.button, self.status]), self.table])

    def __repr__(self) -> str:
        return f"ConfirmForm(action={self.action!r}, origin={self.approvals.origin!r})"


# -- 06: isolation ----------------------------------------------------------------------------------------


def _strings(obj: Any) -> Iterable[str]:
    """Every string inside a JSON-like value, and the JSON text inside strings that hold JSON."""
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
            try:  # contents are often JSON text; decode it so escapes cannot hide a value
                found.extend(t.casefold() for t in _strings(json.loads(text)))
            except (ValueError, TypeError):
                pass
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


def cross_user_scan(store: MemoryStore, requests_by_user: Mapping[str, Sequence[Mapping[str, Any]]], *,
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


def what_user_sees(store: MemoryStore, user: str, task: str, *, session: str = "switcher") -> dict[str, Any]:
    """Run one `ask` of `user`'s agent (fixture model) and return what that agent saw and said.

    Returns:
        `{"user", "task", "retrieved": [{"kind", "key", "value"}, ...], "answer", "requests"}` where
        `retrieved` is the memory inside the request the model received, read back from the request
        itself, and `requests` counts the model's requests.
    """
    model = FixtureModel()
    agent = MemoryAgent(store, user, session, model)
    reply = run_sync(agent.ask(task))
    envelope = user_envelope(model.requests[0]["messages"])
    return {"user": user, "task": task, "retrieved": envelope["retrieved_memory"], "answer": reply.text,
            "requests": len(model.requests)}


class UserSwitcher(_View):
    """A dropdown of users; choosing one runs that user's agent on a task and shows what it saw.

    The dropdown stands for the trusted caller (a logged-in session) choosing the user id: the
    model never gets to choose it.

    Args:
        store: the long-term store.
        users: the user ids offered (default: every user with records).
        task: the task each user's agent is asked.
    """

    def __init__(self, store: MemoryStore, task: str, users: Sequence[str] | None = None) -> None:
        w = _widgets()
        self.store, self.task = store, task
        options = list(users) if users is not None else list(store.users())
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
            + _html_table(memory, "nothing retrieved")
            + f"<p><b>answer</b>: {html.escape(self.seen['answer'])}</p>"
        )
        return self.seen

    def _on_user(self, change: Mapping[str, Any]) -> None:
        self.show(change["new"])

    def _build(self) -> Any:
        return _widgets().VBox([self.dropdown, self.view])

    def __repr__(self) -> str:
        return f"UserSwitcher(users={list(self.dropdown.options)!r})"


# -- 08: the memory inspector ----------------------------------------------------------------------------


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

        The search is the store's rule (literal, case-insensitive substring of key or value, after
        `casefold`), applied to all of the user's records rather than the newest 50.
        """
        if self.user is None:
            return []
        folded = self.query.casefold()
        return [r for r in self.store.records(self.user, self.kind)
                if not folded or folded in r["key"].casefold() or folded in r["value"].casefold()]

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

    def select_user(self, user: str) -> pandas.DataFrame:
        """Show `user`'s records; clears the selected key and any staged change."""
        self.user = self.store.limits.check_id("user", user)
        self.selected, self.staged = None, None
        return self._changed(self.table())

    def set_kind(self, kind: str | None) -> pandas.DataFrame:
        """Filter by kind (`preference`, `episode`, or `all`/None); returns the records table."""
        self.kind = None if kind in (None, self.ALL) else self.store.limits.check_kind(kind)
        return self._changed(self.table())

    def set_query(self, query: str) -> pandas.DataFrame:
        """Filter by a search text (empty shows everything); returns the records table."""
        self.query = self.store.limits.check_query(query)
        return self._changed(self.table())

    def select_key(self, kind: str, key: str) -> pandas.DataFrame:
        """Select one key (deleted keys too: their history remains); returns its revision history."""
        self.store.limits.check_kind(kind)
        self.store.limits.check_key(key)
        if (kind, key) != self.selected:
            self.staged = None  # a change staged for another key must not be confirmed by accident
        self.selected = (kind, key)
        return self._changed(self.history())

    # -- confirm-gated changes ---------------------------------------------------------------------

    def _current(self) -> Record:
        if self.user is None or self.selected is None:
            raise ValidationError("select a user and a key first")
        record = self.store.get(self.user, *self.selected)
        if record is None:
            raise ValidationError(f"{self.selected[0]} {self.selected[1]!r} of {self.user!r} does not exist (any more)")
        return record

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
        self._changed(None)
        return {"cancelled": dropped["describe"] if dropped else None, "written": False}

    def confirm(self) -> dict[str, Any]:
        """The Confirm click: perform exactly the staged change under a new one-time confirmation.

        The record must still be at the revision seen when staging; if someone changed it since,
        nothing is written and the change must be staged again after a fresh look.

        Returns:
            action, kind, key, the confirmation id (also kept in the event history), the new revision.

        Raises:
            ApprovalError: nothing is staged, or the record changed since it was staged.
        """
        staged = self.staged
        if staged is None:
            raise ApprovalError("nothing is staged; stage an edit or a delete first, then confirm it")
        current = self.store.get(staged["user"], staged["kind"], staged["key"])
        if current is None or current["revision"] != staged["revision"]:
            self.staged = None
            self._changed(None)
            now = "deleted" if current is None else f"at revision {current['revision']}"
            raise ApprovalError(
                f"{staged['kind']} {staged['key']!r} changed since it was staged (revision {staged['revision']}, "
                f"now {now}); nothing was written. Look again and stage a new change"
            )
        if staged["action"] == "edit":
            confirmation = self.approvals.confirm_put(staged["kind"], staged["key"], staged["new_value"])
        else:
            confirmation = self.approvals.confirm_delete(staged["kind"], staged["key"])
        try:
            if staged["action"] == "edit":
                record = self.store.put(staged["user"], self.session, staged["kind"], staged["key"],
                                        staged["new_value"], confirmation=confirmation.id)
                revision = record["revision"]
            else:
                self.store.delete(staged["user"], staged["kind"], staged["key"], session=self.session,
                                  confirmation=confirmation.id)
                revision = staged["revision"]
        finally:
            # Spent even if the write failed: a click confirms one attempt, never a later replay.
            self.approvals.spend(confirmation)
            self.staged = None
        self._changed(None)
        return {"done": staged["action"], "kind": staged["kind"], "key": staged["key"],
                "confirmation": confirmation.id, "revision": revision}

    def close(self) -> None:
        """Close the store if the inspector opened it."""
        if self._owns_store:
            self.store.close()

    # -- the widget ----------------------------------------------------------------------------------

    def _build(self) -> Any:
        w = _widgets()
        c = self.controls
        c["user"] = w.Dropdown(options=self.users(), value=self.user, description="user")
        c["kind"] = w.ToggleButtons(options=[self.ALL, *KINDS], value=self.kind or self.ALL,
                                    description="kind", style={"button_width": "90px"})
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
            w.HBox([c["user"], c["kind"]]), c["query"], c["records"],
            w.HTML("<b>revision history</b>"), c["key"], c["history"],
            w.HBox([c["value"], c["stage_edit"], c["stage_delete"]]), w.HBox([c["confirm"], c["cancel"]]),
            c["status"],
        ])
        self._widget = box
        self._refresh()
        return box

    def _handle(self, method: Callable[..., Any], *args: Any) -> Any:
        """Run a plain method for a control; show its refusal instead of raising into the frontend."""
        if self._refreshing:
            return None
        try:
            result = method(*args)
        except MemkitError as exc:
            self._refresh()
            self.controls["status"].value = _status_html(str(exc), ok=False)
            return None
        if isinstance(result, dict) and self.staged is None:  # a staged change keeps its own notice
            message = "; ".join(f"{k}: {v}" for k, v in result.items())
            self.controls["status"].value = _status_html(message)
        return result

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
            c["records"].value = _html_table(records_table(records), "no records match")
            keys = [f"{r['kind']}:{r['key']}" for r in records]
            if self.selected and ":".join(self.selected) not in keys:
                keys.append(":".join(self.selected))  # keep a deleted key's history in view
            c["key"].options = keys
            c["key"].value = ":".join(self.selected) if self.selected else None
            c["history"].value = _html_table(self.history(), "select a key to see its history")
            c["confirm"].disabled = self.staged is None
            c["cancel"].disabled = self.staged is None
            if self.staged is not None:
                c["status"].value = _status_html("staged: " + self.staged["describe"] + " (not written yet)")
        finally:
            self._refreshing = False

    def __repr__(self) -> str:
        return f"MemoryInspector(user={self.user!r}, kind={self.kind or self.ALL!r}, query={self.query!r})"
