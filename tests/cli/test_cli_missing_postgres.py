"""On PostgreSQL, a database without memkit's tables is "no memkit database": every command but a
save refuses it (exit 2) and creates no table; a save creates the store as before."""

from __future__ import annotations

import uuid

import pytest

from _cli_helpers import env_with, memkit

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

NEEDS_A_STORE = [
    ["forget-user", "--user", "alice", "--confirm"],
    ["delete", "--user", "alice", "--key", "drink", "--confirm"],
    ["approve", "1", "--user", "alice", "--confirm"],
    ["reject", "1", "--user", "alice"],
    ["windows"],
    ["limits"],
    ["get", "--user", "alice", "--key", "drink"],
    ["export", "--user", "alice"],
    ["health"],
    ["proposals", "--user", "alice"],
]


def tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', "
            "'information_schema')")]


def test_a_database_without_memkit_s_tables_is_refused_by_every_command_but_a_save(pg_url):
    name = f"empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = pg_url.replace("/postgres?", f"/{name}?", 1)
    env = env_with()
    for argv in NEEDS_A_STORE:
        done = memkit(*argv, "--db", url, env=env)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert "holds no memkit store; nothing was created" in done.stderr, (argv, done.stderr)
        assert done.stderr.count("\n") == 1 and done.stdout == ""
        assert tables(url) == [], argv
    saved = memkit("put", "--db", url, "--user", "alice", "--key", "drink", "--value", "tea", "--confirm", env=env)
    assert saved.returncode == 0, saved.stderr
    assert "memories" in tables(url)
