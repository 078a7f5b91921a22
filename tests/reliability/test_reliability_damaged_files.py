"""The reliability lab: damaged, foreign and unreadable files are refused by name and left unchanged.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any


from _reliability import ROOMY, scale
from _store_helpers import folder_state
from memkit import cli
from memkit.errors import StoreError
from memkit.limits import KINDS, Limits
from memkit.store import SCHEMA_VERSION
from memkit.store import MemoryStore


def memkit_bytes(folder: Path) -> bytes:
    """A closed memkit file of a few dozen pages (records, history, search index), as bytes."""
    path = folder / "source.sqlite3"
    with MemoryStore(path, limits=Limits().replace(**ROOMY)) as store:
        for n in range(120):
            store.put("alice", "s1", KINDS[n % 2], f"key-{n}", f"value {n} " + "long text ☕ " * (n % 30 + 1))
    data = path.read_bytes()
    path.unlink()
    return data


def damaged_cases(folder: Path, rng: random.Random, truncations: int) -> list[tuple[str, Any, str]]:
    """(name, make(case_folder) -> path, what the error must say) for every kind of damage."""
    data = memkit_bytes(folder)
    page = int.from_bytes(data[16:18], "big")

    def write(content: bytes):
        def make(case: Path) -> Path:
            (case / "memory.sqlite3").write_bytes(content)
            return case / "memory.sqlite3"
        return make

    def edited(*statements: str):
        def make(case: Path) -> Path:
            path = write(data)(case)
            conn = sqlite3.connect(path, isolation_level=None)
            for statement in statements:
                conn.execute(statement)
            conn.close()
            return path
        return make

    def foreign(case: Path) -> Path:
        conn = sqlite3.connect(case / "memory.sqlite3", isolation_level=None)
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO orders VALUES (1, 9.5)")
        conn.close()
        return case / "memory.sqlite3"

    def read_only_file(case: Path) -> Path:
        path = write(data)(case)
        path.chmod(0o444)
        return path

    def read_only_folder(case: Path) -> Path:
        path = write(data)(case)
        case.chmod(0o555)
        return path

    def directory(case: Path) -> Path:
        (case / "memory.sqlite3").mkdir()
        return case / "memory.sqlite3"

    def symlink(target: str):
        def make(case: Path) -> Path:
            write(data)(case).rename(case / "real.sqlite3")
            (case / "memory.sqlite3").symlink_to(case / target)
            return case / "memory.sqlite3"
        return make

    truncated = "truncated|damaged|corrupt|empty"
    offsets = {1, 99, 100, 101, page - 1, page, page + 1, len(data) - page, len(data) - 1, len(data) // 2}
    offsets |= {rng.randrange(1, len(data)) for _ in range(truncations)}
    cases = [(f"truncated at byte {n} of {len(data)}", write(data[:n]), truncated) for n in sorted(offsets)]
    for _ in range(max(3, truncations // 10)):
        size = rng.randrange(1, 3 * page)
        cases.append((f"random bytes ({size})", write(rng.randbytes(size)), "not a SQLite database"))
        cases.append((f"SQLite header then random bytes ({size})",
                      write(data[:100] + rng.randbytes(size)), "damaged|corrupt|truncated"))
    cases += [
        ("zero-length", write(b""), "empty"),
        ("a text file", write(b"my notes\nnot a database\n"), "not a SQLite database"),
        ("a foreign SQLite schema", foreign, "another program"),
        ("a newer user_version", edited(f"PRAGMA user_version = {SCHEMA_VERSION + 1}"), "newer"),
        ("a read-only file", read_only_file, "read-only"),
        ("a read-only folder", read_only_folder, "read-only"),
        ("a directory in place of the file", directory, "is a directory"),
        ("a symlink to a memkit file", symlink("real.sqlite3"), "symbolic link"),
        ("a dangling symlink", symlink("missing.sqlite3"), "symbolic link"),
    ]
    return cases


def test_damaged_files_are_refused_by_name_and_left_byte_identical(tmp_path, figures):
    rng = random.Random(3)
    cases = damaged_cases(tmp_path, rng, scale(25, 400))
    tally = {"cases tried": 0, "refused with a StoreError naming the problem": 0, "opened": 0,
             "changed on disk": 0, "silently reset": 0}
    failures = []
    for number, (name, make, words) in enumerate(cases):
        case = tmp_path / f"case-{number}"
        case.mkdir()
        path = make(case)
        before = folder_state(case)
        tally["cases tried"] += 1
        opened = False
        try:
            MemoryStore(path).close()
            opened = True
        except StoreError as exc:
            named = str(path) in str(exc) or f"folder {path.parent} is read-only" in str(exc)
            if re.search(words, str(exc)) and named:
                tally["refused with a StoreError naming the problem"] += 1
            else:
                failures.append(f"{name}: {exc}")
        if opened:
            tally["opened"] += 1
            failures.append(f"{name}: opened without an error")
        changed = folder_state(case) != before
        tally["changed on disk"] += changed
        # Silently reset: the damage was not reported, and what was on disk is no longer there.
        tally["silently reset"] += opened and changed
        case.chmod(0o755)
        if number % 7 == 0:  # the command line says the same, and changes nothing either
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(["health", "--db", str(path)])
            assert code == 2 and err.getvalue().startswith("error: ") and out.getvalue() == "", (name, err.getvalue())
            assert folder_state(case) == before
        shutil.rmtree(case)
    figures("Damaged files", **tally)
    assert failures == [], "\n".join(failures)
    assert tally["changed on disk"] == tally["silently reset"] == tally["opened"] == 0
