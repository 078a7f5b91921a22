"""`memkit consolidate` through the real entry point: after `memkit chat`, it proposes what the session
told, approves nothing, and refuses (exit 2, one line, nothing changed) what it cannot read."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _cli_helpers import env_with, memkit, new_pg_database

TABLES = ("memories", "memory_events", "proposals", "transcript", "window_turns")


def rows(db: Path) -> dict[str, list[Any]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t}")), key=repr) for t in TABLES}


def chat(db: Path, *messages: str) -> None:
    """A conversation in the store's own window; no terminal, so what the model proposes waits."""
    argv = [arg for text in messages for arg in ("--message", text)]
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(db), "--user", "sam",
                           "--session", "s1", *argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=env_with(), timeout=120)
    assert done.returncode == 0, done.stderr


def consolidate(db: Path, *argv: str) -> subprocess.CompletedProcess:
    return memkit("consolidate", "--db", str(db), *argv, env=env_with())


def refused(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout)
    assert done.stderr.startswith("error: ") and message in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


def test_it_proposes_the_session_and_a_person_approves(tmp_path):
    db = tmp_path / "memory.sqlite3"
    chat(db, "answer in French this time", "My ticket number is T-4471")  # nothing the model proposes
    done = consolidate(db, "--user", "sam", "--session", "s1")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["turns_read"], report["policy_calls"], report["approved"]) == (4, 2, 0)
    [episode] = report["proposed"]
    assert (episode["kind"], episode["key"], episode["status"]) == ("episode", "session.s1", "pending")
    assert "Named: ticket number T-4471." in episode["value"]
    assert json.loads(memkit("get", "--db", str(db), "--user", "sam", "--kind", "episode", "--key",
                             "session.s1", env=env_with()).stdout) is None  # proposed, not saved

    approved = memkit("approve", str(episode["id"]), "--db", str(db), "--user", "sam", "--confirm", env=env_with())
    assert approved.returncode == 0, approved.stderr
    kept = json.loads(memkit("get", "--db", str(db), "--user", "sam", "--kind", "episode", "--key",
                             "session.s1", env=env_with()).stdout)
    assert kept["value"] == episode["value"]


def test_a_changed_fact_is_proposed_once_and_a_second_run_proposes_nothing_new(tmp_path):
    db = tmp_path / "memory.sqlite3"
    chat(db, "I live in Lisbon", "I moved to Porto")  # the hot path proposed both, waiting
    done = json.loads(consolidate(db, "--user", "sam", "--session", "s1", "--no-summary").stdout)
    assert done["proposed"] == [] and len(done["already_waiting"]) == 1  # Porto, the last word, waited already
    before = rows(db)
    again = json.loads(consolidate(db, "--user", "sam", "--session", "s1", "--no-summary").stdout)
    assert again["proposed"] == [] and again["already_waiting"] == done["already_waiting"]
    assert rows(db) == before


def test_a_missing_database_is_refused_and_not_created(tmp_path):
    db = tmp_path / "none.sqlite3"
    refused(consolidate(db, "--user", "sam", "--session", "s1"), "no memkit database at")
    assert not db.exists()


@pytest.mark.parametrize(("user", "session"), [("sam", "s2"), ("bob", "s1")])
def test_a_session_with_nothing_to_read_is_refused_and_changes_nothing(tmp_path, user, session):
    db = tmp_path / "memory.sqlite3"
    chat(db, "I live in Lisbon")
    before = rows(db)
    refused(consolidate(db, "--user", user, "--session", session), "Nothing was proposed")
    assert rows(db) == before


def test_user_and_session_are_required(tmp_path):
    done = consolidate(tmp_path / "memory.sqlite3", "--user", "sam")
    assert done.returncode == 2 and "--session" in done.stderr and "Traceback" not in done.stderr


def test_a_failure_after_a_kept_proposal_exits_4_and_names_it(tmp_path):
    """The proposals bound reached halfway: what was kept stands, and the command says so."""
    db = tmp_path / "memory.sqlite3"
    chat(db, "I'm vegetarian", "I live in Lisbon")  # the model proposed both; a person rejects both
    for waiting in json.loads(memkit("proposals", "--db", str(db), "--user", "sam", env=env_with()).stdout):
        assert memkit("reject", str(waiting["id"]), "--db", str(db), "--user", "sam", env=env_with()).returncode == 0
    limited = memkit("limits", "--db", str(db), "--set", "max_pending_proposals_per_user=1", "--confirm",
                     env=env_with())
    assert limited.returncode == 0, limited.stderr
    failed = consolidate(db, "--user", "sam", "--session", "s1")
    assert failed.returncode == 4, (failed.returncode, failed.stderr)
    assert failed.stderr.startswith("error: committed: proposal ") and " kept; then failed: " in failed.stderr
    assert "at most 1 may wait" in failed.stderr and "Traceback" not in failed.stderr
    [kept] = json.loads(memkit("proposals", "--db", str(db), "--user", "sam", env=env_with()).stdout)
    assert (kept["key"], kept["value"], kept["status"]) == ("diet", "vegetarian", "pending")
    assert f"proposal {kept['id']} kept" in failed.stderr


