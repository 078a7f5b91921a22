"""The real `memkit` entry point on PostgreSQL: `--db postgresql://...` and $DATABASE_URL, the whole
walk (put, get, search, update, delete, history, export, import, forget-user, health), and a
read-only command that finds no store: refused, nothing created, no password shown."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from _cli_helpers import env_with, memkit

pytestmark = pytest.mark.postgres

SECRET = "hunter2-Pw"


@pytest.fixture
def database(pg_url):
    """A fresh database of the session's server, its URL carrying a password (ignored by trust auth)."""
    name = f"cli_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@", 1).replace(
        "/postgres?", f"/{name}?", 1)


def run(*argv: str, env: dict[str, str], ok: bool = True):
    done = memkit(*argv, env=env)
    assert (done.returncode == 0) is ok, done.stderr
    assert SECRET not in done.stdout + done.stderr
    return json.loads(done.stdout) if ok and done.stdout.strip().startswith(("{", "[", "null")) else done


def test_the_cli_walk_on_postgresql_with_db_and_with_database_url(database, tmp_path):
    flag, env = ["--db", database], env_with()
    assert run("put", *flag, "--user", "alice", "--key", "drink", "--value", "tea", "--confirm",
               env=env)["revision"] == 1
    # The same database through $DATABASE_URL, no flag at all.
    by_env = env_with(DATABASE_URL=database)
    assert run("get", "--user", "alice", "--key", "drink", env=by_env)["value"] == "tea"
    assert run("put", "--user", "alice", "--key", "drink", "--value", "green tea", "--confirm",
               env=by_env)["revision"] == 2
    assert [r["value"] for r in run("search", *flag, "--user", "alice", "--query", "GREEN", env=env)] == ["green tea"]
    history = run("history", *flag, "--user", "alice", "--key", "drink", env=env)
    assert [(e["action"], e["revision"]) for e in history] == [("create", 1), ("update", 2)]
    out = tmp_path / "alice.jsonl"
    assert run("export", *flag, "--user", "alice", "--out", str(out), env=env)["records"] == 1
    assert memkit("export", *flag, "--user", "alice", env=env).stdout == out.read_text(encoding="utf-8")
    assert run("import", *flag, "--file", str(out), "--as-user", "bob", "--confirm", env=env) == {
        "records": 1, "events": 2, "proposals_imported": 0}
    assert run("delete", *flag, "--user", "alice", "--key", "drink", "--confirm", env=env) == {"deleted": True}
    forgotten = run("forget-user", *flag, "--user", "bob", "--confirm", env=env)
    # Every window is visited, none here: its count (0) is part of the report.
    assert forgotten["removed"] == {"records": 1, "events": 2, "transcript": 0, "proposals": 0, "window_turns": 0}
    assert forgotten["left"] == {"records": 0, "events": 0, "transcript": 0, "proposals": 0, "window_turns": 0}
    health = run("health", *flag, env=env)
    assert health["records_total"] == 0 and health["counters_consistent"] and ":***@" in health["url"]


def test_a_read_only_command_on_a_database_without_a_store_creates_nothing(database):
    done = run("get", "--db", database, "--user", "alice", "--key", "drink", env=env_with(), ok=False)
    assert done.returncode == 2 and "holds no memkit store; nothing was created" in done.stderr
    with psycopg.connect(database.replace(f":{SECRET}", ""), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0


def test_a_database_url_that_is_not_postgresql_or_cannot_be_reached_is_refused_clearly(tmp_path):
    done = run("get", "--user", "alice", "--key", "drink", env=env_with(DATABASE_URL="mysql://x@y/z"), ok=False)
    assert done.returncode == 2 and "DATABASE_URL is set but is not a postgresql:// URL" in done.stderr
    unreachable = f"postgresql://ann:{SECRET}@/db?host={tmp_path}"
    done = run("get", "--db", unreachable, "--user", "alice", "--key", "drink", env=env_with(), ok=False)
    assert done.returncode == 2 and "cannot connect to postgresql://ann:***@" in done.stderr
    # --db and --workspace choose a file even when DATABASE_URL is set.
    done = run("put", "--workspace", str(tmp_path / "ws"), "--user", "alice", "--key", "drink", "--value", "tea",
               "--confirm", env=env_with(DATABASE_URL=unreachable))
    assert done["revision"] == 1 and (tmp_path / "ws" / "state" / "memory.sqlite3").exists()


def chat(database: str, *argv: str, env: dict[str, str], cwd=None) -> dict:
    done = memkit("chat", "--db", database, "--user", "alice", "--session", "s1", *argv, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    return json.loads(done.stdout)


def test_chat_on_postgresql_keeps_its_window_in_redis_one_window_per_database(database, own_server, tmp_path):
    # A server that keeps its data in a folder: the store notes it (a temporary one archives all it holds).
    redis_url = own_server(persistence="aof", directory=tmp_path).url
    env = env_with(REDIS_URL=redis_url)
    chat(database, "--message", "My ticket number is T-4471", env=env)
    reply = chat(database, "--task", "What was my ticket number?", env=env)
    assert "T-4471" in reply["turns"][0]["reply"]  # the second process read the first one's window
    # The same database spelt another way (no password, the user as a parameter) is the same window.
    name, socket = database.split("@/", 1)[1].split("?host=")
    same = f"postgresql:///{name}?user=postgres&host={socket}"
    assert "T-4471" in chat(same, "--redis-url", redis_url, "--task", "What was my ticket number?",
                            env=env_with())["turns"][0]["reply"]
    # Another database never shares it: a window archives into the store it was opened with.
    other = f"postgresql://postgres:{SECRET}@/postgres?host={socket}"
    assert "T-4471" not in chat(other, "--task", "What was my ticket number?", env=env)["turns"][0]["reply"]
    # forget-user finds that window (noted in the store) and clears it with the store, no Redis named.
    forgotten = run("forget-user", "--db", database, "--user", "alice", "--confirm", env=env_with())
    assert forgotten["removed"]["window_turns"] > 0 and forgotten["left"]["window_turns"] == 0
    after = chat(database, "--task", "What was my ticket number?", env=env)
    assert "T-4471" not in after["turns"][0]["reply"]


def test_chat_on_postgresql_without_redis_is_refused_clearly_unless_the_window_is_the_process(database):
    done = memkit("chat", "--db", database, "--user", "alice", "--session", "s1", "--message", "hi",
                  env=env_with())
    assert done.returncode == 2 and "a PostgreSQL store keeps chat's window in Redis" in done.stderr
    assert SECRET not in done.stdout + done.stderr
    reply = chat(database, "--window", "process", "--message", "My ticket number is T-77", env=env_with())
    assert reply["turns"]  # a conversation that ends with the process


def test_db_with_a_path_and_workspace_together_is_refused_and_creates_nothing(tmp_path):
    done = run("put", "--db", str(tmp_path / "m.sqlite3"), "--workspace", str(tmp_path / "ws"), "--user", "alice",
               "--key", "drink", "--value", "tea", "--confirm", env=env_with(), ok=False)
    assert done.returncode == 2 and "both name a SQLite file; give one of them" in done.stderr
    assert list(tmp_path.iterdir()) == []
