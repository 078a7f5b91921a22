"""Handouts of the course: a student copy and a teacher copy of every notebook (`make handout`).

The student copy has no outputs and no worked solutions: each cell tagged `solution` (the folded
worked solution of the exercise, or the answers to the questions that check understanding) is
replaced by a one-line note that the teacher's copy has it. Every other cell stays, the exercise's
answer, experiment and check cells included. The teacher copy is the notebook as it is, outputs and
solutions kept. Each folder gets the classroom helpers the notebooks import, except that the
student's leaves out the helpers that are solutions (`TEACHER_ONLY`: the capstone's reference build).

Example:
    python notebooks/classroom/handout.py --out handout
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

SOLUTION_TAG = "solution"
"""The tag of a cell the student copy leaves out (its cell metadata: `"tags": ["solution"]`)."""

NOTEBOOKS = Path(__file__).resolve().parent.parent
# A worked solution starts so (tests/notebooks/test_notebooks_meta.py folds it), and so do the
# answers to the questions at a notebook's end; one left untagged would reach the students, so the
# handout refuses it rather than guess.
SOLUTION_STARTS = ("**Solution.**", "**Answers.**")
# A classroom module that is a worked solution: no check imports it (the capstone's checks run
# beside stand-ins that look the week's answers up), so the student's folder can go without it.
TEACHER_ONLY = ("capstone_reference.py",)
LABEL_RE = re.compile(r"\*\*([A-Z][A-Za-z ]{0,40})\.\*\*")  # "**Solution.**", "**Answers.**"


class HandoutError(Exception):
    """A notebook the handout cannot copy safely; the message names it and what to do."""


def _tags(cell: dict[str, Any]) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _text(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)


def is_solution(cell: dict[str, Any]) -> bool:
    """True for a cell the student copy leaves out: one tagged `solution`."""
    return SOLUTION_TAG in _tags(cell)


def untagged_solutions(nb: dict[str, Any]) -> list[int]:
    """The indexes of cells that read as a worked solution but are not tagged `solution`."""
    return [index for index, cell in enumerate(nb.get("cells", []))
            if _text(cell.get("source", "")).lstrip().startswith(SOLUTION_STARTS) and not is_solution(cell)]


def student_note(cell: dict[str, Any]) -> str:
    """The line that stands in the student copy for a solution cell, named by its bold label.

    Example: a cell starting "**Solution.**" leaves "*Solution: in the teacher's copy.*"; one
    starting "**Answers.**" (to the questions that check understanding) "*Answers: ...*".
    """
    label = LABEL_RE.match(_text(cell.get("source", "")).lstrip())
    return f"*{label.group(1) if label else 'This cell'}: in the teacher's copy.*"


def student_copy(nb: dict[str, Any]) -> dict[str, Any]:
    """The notebook without outputs, execution counts, saved widget state or solution cells.

    A solution cell becomes a markdown note in its place (same cell id), so the text that points
    to "the worked solution below" still finds where it was.
    """
    student = copy.deepcopy(nb)
    student.get("metadata", {}).pop("widgets", None)  # saved widget views are output too
    cells = []
    for cell in student.get("cells", []):
        if is_solution(cell):
            note = {"cell_type": "markdown", "metadata": {}, "source": [student_note(cell)]}
            cells.append({**({"id": cell["id"]} if "id" in cell else {}), **note})
            continue
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cells.append(cell)
    student["cells"] = cells
    return student


def dumps(nb: dict[str, Any]) -> str:
    """A notebook as this repository stores it (nbformat's layout: one-space indent, sorted keys)."""
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def _read(path: Path) -> dict[str, Any]:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise HandoutError(f"{path.name} cannot be read as a notebook ({error}); "
                           "restore it (git checkout) and run the handout again") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise HandoutError(f"{path.name} is not a notebook (no list of cells); restore it and run the handout again")
    untagged = untagged_solutions(nb)
    if untagged:
        raise HandoutError(f"{path.name}: cell {untagged[0]} is a solution or answers not tagged {SOLUTION_TAG!r}, "
                           f"so it would reach the students; add the tag to its cell metadata and run again")
    return nb


def write_handouts(notebooks: Path, out: Path) -> list[str]:
    """Write out/student and out/teacher: a copy of every `NN_*.ipynb` and the classroom helpers
    (the student's without `TEACHER_ONLY`).

    Every notebook is read and checked before anything is written, so a notebook that cannot be
    copied safely leaves `out` as it was. Returns the notebooks' names.

    Raises:
        HandoutError: no notebooks, an unreadable one, an untagged solution, or `out` not a folder.
    """
    paths = sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise HandoutError(f"no notebooks (NN_name.ipynb) in {notebooks}; name the course's notebooks folder")
    for folder in (out, out / "student", out / "teacher"):
        if folder.exists() and not folder.is_dir():
            raise HandoutError(f"{folder} is a file, not a folder; choose another --out or move the file")
    students = {path.name: dumps(student_copy(_read(path))) for path in paths}
    for side, leave_out in (("student", TEACHER_ONLY), ("teacher", ())):
        folder = out / side
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(notebooks / "classroom", folder / "classroom", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc", *leave_out))
        for name in leave_out:  # a copy left by an earlier run of an older handout
            (folder / "classroom" / name).unlink(missing_ok=True)
    for path in paths:
        (out / "student" / path.name).write_text(students[path.name], encoding="utf-8")
        shutil.copyfile(path, out / "teacher" / path.name)
    return [path.name for path in paths]


def main(argv: list[str] | None = None) -> int:
    """`python notebooks/classroom/handout.py [--out handout]`: write both copies, say where."""
    parser = argparse.ArgumentParser(description="Write student copies (no outputs, no solutions) and "
                                                 "teacher copies (whole) of the course's notebooks.")
    parser.add_argument("--out", type=Path, default=Path("handout"), help="where to write (default: handout)")
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help="the notebooks' folder")
    args = parser.parse_args(argv)
    try:
        names = write_handouts(args.notebooks, args.out)
    except HandoutError as error:
        print(f"handout: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a folder not writable, a disk full: said in one line, not a traceback
        print(f"handout: cannot write {args.out} ({error.strerror or error}); choose another --out",
              file=sys.stderr)
        return 2
    print(f"wrote {len(names)} notebooks to {args.out / 'student'} (no outputs, no solutions) "
          f"and {args.out / 'teacher'} (as they are)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
