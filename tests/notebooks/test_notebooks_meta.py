"""Meta-checks over every notebook in notebooks/: the teaching shape, the kernel, clean committed outputs.

nbval runs the notebooks and compares their outputs; these checks cover what nbval cannot see: that
each notebook opens with a title, learning goals and the time it needs, ends with an exercise and a
cell that checks it, names the `python3` kernel, was committed executed, uses nbval markers that
nbval actually understands, and that no committed output carries a machine path, a secret-like string
or an error traceback.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

NAME_RE = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")
TIME_RE = re.compile(r"(?i)\btime\b[^\n]{0,40}?\d+\s*(?:min|minutes)\b")
EXERCISE_RE = re.compile(r"(?im)^#+[^\n]*\bexercise")
SOLUTION_RE = re.compile(r"(?im)^(?:#+\s*|\*\*)solution")
NUMBERED_HEADING_RE = re.compile(r"(?m)^##+ \d+\. (\w+)")
ARTICLES = {"the", "a", "an"}
# nbval's own tag (out of the student's view, unlike a marker comment) and the exercise tags that
# tests/notebooks/test_exercises.py looks for.
KNOWN_TAGS = {"nbval-ignore-output", "exercise-answer", "exercise-experiment", "exercise-check",
              "live-model",  # live-model: the optional cell that talks to a real model (tests/notebooks/test_course.py)
              "solution"}  # solution: the worked solution, left out of the student handout (classroom/handout.py)
# A path of this machine (or a typical laptop) at the start of a path, not inside a URL.
MACHINE_PATH_RE = re.compile(
    r"(?<![\w.:/-])(?:/tmp/|/var/folders/|/private/var/|/root/|/work/|/home/|/Users/|[A-Za-z]:\\\\?Users\\)"
)
SECRET_RES = [
    re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}"),  # OpenAI-style keys
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"(?i)\b(?:api[_-]?key|secret|token|password)\b\s*[=:]\s*['\"]?[A-Za-z0-9_\-]{16,}"),
]
TRACEBACK_MARKERS = ("Traceback (most recent call last)", "\x1b[0;31m---------------------------------------")


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return value if isinstance(value, str) else json.dumps(value)


def output_texts(output: dict[str, Any]) -> list[str]:
    """Every piece of text an output carries (stream text, rich text reprs, error fields); no images."""
    texts = []
    if "text" in output:
        texts.append(_text(output["text"]))
    for mime, value in output.get("data", {}).items():
        if not mime.startswith("image/"):
            texts.append(_text(value))
    if output.get("output_type") == "error":
        texts += [output.get("ename", ""), output.get("evalue", ""), _text(output.get("traceback", []))]
    return texts


def _heading_words(text: str) -> list[str]:
    return [m.group(1) for m in NUMBERED_HEADING_RE.finditer(text)]


def notebook_problems(nb: dict[str, Any], name: str = "00_example.ipynb") -> list[str]:
    """What is wrong with a notebook, as short sentences; an empty list means it follows the conventions."""
    problems = []
    if not NAME_RE.match(name):
        problems.append(f"name {name!r} is not NN_topic.ipynb")
    kernel = nb.get("metadata", {}).get("kernelspec", {}).get("name")
    if kernel != "python3":
        problems.append(f"kernelspec.name is {kernel!r}, not 'python3'")

    cells = nb.get("cells", [])
    first = cells[0] if cells else {}
    first_text = _text(first.get("source", ""))
    if first.get("cell_type") != "markdown" or not first_text.lstrip().startswith("# "):
        problems.append("the first cell is not a markdown cell starting with a '# ' title")
    if "you will learn" not in first_text.lower():
        problems.append("the first cell does not say 'You will learn'")
    if "what you need" not in first_text.lower():
        problems.append("the first cell does not say 'What you need' (the prerequisites)")
    if not TIME_RE.search(first_text):
        problems.append("the first cell does not give the time needed (e.g. 'Time needed: 10 minutes')")

    markdown = [(i, _text(c.get("source", ""))) for i, c in enumerate(cells) if c.get("cell_type") == "markdown"]
    for index, text in markdown:
        for word in _heading_words(text):
            if word.lower() in ARTICLES:
                problems.append(f"cell {index}: a section heading starts with {word!r}; start it with a verb")
    exercise_at = [i for i, text in markdown if EXERCISE_RE.search(text)]
    answer_at = _tagged(cells, "exercise-answer")
    check_at = _tagged(cells, "exercise-check")
    if not exercise_at:
        problems.append("no '## Exercise' markdown cell")
    elif len(answer_at) != 1 or len(check_at) != 1 or not exercise_at[-1] < answer_at[0] < check_at[0]:
        problems.append("the exercise needs one answer cell and, after it, one check cell "
                        "(tagged exercise-answer and exercise-check)")
    else:
        if "None" not in _text(cells[answer_at[0]].get("source", "")):
            problems.append("the answer cell holds no placeholder (None) for Run All to leave unanswered")
        checked = "".join(t for o in cells[check_at[0]].get("outputs", []) for t in output_texts(o))
        if "not answered yet" not in checked:
            problems.append("the committed check cell does not say 'not answered yet'")
        if any(c.get("cell_type") == "code" for c in cells[check_at[0] + 1:]):
            problems.append("a code cell follows the check: a solution must not run in Run All "
                            "(write it in a folded markdown cell)")
    for index, text in markdown:
        if SOLUTION_RE.search(text) and not cells[index].get("metadata", {}).get("jupyter", {}).get("source_hidden"):
            problems.append(f"cell {index}: the solution is not folded (jupyter.source_hidden)")
    tail = " ".join(text for index, text in markdown if index >= len(cells) - 3)
    if "## In practice" not in tail or "## Further reading" not in tail:
        problems.append("the last cells have no '## In practice' and '## Further reading'")
    elif "](http" not in tail.split("## Further reading", 1)[1]:
        problems.append("'Further reading' links to nothing")
    if not any("start over" in text.lower() for _, text in markdown):
        problems.append("nothing tells the student how to start over")

    counts = []
    for index, cell in enumerate(cells):
        source = _text(cell.get("source", ""))
        for pattern in SECRET_RES:
            if pattern.search(source):
                problems.append(f"cell {index} source holds a secret-like string ({pattern.pattern[:20]}...)")
        for tag in cell.get("metadata", {}).get("tags", []):
            if tag not in KNOWN_TAGS:
                problems.append(f"cell {index}: tag {tag!r} is not one this kit uses ({', '.join(sorted(KNOWN_TAGS))})")
        if cell.get("cell_type") != "code":
            continue
        for line in source.splitlines():
            if line.strip().startswith("# NBVAL"):
                problems.append(f"cell {index}: {line.strip()!r} is an nbval marker in the student's view; "
                                "use a cell tag (nbval-ignore-output) instead")
        if source.strip():
            counts.append(cell.get("execution_count"))
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(f"cell {index} output is an error ({output.get('ename')})")
            for text in output_texts(output):
                if any(marker in text for marker in TRACEBACK_MARKERS):
                    problems.append(f"cell {index} output holds a traceback")
                if match := MACHINE_PATH_RE.search(text):
                    problems.append(f"cell {index} output holds a machine path ({match.group(0)}...)")
                for pattern in SECRET_RES:
                    if pattern.search(text):
                        problems.append(f"cell {index} output holds a secret-like string ({pattern.pattern[:20]}...)")
    if not counts or any(count is None for count in counts):
        problems.append("not every code cell was executed: commit the outputs of a real run")
    elif counts != list(range(counts[0], counts[0] + len(counts))):
        problems.append(f"code cells were not run top to bottom in one go (execution counts {counts})")
    return problems


def _tagged(cells: list[dict[str, Any]], tag: str) -> list[int]:
    return [i for i, c in enumerate(cells) if tag in c.get("metadata", {}).get("tags", [])]


def test_every_lesson_from_00_to_09_has_a_notebook():
    numbers = {path.name[:2] for path in NOTEBOOKS}
    assert {f"{number:02d}" for number in range(10)} <= numbers
    assert len(numbers) == len(NOTEBOOKS), "two notebooks share a number"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_follows_the_conventions(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert notebook_problems(nb, path.name) == []


# -- the checker itself must be able to fail ---------------------------------------------------------


def _cell(kind: str, source: str, **extra: Any) -> dict[str, Any]:
    cell: dict[str, Any] = {"cell_type": kind, "metadata": {}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    cell.update(extra)
    return cell


def _stream(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


GOOD = {
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
    "cells": [
        _cell("markdown", "# 09 · Example\n\n**You will learn**\n\n- one thing\n\n**What you need:** notebook 00."
                          "\n\n**Time needed:** about 5 minutes."),
        _cell("markdown", "## 1. Count to one"),
        _cell("code", "x = 1\nprint(x)", execution_count=1, outputs=[_stream("1\n")]),
        _cell("markdown", "## Summary\n\nOne thing.\n\n## Exercise\n\nPredict x + 1."),
        _cell("code", "predicted = None", execution_count=2, metadata={"tags": ["exercise-answer"]}),
        _cell("code", "print(verdict(predicted))", execution_count=3, outputs=[_stream("not answered yet: ...\n")],
              metadata={"tags": ["exercise-check"]}),
        _cell("markdown", "**Solution.** Two.", metadata={"jupyter": {"source_hidden": True}}),
        _cell("markdown", "## In practice\n\nTo start over, run all again.\n\n"
                          "## Further reading\n\n- [SQLite](https://www.sqlite.org/)"),
    ],
}


def test_a_notebook_that_follows_the_conventions_has_no_problems():
    assert notebook_problems(GOOD) == []


def _with(change) -> dict[str, Any]:
    nb = copy.deepcopy(GOOD)
    change(nb)
    return nb


def _source(index: int, text: str):
    return lambda nb: nb["cells"][index].update(source=text)


@pytest.mark.parametrize("change, expected", [
    (lambda nb: nb["metadata"]["kernelspec"].update(name="conda-env-x"), "kernelspec.name"),
    (_source(0, "Example\n\nYou will learn\n\nWhat you need\n\nTime needed: 5 minutes"), "title"),
    (_source(0, "# Example\n\nWhat you need\n\nTime needed: 5 minutes"), "You will learn"),
    (_source(0, "# Example\n\nYou will learn\n\nTime needed: 5 minutes"), "What you need"),
    (_source(0, "# Example\n\nYou will learn: a thing.\n\nWhat you need: nothing."), "time needed"),
    (_source(1, "## 1. The count"), "start it with a verb"),
    (_source(3, "## Summary"), "Exercise"),
    (lambda nb: nb["cells"][4]["metadata"].update(tags=[]), "answer cell"),
    (_source(4, "predicted = 2"), "placeholder"),
    (lambda nb: nb["cells"][5].update(outputs=[_stream("right: 2\n")]), "not answered yet"),
    (lambda nb: nb["cells"].insert(6, _cell("code", "predicted = 2", execution_count=4)), "follows the check"),
    (lambda nb: nb["cells"][6].update(metadata={}), "not folded"),
    (_source(7, "## In practice\n\nTo start over, run all again."), "Further reading"),
    (_source(7, "## In practice\n\nTo start over, run all again.\n\n## Further reading\n\nNothing."), "links"),
    (_source(7, "## In practice\n\nRun all.\n\n## Further reading\n\n- [a](https://a.org)"), "start over"),
    (lambda nb: nb["cells"][2]["outputs"].append(_stream("saved to /tmp/tmpab12/memory.sqlite3\n")), "machine path"),
    (lambda nb: nb["cells"][2]["outputs"].append(
        {"output_type": "execute_result", "execution_count": 1, "metadata": {},
         "data": {"text/html": "<td>/home/alice/memory.sqlite3</td>", "text/plain": "x"}}), "machine path"),
    (lambda nb: nb["cells"][2]["outputs"].append(_stream("key sk-abcdefghijklmnopqrstuvwxyz123456\n")), "secret"),
    (_source(2, "api_key = 'ABCDEFGHIJKLMNOPQRSTUV'"), "secret"),
    (lambda nb: nb["cells"][2]["outputs"].append(
        {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": ["..."]}), "error"),
    (lambda nb: nb["cells"][2]["outputs"].append(
        _stream("Traceback (most recent call last):\n  File ...\n")), "traceback"),
    (_source(2, "# NBVAL_IGNORE_OUTPUT\nx = 1"), "cell tag"),
    (_source(2, "# NBVAL_SKIP (slow)\nx = 1"), "cell tag"),
    (lambda nb: nb["cells"][2]["metadata"].update(tags=["nbval-skipp"]), "tag 'nbval-skipp'"),
    (lambda nb: nb["cells"][4].update(execution_count=None), "executed"),
    (lambda nb: nb["cells"][4].update(execution_count=7), "top to bottom"),
])
def test_each_broken_convention_is_reported(change, expected):
    problems = notebook_problems(_with(change))
    assert len(problems) == 1 and expected.lower() in problems[0].lower(), problems


def test_a_bad_name_is_reported():
    assert notebook_problems(GOOD, "Example Notebook.ipynb") == [
        "name 'Example Notebook.ipynb' is not NN_topic.ipynb"
    ]


def test_urls_and_sanitized_placeholders_are_not_machine_paths():
    nb = _with(lambda nb: nb["cells"][2]["outputs"].append(
        _stream("see https://sqlite.org/work/wal.html and <TMP> and memory.sqlite3\n")))
    assert notebook_problems(nb) == []


# -- the order of the lessons: each notebook uses only what it or an earlier one introduced ------------

INTRODUCED = {
    # name imported from memkit (or `await` at the top level of a cell) -> the notebook that introduces it
    "MemoryStore": "00", "lab": "00", "FixtureModel": "00", "classroom.Workspace": "00",
    "classroom.exercises": "00", "MemoryAgent": "00", "Approvals": "00", "OpenAIModel": "00",
    "classroom.processes": "00", "memkit.models.propose": "00",
    "FakeClock": "01", "ValidationError": "01", "memkit.store.MIGRATIONS": "01", "memkit.store.SCHEMA_VERSION": "01",
    "forget_user": "01",
    "Limits": "02", "LockedError": "02", "QuotaError": "02",
    "MemoryTools": "03", "ScriptedModel": "03", "await": "03",
    "memkit.agent.SYSTEM_PROMPT": "03", "memkit.jsonutil.canonical_json": "03", "memkit.models.call": "03",
    "memkit.request.Request": "03", "memkit.store.fingerprint": "03", "classroom.ConfirmForm": "03",
    "classroom.confirm_from_form": "03", "classroom.approvals_table": "03",
    "classroom.history_table": "03", "classroom.messages_table": "03",
    "classroom.tool_results_table": "03",
    "retrieve": "04", "memkit.retrieval.task_terms": "04", "memkit.request.History": "04", "BudgetedModel": "04",
    "InProcessWindow": "04",
    "BudgetError": "04", "memkit.tokens.chars_per_token": "04", "classroom.records_table": "04",
    "classroom.conversation_rows": "04", "classroom.measurement_rows": "04",
    "classroom.budget_chart": "04", "classroom.budget_summary": "04",
    "classroom.BudgetExplorer": "04", "classroom.DEFAULT_TASKS": "04",
    "memkit.store.inspect_file": "05",
    "classroom.scan_requests": "06", "classroom.cross_user_scan": "06",
    "classroom.what_user_sees": "06", "classroom.UserSwitcher": "06",
    "RedisWindow": "07", "start_embedded_redis": "07", "WindowError": "07", "memkit.window.connect_redis": "07",
    "MemoryInspector": "08", "ApprovalError": "08", "StoreError": "08", "MemkitError": "08",
    "classroom.MemoryInspector": "08", "classroom.inspect": "08",
    "classroom.peer_samples.make_peer_file": "08",
    "memkit.store.open_store": "09", "memkit.store.postgres.start_embedded_postgres": "09",
    "memkit.semantic.load_embedder": "10",
    "classroom.mcp_client.McpClient": "11", "classroom.mcp_client.QuestionView": "11",
    "classroom.mcp_client.answer": "11", "memkit.integrations.openai_agents.MemkitSession": "11",
    "memkit.integrations.mcp_server": "11", "memkit.integrations.mcp_changes": "11",
    "classroom.agent_turns.run_turn": "11", "classroom.agent_turns.run_turn_in_new_process": "11",
    "classroom.ProposalsPanel": "10", "classroom.decide": "10", "classroom.outcome_line": "10",
    "classroom.pending_table": "10",
    "memkit.remembering.MemoryChange": "10", "memkit.remembering.ONE_OFF": "10",
    "memkit.remembering.explicit_request": "10", "memkit.remembering.plain": "10",
    "memkit.remembering.stated_fact": "10", "memkit.consolidation.consolidate": "10",
    "memkit.window.StoreWindow": "10",
}
"""The curriculum. A notebook that uses a name before the notebook that introduces it fails; the
introducing notebook must name it in its prose (in backticks), where it explains it."""

TERMS = {"trigram": "01", "top-level `await`": "03", "JSON envelope": "03", "canonical JSON": "03",
         "Lua script": "07", "sweep margin": "07"}
"""Terms explained where they first appear: that notebook's first mention is in bold, where it is explained."""