def test_hidden_characters_are_shown_escaped_and_the_suggested_commands_quote_the_user(tmp_path):
    db = tmp_path / "memory.sqlite3"
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(db), "--user", "auth0|123",
                           "--session", "s1", "--message", "My ticket number is T-\u202e4471"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env_with(), timeout=120)
    assert done.returncode == 0, done.stderr
    shown = consolidate(db, "--user", "auth0|123", "--session", "s1")
    assert shown.returncode == 0, shown.stderr
    assert "\u202e" not in shown.stdout and "\\u202e" in shown.stdout
    report = json.loads(shown.stdout)
    assert "T-\u202e4471" in report["proposed"][0]["value"]  # the same data, once parsed
    assert "memkit approve ID --user 'auth0|123' --confirm" in report["next"]


def test_a_report_that_cannot_be_written_after_kept_proposals_exits_3_and_says_what_was_kept(tmp_path):
    db = tmp_path / "memory.sqlite3"
    chat(db, "answer in French this time")
    closed = subprocess.run(["bash", "-c", '"$0" -m memkit consolidate --db "$1" --user sam --session s1 >&-',
                             sys.executable, str(db)], capture_output=True, text=True, env=env_with(), timeout=120)
    assert closed.returncode == 3, (closed.returncode, closed.stderr)
    [kept] = json.loads(memkit("proposals", "--db", str(db), "--user", "sam", env=env_with()).stdout)
    assert closed.stderr.startswith(f"error: committed: proposals {kept['id']} of 'sam' kept, waiting for a person")
    assert "Traceback" not in closed.stderr


def test_turns_still_in_chats_redis_window_are_read(tmp_path):
    """chat kept the session's window in Redis (nothing archived yet): consolidate reads it there too."""
    from memkit.window import start_embedded_redis

    db = tmp_path / "memory.sqlite3"
    with start_embedded_redis(persistence="none") as redis:
        told = memkit("chat", "--db", str(db), "--user", "sam", "--session", "s1", "--redis-url", redis.url,
                      "--message", "My ticket number is T-4471", env=env_with())
        assert told.returncode == 0, told.stderr
        assert rows(db)["transcript"] == []  # both turns are in Redis only
        store_only = consolidate(db, "--user", "sam", "--session", "s1")
        refused(store_only, "Nothing was proposed")  # the store's own window and archive hold nothing
        done = memkit("consolidate", "--db", str(db), "--user", "sam", "--session", "s1",
                      env=env_with(REDIS_URL=redis.url))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["turns_read"] == 2 and "note" not in report
    assert "Named: ticket number T-4471." in report["proposed"][0]["value"]


def test_a_bad_redis_url_is_refused_before_the_store_is_read(tmp_path):
    db = tmp_path / "memory.sqlite3"
    chat(db, "I live in Lisbon")
    before = rows(db)
    done = consolidate(db, "--user", "sam", "--session", "s1", "--redis-url", "http://nowhere")
    assert done.returncode == 2 and "Traceback" not in done.stderr and "redis" in done.stderr.lower(), done.stderr
    assert rows(db) == before


@pytest.mark.postgres
def test_on_postgresql_the_redis_window_is_read_with_its_url_and_said_unread_without(pg_url):
    from memkit.store import open_store
    from memkit.window import start_embedded_redis

    url = new_pg_database(pg_url, "cons")
    with start_embedded_redis(persistence="none") as redis:
        told = memkit("chat", "--db", url, "--user", "sam", "--session", "s1", "--redis-url", redis.url,
                      "--message", "My ticket number is T-4471", env=env_with())
        assert told.returncode == 0, told.stderr
        # Its turns are in Redis only: without the URL the refusal says where they may be.
        refused(memkit("consolidate", "--db", url, "--user", "sam", "--session", "s1", env=env_with()),
                "turns of this session still there were not read; give --redis-url URL")
        done = memkit("consolidate", "--db", url, "--user", "sam", "--session", "s1", "--redis-url", redis.url,
                      env=env_with())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["turns_read"] == 2 and "note" not in report
    assert "Named: ticket number T-4471." in report["proposed"][0]["value"]
    # A session whose turns were archived: read without a URL, and the report says what was not read.
    with open_store(url) as store:
        store.archive_turns("sam", "s2", [
            {"turn": 1, "role": "user", "content": "I'm vegetarian", "at": "2026-01-01T09:00:00.000000Z"},
            {"turn": 2, "role": "assistant", "content": "ok", "at": "2026-01-01T09:00:01.000000Z"}])
    archived = memkit("consolidate", "--db", url, "--user", "sam", "--session", "s2", env=env_with())
    assert archived.returncode == 0, archived.stderr
    report = json.loads(archived.stdout)
    assert report["turns_read"] == 2 and [p["key"] for p in report["proposed"]] == ["diet", "session.s2"]
    assert report["note"].startswith("read the archive only") and "--redis-url" in report["note"]
