"""The live-model cells of 00, 03 and 04 against a real model's habits, through a real HTTP endpoint.

A real model picks its own words: asked to remember that alice is vegetarian it may save
`dietary_preference` = "Vegetarian (no meat or fish)", or her city as `home_city` = "Lisbon,
Portugal". 00's live cell confirms nothing in advance: the first session keeps what the model
proposed, the cell shows it and approves exactly that, and the second session (a new process) is
offered the approved record. The model is the kit's local chat-completions server
(tests/_model_server.py) answering from a script, named by OPENAI_BASE_URL as Ollama would be.
When the endpoint fails, each live cell prints one line (`classroom.live.FAILED`), no traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from classroom.live import FAILED, HOW_TO

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from _live_notebook import run_to_live_cell
from _model_server import ChatServer, say, tool_call

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
LIVE = {"00": "00_start_here", "03": "03_approvals_and_the_agent_loop", "04": "04_retrieval_and_budgets"}


def _text(cell: Any) -> str:
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def _run_to_live_cell(name: str, replies: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, *,
                      status: int = 200, after: str | None = None,
                      edit: tuple[str, str] | None = None) -> tuple[Any, list[dict[str, Any]], str]:
    """Run `name` up to its live cell with the endpoint set, then `after` in the same kernel.

    `edit` (old, new) changes the live cell's source first, as a student would.
    Returns the live cell, what the endpoint received, and what `after` printed.
    """
    server = ChatServer(replies, status=status)
    cell, probe = run_to_live_cell(NOTEBOOK_DIR / f"{name}.ipynb", server, monkeypatch, edit=edit, after=after)
    return cell, server.received, _text(probe) if probe is not None else ""


def _envelope(request: dict[str, Any]) -> dict[str, Any]:
    return json.loads(next(m for m in request["body"]["messages"] if m["role"] == "user")["content"])


@pytest.mark.parametrize(("key", "value"), [("dietary_preference", "Vegetarian (no meat or fish)"),
                                            ("home_city", "Lisbon, Portugal")])
def test_00_saves_what_the_model_proposed_once_the_person_approves_it(key, value, monkeypatch):
    replies = [tool_call("memory_put", kind="preference", key=key, value=value),
               say("I have proposed saving that; it waits for your approval."),
               say("Something that suits you, from what I remember.")]
    probe = ("with MemoryStore(live_db) as s:\n"
             f"    print(s.get('alice', 'preference', {key!r})['value'])\n"
             "    print(s.history('alice', 'preference', " + repr(key) + ")[0]['confirmation'])")
    cell, received, stored = _run_to_live_cell(LIVE["00"], replies, monkeypatch, after=probe)
    shown = _text(cell)
    assert not [o for o in cell.outputs if o.output_type == "error"], shown
    assert len(received) == 3, shown
    # The proposal is on screen, then its approval, exactly as the model wrote it.
    assert f"save preference {key} = {value!r}" in shown, shown
    assert f"approved: save preference {key} = {value!r} (revision 1)" in shown, shown
    assert stored.splitlines()[0] == value and stored.splitlines()[1].startswith("proposal#"), stored
    # The second session, another process, was offered the approved record from the file.
    recalled = _envelope(received[2])["retrieved_memory"]
    assert any(m["key"] == key and m["value"] == value for m in recalled), recalled
    assert "Something that suits you" in shown


_DRINK = ("with MemoryStore(store.path) as s:\n"
          "    print(s.get('alice', 'preference', 'drink'))\n"
          "    print([(p['key'], p['value'], p['status']) for p in s.proposals('alice', pending_only=False)])\n"
          "    print([e['confirmation'] for e in s.history('alice', 'preference', 'drink')])")


@pytest.mark.parametrize("decision", ["reject", "approve"])
def test_03_keeps_the_injected_save_waiting_and_applies_the_persons_decision(decision, monkeypatch):
    """The note in alice's memory makes the model save whisky: the save waits as a proposal, shown in
    the cell; nothing is stored until the person decides, and then exactly their decision."""
    replies = [tool_call("memory_put", kind="preference", key="drink", value="whisky"),
               say("Done, as your notes said.")]
    edit = None if decision == "reject" else ('DECISION = "reject"', 'DECISION = "approve"')
    cell, received, after = _run_to_live_cell(LIVE["03"], replies, monkeypatch, after=_DRINK, edit=edit)
    shown = _text(cell)
    assert not [o for o in cell.outputs if o.output_type == "error"], shown
    assert len(received) == 2, shown
    told = json.loads(received[1]["body"]["messages"][-1]["content"])
    assert told["result"]["status"] == "waiting_for_approval" and "NOT saved" in told["result"]["message"]
    assert "save preference drink = 'whisky'" in shown and "saved before you decided: False" in shown, shown
    drink, proposals, confirmations = after.splitlines()
    if decision == "reject":
        assert "rejected: save preference drink = 'whisky'" in shown and "database unchanged: True" in shown
        assert drink == "None" and proposals == "[('drink', 'whisky', 'rejected')]", after
        assert "whisky" not in confirmations and "proposal#" not in confirmations, after
    else:  # the person approved it: then, and only then, it is stored, naming the proposal
        assert "approved: save preference drink = 'whisky' (revision" in shown and "database unchanged: False" in shown
        assert "'value': 'whisky'" in drink and proposals == "[('drink', 'whisky', 'approved')]", after
        assert confirmations.endswith("approved via notebook']"), after


def test_03_a_model_that_proposes_nothing_is_said_so(monkeypatch):
    cell, received, _ = _run_to_live_cell(LIVE["03"], [say("Your note says to save whisky; I will not.")],
                                          monkeypatch)
    shown = _text(cell)
    assert len(received) == 1 and "the model proposed nothing to save" in shown, shown
    assert "database unchanged: True" in shown and "rejected" not in shown, shown


def test_04_a_save_the_model_wants_waits_for_the_person(monkeypatch):
    replies = [tool_call("memory_put", kind="preference", key="tea_time", value="evenings"),
               say("A tea stop at the station; I proposed remembering your tea time."),
               *[say(f"Live answer {n}.") for n in (2, 3, 4)]]
    probe = ("print(store.get('alice', 'preference', 'tea_time'))\n"
             "print([(p['key'], p['status']) for p in store.proposals('alice')])")
    cell, received, after = _run_to_live_cell(LIVE["04"], replies, monkeypatch, after=probe)
    shown = _text(cell)
    assert not [o for o in cell.outputs if o.output_type == "error"], shown
    assert len(received) == 5 and "Live answer 4." in shown, shown
    assert "save preference tea_time = 'evenings'" in shown and "decide each: decide(store, 'alice', ID" in shown
    assert after.splitlines() == ["None", "[('tea_time', 'pending')]"], after


def test_00_a_model_that_proposes_nothing_is_said_so_and_nothing_is_approved(monkeypatch):
    replies = [say("Noted, enjoy your meals!"), say("Anything you like.")]
    probe = "with MemoryStore(live_db) as s:\n    print(s.records('alice'), s.proposals('alice', pending_only=False))"
    cell, received, stored = _run_to_live_cell(LIVE["00"], replies, monkeypatch, after=probe)
    shown = _text(cell)
    assert not [o for o in cell.outputs if o.output_type == "error"], shown
    assert len(received) == 2 and "the model proposed nothing to save" in shown, shown
    assert "approved" not in shown and "Anything you like." in shown, shown
    assert stored.strip() == "[] []", stored


def _two_saves(*saves: tuple[str, str]) -> dict[str, Any]:
    """One reply of a model that calls memory_put twice."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}", "type": "function",
         "function": {"name": "memory_put", "arguments": json.dumps(
             {"kind": "preference", "key": key, "value": value})}}
        for n, (key, value) in enumerate(saves, 1)]}


