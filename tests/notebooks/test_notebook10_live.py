"""Notebook 10's live cell: a prompt and a JSON schema scored on the labelled set by a real HTTP model.

The notebook runs up to its live cell in a kernel whose environment names the kit's local
chat-completions server (tests/_model_server.py), as a student's names OpenAI or Ollama. The
server answers each labelled utterance as a model might: right on most, with a key of its own
(`home_city`) on one and a value with more in it ("Porto, Portugal") on another; both are
counted as mistakes. A failing endpoint is one line, not a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import _notebook_demo  # noqa: F401  (skips this module without the notebook extra)
import pytest

from _model_server import ChatServer, tool_call
from classroom.remembering_score import LABELLED

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from _live_notebook import run_to_live_cell

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "10_what_to_remember.ipynb"
ODD = {"I live in Lisbon": {"key": "home_city"}, "I moved to Porto": {"value": "Porto, Portugal"}}


def replies() -> list[dict]:
    """What the model answers, in the order the cell asks: a propose_memory call, or words."""
    answers = []
    for said, _, change in LABELLED:
        if change is None:
            answers.append({"role": "assistant", "content": "Nothing to remember."})
            continue
        arguments = {"action": change.action, "kind": change.kind, "key": change.key,
                     "value": change.value or "", **ODD.get(said, {})}
        answers.append(tool_call("propose_memory", **arguments))
    return answers


def run_to_the_live_cell(monkeypatch, server: ChatServer, which: int = 0) -> str:
    """Run the notebook up to its live cell number `which` (0: the prompt, 1: the summary)."""
    cell, _ = run_to_live_cell(NOTEBOOK, server, monkeypatch, which=which, model="test-model")
    outputs = cell.outputs
    assert not [o for o in outputs if o.get("output_type") == "error"], outputs
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs)


def test_the_prompt_is_scored_on_the_labelled_set_with_the_models_own_mistakes(monkeypatch):
    server = ChatServer(replies())
    shown = run_to_the_live_cell(monkeypatch, server)
    assert "precision 0.93 (27 of 29 proposed were right), recall 0.93" in shown, shown
    assert "home_city" in shown and "Porto, Portugal" in shown, shown
    assert len(server.received) == len(LABELLED)
    first = server.received[0]["body"]
    assert first["model"] == "test-model" and first["messages"][0]["role"] == "system"
    assert [t["function"]["name"] for t in first["tools"]] == ["propose_memory"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["action", "kind", "key", "value"]
    assert [r["body"]["messages"][-1]["content"] for r in server.received] == [s for s, _, _ in LABELLED]


def test_a_failing_endpoint_is_one_line(monkeypatch):
    shown = run_to_the_live_cell(monkeypatch, ChatServer([], status=500))
    assert shown.startswith("The live model could not finish") and shown.count("\n") == 1, shown


SUMMARY = "Sam moved from Lisbon to Porto, is vegetarian, and asked about ticket T-4471."


def test_a_models_summary_of_the_finished_session_is_proposed_for_a_person(monkeypatch):
    server = ChatServer([*replies(), {"role": "assistant", "content": SUMMARY}])
    shown = run_to_the_live_cell(monkeypatch, server, which=1)
    assert "episode session.s1:" in shown and "ticket T-4471." in shown.replace("\n", " "), shown
    asked = server.received[-1]["body"]
    assert "tools" not in asked and asked["messages"][0]["role"] == "system"
    assert asked["messages"][0]["content"].startswith("Summarise this finished conversation")
    data = json.loads(asked["messages"][1]["content"])  # the turns travel as data, not instructions
    said = [t["content"] for t in data["conversation"] if t["role"] == "user"]
    assert said[:2] == ["I live in Lisbon", "answer in French this time"] and len(data["conversation"]) == 12


def test_a_model_that_answers_no_summary_is_one_line_and_proposes_nothing(monkeypatch):
    server = ChatServer([*replies(), {"role": "assistant", "content": "  "}])
    shown = run_to_the_live_cell(monkeypatch, server, which=1)
    assert shown.startswith("The live model could not finish") and shown.count("\n") == 1, shown
    assert "no summary" in shown and "episode" not in shown
