"""bench/notebook_bench.py and bench/report.py: the Run All tables from given figures (no timing is asserted anywhere).

The teacher's guide takes its track minutes from these functions, so they must add correctly, mark
a track that does not fit, and keep a notebook that was not measured out of a total rather than
count it as zero minutes silently.
"""

from __future__ import annotations

import json
import subprocess
import sys
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
                                  _row("03_loop (before)", 500.0, 10)), {"00": 15, "03": 10, "11": 20})
    short, tight, open_ = text.split("\n\n**")
    assert "| `00_start` | 15 | 61 s (≤ 2 min) | 17 |" in short  # 61 s rounds up to 2 minutes
    assert "**33** of 40: fits" in short  # 17 + 11 + 5; the "(before)" row is not a notebook of the track
    assert "**28** of 30: fits" in tight
    assert "| `11` | not measured yet |" in open_ and "without 11" in open_


def test_a_track_over_its_limit_says_so(monkeypatch):
    monkeypatch.setattr(report, "TRACKS", {"tiny": {"limit": 20, "notebooks": ["00"], "extra": {}}})
    results = _results(_row("00_start", 10.0, 25))
    assert "does not fit" in report.tracks(results, {"00": 25})
    assert report.tracks_that_do_not_fit(results, {"00": 25}) == ["tiny"]
    assert report.tracks_that_do_not_fit(results, {"00": 15}) == []


def test_a_limited_track_missing_a_notebook_does_not_fit(monkeypatch):
    monkeypatch.setattr(report, "TRACKS", {"tiny": {"limit": 60, "notebooks": ["00", "03"], "extra": {}}})
    results = _results(_row("00_start", 10.0, 25), _row("03_loop", 10.0, 25))
    assert "| `03` | no time stated |" in report.tracks(results, {"00": 25, "03": None})
    assert report.tracks_that_do_not_fit(results, {"00": 25, "03": None}) == ["tiny"]


def _notebook(folder: Path, name: str, first_cell: str) -> Path:
    path = folder / name
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["# x\n", first_cell]}]}))
    return path


def test_the_tracks_take_the_minutes_the_notebooks_state_now(tmp_path: Path, monkeypatch):
    """Not the minutes notebook_times.json recorded when the notebooks were timed (15 here)."""
    monkeypatch.setattr(report, "TRACKS", {"short": {"limit": 40, "notebooks": ["00"], "extra": {}}})
    monkeypatch.setattr(notebook_bench, "NOTEBOOKS", tmp_path)
    results = _results(_row("00_start", 10.0, 15))
    _notebook(tmp_path, "00_start.ipynb", "**Time needed:** about 20 minutes in class.")
    assert report.stated() == {"00": 20}
    assert "| `00_start` | 20 | 10 s (≤ 1 min) | 21 |" in report.tracks(results)
    _notebook(tmp_path, "00_start.ipynb", "**Time needed:** about 45 minutes in class.")
    assert "**46** of 40: **does not fit**" in report.tracks(results)


def _times() -> dict:
    return json.loads((Path(report.__file__).parent / "notebook_times.json").read_text(encoding="utf-8"))


def test_the_guide_shows_the_tracks_the_notebooks_state():
    """docs/TEACHER_GUIDE.md's track tables are the notebooks' stated minutes and the measured Run All."""
    shown = report.guide_tracks(report.GUIDE.read_text(encoding="utf-8"))
    assert shown == report.tracks(_times()), (
        "the teacher's guide's track tables differ from the notebooks' first cells (or notebook_times.json): "
        "run `python -m bench --tracks --guide` and read the new totals")


def test_every_track_of_the_guide_fits():
    assert report.tracks_that_do_not_fit(_times()) == [], (
        "a track of the teacher's guide is over its minutes: change the track (bench/report.py TRACKS) "
        "or the notebook's stated minutes")


def test_writing_the_tracks_into_the_guide_keeps_the_rest(tmp_path: Path):
    guide = tmp_path / "GUIDE.md"
    guide.write_text(f"# Guide\n\nbefore\n\n{report.TRACKS_START}\nold table\n{report.TRACKS_END}\n\nafter\n")
    assert report.write_guide_tracks(guide, "new table\n") is True
    assert guide.read_text() == (f"# Guide\n\nbefore\n\n{report.TRACKS_START}\nnew table\n{report.TRACKS_END}"
                                 "\n\nafter\n")
    assert report.write_guide_tracks(guide, "new table\n") is False
    assert report.guide_tracks(guide.read_text()) == "new table\n"


