"""The real `memkit` entry point: exit codes, JSON on stdout, `error:` on stderr, nothing changed on refusal."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from _cli_helpers import memkit


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_put_get_search_history_round_trip(db):
    got = json.loads(memkit("get", "--db", str(db), "--user", "alice", "--key", "drink").stdout)
    assert got["value"] == "tea" and got["revision"] == 1
    memkit("put", "--db", str(db), "--user", "alice", "--key", "drink", "--value", "coffee", "--confirm")
    found = json.loads(memkit("search", "--db", str(db), "--user", "alice", "--query", "COFF").stdout)
    assert [r["value"] for r in found] == ["coffee"]
    history = json.loads(memkit("history", "--db", str(db), "--user", "alice", "--key", "drink").stdout)
    assert [(e["action"], e["revision"]) for e in history] == [("create", 1), ("update", 2)]
    first, second = (e["confirmation"] for e in history)
    assert re.fullmatch(r"cli@\d{4}-\d\d-\d\dT[\d:.]+Z#1", first) and first != second  # one per command


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["put", "--user", "alice", "--key", "drink", "--value", "milk"], "needs --confirm"),
        (["delete", "--user", "alice", "--key", "drink"], "needs --confirm"),
        (["forget-user", "--user", "alice"], "needs --confirm"),
        (["put", "--user", "alice", "--key", "Drink", "--value", "milk", "--confirm"], "key 'Drink' is not allowed"),
        (["put", "--user", "al\tice", "--key", "drink", "--value", "milk", "--confirm"], "user 'al\\tice'"),
        (["put", "--user", "alice", "--key", "drink", "--value", "x" * 600, "--confirm"], "at most 512"),
        (["put", "--user", "alice", "--key", "drink", "--value", "   ", "--confirm"], "blank"),
        (["search", "--user", "alice", "--limit", "0"], "limit is 0"),
        (["import", "--file", "missing.jsonl", "--confirm"], "no bundle file"),
    ],
)
def test_bad_input_exits_2_with_an_error_and_changes_nothing(db, argv, message):
    before = digest(db)
    done = memkit(argv[0], "--db", str(db), *argv[1:])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert digest(db) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["put", "--user", " bad user", "--key", "k", "--value", "v", "--confirm"],
        ["put", "--user", "alice", "--value", "v", "--confirm"],
        ["put", "--user", "alice", "--key", "k", "--value", "", "--confirm"],
        ["chat", "--user", "alice", "--confirm-preference", "BadKey", "v", "--message", "hi"],
        ["chat", "--user", "alice", "--confirm-delete", "secret", "k", "--message", "hi"],
        ["chat", "--user", "alice", "--message", b"not utf-8: \xff"],  # arrives as a lone surrogate
        ["chat", "--user", "alice", "--budget", "0", "--message", "hi"],
    ],
)
def test_a_refused_write_creates_no_database_or_folder(tmp_path, argv):
    done = memkit(argv[0], "--workspace", str(tmp_path / "ws"), *argv[1:])
    # a refused value: `error: ...`; a missing option (--key): the usage, then `memkit put: error: ...`
    assert done.returncode == 2 and "error: " in done.stderr.splitlines()[-1]
    assert list(tmp_path.iterdir()) == []


def test_the_default_workspace_is_created_on_a_first_write(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MEMKIT_DB"}
    done = memkit("put", "--user", "alice", "--key", "k", "--value", "v", "--confirm", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "memkit-workspace" / "state" / "memory.sqlite3").is_file()


def test_a_chat_that_fails_midway_reports_the_turns_it_completed(tmp_path):
    db = str(tmp_path / "m.sqlite3")
    done = memkit("chat", "--db", db, "--user", "alice", "--budget", "4000", "--confirm-preference", "drink", "tea",
                  "--message", "Remember my drink is tea", "--message", "x" * 5000)
    # The first message's save stands: not "refused, nothing changed" (2) but committed, then failed.
    assert done.returncode == 4 and "budget" in done.stderr and "saved at revision 1" in done.stderr
    partial = json.loads(done.stdout)
    assert [t["message"] for t in partial["turns"]] == ["Remember my drink is tea"] and "error" in partial
    assert json.loads(memkit("get", "--db", db, "--user", "alice", "--key", "drink").stdout)["value"] == "tea"


def test_reading_a_missing_database_does_not_create_one(tmp_path):
    done = memkit("get", "--db", str(tmp_path / "none.sqlite3"), "--user", "alice", "--key", "drink")
    assert done.returncode == 2 and "no memkit database at" in done.stderr
    assert not (tmp_path / "none.sqlite3").exists()


def test_workspace_means_state_memory_sqlite3(tmp_path):
    done = memkit("put", "--workspace", str(tmp_path / "ws"), "--user", "bob", "--key", "k", "--value", "v",
                  "--confirm")
    assert done.returncode == 0
    assert (tmp_path / "ws" / "state" / "memory.sqlite3").is_file()


def test_export_forget_import_round_trip(db, tmp_path):
    bundle = tmp_path / "alice.jsonl"
    assert memkit("export", "--db", str(db), "--user", "alice", "--out", str(bundle)).returncode == 0
    forgotten = json.loads(memkit("forget-user", "--db", str(db), "--user", "alice", "--confirm").stdout)
    # The store's own window is always visited: its count is part of the report.
    assert (forgotten["removed"] == {"records": 1, "events": 1, "transcript": 0, "proposals": 0, "window_turns": 0}
            and set(forgotten["left"].values()) == {0})
    assert json.loads(memkit("get", "--db", str(db), "--user", "alice", "--key", "drink").stdout) is None
    imported = json.loads(memkit("import", "--db", str(db), "--file", str(bundle), "--confirm").stdout)
    assert imported == {"records": 1, "events": 1, "proposals_imported": 0}
    assert memkit("export", "--db", str(db), "--user", "alice").stdout == bundle.read_text()


def test_a_tampered_bundle_is_refused(db, tmp_path):
    bundle = tmp_path / "alice.jsonl"
    memkit("export", "--db", str(db), "--user", "alice", "--out", str(bundle))
    bundle.write_text(bundle.read_text().replace('"tea"', '"gin"'))
    done = memkit("import", "--db", str(db), "--file", str(bundle), "--as-user", "carol", "--confirm")
    assert done.returncode == 2 and "checksum" in done.stderr


def test_chat_recalls_in_a_new_process_and_never_shows_another_user(tmp_path):
    db = str(tmp_path / "m.sqlite3")
    first = memkit("chat", "--db", db, "--user", "alice", "--session", "s1",
                   "--confirm-preference", "drink", "green tea", "--message", "Remember my drink is green tea")
    assert first.returncode == 0, first.stderr
    memkit("chat", "--db", db, "--user", "bob", "--confirm-preference", "drink", "espresso",
           "--message", "Remember my drink is espresso")
    dump = tmp_path / "requests.json"
    second = memkit("chat", "--db", db, "--user", "alice", "--session", "s2", "--dump-requests", str(dump),
                    "--message", "What drink do I like?")
    assert "green tea" in json.loads(second.stdout)["turns"][0]["reply"]
    assert "espresso" not in dump.read_text()


def test_chat_keeps_an_unconfirmed_save_as_a_proposal_and_saves_nothing(tmp_path):
    done = memkit("chat", "--db", str(tmp_path / "m.sqlite3"), "--user", "alice",
                  "--message", "Remember my drink is rum")
    output = json.loads(done.stdout)
    assert output["turns"][0]["tool_results"][0]["outcome"]["result"]["status"] == "waiting_for_approval"
    assert [p["proposed"] for p in output["proposals_waiting"]] == ["save preference drink = 'rum'"]
    assert json.loads(memkit("search", "--db", str(tmp_path / "m.sqlite3"), "--user", "alice").stdout) == []


def test_health_reports_the_settings_an_operator_asks_for(db):
    health = json.loads(memkit("health", "--db", str(db)).stdout)
    assert health["journal_mode"] == "wal" and health["synchronous"] == "FULL"
    assert health["records_per_user"] == {"alice": 1} and health["max_records_per_user"] == 64


def test_demo_runs_end_to_end_and_cleans_up(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # No command: the demo is the default. Five real processes; a busy machine may take minutes.
    done = memkit(env={**os.environ, "TMPDIR": str(scratch)}, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ok  ") == 6 and "FAIL" not in done.stdout
    assert "largest measured request" in done.stdout
    assert list(scratch.iterdir()) == []  # the workspace was removed


def test_chat_keeps_its_window_in_redis_with_redis_url_and_in_the_store_without(tmp_path):
    from _cli_helpers import env_with
    from memkit import MemoryStore
    from memkit.window import StoreWindow, start_embedded_redis

    db = str(tmp_path / "m.sqlite3")
    ask = ["chat", "--db", db, "--user", "alice", "--session", "s1"]
    with start_embedded_redis(persistence="none") as redis:
        told = memkit(*ask, "--redis-url", redis.url, "--message", "My ticket number is T-8", env=env_with())
        assert told.returncode == 0, told.stderr
        recalled = memkit(*ask, "--message", "What was my ticket number?", env=env_with(REDIS_URL=redis.url))
        assert "T-8" in json.loads(recalled.stdout)["turns"][0]["reply"]
        assert redis.client.keys("*:alice:s1:turns")  # the window was in Redis, not in the store
    with MemoryStore(db) as store:
        assert StoreWindow(store).user_turns("alice") == 0
    bad = memkit(*ask, "--redis-url", "http://nowhere", "--message", "hi", env=env_with())
    assert bad.returncode == 2 and "error:" in bad.stderr and "Traceback" not in bad.stderr


def test_workspace_with_a_postgresql_db_is_refused_before_anything_is_opened(tmp_path):
    done = memkit("put", "--db", "postgresql://nobody@127.0.0.1:1/none", "--workspace", str(tmp_path / "ws"),
                  "--user", "alice", "--key", "k", "--value", "v", "--confirm")
    assert done.returncode == 2 and "names a SQLite store's folder" in done.stderr
    assert not (tmp_path / "ws").exists()
