"""The notebooks' exercises, graded outside nbval, and the notebooks run twice in one kernel.

For each notebook one kernel (started the way nbval starts one, in the notebooks' folder):

1. Run All: the check cell of the untouched notebook says "not answered yet";
2. Run All again in the same kernel: every output is the same as the first time, after the
   rules of notebooks/sanitize.cfg (cells whose output varies by design, tagged
   `nbval-ignore-output`, excepted);
3. for each answer below (a right one and several wrong ones), the answer cell is replaced and the
   exercise's cells (answer, experiment, check) are run: the check gives the expected verdict, and
   the same verdict when it runs again; for the first answer, the answer, the experiment and the
   check all run again and give the same verdict.

The cells are found by their tags: `exercise-answer` and `exercise-check`, with the cells between
them the experiment.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"

# notebook -> [(answer cell source, verdict label, text the verdict must hold)]
VARIANTS: dict[str, list[tuple[str, str, str]]] = {
    "00_start_here.ipynb": [
        ('first_session_says = ["Remember my city is Lisbon"]\n'
         'first_session_confirms = [("preference", "city", "Lisbon")]\n'
         'second_session_says = ["Which city do I live in?"]', "right", "from the file"),
        ('first_session_says = ["Remember my city is Lisbon"]\nfirst_session_confirms = []\n'
         'second_session_says = ["Which city do I live in?"]', "not right yet", "saved no city"),
        ('first_session_says = ["Remember my city is Lisbon"]\n'
         'first_session_confirms = [("preference", "city", "lisbon")]\n'
         'second_session_says = ["Which city do I live in?"]', "not right yet", "saved no city"),
        ('first_session_says = ["Remember my city is Lisbon"]\n'
         'first_session_confirms = [("preference", "city", "Lisbon")]\n'
         'second_session_says = ["What do I like to drink?"]', "not right yet", "not about her city"),
        ('first_session_says = ["Remember my city is Lisbon"]\n'
         'first_session_confirms = [("preference", "city", "Lisbon")]\n'
         'second_session_says = ["Do I live in Lisbon?"]', "not right yet", "already says 'Lisbon'"),
        ('first_session_says = "Remember my city is Lisbon"\n'
         'first_session_confirms = [("preference", "city")]\n'
         'second_session_says = ["Which city do I live in?"]', "not right yet", "could not run"),
        ('first_session_says = ["Remember my city is Lisbon"]\n'
         'first_session_confirms = None\nsecond_session_says = ["Which city do I live in?"]',
         "not answered yet", "replace"),
    ],
    "01_schema_and_store.ipynb": [
        ('predicted = {"revision": 3, "events": 3}', "right", "counts changes"),
        ('predicted = {"revision": 1, "events": 3}', "not right yet", "never goes back"),
        ('predicted = {"revision": 3, "events": 2}', "not right yet", "the create is an event too"),
        ('predicted = {"revision": 2, "events": 1}', "not right yet", "every change appends one event"),
        ('predicted = {"revision": "3", "events": 3}', "not right yet", "write a number"),
        ('predicted = {"revision": 3}', "not right yet", "keep the names"),
        ('predicted = {"revision": 3, "events": None}', "not answered yet", "'events'"),
    ],
    "02_quotas_and_transactions.ipynb": [
        ('predicted = {"stored": 5, "new keys saved": 1, "updates saved": 6}', "right", "all six updates"),
        ('predicted = {"stored": 7, "new keys saved": 3, "updates saved": 6}', "not right yet", "no two writers"),
        ('predicted = {"stored": 4, "new keys saved": 0, "updates saved": 6}', "not right yet", "takes it"),
        ('predicted = {"stored": 5, "new keys saved": 1, "updates saved": 2}', "not right yet", "needs no slot"),
        ('predicted = {"stored": "five", "new keys saved": 1, "updates saved": 6}', "not right yet", "write a number"),
        ('predicted = {"stored": 5, "new keys saved": None, "updates saved": 6}', "not answered yet", "new keys"),
    ],
    "03_approvals_and_the_agent_loop.ipynb": [
        ('my_script = [call("memory_put", kind="preference", key="drink", value="green tea"), "Saved."]',
         "right", "saved on confirmation exercise#1"),
        ('my_script = [call("memory_put", kind="preference", key="drink", value="Green tea"), "Saved."]',
         "not right yet", "a different one"),
        ('my_script = ["Saved green tea."]', "not right yet", "only answered in text"),
        ('my_script = [call("memory_put", kind="preference", key="drink", value="green tea")]',
         "not right yet", "ran out of replies"),
        ('my_script = [call("memory_put", kind="preference", key="drink", value="green tea"),\n'
         '             call("memory_put", kind="preference", key="drink", value="green tea"), "Saved."]',
         "not right yet", "already used"),
        ('my_script = [call("memory_delete", kind="preference", key="drink"), "Deleted."]',
         "not right yet", "no confirmation to delete"),
        ('my_script = [None, "Saved."]', "not answered yet", "my_script"),
    ],
    "04_retrieval_and_budgets.ipynb": [
        ("answer = 2800", "right", "sends every request"),
        ("answer = 2700", "not right yet", "too small"),
        ("answer = 3500", "not right yet", "a smaller budget still works"),
        ("answer = 2850", "not right yet", "multiple of 100"),
        ('answer = "2800"', "not right yet", "whole number"),
        ("answer = None", "not answered yet", "write a budget"),
    ],
    "05_restart_simulation.ipynb": [
        ('predicted = {"after commit, NORMAL": 0, "before commit, FULL": 3}', "right", "cannot undo a commit"),
        ('predicted = {"after commit, NORMAL": 3, "before commit, FULL": 3}', "not right yet", "outlive the killed process"),
        ('predicted = {"after commit, NORMAL": 0, "before commit, FULL": 0}', "not right yet", "still inside its open"),
        ('predicted = {"after commit, NORMAL": 0, "before commit, FULL": None}', "not answered yet", "before commit"),
    ],
    "06_user_isolation.ipynb": [
        ('carol_drink = "rooibos with honey"', "right", "only records of their own"),
        ('carol_drink = "tea"', "right", "Carol's agent received her drink 'tea'"),
        ('carol_drink = "jasmine tea"', "not right yet", "alice has the same value"),
        ('carol_drink = "jasmine tea"\nviews = {"alice": {"retrieved": []}, "bob": {"retrieved": []}}',
         "not right yet", "alice has the same value"),
        ('carol_drink = "   "', "not right yet", "refused the value"),
        ("carol_drink = None", "not answered yet", "carol_drink"),
    ],
    "07_short_term_redis.ipynb": [
        ('predicted = {"after two more": {"window": 3, "pending": 2, "archive": 2},\n'
         '             "after idle + flush": {"window": 0, "pending": 0, "archive": 7}}', "right", "archives all 7"),
        ('predicted = {"after two more": {"window": 3, "pending": 0, "archive": 4},\n'
         '             "after idle + flush": {"window": 0, "pending": 0, "archive": 7}}', "not right yet",
         "no flush ran after turns 6 and 7"),
        ('predicted = {"after two more": {"window": 3, "pending": 2, "archive": 2},\n'
         '             "after idle + flush": {"window": 3, "pending": 0, "archive": 4}}', "not right yet",
         "sweep margin"),
        ('predicted = {"after two more": {"window": 3, "pending": 2, "archive": 2},\n'
         '             "after idle + flush": {"window": 0, "pending": None, "archive": 7}}', "not answered yet",
         "after idle + flush"),
    ],
    "08_memory_inspector.ipynb": [
        ("def move_to_bergen(inspector, user):\n    inspector.select_user(user)\n"
         "    inspector.select_key('preference', 'city')\n    inspector.stage_edit('Bergen')\n    inspector.confirm()",
         "right", "changed through the inspector on confirmation inspector#"),
        ("def move_to_bergen(inspector, user):\n    inspector.select_user(user)\n"
         "    inspector.select_key('preference', 'city')\n    inspector.stage_edit('Bergen')",
         "not right yet", "staged"),
        ("def move_to_bergen(inspector, user):\n    inspector.select_user(user)\n"
         "    inspector.select_key('preference', 'city')\n    inspector.stage_edit('bergen')\n    inspector.confirm()",
         "not right yet", "exactly 'Bergen'"),
        ("def move_to_bergen(inspector, user):\n    inspector.store.put(user, 'cli', 'preference', 'city', 'Bergen')",
         "not right yet", "not the inspector"),
        ("def move_to_bergen(inspector, user):\n    inspector.select_user('bob')\n"
         "    inspector.select_key('preference', 'city')\n    inspector.stage_edit('Bergen')",
         "not right yet", "inspector.select_user(user)"),
        ("def move_to_bergen(inspector, user):\n    inspector.select_user(user)\n    inspector.stage_edit('Bergen')",
         "not right yet", "refused a step"),
        ("move_to_bergen = None", "not answered yet", "move_to_bergen"),
    ],
    "09_scaling_out.ipynb": [
        ('predicted = {"hop 2: B, ticket": "forgotten", "hop 3: C, ticket": "forgotten", "hop 5: B, drink": "forgotten", "hop 6: C, drink": "forgotten"}',
         "right", "which B and C never open"),
        ('predicted = {"hop 2: B, ticket": "recalled", "hop 3: C, ticket": "recalled", "hop 5: B, drink": "forgotten", "hop 6: C, drink": "forgotten"}',
         "not right yet", "whose keys carry its store's id"),
        ('predicted = {"hop 2: B, ticket": "forgotten", "hop 3: C, ticket": "forgotten", "hop 5: B, drink": "recalled", "hop 6: C, drink": "recalled"}',
         "not right yet", "saved with a confirmation, by A: into which store"),
        ('predicted = {"hop 2: B, ticket": "recalled", "hop 3: C, ticket": "forgotten", "hop 5: B, drink": "forgotten", "hop 6: C, drink": "forgotten"}',
         "not right yet", "hop 2: B, ticket: you predicted 'recalled'"),
        ('predicted = {"hop 2: B, ticket": "forgotten", "hop 3: C, ticket": "forgotten", "hop 5: B, drink": True, "hop 6: C, drink": "forgotten"}',
         "not right yet", "not True"),
        ('predicted = {"hop 2: B, ticket": "forgotten", "hop 3: C, ticket": "forgotten", "hop 5: B, drink": "forgotten", "hop 6: C, drink": None}',
         "not answered yet", "'hop 6: C, drink'"),
    ],
}

LABELS = ("not answered yet", "right", "not right yet")


def _sanitizers() -> list[tuple[re.Pattern[str], str]]:
    """The `regex:` / `replace:` pairs of notebooks/sanitize.cfg, which nbval applies too."""
    lines = (NOTEBOOK_DIR / "sanitize.cfg").read_text(encoding="utf-8").splitlines()
    patterns = [line.split(":", 1)[1].strip() for line in lines if line.startswith("regex:")]
    replacements = [line.split(":", 1)[1].strip() for line in lines if line.startswith("replace:")]
    return [(re.compile(p), r) for p, r in zip(patterns, replacements, strict=True)]


SANITIZERS = _sanitizers()


def _sanitized(text: str) -> str:
    for pattern, replacement in SANITIZERS:
        text = pattern.sub(replacement, text)
    return text


def _text(cell: Any) -> str:
    """What a cell showed as text: streams and text/plain (images and widget views left out)."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output["text"])
        elif output.get("output_type") in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "application/vnd.jupyter.widget-view+json" not in data:
                parts.append(data.get("text/plain", ""))
                parts.append(data.get("text/html", ""))
    return "".join(parts)


