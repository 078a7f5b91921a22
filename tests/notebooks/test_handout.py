"""`make handout` (notebooks/classroom/handout.py): student copies without outputs or solutions,
teacher copies whole, each beside the classroom helpers; run as `make handout` runs it.

The copies are made from the course's real notebooks by the real script in a new process; one
student copy is executed from its folder to show the copied helpers are enough to run it.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

from classroom import handout

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SCRIPT = NOTEBOOKS / "classroom" / "handout.py"
COURSE = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
EXERCISE_TAGS = ("exercise-answer", "exercise-experiment", "exercise-check")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True)


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _solution_like(cell: Any) -> bool:
    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    return "solution" in _tags(cell) or source.lstrip().startswith(("**Solution.**", "**Answers.**"))


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("handout")
    done = _run("--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and f"wrote {len(COURSE)} notebooks" in done.stdout
    return out


def test_every_worked_solution_is_tagged_so_the_student_copy_leaves_it_out():
    for path in COURSE:
        nb = json.loads(path.read_text(encoding="utf-8"))
        assert handout.untagged_solutions(nb) == [], f"{path.name}: a worked solution without the 'solution' tag"
    # A notebook may keep its solution elsewhere (12's reference build is a classroom module), but
    # most hold one in a cell, so the tag is in use.
    assert sum(any(handout.is_solution(c) for c in json.loads(p.read_text(encoding="utf-8"))["cells"])
               for p in COURSE) >= len(COURSE) // 2


@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.stem)
def test_the_student_copy_has_no_outputs_and_no_solution_and_every_other_cell(copies: Path, path: Path):
    original = nbformat.read(path, as_version=4)
    student = nbformat.read(copies / "student" / path.name, as_version=4)
    nbformat.validate(student)  # still a notebook JupyterLab opens
    assert all(c.outputs == [] and c.execution_count is None for c in student.cells if c.cell_type == "code")
    assert not any(_solution_like(cell) for cell in student.cells)
    assert "widgets" not in student.metadata
    # Every other cell, the exercise's cells included, is there in its order with its source and tags.
    notes = {i: handout.student_note(c) for i, c in enumerate(original.cells) if handout.is_solution(c)}
    kept = [(c.cell_type, c.source, _tags(c)) for c in original.cells if not handout.is_solution(c)]
    assert [(c.cell_type, c.source, _tags(c)) for i, c in enumerate(student.cells) if i not in notes] == kept
    for tag in EXERCISE_TAGS:
        assert [c.source for c in student.cells if tag in _tags(c)] == \
            [c.source for c in original.cells if tag in _tags(c)]
    assert any(tag in _tags(c) for c in student.cells for tag in EXERCISE_TAGS)
    # Each solution left a note in its place, so "the worked solution below" still points somewhere.
    assert {i: student.cells[i].source for i in notes} == notes
    assert set(notes.values()) <= {"*Solution: in the teacher's copy.*", "*Answers: in the teacher's copy.*"}


@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.stem)
def test_the_teacher_copy_is_the_notebook(copies: Path, path: Path):
    assert (copies / "teacher" / path.name).read_bytes() == path.read_bytes()


def test_each_copy_has_the_classroom_helpers_the_notebooks_import(copies: Path):
    for side in ("student", "teacher"):
        helpers = copies / side / "classroom"
        assert (helpers / "__init__.py").read_bytes() == (NOTEBOOKS / "classroom" / "__init__.py").read_bytes()
        assert not list(helpers.rglob("__pycache__"))


def test_the_student_copy_holds_no_line_of_the_capstone_reference_and_the_teacher_copy_does(copies: Path):
    """12's reference build stays with the teacher: no file of the student copy holds its rules.
    (Its `forget` is the one call notebook 12's own answers name, `forget_user`, so it is not sought.)"""
    from classroom import capstone_reference

    reference = NOTEBOOKS / "classroom" / "capstone_reference.py"
    assert not (copies / "student" / "classroom" / reference.name).exists()
    assert (copies / "teacher" / "classroom" / reference.name).read_bytes() == reference.read_bytes()
    rules = [line.strip() for function in (capstone_reference.worth_remembering,
                                           capstone_reference.customer_confirmed, capstone_reference.for_ticket)
             for line in inspect.getsource(function).splitlines() if line.strip().startswith("return ")]
    assert len(rules) == 3
    texts = {path.name: path.read_text(encoding="utf-8") for path in (copies / "student").rglob("*.py")}
    texts |= {path.name: "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
              for path in (copies / "student").glob("*.ipynb")}
    assert len(texts) > 20
    assert {name: rule for name, text in texts.items() for rule in rules if rule in text} == {}


def test_a_student_copy_runs_from_its_folder_and_leaves_the_exercise_unanswered(copies: Path):
    """01 in the student folder: every cell runs, and the check asks for an answer."""
    path = copies / "student" / "01_schema_and_store.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=300,
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    check = next(c for c in nb.cells if "exercise-check" in _tags(c))
    assert "not answered yet" in "".join(o.get("text", "") for o in check.outputs)
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_the_student_copy_of_the_capstone_runs_and_judges_without_the_reference(copies: Path):
    """12 in the student folder, which has no capstone_reference.py: the draft is judged, each of
    its four parts failing for its own cause, and the exercise waits for the student's build."""
    path = copies / "student" / "12_capstone.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=300,
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    draft = next(c for c in nb.cells if c.cell_type == "code" and "capstone.check(draft" in c.source)
    table = "".join(o.get("data", {}).get("text/plain", "") for o in draft.outputs)
    assert table.count("False") == 4 and "True" not in table, table
    for cause in ("remember kept ana's mood", "confirm approved ben's channel", "retrieve sent", "forget left ben's"):
        assert cause in draft.outputs[0]["data"]["text/html"], cause
    check = next(c for c in nb.cells if "exercise-check" in _tags(c))
    assert "not answered yet" in "".join(o.get("text", "") for o in check.outputs)


def _course(folder: Path, solution_tags: list[str]) -> Path:
    cells = [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# 00 · x"]},
             {"cell_type": "code", "id": "b", "metadata": {"tags": ["exercise-answer"]}, "source": ["x = None"],
              "outputs": [{"output_type": "stream", "name": "stdout", "text": ["1\n"]}], "execution_count": 1},
             {"cell_type": "markdown", "id": "c", "source": ["**Solution.** 2"],
              "metadata": {"jupyter": {"source_hidden": True}, "tags": solution_tags}}]
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "classroom").mkdir(parents=True)
    (folder / "classroom" / "__init__.py").write_text("")
    (folder / "00_x.ipynb").write_text(handout.dumps(nb), encoding="utf-8")
    return folder


