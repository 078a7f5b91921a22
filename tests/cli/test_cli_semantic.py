"""`memkit search --by-meaning` and `memkit reindex` through the real entry point: exit codes, JSON
on stdout, `error:` on stderr, nothing changed on refusal."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from _cli_helpers import memkit


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "memory.sqlite3"
    for user, key, value in (("alice", "drink", "espresso"), ("alice", "flight_seat", "window seat on flights"),
                             ("bob", "drink", "cappuccino")):
        done = memkit("put", "--db", str(path), "--user", user, "--key", key, "--value", value, "--confirm")
        assert done.returncode == 0, done.stderr
    return path


def test_reindex_then_search_by_meaning_finds_what_literal_search_misses(db):
    assert json.loads(memkit("search", "--db", str(db), "--user", "alice", "--query", "coffee").stdout) == []
    before = memkit("search", "--db", str(db), "--user", "alice", "--query", "coffee", "--by-meaning")
    assert before.returncode == 0 and json.loads(before.stdout) == []
    assert "2 of 2 records of alice have no vector" in before.stderr and "memkit reindex --confirm" in before.stderr
    done = memkit("reindex", "--db", str(db), "--confirm")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"model": "wordllama/l2_supercat-256", "dim": 256, "embedded": 3, "skipped": 0}
    found = memkit("search", "--db", str(db), "--user", "alice", "--query", "coffee", "--by-meaning")
    hits = json.loads(found.stdout)
    assert found.returncode == 0 and found.stderr == ""
    assert [h["value"] for h in hits] == ["espresso"] and 0.3 <= hits[0]["similarity"] <= 1  # never bob's
    # A put on a store that keeps vectors keeps the new record's vector too.
    memkit("put", "--db", str(db), "--user", "alice", "--key", "city", "--value", "Lisbon", "--confirm")
    city = memkit("search", "--db", str(db), "--user", "alice", "--query", "capital of Portugal", "--by-meaning",
                  "--min-similarity", "0.2", "--limit", "1")
    assert [h["key"] for h in json.loads(city.stdout)] == ["city"] and city.stderr == ""


@pytest.mark.parametrize(("argv", "message"), [
    (["search", "--user", "alice", "--query", "", "--by-meaning"], "needs --query with some text"),
    (["search", "--user", "alice", "--query", "tea", "--by-meaning", "--min-similarity", "2"],
     "--min-similarity is 2.0"),
    (["search", "--user", "alice", "--query", "tea", "--min-similarity", "0.2"], "go with --by-meaning"),
    (["search", "--user", "alice", "--query", "tea", "--by-meaning", "--model", "bert"],
     "embedding model 'bert' is unknown"),
    (["reindex"], "reindex needs --confirm"),
    (["reindex", "--confirm", "--user", "no body"], "user 'no body' is not allowed"),
])
def test_bad_input_is_refused_and_changes_nothing(db, argv, message):
    before = digest(db)
    done = memkit(*argv, "--db", str(db))
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr
    assert digest(db) == before


def test_reindex_of_a_missing_database_creates_nothing(tmp_path):
    done = memkit("reindex", "--db", str(tmp_path / "none.sqlite3"), "--confirm")
    assert done.returncode == 2 and "no memkit database at" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_without_the_extra_by_meaning_is_refused_with_the_hint_and_literal_search_works(db, tmp_path):
    """`import wordllama` fails in these processes, as on an install without the `semantic` extra."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "wordllama.py").write_text("raise ImportError('No module named wordllama')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), *sys.path])}
    before = digest(db)
    done = memkit("search", "--db", str(db), "--user", "alice", "--query", "coffee", "--by-meaning", env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert "pip install 'memkit-course[semantic]'" in done.stderr
    assert digest(db) == before
    literal = memkit("search", "--db", str(db), "--user", "alice", "--query", "espresso", env=env)
    assert literal.returncode == 0 and [r["key"] for r in json.loads(literal.stdout)] == ["drink"]


@pytest.mark.postgres
def test_by_meaning_and_reindex_on_postgresql(pg_url):
    """The same commands with --db postgresql://... (pgserver's PostgreSQL 16, which has pgvector)."""
    import uuid

    import psycopg

    name = f"sem_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = pg_url.replace("/postgres?", f"/{name}?", 1)
    env = {k: v for k, v in os.environ.items() if k not in ("MEMKIT_DB", "DATABASE_URL", "REDIS_URL")}
    for user, value in (("alice", "espresso"), ("bob", "cappuccino")):
        done = memkit("put", "--db", url, "--user", user, "--key", "drink", "--value", value, "--confirm", env=env)
        assert done.returncode == 0, done.stderr
    done = memkit("reindex", "--db", url, "--confirm", env=env)
    assert done.returncode == 0 and json.loads(done.stdout)["embedded"] == 2, done.stderr
    found = memkit("search", "--db", url, "--user", "alice", "--query", "coffee", "--by-meaning", env=env)
    assert found.returncode == 0 and [h["value"] for h in json.loads(found.stdout)] == ["espresso"]
    # A put on a store that keeps vectors keeps the new one current.
    memkit("put", "--db", url, "--user", "alice", "--key", "drink", "--value", "green tea", "--confirm", env=env)
    again = memkit("search", "--db", url, "--user", "alice", "--query", "tea", "--by-meaning", env=env)
    assert [h["value"] for h in json.loads(again.stdout)] == ["green tea"] and again.stderr == ""
