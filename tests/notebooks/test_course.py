"""The course as a teacher runs it: exercises that keep their answers, the idea on a projector, a map
of every notebook, and the optional real-model cells.

Per notebook (parametrized, so a failure names the notebook):

- **answers kept**: the committed outputs of an exercise's cells (answer, experiment, check) show
  nothing but "Record your prediction above first" or "not answered yet"; a prediction exercise
  (its answer cell names `predicted`) says the first; and no committed output anywhere in the
  notebook matches the answer patterns the notebook declares.
- **declaring answers**: the answer cell's metadata holds `"memkit": {"answer_patterns": [...]}`,
  regular expressions that would match an output giving the answer away (the experiment's result,
  the right verdict's explanation). tests/notebooks/test_exercises.py runs the right answer and checks that
  its output matches at least one of them, so a pattern that could never match is caught.
- **projector**: code lines of at most 88 characters; no table taller than 15 rows in an output
  that is compared; no prose about the test set-up (nbval, "not compared").
- **live cells**: 00, 03 and 04 each have one cell tagged `live-model`; without credentials it
  prints one line saying how to set them; with them it runs against the kit's local HTTP model
  server (tests/_model_server.py) for real.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from _model_server import say, tool_call
from classroom.exercises import PREDICT_FIRST

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

MAX_LINE = 88
MAX_TABLE_ROWS = 15
PLANNED = ("10_what_to_remember", "11_where_agents_live", "12_capstone")
"""Notebooks written this round beside these tests; 00's map names them already."""

LIVE_NOTEBOOKS = ("00_start_here", "03_approvals_and_the_agent_loop", "04_retrieval_and_budgets")
SETUP_TALK = re.compile(r"(?i)\bnbval\b|\bNBVAL_|when the notebook is tested|\bnot compared\b")
TABLE_ROW = re.compile(r"<tr[ >]")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _tags(cell: dict[str, Any]) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def output_text(output: dict[str, Any]) -> str:
    """What an output shows as text: a stream, or text/plain and text/html (no images, no widgets)."""
    if output.get("output_type") == "stream":
        text = output.get("text", "")
        return "".join(text) if isinstance(text, list) else text
    data = output.get("data", {})
    if "application/vnd.jupyter.widget-view+json" in data:
        return ""
    parts = [data.get("text/plain", ""), data.get("text/html", "")]
    return "\n".join("".join(p) if isinstance(p, list) else p for p in parts)


def answer_patterns(nb: dict[str, Any]) -> list[re.Pattern[str]]:
    """The answer patterns a notebook declares on its answer cell (`metadata.memkit.answer_patterns`)."""
    for cell in nb.get("cells", []):
        if "exercise-answer" in _tags(cell):
            return [re.compile(p) for p in cell.get("metadata", {}).get("memkit", {}).get("answer_patterns", [])]
    return []


def answer_problems(nb: dict[str, Any]) -> list[str]:
    """Where a notebook's committed outputs give an exercise's answer away, or could do so unseen."""
    cells = nb.get("cells", [])
    answer_at = [i for i, c in enumerate(cells) if "exercise-answer" in _tags(c)]
    check_at = [i for i, c in enumerate(cells) if "exercise-check" in _tags(c)]
    if len(answer_at) != 1 or len(check_at) != 1:
        return ["no single exercise (one cell tagged exercise-answer, one tagged exercise-check)"]
    problems = []
    shown = []
    for index in range(answer_at[0], check_at[0] + 1):
        for output in cells[index].get("outputs", []):
            for line in output_text(output).splitlines():
                if line.strip() and not line.startswith((PREDICT_FIRST, "not answered yet")):
                    problems.append(f"cell {index} (an exercise cell) shows {line.strip()[:80]!r} before "
                                    "the student answered")
                shown.append(line)
    if "predicted" in _source(cells[answer_at[0]]) and not any(line.startswith(PREDICT_FIRST) for line in shown):
        problems.append(f"the prediction exercise's experiment does not say {PREDICT_FIRST!r} while the "
                        "prediction is None (start it with exercises.prediction_recorded(predicted))")
    patterns = answer_patterns(nb)
    if not patterns:
        problems.append("the answer cell declares no answer patterns (metadata memkit.answer_patterns)")
    for index, cell in enumerate(cells):
        for output in cell.get("outputs", []):
            text = output_text(output)
            for pattern in patterns:
                if pattern.search(text):
                    problems.append(f"cell {index} output gives the answer away ({pattern.pattern!r})")
    return problems


