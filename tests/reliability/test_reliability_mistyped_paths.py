"""The reliability lab: a mistyped path forgets nothing, and says so.

`memkit forget-user --db typo.sqlite3 --user alice --confirm` used to create an empty store there
and exit 0 ("removed 0, left 0") while alice's real database still held her; `delete` did the same.
Every command that removes, maintains, decides or reads must refuse a path where no memkit database
is (exit 2, one `error: no memkit database at ...` line) and create nothing: no file, no folder, no
-wal. Only a save (put, import, chat, mcp) makes a store. Each command is run against a missing
file, a missing folder and an existing folder without a database (as --db and as --workspace),
through `memkit.cli.main`, the function the `memkit` script runs; under `make reliability` each is
also run as a real `python -m memkit` process. See conftest.py for the `figures` fixture.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

from _reliability import FULL
from memkit.cli import main

COMMANDS = {
    "forget-user": ["forget-user", "--user", "alice", "--confirm"],
    "delete": ["delete", "--user", "alice", "--key", "drink", "--confirm"],
    "approve": ["approve", "1", "--user", "alice", "--confirm"],
    "reject": ["reject", "1", "--user", "alice"],
    "windows": ["windows"],
    "windows --drop": ["windows", "--drop", "redis://localhost:1", "--confirm"],
    "limits": ["limits"],
    "limits --set": ["limits", "--set", "max_records_per_user=10", "--confirm"],
    "migrate": ["migrate", "--confirm"],
    "get": ["get", "--user", "alice", "--key", "drink"],
    "search": ["search", "--user", "alice", "--query", "tea"],
    "history": ["history", "--user", "alice", "--key", "drink"],
    "export": ["export", "--user", "alice"],
    "health": ["health"],
    "proposals": ["proposals", "--user", "alice"],
    "reindex": ["reindex", "--confirm"],
}

PLACES = {
    "missing file": lambda base: ["--db", str(base / "here" / "memroy.sqlite3")],
    "missing folder": lambda base: ["--db", str(base / "no-such-folder" / "memory.sqlite3")],
    "folder without a database": lambda base: ["--db", str(base / "here" / "memory.sqlite3")],
    "missing workspace": lambda base: ["--workspace", str(base / "no-such-workspace")],
    "workspace without a database": lambda base: ["--workspace", str(base / "here")],
}


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def run_in_process(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def run_as_process(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "memkit", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=120)
    return done.returncode, done.stdout, done.stderr


def test_every_command_but_a_save_refuses_a_path_without_a_database(tmp_path, monkeypatch, figures):
    for name in ("MEMKIT_DB", "DATABASE_URL", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    runners = [run_in_process] + ([lambda argv: run_as_process(argv, tmp_path)] if FULL else [])
    before = listing(tmp_path)
    runs = refused = named = one_line = created = tracebacks = 0
    wrong: list[str] = []
    for command, argv in COMMANDS.items():
        for place, where in PLACES.items():
            for run in runners:
                code, stdout, stderr = run([*argv, *where(tmp_path)])
                runs += 1
                refused += code == 2
                named += stderr.startswith("error: no memkit database at ")
                one_line += stderr.count("\n") == 1 and stdout == ""
                tracebacks += "Traceback" in stderr
                if code != 2 or not stderr.startswith("error: no memkit database at "):
                    wrong.append(f"{command} on a {place}: exit {code}, {stderr.strip()!r}")
                after = listing(tmp_path)
                created += len(after - before)
                before = after
    figures("Mistyped paths: commands that need a store",
            **{"commands": len(COMMANDS), "places": len(PLACES), "runs": runs, "refused (exit 2)": refused,
               "saying 'no memkit database at'": named, "one error line, nothing on stdout": one_line,
               "files or folders created": created,
               "tracebacks": tracebacks})
    assert wrong == []
    assert refused == named == one_line == runs and created == tracebacks == 0


def test_a_mistyped_path_leaves_the_real_store_holding_its_user(tmp_path, monkeypatch, figures):
    """The attack as it was: alice forgotten from a typo, while her database keeps her."""
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "memory.sqlite3"
    assert run_in_process(["put", "--db", str(real), "--user", "alice", "--key", "drink", "--value", "tea",
                           "--confirm"])[0] == 0
    typos = [tmp_path / "memroy.sqlite3", tmp_path / "memory.sqlite", tmp_path / "Memory.sqlite3"]
    codes = [run_as_process(["forget-user", "--db", str(typo), "--user", "alice", "--confirm"], tmp_path)[0]
             for typo in typos]
    mistyped_user = run_as_process(["forget-user", "--db", str(real), "--user", "alcie", "--confirm"], tmp_path)
    kept = run_in_process(["get", "--db", str(real), "--user", "alice", "--key", "drink"])
    figures("Mistyped paths: forget-user on a typo",
            **{"typos tried": len(typos), "refused (exit 2)": codes.count(2),
               "stores created": sum(typo.exists() for typo in typos),
               "mistyped user refused (exit 2)": int(mistyped_user[0] == 2),
               "alice's record kept": int('"tea"' in kept[1])})
    assert codes == [2] * len(typos) and not any(typo.exists() for typo in typos)
    assert mistyped_user[0] == 2 and "nothing stored for user 'alcie'" in mistyped_user[2]
    assert kept[0] == 0 and '"tea"' in kept[1]
