"""Retrieval by meaning: each record's vector kept with it, the user filter first, on every backend.

The conformance suite: every test runs on SQLite, on PostgreSQL with pgvector (the pgserver wheel
has it: ranked in SQL) and on Debian's PostgreSQL 15 without it (ranked in Python). The embedding
model is the real one (wordllama, the `semantic` extra); nothing is stubbed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _store_helpers import open_store
from memkit import ValidationError, retrieve
from memkit.semantic import (DEFAULT_MIN_SIMILARITY, SemanticUnavailableError, embedding_text, load_embedder,
                             similarities)

pytestmark = pytest.mark.usefixtures("backend")

SMALL = "wordllama/l2_supercat-64"  # the same weights cut to 64 dimensions: another model, for staleness


@pytest.fixture(scope="module")
def embedder():
    return load_embedder()


@pytest.fixture
def store(tmp_path, embedder):
    with open_store(tmp_path / "memory.sqlite3", embedder=embedder) as opened:
        yield opened


def vectors_of(store, user: str) -> list[tuple[str, int]]:
    """(model, dim) of every vector the database keeps for `user`, read past the store's API."""
    return [(row[0], row[1]) for row in store._db.fetch(
        "SELECT model, dim FROM memory_embeddings WHERE user_id = ? ORDER BY memory_id", (user,))]


def test_coffee_finds_espresso_by_meaning_and_not_literally(store):
    store.put("alice", "s1", "preference", "drink", "espresso")
    store.put("alice", "s1", "preference", "flight_seat", "window seat")
    store.put("alice", "s1", "episode", "trip.porto", "moved to Porto in March")
    assert store.search("alice", "coffee") == []
    hits = store.search_by_meaning("alice", "coffee", limit=3)
    assert [h["key"] for h in hits][:1] == ["drink"]
    assert hits[0]["value"] == "espresso" and hits[0]["similarity"] >= DEFAULT_MIN_SIMILARITY
    assert all(h["similarity"] >= DEFAULT_MIN_SIMILARITY for h in hits)
    seat = store.search_by_meaning("alice", "airplane seat preference", limit=1)
    assert [h["key"] for h in seat] == ["flight_seat"]
    assert vectors_of(store, "alice") == [("wordllama/l2_supercat-256", 256)] * 3


def test_similarity_is_the_models_cosine_and_hits_are_ranked(store, embedder):
    texts = {"drink": "espresso", "tea": "green tea", "city": "Lisbon"}
    for key, value in texts.items():
        store.put("alice", "s1", "preference", key, value)
    hits = store.search_by_meaning("alice", "coffee", limit=3, min_similarity=-1.0)
    query = embedder.embed(["coffee"])[0]
    expected = dict(zip(texts, similarities(query, embedder.embed([embedding_text(k, v) for k, v in texts.items()])),
                        strict=True))
    assert [h["key"] for h in hits] == sorted(expected, key=expected.get, reverse=True)
    for hit in hits:
        assert hit["similarity"] == pytest.approx(expected[hit["key"]], abs=2e-4)


def test_a_changed_value_gets_its_new_vector_in_the_same_write(store):
    store.put("alice", "s1", "preference", "drink", "espresso")
    store.put("alice", "s1", "preference", "drink", "green tea")
    assert store.embedding_status("alice") == {"model": "wordllama/l2_supercat-256", "dim": 256, "records": 1,
                                               "current": 1, "stale": 0, "missing": 0}
    assert store.search_by_meaning("alice", "coffee") == []  # the espresso vector went with its value
    assert store.search_by_meaning("alice", "tea")[0]["value"] == "green tea"


