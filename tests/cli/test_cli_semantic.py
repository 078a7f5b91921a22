"""`memkit search --by-meaning` and `memkit reindex` through the real entry point: exit codes, JSON
on stdout, `error:` on stderr, nothing changed on refusal."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from _cli_helpers import env_with, memkit, new_pg_database


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


def test_a_record_put_before_the_store_kept_vectors_is_found_by_meaning(db):
    """Issue 33, failure 6: `put espresso`, then `search --query coffee --by-meaning` returned []."""
    before = digest(db)
    assert json.loads(memkit("search", "--db", str(db), "--user", "alice", "--query", "coffee").stdout) == []
    found = memkit("search", "--db", str(db), "--user", "alice", "--query", "coffee", "--by-meaning")
    assert found.returncode == 0 and [h["value"] for h in json.loads(found.stdout)] == ["espresso"]  # never bob's
    assert found.stderr == ("note: 2 of 2 records of alice have no stored vector of wordllama/l2_supercat-256: "
                            "compared with vectors made for this search; `memkit reindex --confirm` keeps them\n")
    assert digest(db) == before  # a search writes nothing: the vectors it made are not kept


def test_reindex_then_search_by_meaning_finds_what_literal_search_misses(db):
    assert json.loads(memkit("search", "--db", str(db), "--user", "alice", "--query", "coffee").stdout) == []
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


def status(db: Path, user: str) -> dict:
    from memkit.semantic import load_embedder
    from memkit.store import MemoryStore

    with MemoryStore(db, read_only=True, embedder=load_embedder()) as store:
        return store.embedding_status(user)


def test_an_import_into_a_store_that_keeps_vectors_keeps_the_imported_records_vectors(db, tmp_path):
    assert memkit("reindex", "--db", str(db), "--confirm").returncode == 0
    bundle = tmp_path / "alice.jsonl"
    assert memkit("export", "--db", str(db), "--user", "alice", "--out", str(bundle)).returncode == 0
    done = memkit("import", "--db", str(db), "--file", str(bundle), "--as-user", "carol", "--confirm")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"records": 2, "events": 2, "proposals_imported": 0, "vectors": 2}
    assert status(db, "carol")["current"] == 2 and status(db, "carol")["missing"] == 0
    found = memkit("search", "--db", str(db), "--user", "carol", "--query", "coffee", "--by-meaning")
    assert [h["value"] for h in json.loads(found.stdout)] == ["espresso"] and found.stderr == ""


def test_an_approved_proposal_on_a_store_that_keeps_vectors_keeps_its_vector(db):
    from memkit.store import MemoryStore

    assert memkit("reindex", "--db", str(db), "--confirm").returncode == 0
    with MemoryStore(db) as store:
        proposal = store.propose_put("alice", "s1", "preference", "snack", "croissant")
    done = memkit("approve", str(proposal["id"]), "--db", str(db), "--user", "alice", "--confirm")
    assert done.returncode == 0, done.stderr
    assert status(db, "alice") == {"model": "wordllama/l2_supercat-256", "dim": 256, "records": 3, "current": 3,
                                   "stale": 0, "missing": 0}


@pytest.mark.parametrize(("argv", "message"), [
    (["search", "--user", "alice", "--query", "", "--by-meaning"], "needs --query with some text"),
    (["search", "--user", "alice", "--query", "tea", "--by-meaning", "--min-similarity", "2"],
     "--min-similarity is 2.0"),
    (["search", "--user", "alice", "--query", "tea", "--min-similarity", "0.2"], "go with --by-meaning"),
    (["search", "--user", "alice", "--query", "tea", "--by-meaning", "--model", "bert"],
     "embedding model 'bert' is unknown"),
    (["reindex"], "reindex needs --confirm"),
    (["reindex", "--confirm", "--user", " nobody"], "user ' nobody' is not allowed"),
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
    assert "pip install -e '.[semantic]'" in done.stderr
    assert digest(db) == before
    literal = memkit("search", "--db", str(db), "--user", "alice", "--query", "espresso", env=env)
    assert literal.returncode == 0 and [r["key"] for r in json.loads(literal.stdout)] == ["drink"]


@pytest.mark.postgres
def test_by_meaning_and_reindex_on_postgresql(pg_url):
    """The same commands with --db postgresql://... (pgserver's PostgreSQL 16, which has pgvector)."""
    url = new_pg_database(pg_url, "sem")
    env = env_with()
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


def test_a_write_without_the_extra_says_why_it_keeps_no_vector_and_the_record_is_still_found(db, tmp_path):
    """On a store that keeps vectors, a put from an install without the extra says so at the write;
    a search by meaning from one with it still finds the record."""
    assert memkit("reindex", "--db", str(db), "--confirm").returncode == 0
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "wordllama.py").write_text("raise ImportError('No module named wordllama')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), *sys.path])}
    done = memkit("put", "--db", str(db), "--user", "alice", "--key", "snack", "--value", "croissant",
                  "--confirm", env=env)
    assert done.returncode == 0 and json.loads(done.stdout)["value"] == "croissant"
    assert done.stderr.startswith("note: this write keeps no vector for retrieval by meaning (")
    assert "memkit reindex --confirm" in done.stderr and done.stderr.count("\n") == 1
    found = memkit("search", "--db", str(db), "--user", "alice", "--query", "pastry", "--by-meaning",
                   "--min-similarity", "0.1", "--limit", "1")
    assert [h["value"] for h in json.loads(found.stdout)] == ["croissant"]
    assert "1 of 3 records of alice have no stored vector" in found.stderr
