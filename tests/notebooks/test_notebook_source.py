"""The helpers notebook 11 uses to put the server on screen: `show_source` and `host_config`.

`show_source` prints lines of the installed library between two markers, so a notebook shows the
code that runs; a marker the code no longer has is refused with a message saying what to update.
`host_config` runs the real `memkit mcp --print-config` and shortens only this machine's paths.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from classroom.mcp_client import host_config
from classroom.source import show_source, source_lines


def sample(store: dict[str, int], user: str) -> int:
    """A function to print."""
    user = user.strip()
    count = store.get(user, 0)
    store[user] = count + 1
    return count


def test_the_lines_between_two_markers_are_printed_under_their_module_and_name(capsys):
    show_source(sample, "count = store", "store[user]")
    assert capsys.readouterr().out == (f"# {__name__.replace('.', '/')}.py, sample\n"
                                       "count = store.get(user, 0)\n"
                                       "store[user] = count + 1\n")


def test_without_markers_the_whole_definition_is_shown():
    lines = source_lines(sample)
    assert lines[0].startswith("def sample(") and lines[-1].strip() == "return count"


@pytest.mark.parametrize("start, stop, missing", [
    ("count = stored", None, "'count = stored'"),
    ("count = store", "return counted", "'return counted'"),
    ("return count", "user = user", "'user = user'"),  # the stop marker is searched after the start
])
def test_a_marker_the_code_no_longer_has_is_refused_with_what_to_do(start, stop, missing):
    with pytest.raises(ValueError, match=rf"sample has no line containing {missing}.*point the notebook"):
        source_lines(sample, start, stop)


def test_the_host_config_is_the_real_commands_with_only_this_machines_paths_shortened(tmp_path):
    text = host_config(tmp_path / "memory.sqlite3", "alice", "vscode")
    config, note = text.rsplit("}\n", 1)
    entry = json.loads(config + "}")["servers"]["memkit"]
    assert entry["type"] == "stdio"
    assert entry["command"] == "<venv>/bin/memkit"
    assert entry["args"] == ["mcp", "--db", "<workspace>/memory.sqlite3", "--user", "alice"]
    assert note.startswith("note: put this in VS Code's")
    assert str(tmp_path) not in text and sys.prefix not in text and os.sep + "tmp" not in text


def test_a_host_the_command_refuses_is_one_line_naming_it(tmp_path):
    with pytest.raises(RuntimeError) as refused:
        host_config(tmp_path / "memory.sqlite3", "alice", "emacs")
    assert str(refused.value) == ("memkit mcp --print-config failed: memkit mcp: error: --print-config 'emacs' "
                                  "is not one of claude-desktop, vscode, cursor; choose one of them")
