"""`memkit proposals`, `approve`, `reject` and chat's question at a terminal, through the real entry
point: JSON on stdout, exit 2 with `error:` on stderr and nothing changed for every refusal."""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memkit import FakeClock, MemoryStore
from _cli_helpers import env_with, memkit, new_pg_database

TABLES = ("memories", "memory_events", "user_counts", "(SELECT records FROM store_meta)", "transcript", "proposals")


def rows(db: Path) -> dict[str, list[Any]]:
    """Every row of every table, read on a connection of its own: equal values, nothing changed."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t}")), key=repr) for t in TABLES}


def chat(db: Path, *argv: str, stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(db), "--window", "process", *argv],
                          capture_output=True, text=True, stdin=stdin, timeout=120)


def ok(done: subprocess.CompletedProcess) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def refused(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout)
    assert done.stderr.startswith("error: ") and message in done.stderr and "Traceback" not in done.stderr


def test_a_chat_with_no_terminal_leaves_a_proposal_that_approve_stores(tmp_path):
    db = tmp_path / "memory.sqlite3"
    report = ok(chat(db, "--user", "alice", "--session", "s1", "--message", "Remember my city is Porto"))
    [waiting] = report["proposals_waiting"]
    number = waiting["proposal"]
    assert waiting == {"proposal": number, "proposed": "save preference city = 'Porto'", "decision": "pending",
                       "approve_with": f"memkit approve {number} --user alice --confirm"}
    assert ok(memkit("get", "--db", str(db), "--user", "alice", "--key", "city")) is None  # not saved
    [listed] = ok(memkit("proposals", "--db", str(db), "--user", "alice"))
    assert {k: listed[k] for k in ("id", "action", "kind", "key", "value", "against_value", "against_revision",
                                   "session", "status")} == {
        "id": number, "action": "put", "kind": "preference", "key": "city", "value": "Porto",
        "against_value": None, "against_revision": None, "session": "s1", "status": "pending"}
    assert isinstance(listed["age_seconds"], int) and ok(memkit("proposals", "--db", str(db), "--user", "bob")) == []

    before = rows(db)
    refused(memkit("approve", str(number), "--db", str(db), "--user", "alice"), "approve needs --confirm")
    assert rows(db) == before
    done = ok(memkit("approve", str(number), "--db", str(db), "--user", "alice", "--confirm"))
    assert done["record"]["value"] == "Porto" and done["proposal"]["status"] == "approved"
    [event] = ok(memkit("history", "--db", str(db), "--user", "alice", "--key", "city"))
    assert (event["new_value"], event["session"], event["confirmation"]) == (
        "Porto", "s1", f"proposal#{number} approved via cli")
    after = rows(db)
    refused(memkit("approve", str(number), "--db", str(db), "--user", "alice", "--confirm"), "already approved")
    refused(memkit("reject", str(number), "--db", str(db), "--user", "alice"), "already approved")
    assert rows(db) == after and ok(memkit("proposals", "--db", str(db), "--user", "alice")) == []
    assert [p["status"] for p in ok(memkit("proposals", "--db", str(db), "--user", "alice", "--all"))] == ["approved"]


def test_reject_turns_a_proposal_down_and_touches_no_memory(tmp_path):
    db = tmp_path / "memory.sqlite3"
    ok(memkit("put", "--db", str(db), "--user", "alice", "--key", "drink", "--value", "tea", "--confirm"))
    with MemoryStore(db) as store:
        number = store.propose_delete("alice", "s1", "preference", "drink")["id"]
    memories = {t: v for t, v in rows(db).items() if t != "proposals"}
    rejected = ok(memkit("reject", str(number), "--db", str(db), "--user", "alice"))
    assert (rejected["status"], rejected["decided_by"], rejected["action"]) == ("rejected", "cli", "delete")
    assert {t: v for t, v in rows(db).items() if t != "proposals"} == memories
    refused(memkit("approve", str(number), "--db", str(db), "--user", "alice", "--confirm"), "already rejected")


def test_every_refusal_exits_2_and_changes_nothing(tmp_path):
    db = tmp_path / "memory.sqlite3"
    ok(memkit("put", "--db", str(db), "--user", "alice", "--key", "drink", "--value", "tea", "--confirm"))
    with MemoryStore(db) as store:
        stale = store.propose_put("alice", "s1", "preference", "drink", "coffee")["id"]
        store.put("alice", "s2", "preference", "drink", "water")
    with MemoryStore(db, clock=FakeClock()) as store:  # made on 2026-01-01: expired a week later
        expired = store.propose_put("alice", "s1", "preference", "city", "Porto")["id"]
    before = rows(db)
    for argv, message in [
        (["approve", str(stale), "--user", "alice", "--confirm"], "has changed since; nothing was changed"),
        (["approve", str(expired), "--user", "alice", "--confirm"], f"proposal {expired} (save preference city"
                                                                     " = 'Porto') expired at 2026-01-08"),
        (["approve", str(stale), "--user", "bob", "--confirm"], f"user 'bob' has no proposal {stale} "),
        (["reject", str(stale), "--user", "bob"], f"user 'bob' has no proposal {stale} "),
        (["approve", "999", "--user", "alice", "--confirm"], "user 'alice' has no proposal 999 "),
        (["approve", "0", "--user", "alice", "--confirm"], "proposal id '0' is not a proposal id"),
        (["reject", "1; DROP TABLE memories", "--user", "alice"], "is not a proposal id"),
        (["approve", "-1", "--user", "alice", "--confirm"], "is not a proposal id"),
        (["proposals", "--user", "al\tice"], "user 'al\\tice' is not allowed"),
        (["approve", "1", "--user", "alice\n", "--confirm"], "user 'alice\\n' is not allowed"),
    ]:
        refused(memkit(*argv, "--db", str(db)), message)
        assert rows(db) == before, argv
    listed = {p["id"]: p for p in ok(memkit("proposals", "--db", str(db), "--user", "alice"))}
    assert (listed[stale]["stale"], listed[expired]["expired"]) == (True, True)


def test_proposals_commands_never_create_a_database(tmp_path):
    for argv in (["proposals", "--user", "alice"], ["approve", "1", "--user", "alice", "--confirm"],
                 ["reject", "1", "--user", "alice"]):
        refused(memkit(*argv, "--db", str(tmp_path / "none.sqlite3")), "no memkit database at")
    assert os.listdir(tmp_path) == []


def terminal_chat(db: Path, answer: bytes, message: str) -> tuple[dict[str, Any], str]:
    """`memkit chat` with stdin and stderr on a pseudo-terminal (a person at a terminal) answering
    `answer` to its question; returns its report and what the terminal showed."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "memkit", "chat", "--db", str(db), "--window", "process", "--user", "alice",
             "--message", message], stdin=follower, stderr=follower, stdout=subprocess.PIPE)
        os.close(follower)
        shown = b""
        while b"[y/N]" not in shown:
            chunk = os.read(leader, 1024)
            assert chunk, shown
            shown += chunk
        os.write(leader, answer)
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0, shown
        return json.loads(out), shown.decode()
    finally:
        os.close(leader)


