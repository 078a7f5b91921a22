"""Notebook 11 in a real browser: after Run All, its hands-on question is still the student's to answer.

Section 6 of 11 has the fixture model propose a memory through the MCP client, and the person (the
student) answer the server's question with the buttons of a `QuestionView`. The text asks them to
decide; no later cell may have decided for them. So, after Edit > Clear Outputs and Run > Run All
Cells in JupyterLab (headless Chromium, as tests/notebooks/test_browser.py drives it):

1. the view shows the model's exact proposal (`value: "green tea"`) and no result under its
   buttons, and the cell after it says the question has no answer yet and nothing is stored;
2. pressing Approve shows the tool's result (stored), and running the next cell again reads the
   drink from the store: the student's answer, and only theirs, made the change.

The launch helpers (JupyterLab on a copy of notebooks/, Chromium, the kernel's websocket log) are
test_browser.py's; without a Chromium this module is skipped with that module's reason.
"""

from __future__ import annotations

from typing import Any

import test_browser
from test_browser import ROOT, Steps, find_widget, kernel_idle, open_and_run_all, wait_until
from test_browser import browser, lab  # noqa: F401 - the fixtures this module's test uses

NOTEBOOK = ROOT / "notebooks" / "11_where_agents_live.ipynb"
QUESTION_BUTTON = ".widget-button:has-text('Approve')"
READ_BACK = 'print("your answer:"'
"""The first line of the cell after the question view, which reads the answer and the store."""


def cell_after_question(cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cell that reads back the student's answer (None if the notebook has none)."""
    found = [cell for cell in cells if cell["code"] and cell["source"].startswith(READ_BACK)]
    return found[0] if found else None


def test_the_question_is_still_open_after_run_all_and_only_the_student_answers_it(browser, lab):  # noqa: F811
    opened = open_and_run_all(browser, lab, NOTEBOOK)
    try:
        assert not opened.problems, "11 after Run All:\n  " + "\n  ".join(opened.problems)
        steps = Steps(opened, "open question")
        widget = find_widget(opened, steps, QUESTION_BUTTON, "the question view")
        if widget is None:
            return steps.finish()
        shown = widget.text_content() or ""
        steps.check("it shows the model's exact proposal", 'value: "green tea"' in shown, shown[:300])
        steps.check("no answer is shown under its buttons after Run All", '"stored"' not in shown, shown[-300:])
        page = opened.page
        read_back = cell_after_question(page.evaluate(test_browser.CELLS_JS))
        if not steps.check("the cell after it is on the page", read_back is not None, "not found"):
            return steps.finish()
        assert read_back is not None
        steps.check("it says the question has no answer yet and nothing is stored",
                    "none yet" in read_back["text"] and "stored: nothing" in read_back["text"],
                    read_back["text"][:300])

        steps.act("press Approve", lambda: widget.locator("button:has-text('Approve')").click())
        steps.check("the tool's result appears under the buttons: stored",
                    steps.wait(lambda: '"stored": true' in (widget.text_content() or "")),
                    (widget.text_content() or "")[-300:])
        cell = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").nth(read_back["index"])

        def run_read_back() -> None:
            cell.locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")

        steps.act("run the cell after it again", run_read_back)

        def answered() -> bool:
            text = cell.locator(".jp-OutputArea").text_content() or ""
            return "your answer: accept" in text and "'green tea', revision 1" in text

        steps.check("it now reads the student's answer and the drink it stored",
                    steps.wait(lambda: answered() and kernel_idle(page)),
                    (cell.locator(".jp-OutputArea").text_content() or "")[:300])
        wait_until(lambda: kernel_idle(page), 10)
        steps.finish()
    finally:
        opened.page.close()
        lab.shut_down_kernels()


def test_the_read_back_cell_is_found_by_its_first_line() -> None:
    cells = [{"code": True, "source": "QuestionView(asked)", "text": "", "index": 30},
             {"code": True, "source": READ_BACK + ', asked.answered or "none yet")', "text": "", "index": 33}]
    assert cell_after_question(cells) == cells[1]
    assert cell_after_question(cells[:1]) is None