def test_a_guide_without_the_markers_is_refused_and_left_alone(tmp_path: Path):
    guide = tmp_path / "GUIDE.md"
    guide.write_text("# Guide\n\nno tables\n")
    with pytest.raises(ValueError, match="no <!-- tracks"):
        report.write_guide_tracks(guide, "new table\n")
    assert guide.read_text() == "# Guide\n\nno tables\n"


def test_the_tracks_command_fails_when_a_track_does_not_fit(tmp_path: Path):
    """`python -m bench --tracks` prints the tables and exits 1 when a track is over its minutes."""
    def tracks_command(times: dict) -> subprocess.CompletedProcess:
        (tmp_path / "notebook_times.json").write_text(json.dumps(times))
        return subprocess.run([sys.executable, "-m", "bench", "--tracks", "--out", str(tmp_path)],
                              cwd=Path(report.__file__).parent.parent, capture_output=True, text=True)

    times = _times()
    done = tracks_command({**times, "notebooks": [{**row, "median_s": 3600.0} for row in times["notebooks"]]})
    assert done.returncode == 1 and "**does not fit**" in done.stdout
    assert done.stderr.startswith("over its minutes: A 90-minute taster, A three-hour class")
    assert done.stderr.count("\n") == 1
    done = tracks_command(times)
    assert done.returncode == 0 and "does not fit" not in done.stdout and done.stderr == ""


def test_writing_the_section_replaces_its_older_self_in_place_and_keeps_the_rest(tmp_path: Path):
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("# bench\n\n## Other\n\nkept\n\n" + report.NOTEBOOKS_SECTION
                          + "\n\nold\n\n## Last\n\nkept too\n")
    report.write_section(results_md, report.NOTEBOOKS_SECTION + "\n\nnew\n")
    assert results_md.read_text() == ("# bench\n\n## Other\n\nkept\n\n" + report.NOTEBOOKS_SECTION
                                      + "\n\nnew\n\n## Last\n\nkept too\n")
    report.write_section(results_md, "## Chat\n\nfirst time\n")  # a section not there yet: at the end
    assert results_md.read_text().endswith("## Last\n\nkept too\n\n## Chat\n\nfirst time\n")


def test_a_run_of_some_notebooks_updates_their_rows_in_place_and_keeps_every_section(tmp_path: Path, monkeypatch):
    """`python -m bench notebooks --names 09 --out OUT`: 09's row is new, 01's kept (notebook_times.json),
    the section stays where it was, and every other section of RESULTS.md is kept as it was."""
    from bench.suites import main

    earlier = _results(_row("01_schema", 2.0, 25), _row("09_scaling", 31.0, 30))
    (tmp_path / "notebook_times.json").write_text(json.dumps(earlier))
    before, after = "# memkit benchmarks\n\nhead\n\n## Targets\n\ntargets\n", "## Chat: one message\n\nchat\n"
    (tmp_path / "RESULTS.md").write_text(before + "\n" + report.notebooks_markdown(earlier) + "\n" + after)
    timed: list[list[str]] = []

    def run(names: list[str], repeat: int) -> dict:  # instead of timing real notebooks
        timed.append(names)
        return _results(_row("09_scaling", 12.0, 30))
    monkeypatch.setattr(notebook_bench, "run", run)
    assert main(["notebooks", "--names", "09", "--out", str(tmp_path)]) == 0
    assert timed == [["09"]]
    text = (tmp_path / "RESULTS.md").read_text()
    section = report.notebooks_markdown(_results(_row("01_schema", 2.0, 25), _row("09_scaling", 12.0, 30)))
    assert text == before + "\n" + section + "\n" + after
    assert "| `09_scaling` | 12.0 s |" in section and "| `01_schema` | 2.0 s |" in section


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
    path = _notebook(tmp_path, "00_x.ipynb", first_cell)
    assert notebook_bench.stated_minutes(path) == minutes