@pytest.mark.parametrize(("answer", "decision"), [(b"y\n", "approved"), (b"n\n", "rejected"), (b"\n", "pending")])
def test_chat_at_a_terminal_asks_the_person_and_approves_on_yes(tmp_path, answer, decision):
    db = tmp_path / "memory.sqlite3"
    report, shown = terminal_chat(db, answer, "Remember my city is Porto")
    assert "save preference city = 'Porto'? [y/N]" in shown
    [settled] = report["turns"][0]["proposals"]
    assert settled["decision"] == decision
    assert [p["proposal"] for p in report["proposals_waiting"]] == ([settled["proposal"]] if decision == "pending"
                                                                    else [])
    with MemoryStore(db) as store:
        record = store.get("alice", "preference", "city")
        assert (record is not None) is (decision == "approved")
        if decision == "approved":
            assert store.history("alice", "preference", "city")[0]["confirmation"] == (
                f"proposal#{settled['proposal']} approved via chat-terminal")
        assert [p["status"] for p in store.proposals("alice", pending_only=False)] == [
            {"approved": "approved", "rejected": "rejected", "pending": "pending"}[decision]]


@pytest.mark.postgres
def test_the_proposal_walk_on_postgresql(pg_url):
    url = new_pg_database(pg_url, "cli")
    env = env_with()
    chatted = memkit("chat", "--db", url, "--user", "alice", "--window", "process", "--message",
                     "Remember my city is Porto", "--message", "Remember my drink is tea", env=env)
    numbers = [p["proposal"] for p in ok(chatted)["proposals_waiting"]]
    assert len(numbers) == 2
    listed = ok(memkit("proposals", "--db", url, "--user", "alice", env=env))
    assert [(p["id"], p["key"], p["value"]) for p in listed] == [(numbers[0], "city", "Porto"),
                                                                 (numbers[1], "drink", "tea")]
    refused(memkit("approve", str(numbers[0]), "--db", url, "--user", "bob", "--confirm", env=env), "has no proposal")
    assert ok(memkit("approve", str(numbers[0]), "--db", url, "--user", "alice", "--confirm", env=env))[
        "record"]["value"] == "Porto"
    refused(memkit("approve", str(numbers[0]), "--db", url, "--user", "alice", "--confirm", env=env),
            "already approved")
    assert ok(memkit("reject", str(numbers[1]), "--db", url, "--user", "alice", env=env))["status"] == "rejected"
    [event] = ok(memkit("history", "--db", url, "--user", "alice", "--key", "city", env=env))
    assert event["confirmation"] == f"proposal#{numbers[0]} approved via cli"
    assert ok(memkit("get", "--db", url, "--user", "alice", "--key", "drink", env=env)) is None
    forgotten = ok(memkit("forget-user", "--db", url, "--user", "alice", "--confirm", env=env))
    assert forgotten["removed"]["proposals"] == 2 and forgotten["left"]["proposals"] == 0


