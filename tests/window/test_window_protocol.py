"""The window's Redis protocol is one module: every Lua script lives there, each with a header that
documents every KEYS and ARGV slot its code reads, and `Scripts` registers every one of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import memkit
from memkit.window import protocol

SCRIPTS = {name: text for name, text in vars(protocol).items()
           if name.isupper() and isinstance(text, str) and "redis.call(" in text}


def slots(lines: list[str], kind: str) -> set[int]:
    """The slots of `kind` (KEYS or ARGV) that `lines` name: `KEYS[3]`, or each one of `KEYS[1..5]`."""
    found: set[int] = set()
    for first, last in re.findall(rf"{kind}\[(\d+)(?:\.\.(\d+))?\]", "\n".join(lines)):
        found.update(range(int(first), int(last or first) + 1))
    return found


def undocumented(script: str) -> dict[str, set[int]]:
    lines = script.strip().splitlines()
    header = [line for line in lines if line.startswith("--")]
    code = [line.split("--", 1)[0] for line in lines if not line.startswith("--")]
    return {kind: slots(code, kind) - slots(header, kind) for kind in ("KEYS", "ARGV")}


def test_the_protocol_holds_every_script_the_window_runs():
    assert set(SCRIPTS) == {"APPEND", "READ", "RECENT", "RETIRE", "TRIM", "RENUMBER"}
    elsewhere = [str(path.relative_to(Path(memkit.__file__).parent))
                 for path in Path(memkit.__file__).parent.rglob("*.py")
                 if path.name != "protocol.py" and "redis.call(" in path.read_text(encoding="utf-8")]
    assert elsewhere == [], f"Lua outside memkit/window/protocol.py: {elsewhere}"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_script_documents_each_slot_it_reads_and_what_it_returns(name):
    script = SCRIPTS[name]
    assert script.lstrip().startswith("--"), f"{name} starts without its header"
    assert undocumented(script) == {"KEYS": set(), "ARGV": set()}, name
    assert any(line.startswith("-- Returns") for line in script.splitlines()), f"{name} says not what it returns"


def test_the_check_finds_a_slot_missing_from_a_header():
    script = "-- KEYS[1..2] the keys\n-- ARGV[1] a value\nredis.call('SET', KEYS[2], ARGV[1], ARGV[2])\n"
    assert undocumented(script) == {"KEYS": set(), "ARGV": {2}}


def test_scripts_registers_every_script_of_the_protocol():
    import redis

    # Registering sends nothing: redis-py loads a script at its first call.
    client = redis.Redis(unix_socket_path="unused")
    registered = vars(protocol.Scripts(client)).values()
    assert sorted(script.script for script in registered) == sorted(SCRIPTS.values())
