"""Headless tests of classroom: the tables (records, history, tool results, messages),
run_sync and the lazy optional imports.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import _notebook_demo  # noqa: F401  (skips this module without the notebook extra)

from memkit import MemoryAgent, ScriptedModel
from memkit.models import call
from classroom import history_table, messages_table, records_table, run_sync
from classroom.tables import times_of_day
from memkit.store import fingerprint

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
"""Where the notebooks run, and so where `classroom` is importable without an install."""


def test_records_and_history_tables_have_fixed_columns(demo):
    frame = records_table(demo.records("alice"))
    assert list(frame.columns) == ["kind", "key", "value", "revision", "source_session", "updated_at"]
    assert list(frame["key"]) == ["trip.lisbon", "city", "drink"]
    assert records_table([]).empty and list(records_table([]).columns) == list(frame.columns)
    events = history_table(demo.history("alice", "preference", "drink"))
    assert list(events["action"]) == ["create"] and events.loc[0, "old_value"] == ""


def test_fingerprint_changes_with_content_and_only_then(demo):
    before = fingerprint(demo)
    assert before["memories"] == 5 and before["events"] == 5
    assert fingerprint(demo) == before
    demo.put("alice", "s1", "preference", "drink", "jasmine tea")  # the same value: a no-op
    assert fingerprint(demo) == before
    demo.put("alice", "s1", "preference", "drink", "green tea")
    after = fingerprint(demo)
    assert after["sha256"] != before["sha256"] and after["events"] == 6


def test_messages_table_shows_calls_and_shortens_content(demo):
    model = ScriptedModel([call("memory_search", query="drink"), "done"])
    run_sync(MemoryAgent(demo, "alice", "s1", model).ask("What do I drink?"))
    frame = messages_table(model.requests[1]["messages"], max_chars=80)
    assert list(frame["role"]) == ["system", "user", "assistant", "tool"]
    assert frame.loc[2, "content"] == 'memory_search {"query": "drink"}'
    assert len(frame.loc[0, "content"]) == 80 and "shortened" in frame.loc[0, "content"]
    assert frame.loc[3, "content"].startswith('{"ok":true,"result":[')


def test_run_sync_works_inside_a_running_event_loop():
    async def answer():
        return 42

    async def from_a_callback_inside_a_loop():
        return run_sync(answer())  # what a widget callback does in a Jupyter kernel

    assert run_sync(answer()) == 42
    assert asyncio.run(from_a_callback_inside_a_loop()) == 42


def test_missing_extra_names_the_install_command():
    script = ("import sys; sys.modules['ipywidgets'] = None\n"
              "from memkit import Approvals\nfrom classroom import ConfirmForm\n"
              "try:\n    ConfirmForm(Approvals())\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=NOTEBOOKS).stdout
    assert "pip install -e '.[notebooks]'" in out


def test_importing_classroom_and_the_inspector_does_not_import_the_extras():
    script = ("import sys, memkit.inspector.tables, classroom, classroom.charts, classroom.views, "
              "memkit.inspector; print(sorted({'ipywidgets', 'pandas', 'matplotlib'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=NOTEBOOKS).stdout
    assert out.strip() == "[]"


def test_tables_show_text_columns_left_aligned_and_numbers_as_pandas_does(demo):
    frame = records_table(demo.records("alice"))
    page = frame[["kind", "key", "revision"]]._repr_html_()  # a selection keeps the display
    header = page.split("<tbody>")[0]
    assert '<th style="text-align: left;">kind</th>' in header and "<th>revision</th>" in header
    first_row = page.split("<tbody>")[1].split("</tr>")[0]
    assert first_row.count('<td style="text-align: left;">') == 2 and "<td>1</td>" in first_row
    assert frame["revision"].sum() == 3 and list(frame.columns)[:2] == ["kind", "key"]  # still a DataFrame


def test_a_long_table_shows_its_first_rows_and_how_many_there_are():
    import pandas as pd

    from memkit.inspector.tables import MAX_ROWS, left_aligned, text_table

    long = text_table(pd.DataFrame({"n": range(MAX_ROWS + 5), "word": ["tea"] * (MAX_ROWS + 5)}))
    page = long._repr_html_()
    assert page.split("<tbody>")[1].count("<tr>") == MAX_ROWS
    assert page.endswith(f"<p>the first {MAX_ROWS} of {MAX_ROWS + 5} rows</p>")
    assert repr(long).endswith(f"the first {MAX_ROWS} of {MAX_ROWS + 5} rows")
    short = text_table(pd.DataFrame({"n": range(3)}))
    assert "rows</p>" not in short._repr_html_() and "the first" not in repr(short)
    plain = "<table><tr><td>1</td><td>a</td></tr></table>"
    assert left_aligned(plain, [1], index=False) == (
        '<table><tr><td>1</td><td style="text-align: left;">a</td></tr></table>')


def test_times_of_day_shortens_columns_of_timestamps_only(demo):
    """A history's `at` becomes the time of day; a confirmation id holding a time stays whole."""
    demo.put("alice", "s1", "preference", "drink", "oolong", confirmation="cli@2026-12-06T21:41:16.413084Z#1")
    events = history_table(demo.history("alice", "preference", "drink"))
    shown = times_of_day(events)
    assert list(shown.columns) == list(events.columns) and len(shown) == len(events) == 2
    assert all(len(at) == 8 and at.count(":") == 2 for at in shown["at"])
    assert list(shown["at"]) == [at[11:19] for at in events["at"]]
    assert shown.loc[1, "confirmation"] == "cli@2026-12-06T21:41:16.413084Z#1"
    assert list(shown["new_value"]) == list(events["new_value"]) and shown.loc[0, "old_value"] == ""
    assert "text-align: left" in shown._repr_html_()  # still shown as the inspector's tables are
    deleted = times_of_day(records_table(demo.records("alice")).assign(deleted_at=""))
    assert list(deleted["deleted_at"]) == ["", "", ""]  # a column of empty cells stays empty
    assert times_of_day(records_table([])).empty