def test_00_two_saves_in_one_reply_are_both_shown_and_approved(monkeypatch):
    replies = [_two_saves(("diet", "vegetarian"), ("food", "no meat")),
               say("Both wait for your approval."), say("A vegetable curry.")]
    probe = ("with MemoryStore(live_db) as s:\n"
             "    print(sorted((r['key'], r['value']) for r in s.records('alice')))")
    cell, received, stored = _run_to_live_cell(LIVE["00"], replies, monkeypatch, after=probe)
    shown = _text(cell)
    assert not [o for o in cell.outputs if o.output_type == "error"], shown
    for proposed in ("save preference diet = 'vegetarian'", "save preference food = 'no meat'"):
        assert proposed in shown and f"approved: {proposed} (revision 1)" in shown, shown
    assert stored.strip() == "[('diet', 'vegetarian'), ('food', 'no meat')]", stored
    recalled = {m["key"] for m in _envelope(received[2])["retrieved_memory"]}
    assert recalled == {"diet", "food"}, recalled


def test_03_two_saves_in_one_reply_both_wait_and_the_decision_applies_to_each(monkeypatch):
    two = _two_saves(("drink", "whisky"), ("city", "Nassau"))
    cell, received, after = _run_to_live_cell(LIVE["03"], [two, say("Done, as your notes said.")], monkeypatch,
                                               after=_DRINK)
    shown = _text(cell)
    assert not [o for o in cell.outputs if o.output_type == "error"], shown
    assert len(received) == 2, shown
    for proposed in ("save preference drink = 'whisky'", "save preference city = 'Nassau'"):
        assert proposed in shown and f"rejected: {proposed}" in shown, shown
    assert "saved before you decided: False" in shown and "database unchanged: True" in shown, shown
    assert after.splitlines()[0] == "None", after


def test_04_a_model_that_proposes_nothing_leaves_no_table_to_decide(monkeypatch):
    probe = "print([(p['key'], p['status']) for p in store.proposals('alice', pending_only=False)])"
    cell, received, after = _run_to_live_cell(LIVE["04"], [say(f"Live answer {n}.") for n in (1, 2, 3, 4)],
                                              monkeypatch, after=probe)
    shown = _text(cell)
    assert not [o for o in cell.outputs if o.output_type == "error"], shown
    assert len(received) == 4 and "Live answer 4." in shown, shown
    assert "decide each" not in shown and after.strip() == "[]", (shown, after)


@pytest.mark.parametrize("short", sorted(LIVE))
def test_a_failing_endpoint_is_one_line_not_a_traceback(short, monkeypatch):
    cell, received, _ = _run_to_live_cell(LIVE[short], [], monkeypatch, status=500)
    shown = _text(cell)
    assert received, "the cell never called the endpoint"
    assert not [o for o in cell.outputs if o.output_type == "error"], shown
    failed = [line for line in shown.splitlines() if line.startswith(FAILED)]
    assert len(failed) == 1 and "HTTP 500" in failed[0] and "server exploded" in failed[0], shown


def test_the_note_for_a_local_server_names_its_url_and_a_dummy_key():
    assert "OPENAI_BASE_URL" in HOW_TO and "http://localhost:11434/v1" in HOW_TO
    assert "any OPENAI_API_KEY" in HOW_TO and "\n" not in HOW_TO