def test_a_write_without_an_embedder_leaves_no_vector_and_reindex_makes_it(tmp_path, embedder):
    with open_store(tmp_path / "m.sqlite3", embedder=embedder) as store:
        store.put("alice", "s1", "preference", "drink", "espresso")
    with open_store(tmp_path / "m.sqlite3") as plain:  # no embedder: the literal kit as it was
        plain.put("alice", "s1", "preference", "drink", "green tea")
        plain.put("alice", "s1", "preference", "city", "Porto")
        with pytest.raises(ValidationError, match=r"pip install -e '\.\[semantic\]'"):
            plain.search_by_meaning("alice", "coffee")
    with open_store(tmp_path / "m.sqlite3", embedder=embedder) as store:
        # The old value's vector went with it; the new values have none: missing, never a wrong one.
        assert store.embedding_status("alice")["missing"] == 2
        assert store.search_by_meaning("alice", "coffee", min_similarity=-1.0) == []
        assert store.reindex() == {"model": embedder.name, "dim": 256, "embedded": 2, "skipped": 0}
        assert store.reindex() == {"model": embedder.name, "dim": 256, "embedded": 0, "skipped": 0}
        assert store.embedding_status("alice")["current"] == 2
        assert store.search_by_meaning("alice", "tea")[0]["key"] == "drink"


def test_a_vector_of_another_model_is_stale_until_reindex(tmp_path, embedder):
    with open_store(tmp_path / "m.sqlite3", embedder=embedder) as store:
        store.put("alice", "s1", "preference", "drink", "espresso")
        store.put("bob", "s1", "preference", "drink", "espresso")
    with open_store(tmp_path / "m.sqlite3", embedder=load_embedder(SMALL)) as small:
        assert small.embedding_status("alice") == {"model": SMALL, "dim": 64, "records": 1, "current": 0,
                                                   "stale": 1, "missing": 0}
        assert small.search_by_meaning("alice", "coffee", min_similarity=-1.0) == []  # never compared
        assert small.reindex(user="alice")["embedded"] == 1
        assert vectors_of(small, "alice") == [(SMALL, 64)] and vectors_of(small, "bob") == [(embedder.name, 256)]
        assert small.search_by_meaning("alice", "coffee")[0]["value"] == "espresso"


def test_delete_and_forget_user_take_the_vectors_with_them(store):
    store.put("alice", "s1", "preference", "drink", "espresso")
    store.put("alice", "s1", "preference", "city", "Porto")
    store.put("bob", "s1", "preference", "drink", "tea")
    store.delete("alice", "preference", "drink")
    assert len(vectors_of(store, "alice")) == 1
    store.forget_user("alice")
    assert vectors_of(store, "alice") == [] and len(vectors_of(store, "bob")) == 1


@pytest.mark.parametrize(("args", "message"), [
    ({"query": ""}, "query is blank"),
    ({"query": "   "}, "query is blank"),
    ({"query": "x" * 257}, "at most 256"),
    ({"query": "tea", "limit": 0}, "limit is 0"),
    ({"query": "tea", "min_similarity": 1.5}, "min_similarity is 1.5"),
    ({"query": "tea", "min_similarity": "high"}, "min_similarity is 'high'"),
    ({"query": "tea", "kind": "fact"}, "kind 'fact' is unknown"),
    ({"query": "tea", "user": "bad\nuser"}, "user 'bad\\\\nuser' is not allowed"),
])
def test_bad_input_is_refused_with_a_clear_message(store, args, message):
    store.put("alice", "s1", "preference", "drink", "espresso")
    before = store.export_user("alice")
    with pytest.raises(ValidationError, match=message):
        store.search_by_meaning(**{"user": "alice", **args})
    assert store.export_user("alice") == before


def test_reindex_refuses_bad_arguments(store):
    with pytest.raises(ValidationError, match="batch is 0"):
        store.reindex(batch=0)
    with pytest.raises(ValidationError, match="user is empty"):
        store.reindex(user="")


# -- the user filter comes first -------------------------------------------------------------------