def test_an_untagged_solution_is_refused_and_nothing_is_written(tmp_path: Path):
    course = _course(tmp_path / "course", solution_tags=[])
    done = _run("--notebooks", str(course), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("handout: 00_x.ipynb: cell 2 is a solution or answers not tagged 'solution', so it "
                           "would reach the students; add the tag to its cell metadata and run again\n")
    assert not (tmp_path / "out").exists()


def test_untagged_answers_to_the_questions_are_refused_too():
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "## Check your understanding\n\n1. Why?"},
                    {"cell_type": "markdown", "metadata": {}, "source": "**Answers.**\n\n1. Because."}]}
    assert handout.untagged_solutions(nb) == [1]
    nb["cells"][1]["metadata"]["tags"] = ["solution"]
    assert handout.untagged_solutions(nb) == []
    assert [c["source"] for c in handout.student_copy(nb)["cells"]] == [
        "## Check your understanding\n\n1. Why?", ["*Answers: in the teacher's copy.*"]]


def test_the_small_course_copies_as_the_rule_says(tmp_path: Path):
    course = _course(tmp_path / "course", solution_tags=["solution"])
    done = _run("--notebooks", str(course), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    student = json.loads((tmp_path / "out" / "student" / "00_x.ipynb").read_text(encoding="utf-8"))
    assert [c["source"] for c in student["cells"]] == [["# 00 · x"], ["x = None"],
                                                       ["*Solution: in the teacher's copy.*"]]
    assert student["cells"][1]["outputs"] == [] and student["cells"][1]["execution_count"] is None
    assert student["cells"][2]["id"] == "c"


@pytest.mark.parametrize("source, note", [
    ("**Solution.** Two.", "*Solution: in the teacher's copy.*"),
    ("**Answers.**\n\n1. Because ...", "*Answers: in the teacher's copy.*"),
    ("1. Because ...", "*This cell: in the teacher's copy.*"),
])
def test_the_note_names_what_the_teacher_copy_has(source: str, note: str):
    assert handout.student_note({"cell_type": "markdown", "source": source, "metadata": {}}) == note


@pytest.mark.parametrize("problem", ["not a notebook", "no notebooks", "out is a file"])
def test_bad_input_gets_one_line_and_changes_nothing(tmp_path: Path, problem: str):
    course = _course(tmp_path / "course", solution_tags=["solution"])
    out = tmp_path / "out"
    if problem == "not a notebook":
        (course / "01_y.ipynb").write_text("{not json")
    elif problem == "no notebooks":
        (course / "00_x.ipynb").unlink()
    else:
        out.write_text("keep me")
    done = _run("--notebooks", str(course), "--out", str(out))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("handout: ") and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert out.read_text() == "keep me" if problem == "out is a file" else not out.exists()


def test_make_handout_runs_the_script_into_an_ignored_folder():
    dry = subprocess.run(["make", "-n", "handout"], cwd=ROOT, capture_output=True, text=True)
    assert "notebooks/classroom/handout.py --out handout" in dry.stdout
    ignored = subprocess.run(["git", "check-ignore", "-q", "handout/student/00_start_here.ipynb"], cwd=ROOT)
    assert ignored.returncode == 0
