"""docs/TEACHER_GUIDE.md against what it describes: the README's install sizes and the course's notebooks.

The track tables themselves are checked against the notebooks' first cells in
tests/benchmarks/test_notebook_bench.py; the handout convention in tests/notebooks/test_handout.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench import report

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "TEACHER_GUIDE.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
SIZE_RE = re.compile(r"(\d[\d,]*) MB")


def _section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def test_the_guide_gives_the_install_sizes_the_readme_gives():
    """The README measures a fresh .venv for `make lab` and for `make test`; the guide repeats both."""
    readme = SIZE_RE.findall(README.split("`make lab` installs only what the notebooks import", 1)[1][:700])
    guide = SIZE_RE.findall(_section(GUIDE, "## Install sizes"))
    assert len(readme) == 2 and guide == readme, f"README says {readme} MB, the guide's Install sizes {guide} MB"
    assert f"({readme[0]} MB measured" in GUIDE  # the prerequisites repeat the student set's size


def test_the_full_day_holds_every_notebook_of_the_course_in_order():
    course = [path.name[:2] for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
    assert report.TRACKS["A full day"]["notebooks"] == course


def test_each_notebook_in_a_track_is_named_once_and_exists():
    course = {path.name[:2] for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    for title, track in report.TRACKS.items():
        assert len(set(track["notebooks"])) == len(track["notebooks"]), title
        assert set(track["notebooks"]) <= course, title