def line_problems(nb: dict[str, Any]) -> list[str]:
    """Code lines longer than a projector shows (88 characters)."""
    return [f"cell {index} line {number}: {len(line)} characters: {line[:60]}..."
            for index, cell in enumerate(nb.get("cells", [])) if cell.get("cell_type") == "code"
            for number, line in enumerate(_source(cell).splitlines(), start=1) if len(line) > MAX_LINE]


def table_problems(nb: dict[str, Any]) -> list[str]:
    """Tables taller than a screen in outputs that are compared (not tagged nbval-ignore-output)."""
    problems = []
    for index, cell in enumerate(nb.get("cells", [])):
        if "nbval-ignore-output" in _tags(cell):
            continue
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            for body in re.findall(r"<tbody>(.*?)</tbody>", html, flags=re.S):
                rows = len(TABLE_ROW.findall(body))
                if rows > MAX_TABLE_ROWS:
                    problems.append(f"cell {index}: a table of {rows} rows (show the head and a count)")
    return problems


def prose_problems(nb: dict[str, Any]) -> list[str]:
    """Prose (markdown, code comments) that talks about the test set-up instead of to the student."""
    problems = []
    for index, cell in enumerate(nb.get("cells", [])):
        text = _source(cell)
        if cell.get("cell_type") == "code":
            text = "\n".join(line.split("#", 1)[1] for line in text.splitlines() if "#" in line)
        if match := SETUP_TALK.search(text):
            problems.append(f"cell {index} talks about the test set-up ({match.group(0)!r})")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_no_committed_output_gives_an_exercise_answer_away(path):
    assert answer_problems(_load(path)) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_code_lines_fit_a_projector(path):
    assert line_problems(_load(path)) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_no_compared_table_is_taller_than_a_screen(path):
    assert table_problems(_load(path)) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_prose_talks_to_the_student_not_to_the_test_set_up(path):
    assert prose_problems(_load(path)) == []


def test_the_map_in_00_names_every_notebook_on_one_line_each():
    nb = _load(NOTEBOOK_DIR / "00_start_here.ipynb")
    rows = [line for cell in nb["cells"] if cell["cell_type"] == "markdown"
            for line in _source(cell).splitlines() if re.match(r"\| \d\d \| `", line)]
    named = [re.match(r"\| (\d\d) \| `([a-z0-9_]+)`", row).group(2) for row in rows]
    expected = sorted({path.stem for path in NOTEBOOKS} | set(PLANNED))
    assert named == expected


# -- the checks above, on notebooks made to break them -------------------------------------------

def _nb(*cells: dict[str, Any]) -> dict[str, Any]:
    return {"cells": list(cells)}


def _code(source: str, *outputs: str, tags: tuple[str, ...] = (), **metadata: Any) -> dict[str, Any]:
    return {"cell_type": "code", "source": source, "metadata": {"tags": list(tags), **metadata},
            "outputs": [{"output_type": "stream", "name": "stdout", "text": text} for text in outputs]}


def _exercise(experiment_output: str, check_output: str = "not answered yet: replace\n",
              patterns: tuple[str, ...] = (r"revision 3",), before: str = "") -> dict[str, Any]:
    return _nb(_code("x = 1", before),
               _code("predicted = {'revision': None}", tags=("exercise-answer",),
                     memkit={"answer_patterns": list(patterns)}),
               _code("if exercises.prediction_recorded(predicted): ...", experiment_output,
                     tags=("exercise-experiment",)),
               _code("print(check())", check_output, tags=("exercise-check",)))


def test_the_answer_check_catches_a_reveal_and_passes_a_kept_answer():
    kept = _exercise(f"{PREDICT_FIRST}: replace each None\n")
    assert answer_problems(kept) == []
    revealed = answer_problems(_exercise("revision: 3, events: 3\n"))
    assert any("shows 'revision: 3, events: 3' before the student answered" in p for p in revealed)
    assert any("does not say 'Record your prediction above first'" in p for p in revealed)
    earlier = answer_problems(_exercise(f"{PREDICT_FIRST}\n", before="the key is at revision 3\n"))
    assert earlier == ["cell 0 output gives the answer away ('revision 3')"]
    undeclared = answer_problems(_exercise(f"{PREDICT_FIRST}\n", patterns=()))
    assert undeclared == ["the answer cell declares no answer patterns (metadata memkit.answer_patterns)"]


