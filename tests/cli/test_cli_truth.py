"""Commands that tell the truth: a committed change is never reported as a plain failure, bad input
changes nothing, and an export can never overwrite the database it reads."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def memkit(*argv: str, stdout=subprocess.PIPE, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memkit", *argv], stdout=stdout, stderr=subprocess.PIPE,
                          stdin=stdin, text=True, timeout=120)


def files_digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def get(db: Path, key: str = "drink") -> dict | None:
    return json.loads(memkit("get", "--db", str(db), "--user", "alice", "--key", key).stdout)


@pytest.mark.parametrize("target", ["", "-wal", "-shm"])
def test_export_refuses_the_database_s_own_files(db, target):
    before = files_digest(db.parent)
    out = db.with_name(db.name + target)
    done = memkit("export", "--db", str(db), "--user", "alice", "--out", str(out), "--force")
    assert done.returncode == 2 and "database's own file" in done.stderr
    assert files_digest(db.parent) == before and get(db)["value"] == "tea"


def test_export_refuses_a_link_to_the_database(db, tmp_path):
    link = tmp_path / "alias.jsonl"
    link.hardlink_to(db)
    done = memkit("export", "--db", str(db), "--user", "alice", "--out", str(link), "--force")
    assert done.returncode == 2 and get(db)["value"] == "tea"


def test_export_does_not_replace_a_file_without_force_and_writes_whole_with_it(db, tmp_path):
    out = tmp_path / "alice.jsonl"
    out.write_text("precious\n")
    refused = memkit("export", "--db", str(db), "--user", "alice", "--out", str(out))
    assert refused.returncode == 2 and "--force" in refused.stderr and out.read_text() == "precious\n"
    done = memkit("export", "--db", str(db), "--user", "alice", "--out", str(out), "--force")
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text().splitlines()[0])["records"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


@pytest.mark.parametrize("command", [
    ["put", "--user", "alice", "--key", "drink", "--value", "coffee", "--confirm"],
    ["forget-user", "--user", "alice", "--confirm"],
])
def test_a_committed_change_with_a_full_disk_for_stdout_exits_3_and_says_it_was_committed(db, command):
    with open("/dev/full", "w") as full:
        done = memkit(command[0], "--db", str(db), *command[1:], stdout=full)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("error: committed: ")
    assert (get(db) or {}).get("value") in ("coffee", None)  # the change stands


def test_a_committed_put_into_a_closed_pipe_exits_3(db):
    process = subprocess.Popen([sys.executable, "-m", "memkit", "put", "--db", str(db), "--user", "alice",
                                "--key", "drink", "--value", "milk", "--confirm"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # the reader went away before the report was written
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 3, stderr
    assert "committed" in stderr and get(db)["value"] == "milk"


def test_a_refused_command_with_a_full_stdout_is_still_a_plain_refusal(db):
    with open("/dev/full", "w") as full:
        done = memkit("put", "--db", str(db), "--user", "alice", "--key", "Bad Key", "--value", "x", "--confirm",
                      stdout=full)
    assert done.returncode == 2 and "committed" not in done.stderr and get(db)["value"] == "tea"


@pytest.mark.parametrize("flag", ["--db", "--workspace"])
@pytest.mark.parametrize("database_url", [None, "postgresql://nobody@127.0.0.1:1/none"])
def test_an_empty_path_is_bad_input(tmp_path, flag, database_url, monkeypatch):
    """Even with $DATABASE_URL set, an empty --db is refused, not replaced by the URL."""
    monkeypatch.chdir(tmp_path)
    if database_url:
        monkeypatch.setenv("DATABASE_URL", database_url)
    done = memkit("put", flag, "", "--user", "alice", "--key", "drink", "--value", "tea", "--confirm")
    assert done.returncode == 2 and "empty" in done.stderr and list(tmp_path.iterdir()) == []


def test_chat_with_stdin_closed_is_an_error_not_a_traceback(tmp_path):
    done = subprocess.run(f"{sys.executable} -m memkit chat --db {tmp_path / 'm.sqlite3'} --user alice <&-",
                          shell=True, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert not (tmp_path / "m.sqlite3").exists()


def test_chat_with_stdin_that_is_not_utf8_is_an_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(tmp_path / "m.sqlite3"), "--user",
                           "alice"], input=b"\xff\xfe not text\n", capture_output=True, timeout=120)
    assert done.returncode == 2 and b"Traceback" not in done.stderr and done.stderr.startswith(b"error: ")


def test_a_later_message_refused_after_an_earlier_one_saved_exits_4_naming_the_save(tmp_path):
    """The first message saved a memory; the second cannot fit the budget. The save stands, so the
    command must not say "refused, nothing changed" (2): it exits 4 and names what was committed."""
    path = tmp_path / "m.sqlite3"
    done = memkit("chat", "--db", str(path), "--user", "alice", "--window", "process", "--budget", "3300",
                  "--confirm-preference", "city", "Porto", "--message", "I live in Porto",
                  "--message", "tell me about " + "the sea " * 180)
    assert done.returncode == 4, done.stderr
    assert "committed:" in done.stderr and "'city' saved at revision 1" in done.stderr and "then failed" in done.stderr
    assert get(path, "city")["value"] == "Porto"


def test_chat_writes_the_requests_it_dumps_privately(tmp_path):
    out = tmp_path / "requests.json"
    done = memkit("chat", "--db", str(tmp_path / "m.sqlite3"), "--user", "alice", "--window", "process",
                  "--message", "hello", "--dump-requests", str(out))
    assert done.returncode == 0, done.stderr
    assert out.stat().st_mode & 0o777 == 0o600 and "hello" in out.read_text()


@pytest.mark.parametrize("argv, says", [
    (["--redis-url", "http://nowhere"], "http://nowhere"),
    (["--db", "postgresql://nobody@127.0.0.1:1/none"], "keeps chat's window in Redis"),
    (["--window", "process", "--redis-url", "redis://127.0.0.1:1/0"], "drop --redis-url"),
])
def test_chat_refused_for_its_window_creates_nothing(tmp_path, argv, says):
    db = tmp_path / "m.sqlite3"
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(db), "--user", "alice",
                           "--message", "hi", *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if k != "REDIS_URL"})
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert list(tmp_path.iterdir()) == []  # refused before the store was opened: no file made
