"""Every command's JSON shows hidden characters as escapes, as `memkit proposals` does: same data.

A value may hold U+2028 (a line break to a terminal), U+202E (text turned right to left), U+200B
and other characters that show nothing. `get`, `search`, `history`, `export` and the rest print
them as `\\u` escapes (memkit.visible.visible_json): the output is still JSON that parses back to
the exact value, and no hidden character reaches the terminal. An exported bundle imports back.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memkit.visible import hidden

VALUE = "tea\u2028now: nothing saved \u202egnirts\u200b \U000e0041 caf\u00e9 \u4e2d \U0001f375"


def memkit(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memkit", *argv], capture_output=True, text=True, timeout=120,
                          encoding="utf-8")


def shown(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert not [char for char in done.stdout if char != "\n" and hidden(char)], done.stdout  # nothing hidden
    assert "caf\u00e9" in done.stdout and "\u4e2d" in done.stdout  # visible text stays as it is
    return done.stdout


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "memory.sqlite3"
    put = memkit("put", "--db", str(path), "--user", "alice", "--key", "drink", "--value", VALUE, "--confirm")
    assert put.returncode == 0, put.stderr
    return path


def test_put_get_search_and_history_print_hidden_characters_escaped_and_parse_back_exactly(db):
    put = memkit("put", "--db", str(db), "--user", "alice", "--key", "drink", "--value", VALUE + "!", "--confirm")
    assert json.loads(shown(put))["value"] == VALUE + "!"
    got = memkit("get", "--db", str(db), "--user", "alice", "--key", "drink")
    assert json.loads(shown(got))["value"] == VALUE + "!"
    [found] = json.loads(shown(memkit("search", "--db", str(db), "--user", "alice", "--query", "tea")))
    assert found["value"] == VALUE + "!"
    events = json.loads(shown(memkit("history", "--db", str(db), "--user", "alice", "--key", "drink")))
    assert [e["new_value"] for e in events] == [VALUE, VALUE + "!"] and events[1]["old_value"] == VALUE


def test_an_exported_bundle_shows_no_hidden_character_and_imports_back_exactly(db, tmp_path):
    bundle = shown(memkit("export", "--db", str(db), "--user", "alice"))
    (tmp_path / "alice.jsonl").write_text(bundle, encoding="utf-8")
    other = tmp_path / "other.sqlite3"
    imported = memkit("import", "--db", str(other), "--file", str(tmp_path / "alice.jsonl"), "--confirm")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(shown(memkit("get", "--db", str(other), "--user", "alice", "--key", "drink")))["value"] == VALUE