def _verdict(cell: Any) -> str:
    lines = [line for line in _text(cell).splitlines() if line.startswith(LABELS)]
    assert len(lines) == 1, f"the check printed {_text(cell)!r}, not one verdict"
    return lines[0]


def _numbers_out(text: str) -> str:
    return re.sub(r"\d+", "N", text)


def _tagged(nb: Any, tag: str) -> int:
    found = [i for i, cell in enumerate(nb.cells) if tag in cell.get("metadata", {}).get("tags", [])]
    assert len(found) == 1, f"{len(found)} cells are tagged {tag!r}"
    return found[0]


def _varies(cell: Any) -> bool:
    return "nbval-ignore-output" in cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_exercise_verdicts_and_run_all_twice(name):
    nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    answer_at, check_at = _tagged(nb, "exercise-answer"), _tagged(nb, "exercise-check")
    assert answer_at < check_at
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})

    def run(index: int, source: str | None = None) -> Any:
        cell = copy.deepcopy(nb.cells[index])
        if source is not None:
            cell.source = source
        client.execute_cell(cell, index)
        return cell

    def run_all() -> list[str]:
        outputs = []
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                text = _sanitized(_text(run(index)))
                outputs.append("" if _varies(cell) else text)
        return outputs

    with client.setup_kernel():
        first = run_all()
        second = run_all()
        assert first == second, _first_difference(nb, first, second)
        assert _verdict(run(check_at)).startswith("not answered yet")

        for number, (source, label, expected) in enumerate(VARIANTS[name]):
            run(answer_at, source)
            for index in range(answer_at + 1, check_at):
                run(index)
            verdict = _verdict(run(check_at))
            assert verdict.startswith(label) and expected in verdict, (source, verdict)
            assert _verdict(run(check_at)) == verdict, (source, verdict)  # the check again
            if number == 0:  # the answer, the experiment and the check again (experiments are the slow part)
                for index in range(answer_at, check_at + 1):
                    again = run(index, source if index == answer_at else None)
                # The same verdict; fresh names and ids (mover-2, inspector#3) may count on.
                assert _numbers_out(_verdict(again)) == _numbers_out(verdict), (source, verdict)


def _first_difference(nb: Any, first: list[str], second: list[str]) -> str:
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    for index, a, b in zip(code, first, second):
        if a != b:
            return f"cell {index} differs on the second Run All:\n{a[:600]}\n---\n{b[:600]}"
    return "the runs differ in length"


def test_a_verdict_line_is_found_and_a_second_one_is_refused():
    cell = {"outputs": [{"output_type": "stream", "name": "stdout", "text": "right: fine\n"}]}
    assert _verdict(cell) == "right: fine"
    cell["outputs"].append({"output_type": "stream", "name": "stdout", "text": "not right yet: x\n"})
    with pytest.raises(AssertionError, match="not one verdict"):
        _verdict(cell)
    assert re.match("|".join(LABELS), "not answered yet: replace")