def used_names(source: str) -> set[str]:
    """What a code cell takes from memkit (`from memkit[.x] import y`), and `await` at the top level."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    tree = ast.parse(code)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "memkit":
            names |= {alias.name if node.module == "memkit" else f"{node.module}.{alias.name}" for alias in node.names}
    top_level = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    if any(isinstance(n, ast.Await) for stmt in top_level for n in ast.walk(stmt)):
        names.add("await")
    return names


def order_problems(notebooks: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Names used before their notebook, names nobody declared, introductions the prose never names,
    terms whose first appearance is not where they are explained."""
    problems = []
    for name, nb in notebooks:
        number = name[:2]
        cells = nb.get("cells", [])
        prose = "\n".join(_text(c.get("source", "")) for c in cells if c.get("cell_type") == "markdown")
        used = set().union(*[used_names(_text(c.get("source", ""))) for c in cells if c.get("cell_type") == "code"])
        for item in sorted(used):
            if item not in INTRODUCED:
                problems.append(f"{name} uses {item!r}, which no notebook is declared to introduce")
            elif INTRODUCED[item] > number:
                problems.append(f"{name} uses {item!r} before notebook {INTRODUCED[item]} introduces it")
            elif INTRODUCED[item] == number:
                named = "top-level `await`" if item == "await" else "`" + item.rsplit(".", 1)[-1]
                if named not in prose:
                    problems.append(f"{name} introduces {item!r} without naming it in its prose")
    for term, where in TERMS.items():
        for name, nb in notebooks:
            prose = "\n".join(_text(c.get("source", "")) for c in nb.get("cells", [])
                              if c.get("cell_type") == "markdown")
            at = prose.lower().find(term.lower())
            if at < 0:
                continue
            if name[:2] != where:
                problems.append(f"{term!r} first appears in {name}, not in notebook {where} that explains it")
            elif prose[max(0, at - 2):at] != "**":
                problems.append(f"{name}: the first mention of {term!r} is not in bold where it is explained")
            break
        else:
            problems.append(f"no notebook mentions {term!r}")
    return problems