TEXTS = ["espresso", "green tea", "window seat on flights", "aisle seat", "vegetarian", "lives in Porto",
         "allergic to peanuts", "plays the piano", "dog named Rex", "likes jazz", "cappuccino with oat milk",
         "train to Lisbon", "a cat called Tom", "hiking in the Alps", "sushi on Fridays"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(owned=st.lists(st.lists(st.sampled_from(TEXTS), unique=True, max_size=6), min_size=2, max_size=4),
       query=st.sampled_from(["coffee", "airplane", "pets", "music", "food", "travel", "Portugal"]),
       threshold=st.sampled_from([-1.0, 0.0, 0.3]))
def test_by_meaning_never_returns_another_users_record(store, embedder, owned, query, threshold):
    """Users hold overlapping texts; each user's answer is exactly the ranking of their own records."""
    run = uuid.uuid4().hex[:8]
    users = [f"u{n}-{run}" for n in range(len(owned))]
    for user, texts in zip(users, owned, strict=True):
        for n, text in enumerate(texts):
            store.put(user, "s1", "preference", f"k{n}", f"{text} ({user})")
    q = embedder.embed([query])[0]
    for user, texts in zip(users, owned, strict=True):
        hits = store.search_by_meaning(user, query, limit=50, min_similarity=threshold)
        assert all(h["value"].endswith(f"({user})") for h in hits)
        own = {f"k{n}": f"{t} ({user})" for n, t in enumerate(texts)}
        sims = similarities(q, embedder.embed([embedding_text(k, v) for k, v in own.items()])) if own else []
        expected = {k for k, s in zip(own, sims, strict=True) if s >= threshold + 2e-4}
        assert expected <= {h["key"] for h in hits} <= {k for k, s in zip(own, sims, strict=True)
                                                         if s >= threshold - 2e-4}


# -- retrieval: literal and by meaning, in one budget ----------------------------------------------

def test_retrieval_combines_literal_hits_and_meaning_and_says_why(store):
    store.put("alice", "s1", "preference", "drink", "espresso")
    store.put("alice", "s1", "preference", "city", "Porto")
    store.put("alice", "s1", "episode", "trip.kyoto", "Visited Kyoto in May")
    store.put("alice", "s1", "episode", "flight", "booked a window seat on flights to Tokyo")
    context = retrieve(store, "alice", "Which coffee do I drink, and where did I go in Kyoto?")
    why = {(row["kind"], row["key"]): row["matched_by"] for row in context.packing}
    assert context.by_meaning
    assert why[("episode", "trip.kyoto")].startswith("terms: kyoto")
    assert why[("preference", "drink")].startswith("terms: drink")
    literal = retrieve(store, "alice", "something hot with caffeine", by_meaning=False)
    meaning = retrieve(store, "alice", "something hot with caffeine")
    assert ("preference", "drink", "recent preference") in {(r["kind"], r["key"], r["matched_by"])
                                                             for r in literal.packing}
    row = next(r for r in meaning.packing if r["key"] == "drink")
    assert row["matched_by"].startswith("similarity 0.") and float(row["matched_by"].split()[1]) >= 0.3


def test_retrieval_by_meaning_stays_inside_the_budget_and_the_counts(tmp_path, embedder):
    from memkit import Limits

    limits = Limits().replace(retrieval_budget_chars=300, retrieval_max_episodes=2)
    with open_store(tmp_path / "m.sqlite3", limits=limits, embedder=embedder) as store:
        for n, value in enumerate(["espresso at dawn", "a latte in Rome", "cappuccino with friends",
                                   "mocha after lunch"]):
            store.put("alice", "s1", "episode", f"coffee.{n}", value + " " + "x" * 60)
        context = retrieve(store, "alice", "coffee drinks", min_similarity=0.0)
    episodes = [r for r in context.packing if r["kind"] == "episode"]
    assert len(episodes) == 2 and context.chars <= 300
    assert all("similarity" in r["matched_by"] or "terms" in r["matched_by"] for r in episodes)


def test_retrieval_by_meaning_on_a_store_without_embedder_is_refused(tmp_path):
    with open_store(tmp_path / "m.sqlite3") as plain:
        plain.put("alice", "s1", "preference", "drink", "espresso")
        assert not retrieve(plain, "alice", "coffee").by_meaning
        with pytest.raises(ValidationError, match=r"pip install -e '\.\[semantic\]'"):
            retrieve(plain, "alice", "coffee", by_meaning=True)
        with pytest.raises(ValidationError, match="by_meaning is 'yes'"):
            retrieve(plain, "alice", "coffee", by_meaning="yes")


@pytest.mark.sqlite_only
def test_without_the_extra_the_hint_is_clear_and_literal_retrieval_works(tmp_path):
    """A process where `import wordllama` fails, as on an install without the `semantic` extra."""
    script = f"""
import json, sys
sys.modules["wordllama"] = None  # what an absent package does to `import wordllama`
from memkit import MemoryStore, retrieve
from memkit.semantic import load_embedder, SemanticUnavailableError
out = {{}}
try:
    load_embedder()
except SemanticUnavailableError as exc:
    out["error"] = str(exc)
    out["is_import_error"] = isinstance(exc, ImportError)
with MemoryStore({str(tmp_path / "m.sqlite3")!r}) as store:
    store.put("alice", "s1", "preference", "drink", "espresso")
    out["memory"] = retrieve(store, "alice", "what do I drink?").memory
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "pip install -e '.[semantic]'" in out["error"] and "Literal search works" in out["error"]
    assert out["is_import_error"]
    assert out["memory"] == [{"kind": "preference", "key": "drink", "value": "espresso"}]


@pytest.mark.sqlite_only
def test_an_unknown_model_name_is_refused():
    with pytest.raises(ValidationError, match="embedding model 'bert' is unknown"):
        load_embedder("bert")
    assert issubclass(SemanticUnavailableError, ImportError)


def test_postgresql_ranks_in_sql_exactly_where_the_server_has_pgvector(store, backend):
    if backend.name == "sqlite":
        assert not hasattr(store, "vector_schema")
        return
    offered = bool(store._db.fetch("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"))
    assert (store.vector_schema is not None) == offered
    if backend.name == "pg-trgm":  # Debian's PostgreSQL 15 here has no pgvector: the Python path is tested
        assert store.vector_schema is None


@pytest.mark.sqlite_only
def test_on_the_labelled_set_meaning_finds_what_literal_misses_and_never_another_users(tmp_path, embedder):
    """bench/semantic_bench.py's labelled set (its figures are in bench/RESULTS.md)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    try:
        from bench import semantic_bench
    finally:
        sys.path.pop(0)
    with open_store(tmp_path / "set.sqlite3", embedder=embedder) as store:
        semantic_bench.fill(store)
        measured = semantic_bench.recall_at_3(store, DEFAULT_MIN_SIMILARITY)
    hits = measured["hits"]
    assert measured["leaked"] == 0
    assert hits["combined"] >= hits["meaning"] > hits["literal"]
    found_by_meaning_alone = [r for r in measured["rows"] if r["answer"] is not None
                              and r["answer"] in r["meaning"] and r["answer"] not in r["literal"]]
    assert len(found_by_meaning_alone) >= 10


@pytest.mark.sqlite_only
def test_retrieval_by_meaning_takes_any_task_text(store):
    """A task is what a person typed: NULs, lone surrogates and 10,000 characters do not stop it."""
    store.put("alice", "s1", "preference", "drink", "espresso")
    for task in ("coffee\x00please", "coffee \ud800", "coffee " * 2000, "   "):
        context = retrieve(store, "alice", task)
        assert [m["key"] for m in context.memory] == ["drink"]


def test_a_refused_or_rolled_back_write_leaves_no_vector(tmp_path, embedder):
    from memkit import Limits, QuotaError

    with open_store(tmp_path / "m.sqlite3", limits=Limits().replace(max_records_per_user=1),
                    embedder=embedder) as store:
        store.put("alice", "s1", "preference", "drink", "espresso")
        with pytest.raises(QuotaError):
            store.put("alice", "s1", "preference", "city", "Porto")
        with pytest.raises(RuntimeError), store.transaction():
            store.put("alice", "s1", "preference", "drink", "green tea")
            raise RuntimeError("the caller's block fails after the put")
        assert vectors_of(store, "alice") == [(embedder.name, 256)]
        assert store.search_by_meaning("alice", "coffee")[0]["value"] == "espresso"  # the old vector, kept
