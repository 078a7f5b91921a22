"""bench/notebook_bench.py and bench/report.py: the Run All tables from given figures (no timing is asserted anywhere).

The teacher's guide takes its track minutes from these functions, so they must add correctly, mark
a track that does not fit, and keep a notebook that was not measured out of a total rather than
count it as zero minutes silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import notebook_bench, report


def _row(name: str, seconds: float, minutes: int | None) -> dict:
    return {"notebook": name, "runs_s": [seconds], "median_s": seconds, "kernel_start_s": 1.0,
            "code_cells": 3, "slowest": [{"cell": 2, "s": seconds / 2}], "stated_minutes": minutes}


def _results(*rows: dict) -> dict:
    return {"meta": {"date": "2026-12-01", "cores": 2, "python": "3.11", "machine": "Linux x86_64", "repeat": 1,
                     "load_before": 1.0, "load_after": 1.0}, "notebooks": list(rows)}


def test_the_section_marks_each_target_held_or_missed():
    text = report.notebooks_markdown(_results(_row("05_restart", 12.0, 25), _row("09_scaling", 31.0, 30),
                                           _row("01_schema", 2.0, 25)))
    assert "| `05_restart` | 12.0 s |" in text and "≤ 20 s: held" in text
    assert "| `09_scaling` | 31.0 s |" in text and "≤ 20 s: **missed**" in text
    assert text.startswith(report.NOTEBOOKS_SECTION)


def test_tracks_add_stated_minutes_and_run_all_rounded_up(monkeypatch):
    monkeypatch.setattr(report, "TRACKS", {
        "short": {"limit": 40, "notebooks": ["00", "03"], "extra": {"closing": 5}},
        "tight": {"limit": 30, "notebooks": ["00", "03"], "extra": {}},
        "open": {"limit": None, "notebooks": ["00", "11"], "extra": {}},
    })
    text = report.tracks(_results(_row("00_start", 61.0, 15), _row("03_loop", 5.0, 10),
                                          _row("03_loop (before)", 500.0, 10)))
    short, tight, open_ = text.split("\n\n**")
    assert "| `00_start` | 15 | 61 s (≤ 2 min) | 17 |" in short  # 61 s rounds up to 2 minutes
    assert "**33** of 40: fits" in short  # 17 + 11 + 5; the "(before)" row is not a notebook of the track
    assert "**28** of 30: fits" in tight
    assert "| `11` | not measured yet |" in open_ and "without 11" in open_


def test_a_track_over_its_limit_says_so(monkeypatch):
    monkeypatch.setattr(report, "TRACKS", {"tiny": {"limit": 20, "notebooks": ["00"], "extra": {}}})
    assert "does not fit" in report.tracks(_results(_row("00_start", 10.0, 25)))


def test_writing_the_section_keeps_the_rest_and_replaces_an_older_one(tmp_path: Path):
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("# bench\n\n## Other\n\nkept\n\n" + report.NOTEBOOKS_SECTION
                          + "\n\nold\n\n## Last\n\nkept too\n")
    report.write_section(results_md, report.NOTEBOOKS_SECTION + "\n\nnew\n")
    text = results_md.read_text()
    assert "old" not in text and text.count(report.NOTEBOOKS_SECTION) == 1
    assert "## Other\n\nkept" in text and "## Last\n\nkept too" in text and text.endswith("new\n")


def test_a_partial_run_keeps_the_earlier_figures_of_the_other_notebooks(tmp_path: Path):
    earlier = tmp_path / "times.json"
    earlier.write_text(json.dumps(_results(_row("01_schema", 2.0, 25), _row("05_restart", 40.0, 25))))
    merged = notebook_bench.merge(earlier, _results(_row("05_restart", 12.0, 25)))
    assert [(r["notebook"], r["median_s"]) for r in merged["notebooks"]] == [("01_schema", 2.0), ("05_restart", 12.0)]


@pytest.mark.parametrize("first_cell, minutes", [
    ("**Time needed:** about 25 minutes in class, 5 of them for the exercise.", 25),
    ("Time needed: about 15 min", 15),
    ("No time given.", None),
])
def test_stated_minutes_are_read_from_the_first_cell(tmp_path: Path, first_cell: str, minutes: int | None):
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["# 00\n", first_cell]}]}))
    assert notebook_bench.stated_minutes(path) == minutes