def test_each_notebook_uses_only_what_it_or_an_earlier_one_introduced():
    notebooks = [(path.name, json.loads(path.read_text(encoding="utf-8"))) for path in NOTEBOOKS]
    assert order_problems(notebooks) == []


def test_the_order_check_catches_a_name_used_too_early_and_an_unexplained_term():
    def notebook(*cells: dict[str, Any]) -> dict[str, Any]:
        return {"cells": list(cells)}

    early = notebook(_cell("markdown", "Meet `ScriptedModel`."), _cell("code", "from memkit import ScriptedModel"))
    assert [p for p in order_problems([("02_x.ipynb", early)]) if "02_x" in p] == [
        "02_x.ipynb uses 'ScriptedModel' before notebook 03 introduces it"]
    silent = notebook(_cell("code", "from memkit import ScriptedModel\nreply = await agent.ask('x')"))
    problems = order_problems([("03_x.ipynb", silent)])
    assert "03_x.ipynb introduces 'ScriptedModel' without naming it in its prose" in problems
    assert "03_x.ipynb introduces 'await' without naming it in its prose" in problems
    plain = notebook(_cell("markdown", "A trigram index and **canonical JSON**."))
    problems = order_problems([("00_x.ipynb", plain)])
    assert "'trigram' first appears in 00_x.ipynb, not in notebook 01 that explains it" in problems
    assert "'canonical JSON' first appears in 00_x.ipynb, not in notebook 03 that explains it" in problems
    assert "no notebook mentions 'sweep margin'" in problems