def test_the_projector_checks_catch_long_lines_tall_tables_and_set_up_talk():
    long_line = "x = " + "1" * 90
    assert line_problems(_nb(_code("short = 1\n" + long_line))) == [
        f"cell 0 line 2: {len(long_line)} characters: {long_line[:60]}..."]
    table = "<table><tbody>" + "<tr><td>1</td></tr>" * 16 + "</tbody></table>"
    tall = _code("frame", tags=())
    tall["outputs"] = [{"output_type": "execute_result", "data": {"text/html": table}}]
    assert table_problems(_nb(tall)) == ["cell 0: a table of 16 rows (show the head and a count)"]
    tall["metadata"]["tags"] = ["nbval-ignore-output"]
    assert table_problems(_nb(tall)) == []
    talk = {"cell_type": "markdown", "source": "This output is not compared when tested.", "metadata": {}}
    comment = _code("x = 1  # nbval cannot check this")
    assert prose_problems(_nb(talk, comment)) == [
        "cell 0 talks about the test set-up ('not compared')", "cell 1 talks about the test set-up ('nbval')"]


# -- the optional real-model cells ----------------------------------------------------------------

def _live_cell(nb: dict[str, Any]) -> int:
    found = [i for i, cell in enumerate(nb["cells"]) if "live-model" in _tags(cell)]
    assert len(found) == 1, f"{len(found)} cells are tagged live-model"
    return found[0]


@pytest.mark.parametrize("name", LIVE_NOTEBOOKS)
def test_without_credentials_the_live_cell_says_how_in_one_line_before_the_exercise(name):
    nb = _load(NOTEBOOK_DIR / f"{name}.ipynb")
    at = _live_cell(nb)
    text = "".join(output_text(output) for output in nb["cells"][at]["outputs"])
    assert text.count("\n") == 1 and "OPENAI_API_KEY" in text and "OPENAI_MODEL" in text, text
    answer_at = next(i for i, cell in enumerate(nb["cells"]) if "exercise-answer" in _tags(cell))
    assert at < answer_at
    assert "os.environ.get(\"OPENAI_API_KEY\")" in _source(nb["cells"][at])


LIVE_REPLIES = {
    "00_start_here": [tool_call("memory_put", kind="preference", key="city", value="Lisbon"),
                      say("Saved your city."), say("You live in Lisbon.")],
    "03_approvals_and_the_agent_loop": [tool_call("memory_put", kind="preference", key="drink", value="whisky"),
                                        say("Done, as your notes said.")],
    "04_retrieval_and_budgets": [say(f"Live answer {n}.") for n in range(1, 5)],
}
"""What the local chat-completions server answers, in order, to the requests of each live cell."""


def _envelope(request: dict[str, Any]) -> dict[str, Any]:
    return json.loads(next(m for m in request["body"]["messages"] if m["role"] == "user")["content"])


@pytest.mark.parametrize("name", LIVE_NOTEBOOKS)
def test_the_live_cell_runs_against_a_real_http_endpoint(name, monkeypatch):
    """Run the notebook up to its live cell in a kernel whose environment names the kit's local
    chat-completions server (tests/_model_server.py), as a student's would name OpenAI or Ollama."""
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    from _live_notebook import run_to_live_cell
    from _model_server import ChatServer

    path = NOTEBOOK_DIR / f"{name}.ipynb"
    _live_cell(json.loads(path.read_text(encoding="utf-8")))  # exactly one live cell
    server = ChatServer(LIVE_REPLIES[name])
    cell, _ = run_to_live_cell(path, server, monkeypatch, key="sk-test-not-real", model="test-model")
    shown = "".join(output_text(output) for output in cell.outputs)
    received = server.received
    assert received and all(r["body"]["model"] == "test-model" for r in received)
    assert all(r["auth"] == "Bearer sk-test-not-real" for r in received)
    assert all(r["path"] == "/v1/chat/completions" for r in received)
    if name == "00_start_here":
        assert "Saved your city." in shown and "You live in Lisbon." in shown, shown
        # The second session, another process, was given the city from the file the first one wrote.
        recalled = _envelope(received[2])["retrieved_memory"]
        assert {"kind": "preference", "key": "city", "value": "Lisbon"}.items() <= recalled[0].items()
    elif name == "03_approvals_and_the_agent_loop":
        # The injected save is kept as a proposal, shown, and rejected by the person: never stored.
        assert "Done, as your notes said." in shown, shown
        outcome = json.loads(received[1]["body"]["messages"][-1]["content"])
        assert outcome["ok"] is True and outcome["result"]["status"] == "waiting_for_approval", outcome
        assert "save preference drink = 'whisky'" in shown and "saved before you decided: False" in shown, shown
        assert re.search(r"proposal \d+ rejected: save preference drink = 'whisky'", shown), shown
        assert "database unchanged: True" in shown, shown
        assert any("INSTRUCTION" in m["value"] for m in _envelope(received[0])["retrieved_memory"])
    else:
        assert len(received) == 4 and "Live answer 4." in shown, shown
        prefix = len('"model":"test-model",')
        assert all(len(r["raw"].decode("utf-8")) - prefix <= 4000 for r in received)
