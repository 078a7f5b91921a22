"""docs/READING.md, the reading path, and the notebooks' "Read the code" cells point at real code.

READING.md lists the whole files a student reads, each with its line count and the names to look
at first; together they must hold 800 to 2,500 lines (issue 32). Each notebook from 01 to 07 has a
"Read the code" cell naming the file and the function behind what the student just ran. A rename
or a move that leaves either pointing at nothing fails here, with the fix in the message.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READING = ROOT / "docs" / "READING.md"
COURSE_NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("[01][0-9]_*.ipynb") if "01" <= p.name[:2] <= "12")
"""The notebooks with a "Read the code" cell: the core (01-07) and the wings' notebooks (08-12)."""

MIN_LINES, MAX_LINES = 800, 2500
"""The issue's done-criterion for the reading path."""

ENTRY = re.compile(r"^### \d+\. `(?P<path>[^`]+)` · (?P<lines>[\d,]+) lines · notebooks? (?P<notebooks>[\d, ]+)$",
                   re.MULTILINE)
TOTAL = re.compile(r"\*\*Together: (?P<lines>[\d,]+) lines\*\*")
LOOK_FIRST = re.compile(r"\*\*Look first:\*\*(?P<names>.*?)(?:\n\n|\n###|\Z)", re.DOTALL)
CODE_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)`")
"""A backticked name: `function`, `Class`, `CONSTANT` or `Class.method`."""
PATH = re.compile(r"`((?:memkit|docs|notebooks)/[^`\s]*)`")


@dataclass(frozen=True)
class Entry:
    path: str
    lines: int
    notebooks: tuple[str, ...]
    look_first: tuple[str, ...]


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def parse_reading(text: str) -> tuple[list[Entry], int | None]:
    """The entries of the reading path, in order, and the total it states (None if it states none)."""
    entries = []
    matches = list(ENTRY.finditer(text))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        section = text[match.end():following.start() if following else len(text)]
        look = LOOK_FIRST.search(section)
        entries.append(Entry(
            path=match["path"],
            lines=_number(match["lines"]),
            notebooks=tuple(n.strip() for n in match["notebooks"].split(",") if n.strip()),
            look_first=tuple(CODE_NAME.findall(look["names"])) if look else (),
        ))
    total = TOTAL.search(text)
    return entries, _number(total["lines"]) if total else None


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def defined_names(source: str) -> set[str]:
    """What a module defines: top-level functions, classes and assignments, and `Class.member`."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}.{item.name}")
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(f"{node.name}.{item.target.id}")
                elif isinstance(item, ast.Assign):
                    names |= {f"{node.name}.{t.id}" for t in item.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def tolerance(lines: int) -> int:
    """How far a listed line count may drift from the file before the test asks for an update.

    The files are edited often; a count off by a few lines still tells a reader what to expect,
    while one that is off by more than this (5%, at least 10 lines) is a stale promise."""
    return max(10, lines // 20)


def reading_problems(text: str, root: Path = ROOT) -> list[str]:
    """What is wrong with a READING.md text, as sentences with the fix; empty when it is right."""
    entries, stated_total = parse_reading(text)
    if not entries:
        return ["no entries: each file is a heading '### N. `path` · NNN lines · notebook(s) NN, NN'"]
    problems = []
    real_total = 0
    for entry in entries:
        path = root / entry.path
        if not path.is_file():
            problems.append(f"{entry.path} does not exist: list where the code went")
            continue
        lines = line_count(path)
        real_total += lines
        if abs(lines - entry.lines) > tolerance(lines):
            problems.append(f"{entry.path} has {lines} lines, READING.md says {entry.lines}: update it")
        if not entry.look_first:
            problems.append(f"{entry.path}: no '**Look first:**' names")
        missing = sorted(set(entry.look_first) - defined_names(path.read_text(encoding="utf-8")))
        problems += [f"{entry.path} defines no {name!r} (named under 'Look first')" for name in missing]
        problems += [f"{entry.path}: notebook {n!r} is not a notebook number" for n in entry.notebooks
                     if not re.fullmatch(r"\d\d", n)]
    if len({e.path for e in entries}) != len(entries):
        problems.append("a file is listed twice")
    every_file_there = all((root / e.path).is_file() for e in entries)
    if every_file_there and not MIN_LINES <= real_total <= MAX_LINES:
        problems.append(f"the listed files hold {real_total} lines together; the path must hold "
                        f"{MIN_LINES} to {MAX_LINES}")
    if stated_total is None:
        problems.append("no '**Together: N lines**' total")
    elif abs(stated_total - sum(e.lines for e in entries)) > 0:
        problems.append(f"the stated total {stated_total} is not the sum of the listed counts "
                        f"({sum(e.lines for e in entries)})")
    listed = {e.path for e in entries}
    problems += [f"{path} does not exist" for path in PATH.findall(text)
                 if path not in listed and not (root / path).exists()]
    return problems


def read_the_code_cells(nb: dict) -> list[str]:
    """The sources of a notebook's "Read the code" markdown cells."""
    cells = []
    for cell in nb.get("cells", []):
        source = "".join(cell.get("source", ""))
        if cell.get("cell_type") == "markdown" and re.match(r"(?:#+ |\*\*)Read the code", source):
            cells.append(source)
    return cells


BULLET = re.compile(r"- `(?P<path>[^`]+)`(?P<names>(?:[^:`\n]|`[^`]*`)*):")
"""A pointer: '- `memkit/file.py`, `Class.method` and `function`: what it does, in prose'."""


def pointer_problems(text: str, root: Path = ROOT) -> list[str]:
    """What a "Read the code" cell names that does not exist.

    Each bullet names a file, then (before the colon) the functions, classes or methods to read in
    it; the prose after the colon is free to quote anything in backticks (a table, a statement)."""
    problems = []
    bullets = [b for b in re.split(r"\n(?=- )", text) if b.startswith("- `")]
    if not bullets:
        return ["no bullet of the form '- `memkit/file.py`, `name`: ...'"]
    for bullet in bullets:
        match = BULLET.match(bullet)
        if not match or not match["path"].endswith(".py"):
            problems.append(f"a bullet does not start with a file and its names: {bullet[:60]!r}")
            continue
        path = root / match["path"]
        if not path.is_file():
            problems.append(f"{match['path']} does not exist")
            continue
        names = CODE_NAME.findall(match["names"])
        if not names:
            problems.append(f"{match['path']}: no function or class named before the colon")
        defined = defined_names(path.read_text(encoding="utf-8"))
        problems += [f"{match['path']} defines no {name!r}" for name in names if name not in defined]
    return problems


# -- the real reading path and the real notebooks -------------------------------------------------


def test_the_reading_path_lists_real_files_with_their_sizes_and_names():
    assert reading_problems(READING.read_text(encoding="utf-8")) == []


FILE_NAMED = re.compile(r"memkit/[A-Za-z0-9_/]*\.py")


def files_off_the_path(text: str) -> list[str]:
    """`.py` files READING.md names that are not entries of the path: a reader meets them too, so the
    stated total would not be what the page sends them through."""
    listed = {entry.path for entry in parse_reading(text)[0]}
    return sorted(set(FILE_NAMED.findall(text)) - listed)


def test_the_reading_path_names_no_file_it_does_not_count():
    assert files_off_the_path(READING.read_text(encoding="utf-8")) == []


def test_a_file_named_outside_the_entries_is_reported():
    text = READING.read_text(encoding="utf-8") + "\nSkip `memkit/window/protocol.py` for now.\n"
    assert files_off_the_path(text) == ["memkit/window/protocol.py"]


def test_the_course_has_its_notebooks_01_to_12():
    assert [p.name[:2] for p in COURSE_NOTEBOOKS] == [f"{n:02d}" for n in range(1, 13)]


def test_the_reading_path_covers_the_notebooks_01_to_07():
    entries, _ = parse_reading(READING.read_text(encoding="utf-8"))
    covered = {n for entry in entries for n in entry.notebooks}
    assert {f"{n:02d}" for n in range(1, 8)} <= covered
    numbers = {path.name[:2] for path in (ROOT / "notebooks").glob("*.ipynb")}
    assert covered <= numbers, f"READING.md names notebooks that do not exist: {sorted(covered - numbers)}"


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_sends_the_student_to_real_code(path):
    cells = read_the_code_cells(json.loads(path.read_text(encoding="utf-8")))
    assert cells, f"{path.name} has no 'Read the code' markdown cell"
    assert [p for cell in cells for p in pointer_problems(cell)] == []


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_names_a_module_that_went(path):
    gone = re.compile(r"store_core|store_records|store_proposals|\bfacade\b|memkit/store/memory\.py"
                      r"|\bpg_[a-z]+\.py|memkit\.notebook|memkit/notebook|memkit\.lab|memkit/lab"
                      r"|servers/workspace|`memkit/store/`")
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = [m.group(0) for c in nb["cells"] for m in gone.finditer("".join(c.get("source", "")))]
    assert found == []


# -- the checkers themselves must be able to fail -------------------------------------------------


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "memkit").mkdir()
    (tmp_path / "memkit" / "a.py").write_text(
        "LIMIT = 3\n\n\nclass Store:\n    def put(self):\n        pass\n" + "\n" * 894, encoding="utf-8")
    return tmp_path


GOOD = """# Read the code

**Together: 900 lines**

### 1. `memkit/a.py` · 900 lines · notebooks 01, 02

**Teaches:** a thing.
**Look first:** `Store.put`, `LIMIT`.
"""


def test_a_right_reading_path_has_no_problems(tmp_path):
    assert reading_problems(GOOD, _tree(tmp_path)) == []


@pytest.mark.parametrize("change, expected", [
    (("`Store.put`", "`Store.get`"), "defines no 'Store.get'"),
    (("`LIMIT`", "`put`"), "defines no 'put'"),
    (("memkit/a.py`", "memkit/b.py`"), "memkit/b.py does not exist"),
    (("900 lines", "700 lines"), "has 900 lines, READING.md says 700"),
    (("900 lines**", "901 lines**"), "stated total 901"),
    (("**Together: 900 lines**", ""), "no '**Together"),
    (("**Look first:** `Store.put`, `LIMIT`.", ""), "no '**Look first:**'"),
    (("a thing.", "a thing, see `docs/GONE.md`."), "docs/GONE.md does not exist"),
])
def test_each_wrong_reading_path_is_reported(tmp_path, change, expected):
    problems = reading_problems(GOOD.replace(*change), _tree(tmp_path))
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_reading_path_outside_the_budget_is_reported(tmp_path):
    root = _tree(tmp_path)
    (root / "memkit" / "a.py").write_text("x = 1\n" * 3000, encoding="utf-8")
    text = GOOD.replace("900 lines", "3,000 lines").replace("`Store.put`, `LIMIT`", "`x`")
    assert reading_problems(text, root) == [
        "the listed files hold 3000 lines together; the path must hold 800 to 2500"]


def test_a_small_drift_in_a_line_count_is_allowed(tmp_path):
    assert reading_problems(GOOD.replace("900 lines", "895 lines"), _tree(tmp_path)) == []


def test_a_read_the_code_cell_with_a_stale_pointer_is_reported(tmp_path):
    root = _tree(tmp_path)
    right = ("### Read the code\n\n- `memkit/a.py`, `Store.put` and `LIMIT`: it checks the `memories` "
             "table: `x = 1`.\n- `memkit/a.py`, `Store`: the class.")
    assert pointer_problems(right, root) == []
    assert pointer_problems(right.replace("Store.put", "MemoryStore.transaction"), root) == [
        "memkit/a.py defines no 'MemoryStore.transaction'"]
    [problem] = pointer_problems(right.replace("- `memkit/a.py`, `Store`:", "- `memkit/b.py`, `Store`:"), root)
    assert problem == "memkit/b.py does not exist"
    [problem] = pointer_problems(right.replace("`memkit/a.py`, `Store.put` and `LIMIT`:", "`memkit/a.py`:"), root)
    assert problem == "memkit/a.py: no function or class named before the colon"
    [problem] = pointer_problems(right.replace("- `memkit/a.py`, `Store`:", "- `memkit/store/`, `Store`:"), root)
    assert problem.startswith("a bullet does not start with a file and its names: '- `memkit/store/`")
    assert pointer_problems("Read `MemoryStore.transaction` in `memkit/store/`.", root) == [
        "no bullet of the form '- `memkit/file.py`, `name`: ...'"]
    nb = {"cells": [{"cell_type": "markdown", "source": [right]},
                    {"cell_type": "markdown", "source": ["## Read the table"]}]}
    assert read_the_code_cells(nb) == [right]