# -- questions that check understanding (issue 35: five to eight in every notebook) ----------------------


def understanding_problems(nb: dict[str, Any]) -> list[str]:
    """What is wrong with a notebook's "Check your understanding" cell and its answers: one markdown
    cell of five to eight numbered questions, and right after it an **Answers.** cell answering each
    by its number, tagged `solution` (the student's handout leaves it out) and folded."""
    cells = nb["cells"]
    text = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]
    at = [i for i, cell in enumerate(cells) if cell["cell_type"] == "markdown"
          and text[i].startswith("## Check your understanding")]
    if len(at) != 1:
        return [f"{len(at)} 'Check your understanding' cells (want 1)"]
    questions = NUMBERED.findall(text[at[0]])
    problems = [] if 5 <= len(questions) <= 8 else [f"{len(questions)} questions (want 5 to 8)"]
    answers = cells[at[0] + 1] if at[0] + 1 < len(cells) else None
    if answers is None or not text[at[0] + 1].startswith("**Answers.**"):
        return [*problems, "no **Answers.** cell right after the questions"]
    if "solution" not in answers.get("metadata", {}).get("tags", []):
        problems.append("the answers are not tagged 'solution' (the student's handout would show them)")
    elif not answers["metadata"].get("jupyter", {}).get("source_hidden"):
        problems.append("the answers are not folded (the projector would show them with the questions)")
    if NUMBERED.findall(text[at[0] + 1]) != questions:
        problems.append(f"the answers are numbered {NUMBERED.findall(text[at[0] + 1])}, the questions {questions}")
    return problems


