"""Charts: what a request is made of, part by part, against its budget; and the runs behind them.

A chart is a bare matplotlib `Figure` (not pyplot): nothing is registered globally, so a chart
made in a widget callback never shows up a second time at the end of some later cell.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any
from collections.abc import Iterable

from memkit.agent import MemoryAgent
from memkit.errors import BudgetError
from memkit.models import ModelReply, ScriptedModel, call, say, user_envelope
from memkit.store import Store
from memkit.inspector._support import optional, pandas as _pandas

from .sync import run_sync

if TYPE_CHECKING:  # pragma: no cover - only for type checkers
    from matplotlib.figure import Figure

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


def png(figure: Figure) -> bytes:
    """The figure as PNG bytes (for an `ipywidgets.Image`); the same chart gives the same bytes."""
    buffer = io.BytesIO()
    # No metadata: the same chart gives the same bytes, whatever the matplotlib build date.
    figure.savefig(buffer, format="png", dpi=80, metadata={"Software": None})
    return buffer.getvalue()


def measurement_rows(measurements: Iterable[Any], turn: int | None = None) -> list[dict[str, Any]]:
    """Flatten `Measurement`s into table rows (`Measurement.row()`), optionally tagged with a turn."""
    rows = []
    for measurement in measurements:
        row = measurement.row()
        rows.append({"turn": turn, **row} if turn is not None else row)
    return rows


def conversation_rows(store: Store, user: str, budget_chars: int) -> list[dict[str, Any]]:
    """Replay a scripted, growing conversation under a request budget; one row per model request.

    Each task of `DEFAULT_TASKS` is one `MemoryAgent.ask` (session `budget-demo`): the scripted model
    first calls `memory_search` with the task's first word of 4+ letters, then answers with 600
    characters, so the history grows by one long exchange per turn and the budget wrapper must trim
    it. A turn the wrapper refuses (`BudgetError`) gets a row with `sent=False` and the conversation
    goes on.

    The store is only read, so replaying under another budget sees the same memory; the scripted
    model numbers its tool calls itself, so a replay measures the same sizes however often it runs.

    Args:
        store: the long-term store holding `user`'s memory.
        user: whose agent talks.
        budget_chars: the request budget of the `BudgetedModel`.

    Returns:
        Rows of `Measurement.row()` plus `turn` (1-based) and `refused` (the BudgetError message or "").
    """
    def step(messages: list[dict[str, Any]]) -> ModelReply:
        if messages[-1]["role"] == "tool":
            return say(f"Answer {len(messages)}: " + "·" * 600)
        task = user_envelope(messages)["task"]
        words = [w.strip("?,.!").lower() for w in task.split() if len(w.strip("?,.!")) >= 4]
        return call("memory_search", json.dumps({"query": words[0] if words else task[:20]}))

    # A step per request is enough however the budget trims: each step looks at the messages.
    model = ScriptedModel([step] * (2 * len(DEFAULT_TASKS) + 2))
    agent = MemoryAgent(store, user, "budget-demo", model, budget_chars=budget_chars)
    rows: list[dict[str, Any]] = []
    for turn, task in enumerate(DEFAULT_TASKS, start=1):
        first = len(agent.model.measurements)
        refused = ""
        try:
            run_sync(agent.ask(task))
        except BudgetError as exc:
            refused = str(exc)
        for row in measurement_rows(agent.model.measurements[first:], turn):
            rows.append({**row, "refused": refused if not row["sent"] else ""})
    return rows


def budget_chart(rows: Any, budget: int | None = None) -> Figure:
    """A stacked bar per model request: its characters by part, against the budget line.

    Args:
        rows: `conversation_rows(...)` or `measurement_rows(...)` (a list of dicts or a DataFrame).
        budget: where to draw the budget line (default: the rows' own `budget`).

    Returns:
        A matplotlib Figure (not registered with pyplot; display it or save it).
    """
    pd = _pandas()
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if budget is None:
        budget = int(frame["budget"].max()) if not frame.empty else 0
    figure = optional("matplotlib.figure").Figure(figsize=(10, 4))
    ax = figure.add_subplot()
    x = list(range(len(frame)))
    bottom = [0] * len(frame)
    for part in PARTS:
        heights = [int(v) for v in frame[part]] if part in frame else [0] * len(frame)
        ax.bar(x, heights, bottom=bottom, color=_PART_COLOURS[part], label=PART_LABELS[part], width=0.8)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    refused = [i for i, sent in enumerate(frame.get("sent", [])) if not sent]
    if refused:
        # Refused requests were measured but never sent: outline them in red with a cross.
        ax.bar(refused, [bottom[i] for i in refused], fill=False, edgecolor="#b71c1c", hatch="xx",
               linewidth=1.2, width=0.8, label="refused (not sent)")
    ax.axhline(budget, color="#b71c1c", linestyle="--", linewidth=1.5, label=f"budget {budget}")
    if "turn" in frame and not frame.empty:
        labels = [f"{t}.{n}" for t, n in zip(frame["turn"], frame.groupby("turn").cumcount() + 1, strict=True)]
        ax.set_xlabel("request (turn.call)")
    else:
        labels = [str(c) for c in frame.get("call", x)]
        ax.set_xlabel("request")
    ax.set_xticks(x, labels, fontsize=10, rotation=90 if len(x) > 24 else 0)
    ax.tick_params(axis="y", labelsize=10)
    ax.set_ylabel("characters (canonical JSON)", fontsize=10)
    ax.set_ylim(0, max([budget, *bottom]) * 1.12 if bottom or budget else 1)
    ax.set_title(f"Each request by part, budget {budget} characters")
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