def test_chat_reading_messages_from_a_terminal_asks_between_them(tmp_path):
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "memkit", "chat", "--db", str(tmp_path / "m.sqlite3"),
                                    "--window", "process", "--user", "alice"],
                                   stdin=follower, stderr=follower, stdout=subprocess.PIPE)
        os.close(follower)
        for message, answer in ((b"Remember my city is Porto\n", b"y\n"), (b"Remember my name is Sam\n", b"\n")):
            os.write(leader, message)
            shown = b""
            while b"[y/N]" not in shown:
                chunk = os.read(leader, 1024)
                assert chunk, shown
                shown += chunk
            os.write(leader, answer)
        os.write(leader, b"\x04")  # end of input: the conversation ends
        out, _ = process.communicate(timeout=120)
    finally:
        os.close(leader)
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert [t["proposals"][0]["decision"] for t in lines[:2]] == ["approved", "pending"]
    assert lines[-1]["done"] is True and [p["proposed"] for p in lines[-1]["proposals_waiting"]] == [
        "save preference name = 'Sam'"]
    with MemoryStore(tmp_path / "m.sqlite3") as store:
        assert store.get("alice", "preference", "city")["value"] == "Porto"
        assert store.get("alice", "preference", "name") is None


def test_export_says_proposals_stay_behind_and_import_brings_none(tmp_path):
    db = tmp_path / "memory.sqlite3"
    ok(memkit("put", "--db", str(db), "--user", "alice", "--key", "drink", "--value", "tea", "--confirm"))
    with MemoryStore(db) as store:
        store.propose_put("alice", "s1", "preference", "city", "Porto")
    bundle = tmp_path / "alice.jsonl"
    exported = ok(memkit("export", "--db", str(db), "--user", "alice", "--out", str(bundle)))
    assert (exported["records"], exported["proposals_left_out"]) == (1, 1) and "Porto" not in bundle.read_text()
    imported = ok(memkit("import", "--db", str(db), "--file", str(bundle), "--as-user", "carol", "--confirm"))
    assert imported == {"records": 1, "events": 1, "proposals_imported": 0}
    assert ok(memkit("proposals", "--db", str(db), "--user", "carol")) == []