NUMBERED = re.compile(r"(?m)^(\d+)\. ")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_asks_questions_that_check_understanding(path):
    assert understanding_problems(json.loads(path.read_text(encoding="utf-8"))) == []


def test_the_questions_check_reports_what_is_missing():
    def nb(*cells: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        return {"cells": [{"cell_type": "markdown", "source": [text], "metadata": metadata}
                          for text, metadata in cells]}
    five = "## Check your understanding\n\n" + "".join(f"{n}. Why?\n" for n in range(1, 6))
    answers = "**Answers.**\n\n" + "".join(f"{n}. Because.\n" for n in range(1, 6))
    folded = {"tags": ["solution"], "jupyter": {"source_hidden": True}}
    assert understanding_problems(nb((five, {}), (answers, folded))) == []
    assert understanding_problems(nb(("## Summary", {}))) == ["0 'Check your understanding' cells (want 1)"]
    assert understanding_problems(nb((five.replace("5. Why?\n", ""), {}), (answers, folded))) == [
        "4 questions (want 5 to 8)", "the answers are numbered ['1', '2', '3', '4', '5'], the questions "
        "['1', '2', '3', '4']"]
    assert understanding_problems(nb((five, {}), (answers, {}))) == [
        "the answers are not tagged 'solution' (the student's handout would show them)"]
    assert understanding_problems(nb((five, {}), (answers, {"tags": ["solution"]}))) == [
        "the answers are not folded (the projector would show them with the questions)"]
    assert understanding_problems(nb((five, {}))) == ["no **Answers.** cell right after the questions"]


# -- a projector (1280x800 at 150%) shows about 90 words of prose at once --------------------------

MAX_PARAGRAPH_WORDS = 90
FENCE_RE = re.compile(r"```.*?```", re.S)
ITEM_RE = re.compile(r"\n(?=[ ]*(?:[-*]|\d+\.) )")  # a list item starts a paragraph of its own
MARKER_RE = re.compile(r"^\s*(?:[-*]|\d+\.)\s")  # an item's marker is not a word


def long_paragraphs(nb: dict[str, Any]) -> list[str]:
    """Markdown paragraphs (or list items) of more than MAX_PARAGRAPH_WORDS words; tables and code
    blocks are not prose and are not counted."""
    found = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "markdown":
            continue
        for block in re.split(r"\n\s*\n", FENCE_RE.sub("", _text(cell.get("source", "")))):
            for paragraph in ITEM_RE.split(block):
                words = len(MARKER_RE.sub("", paragraph).split())
                if words > MAX_PARAGRAPH_WORDS and not paragraph.lstrip().startswith("|"):
                    found.append(f"cell {index}: {words} words: {' '.join(paragraph.split()[:8])} ...")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_paragraph_runs_over_what_a_projector_shows(path):
    assert long_paragraphs(json.loads(path.read_text(encoding="utf-8"))) == []


def test_the_paragraph_check_counts_paragraphs_and_list_items_not_tables_or_code():
    def nb(text: str) -> dict[str, Any]:
        return {"cells": [{"cell_type": "markdown", "source": text, "metadata": {}}]}

    ninety, more = " ".join(["word"] * 90), " ".join(["word"] * 91)
    assert long_paragraphs(nb(f"{ninety}\n\n{ninety}")) == []
    assert long_paragraphs(nb(f"- {ninety}\n- {ninety}\n12. {ninety}")) == []  # items of 90 words
    assert long_paragraphs(nb(f"| {more} |\n\n```\n{more}\n```")) == []
    first = "word word word word word word word word ..."
    assert long_paragraphs(nb(f"{ninety}\n{ninety}")) == [f"cell 0: 180 words: {first}"]
    assert long_paragraphs(nb(f"## Title\n\n- {more}")) == [f"cell 0: 91 words: - {first[5:]}"]
