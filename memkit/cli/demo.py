"""`memkit demo`: the kit end to end in real processes, with checks that say whether it held.

1. Long-term memory: alice saves a preference and an episode in one process, bob saves his own,
   and a new process for alice (another session) recalls hers and never sees bob's.
2. Short-term memory: alice gives a ticket number in a conversation; that process is killed with
   SIGKILL; a new process for the same session is asked "What was my ticket number?" and answers
   it from the conversation's window, kept in the store's own file: nothing ran in between.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import MemkitError
from .killed_chat import told_then_killed


class DemoFailed(MemkitError):
    """One of the demo's checks did not hold."""


def _memkit(*argv: str) -> dict[str, Any]:
    """One `memkit` command in a new Python process, as a restart would start it."""
    done = subprocess.run([sys.executable, "-m", "memkit", *argv], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise DemoFailed(f"a demo session failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def run_demo() -> None:
    """Run both scenarios in a temporary workspace and print what happened and the checks."""
    workspace = Path(tempfile.mkdtemp(prefix="memkit-demo-"))
    db = workspace / "state" / "memory.sqlite3"
    try:
        db.parent.mkdir()
        dumps = {name: workspace / f"{name}.json" for name in ("alice-1", "bob-1", "alice-2", "alice-3")}
        print("memkit demo: a fresh workspace, the fixture model, real processes\n")
        print("1. Long-term memory survives a restart, and stays with its user")
        first = _memkit(
            "chat", "--db", str(db), "--user", "alice", "--session", "s1", "--dump-requests", str(dumps["alice-1"]),
            "--confirm-preference", "drink", "green tea",
            "--confirm-episode", "trip.kyoto", "Visited Kyoto in May and loved the tea houses",
            "--message", "Remember my drink is green tea",
            "--message", "Note episode trip.kyoto: Visited Kyoto in May and loved the tea houses",
        )
        for turn in first["turns"]:
            print(f"[process 1, alice/s1] {turn['message']!r}\n    -> {turn['reply']}")
        second = _memkit("chat", "--db", str(db), "--user", "bob", "--session", "s1",
                         "--dump-requests", str(dumps["bob-1"]), "--confirm-preference", "drink", "espresso",
                         "--message", "Remember my drink is espresso")
        print(f"[process 2, bob/s1]   {second['turns'][0]['message']!r}\n"
              f"    -> {second['turns'][0]['reply']}")
        third = _memkit("chat", "--db", str(db), "--user", "alice", "--session", "s2",
                        "--dump-requests", str(dumps["alice-2"]),
                        "--message", "What drink do I like, and how was Kyoto?")
        recall = third["turns"][0]["reply"]
        print(f"[process 3, alice/s2] {third['turns'][0]['message']!r}\n    -> {recall}\n")

        print("2. The conversation survives a crash: its recent turns live in the store's file, not the process")
        told = told_then_killed(db, "My ticket number is T-4471")
        print(f"[process 4, alice/support] {told['message']!r}\n    -> {told['reply']}\n"
              f"    (process {told['pid']} killed with SIGKILL right after that reply)")
        fifth = _memkit("chat", "--db", str(db), "--user", "alice", "--session", "support",
                        "--dump-requests", str(dumps["alice-3"]), "--message", "What was my ticket number?")
        ticket = fifth["turns"][0]["reply"]
        print(f"[process 5, alice/support] {fifth['turns'][0]['message']!r}\n    -> {ticket}\n")

        alice_seen = "".join(dumps[n].read_text(encoding="utf-8") for n in ("alice-1", "alice-2", "alice-3"))
        bob_seen = dumps["bob-1"].read_text(encoding="utf-8")
        alice_3_requests = json.loads(dumps["alice-3"].read_text(encoding="utf-8"))
        fifth_request = json.loads(alice_3_requests[0]["messages"][1]["content"])
        checks = {
            "alice's new process recalled her preference": "green tea" in recall,
            "alice's new process recalled her episode": "Kyoto" in recall,
            "no request for alice held bob's value": "espresso" not in alice_seen,
            "no request for bob held alice's values": "green tea" not in bob_seen and "Kyoto" not in bob_seen,
            "after SIGKILL, the new process's request held the earlier exchange":
                [e["user"] for e in fifth_request["recent_history"]] == ["My ticket number is T-4471"],
            "the new process answered with the ticket number": "T-4471" in ticket,
        }
        for label, ok in checks.items():
            print(f"  {'ok  ' if ok else 'FAIL'} {label}")
        largest = max(run["largest_request_chars"] for run in (first, second, third, fifth))
        print(f"\nlargest measured request: {largest} characters (budget 16000)")
        print("workspace removed; run `make lab` for the notebooks")
        if not all(checks.values()):
            raise DemoFailed("the demo's checks failed")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
